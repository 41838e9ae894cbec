"""`kwire-spool`: the rotation hook that moves each closed capture file of a ring into a spool
directory, which `kwire live SPOOL` follows.

`kwire live` reads only closed capture files. The capture tool writes a rotating ring; after it
closes a file, this hook moves the file into SPOOL as `<seq>-<name>` (e.g.
`000000000007-ring.pcap03`): `seq` (12 digits) counts the files the spool has received, so the
names sort in arrival order and never repeat, even when the ring writes the same file name again.

With tcpdump (`-z` runs the hook with the closed file's name after closing each file)::

    mkdir -p /var/spool/kwire
    KWIRE_SPOOL=/var/spool/kwire tcpdump -i eth0 -C 100 -W 50 -w /var/ring/ring.pcap \\
        -z "$(command -v kwire-spool)"
    kwire live /var/spool/kwire -o OUT

tcpdump passes the hook exactly one argument (the file), so the spool directory comes from the
environment variable KWIRE_SPOOL, which tcpdump's children inherit. `sudo` clears the environment:
use `sudo -E tcpdump ...` (if the sudoers policy allows it) or, always,
`sudo env KWIRE_SPOOL=/var/spool/kwire tcpdump ...`. Give `-z` an absolute path (as above):
tcpdump looks the hook up in its own PATH, which under sudo is sudo's secure_path.

- tcpdump started as root drops to the user `tcpdump` (or the user of `-Z USER`) before
  capturing, and the hook runs as that user: it must be able to write to the ring's directory
  (a move takes the file out of it) and to SPOOL.
- Where AppArmor confines tcpdump (Debian and Ubuntu ship a profile, usr.bin.tcpdump), the
  profile lets `-z` run only gzip and bzip2: allow the hook with a line such as
  `/path/to/venv/bin/kwire-spool Ux,` in /etc/apparmor.d/local/usr.bin.tcpdump (then
  `apparmor_parser -r /etc/apparmor.d/usr.bin.tcpdump`), or `aa-complain /usr/bin/tcpdump`.
- tcpdump runs the hooks in parallel with the capture, several at once when files close quickly;
  each takes its own number. Since the file is moved, not copied, `-W` writing the same name again
  later creates a new file and never truncates one the spool holds.
- Size the ring so it takes far longer to come round than a hook takes to start (seconds on a
  busy machine; tcpdump runs hooks at the lowest priority): when tcpdump comes back to a file
  name whose hook has not yet moved it, it truncates that file, and its packets are lost.
- tcpdump does not run the hook for the file it is writing when it stops; spool that one by
  hand if it matters: `kwire-spool --spool /var/spool/kwire /var/ring/ring.pcap*`.

With dumpcap (`-b printname:stdout` prints each file's name after closing it, one a line,
including the last file when it stops)::

    dumpcap -i eth0 -b filesize:100000 -b files:50 -b printname:stdout -w /var/ring/ring.pcapng \\
        | kwire-spool --stdin /var/spool/kwire

Relative names are taken relative to kwire-spool's working directory (in a pipeline, dumpcap's).
dumpcap's own removal of old ring files (`-b files:N`) finds them already moved, which is
harmless; a file it reaches before kwire-spool has read its name is deleted, so size that ring
to take minutes to come round too.

By hand: `kwire-spool --spool SPOOL FILE...` (or with KWIRE_SPOOL set, `kwire-spool FILE...`).

How a file is moved: with `os.rename` when the file and SPOOL are on the same filesystem (keep
them on one: the move is then instant and atomic). Otherwise the file is copied into SPOOL under a
hidden temporary name (starting with `.`; `kwire live` never reads hidden files), synced to disk,
renamed to its spool name, and the original removed. The sequence number is taken under an
exclusive lock on a hidden counter file in SPOOL (`.kwire-spool.seq`) and the file is renamed into
place while the lock is held, so parallel hooks never take the same number, the numbers have no
gaps, and a file with a higher number never appears before one with a lower number.

Exit status: 0 all files spooled; 1 some file could not be spooled (it no longer exists, is
empty or is not a regular file; one line on stderr names it; the other files are still spooled);
2 bad usage, or SPOOL is missing or cannot be written.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import re
import secrets
import sys
from collections.abc import Iterable, Iterator
from types import TracebackType

PROG = "kwire-spool"
ENV = "KWIRE_SPOOL"
COUNTER = ".kwire-spool.seq"
EXIT_OK, EXIT_FILE, EXIT_SPOOL = 0, 1, 2
CHUNK = 1 << 20
_SPOOLED = re.compile(r"^(\d{12,})-")

USAGE = (
    f"{PROG} [--spool SPOOL] FILE... (SPOOL from ${ENV} if not given)\n"
    f"       {PROG} --stdin [SPOOL]     (names of closed files on stdin, one a line)"
)


class SpoolError(Exception):
    """The spool directory cannot be used (exit status 2)."""


class SourceError(Exception):
    """One closed file cannot be spooled (exit status 1; the other files go on)."""


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


# -- moving one file --------------------------------------------------------------------------


def check_spool(spool: str) -> None:
    """SpoolError unless `spool` is a directory this process can create files in."""
    if not spool:
        raise SpoolError("no spool directory given")
    if not os.path.exists(spool):
        raise SpoolError(f"spool directory {spool} does not exist")
    if not os.path.isdir(spool):
        raise SpoolError(f"spool {spool} is not a directory")
    if not os.access(spool, os.W_OK | os.X_OK):
        raise SpoolError(f"spool directory {spool} is not writable")


def spool_file(path: str, spool: str) -> str:
    """Move the closed capture file `path` into `spool` as `<seq:012d>-<basename>` and return its
    new path. SourceError if the file cannot be spooled (missing, empty, not a regular file),
    SpoolError if the spool cannot be used."""
    check_spool(spool)
    name = os.path.basename(path.rstrip(os.sep))
    if not name:
        raise SourceError(f"{path!r} is not a file name")
    _check_source(path)
    try:
        with _Counter(spool) as counter:
            return counter.place(path, name)
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise _move_error(path, spool, e) from None
    # Another filesystem: copy under a hidden name, sync, then rename into place.
    tmp = _copy_in(path, spool, name)
    try:
        with _Counter(spool) as counter:
            final = counter.place(tmp, name)
    except OSError as e:
        _unlink_quietly(tmp)
        raise SpoolError(f"cannot rename {tmp} into place: {e.strerror}") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        say(f"{path}: spooled as {final}, but the original could not be removed: {e.strerror}")
    return final


def _check_source(path: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file (already spooled, or removed?)") from None
    except OSError as e:
        raise SourceError(f"{path}: {e.strerror}") from None
    if not os.path.isfile(path):
        raise SourceError(f"{path}: not a regular file")
    if st.st_size == 0:
        raise SourceError(f"{path}: empty file (0 bytes), not spooled")


def _move_error(path: str, spool: str, e: OSError) -> SourceError:
    if e.errno == errno.ENOENT:
        return SourceError(f"{path}: no such file (already spooled, or removed?)")
    return SourceError(f"{path}: cannot move it into {spool}: {e.strerror}")


def _copy_in(path: str, spool: str, name: str) -> str:
    """A complete, synced copy of `path` under a hidden temporary name in `spool`."""
    tmp = os.path.join(spool, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.part")
    try:
        src = open(path, "rb")
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file (already spooled, or removed?)") from None
    except OSError as e:
        raise SourceError(f"{path}: {e.strerror}") from None
    with src:
        st = os.fstat(src.fileno())
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, st.st_mode & 0o777)
        except OSError as e:
            raise SpoolError(f"cannot create {tmp}: {e.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as dst:
                while True:
                    try:
                        chunk = src.read(CHUNK)
                    except OSError as e:
                        raise SourceError(f"{path}: read failed: {e.strerror}") from None
                    if not chunk:
                        break
                    try:
                        dst.write(chunk)
                    except OSError as e:
                        raise SpoolError(f"cannot write {tmp}: {e.strerror}") from None
                try:
                    dst.flush()
                    os.fsync(dst.fileno())
                except OSError as e:
                    raise SpoolError(f"cannot write {tmp}: {e.strerror}") from None
            if st.st_size and os.stat(tmp).st_size != st.st_size:
                raise SourceError(f"{path}: changed size while it was being copied")
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        except BaseException:
            _unlink_quietly(tmp)
            raise
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _Counter:
    """The spool's next sequence number, in a hidden file locked (flock) while in use."""

    def __init__(self, spool: str) -> None:
        self.spool = spool
        self.path = os.path.join(spool, COUNTER)
        self.fd = -1

    def __enter__(self) -> _Counter:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise SpoolError(f"cannot open the spool's counter {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as e:
            os.close(self.fd)
            raise SpoolError(f"cannot lock the spool's counter {self.path}: {e.strerror}") from None
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.close(self.fd)  # releases the lock

    def read(self) -> int:
        text = os.pread(self.fd, 64, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        # A new spool (or a counter lost or cut): go on after the highest number present.
        return self._after_highest()

    def _after_highest(self) -> int:
        highest = -1
        try:
            names = os.listdir(self.spool)
        except OSError as e:
            raise SpoolError(f"cannot list the spool {self.spool}: {e.strerror}") from None
        for name in names:
            m = _SPOOLED.match(name)
            if m:
                highest = max(highest, int(m.group(1)))
        return highest + 1

    def write(self, value: int) -> None:
        data = f"{value:012d}\n".encode("ascii")
        try:
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))
            os.fsync(self.fd)
        except OSError as e:
            raise SpoolError(
                f"cannot update the spool's counter {self.path}: {e.strerror}"
            ) from None

    def place(self, src: str, name: str) -> str:
        """Rename `src` to the spool's next name for `name`, and count it. OSError from the
        rename (nothing counted)."""
        seq = self.read()
        final = os.path.join(self.spool, f"{seq:012d}-{name}")
        while os.path.lexists(final):  # never overwrite (a counter reset by hand)
            seq += 1
            final = os.path.join(self.spool, f"{seq:012d}-{name}")
        # Counted before the rename, so a crash in between leaves a gap, never a reused number.
        self.write(seq + 1)
        try:
            os.rename(src, final)
        except OSError:
            self.write(seq)
            raise
        _sync_dir(self.spool)
        return final


def _sync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# -- the command ------------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    """The hook's arguments, on a parser of its own or on a `kwire spool` subcommand."""
    parser.usage = USAGE.replace("kwire-spool", parser.prog)
    if not parser.description:
        parser.description = (
            "Move closed capture files into a spool directory for `kwire live` (a rotation "
            "hook for tcpdump -z and dumpcap -b printname)."
        )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="FILE",
        help="closed capture files to move into the spool (with --stdin: at most one argument, "
        "the spool directory)",
    )
    parser.add_argument(
        "--spool",
        metavar="SPOOL",
        help=f"the spool directory (default: ${ENV})",
    )
    parser.add_argument(
        "--stdin",
        action="store_true",
        help="read the closed files' names from standard input, one a line, as dumpcap "
        "-b printname:stdout writes them",
    )


def run(args: argparse.Namespace) -> int:
    """Spool the files `args` names; the exit status (0, 1 or 2)."""
    paths: list[str] = list(args.paths)
    spool: str | None = args.spool
    if args.stdin:
        if paths and spool:
            say("with --stdin, give the spool directory once (--spool SPOOL or SPOOL)")
            return EXIT_SPOOL
        if len(paths) > 1:
            say("with --stdin, file names come from standard input; the one argument is SPOOL")
            return EXIT_SPOOL
        if paths:
            spool = paths.pop()
    elif not paths:
        say(f"no capture file given: {PROG} [--spool SPOOL] FILE..., or {PROG} --stdin [SPOOL]")
        return EXIT_SPOOL
    if not spool:
        spool = os.environ.get(ENV) or None
    if not spool:
        say(
            f"no spool directory: set {ENV} (tcpdump -z passes only the file name; under sudo "
            f"use sudo -E or sudo env {ENV}=DIR tcpdump ...) or give --spool SPOOL"
        )
        return EXIT_SPOOL
    try:
        check_spool(spool)
    except SpoolError as e:
        say(str(e))
        return EXIT_SPOOL
    status = EXIT_OK
    try:
        for path in _stdin_names() if args.stdin else paths:
            try:
                spool_file(path, spool)
            except SourceError as e:
                say(str(e))
                status = EXIT_FILE
    except SpoolError as e:
        say(str(e))
        return EXIT_SPOOL
    except KeyboardInterrupt:
        return 130
    return status


def _stdin_names() -> Iterator[str]:
    """The file names on standard input, each as soon as its line is complete."""
    return _names(iter(sys.stdin.buffer.readline, b""))


def _names(lines: Iterable[bytes]) -> Iterator[str]:
    for line in lines:
        name = line.rstrip(b"\r\n")
        if name.strip():
            yield os.fsdecode(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG)
    configure(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
