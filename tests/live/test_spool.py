"""kwire-spool, the rotation hook that moves closed capture files into `kwire live`'s spool:
parallel hooks take distinct, gap-free numbers; a reused ring name becomes a new spool file; the
copy across filesystems is atomic; `--stdin` follows dumpcap's printname lines; errors are one
line and the right status; and a real tcpdump ring, when this machine can capture, lands whole."""

from __future__ import annotations

import errno
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dpkt
import pytest

from kwire.capture.pcapfile import FileStats, iter_packets
from kwire.live import spool as hook
from kwire.live.spool import COUNTER, ENV, main, spool_file

ROOT = Path(__file__).resolve().parents[2]
SPOOLED = re.compile(r"^(\d{12})-(.+)$")


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def payload(i: int, size: int = 3000) -> bytes:
    return (f"file {i}:".encode() + os.urandom(size))[: size + 8]


def spooled(spool: Path) -> list[tuple[int, str, bytes]]:
    """(seq, original name, contents) of every visible spool file, in name order."""
    out = []
    for name in sorted(os.listdir(spool)):
        if name.startswith("."):
            continue
        m = SPOOLED.match(name)
        assert m, f"unexpected name in the spool: {name}"
        out.append((int(m.group(1)), m.group(2), (spool / name).read_bytes()))
    return out


def hidden(spool: Path) -> list[str]:
    return sorted(n for n in os.listdir(spool) if n.startswith(".") and n != COUNTER)


def run_hook(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The hook as a command (the spool from `env` only: KWIRE_SPOOL is removed otherwise)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if env is None or ENV not in env:
        full.pop(ENV, None)
    return subprocess.run(
        [sys.executable, "-m", "kwire.live.spool", *args],
        env=full,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ring, spool = tmp_path / "ring", tmp_path / "spool"
    ring.mkdir()
    spool.mkdir()
    return ring, spool


# -- parallel hooks ---------------------------------------------------------------------------


def test_parallel_hook_processes(dirs: tuple[Path, Path]) -> None:
    """Hooks started at once, as tcpdump -z starts them (one file each, the spool from the
    environment)."""
    ring, spool = dirs
    data = {f"ring.pcap{i:02d}": payload(i, 1000 + 97 * i) for i in range(16)}
    for name, content in data.items():
        write(ring / name, content)
    env = {**os.environ, "PYTHONPATH": str(ROOT), ENV: str(spool)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kwire.live.spool", str(ring / name)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for name in data
    ]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert out == err == b""
    files = spooled(spool)
    assert [seq for seq, _, _ in files] == list(range(len(data)))
    assert {name: content for _, name, content in files} == data
    assert hidden(spool) == []
    assert os.listdir(ring) == []


def _spool_many(paths: list[str], spool: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()
    for path in paths:
        spool_file(path, spool)


def test_parallel_spool_file_stress(dirs: tuple[Path, Path]) -> None:
    """Eight processes released together, each spooling 25 files as fast as it can."""
    ring, spool = dirs
    workers, each = 8, 25
    data: dict[str, bytes] = {}
    groups: list[list[str]] = []
    for w in range(workers):
        group = []
        for i in range(each):
            name = f"w{w}-ring.pcap{i}"
            data[name] = payload(w * 1000 + i, 200 + i)
            group.append(str(write(ring / name, data[name])))
        groups.append(group)
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers)
    procs = [ctx.Process(target=_spool_many, args=(g, str(spool), barrier)) for g in groups]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    files = spooled(spool)
    assert [seq for seq, _, _ in files] == list(range(workers * each))
    assert {name: content for _, name, content in files} == data
    # Each worker's files arrived in the order it spooled them.
    for w, group in enumerate(groups):
        mine = [name for _, name, _ in files if name.startswith(f"w{w}-")]
        assert mine == [os.path.basename(p) for p in group]
    assert hidden(spool) == []
    assert (spool / COUNTER).read_text().strip() == f"{workers * each:012d}"


# -- names tcpdump -W reuses ------------------------------------------------------------------


def test_reused_ring_name_is_a_new_spool_file(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    first = spool_file(str(write(ring / "ring.pcap0", b"first contents")), str(spool))
    assert not (ring / "ring.pcap0").exists()
    second = spool_file(str(write(ring / "ring.pcap0", b"second, other contents")), str(spool))
    assert os.path.basename(first) == "000000000000-ring.pcap0"
    assert os.path.basename(second) == "000000000001-ring.pcap0"
    assert spooled(spool) == [
        (0, "ring.pcap0", b"first contents"),
        (1, "ring.pcap0", b"second, other contents"),
    ]


def test_moved_not_copied_so_rewriting_the_name_leaves_the_spool_alone(
    dirs: tuple[Path, Path],
) -> None:
    """tcpdump -W reopens a reused name with truncation: that must not reach the spool's file."""
    ring, spool = dirs
    src = write(ring / "ring.pcap1", b"x" * 5000)
    ino = src.stat().st_ino
    new = spool_file(str(src), str(spool))
    assert os.stat(new).st_ino == ino  # the same file, renamed
    with open(ring / "ring.pcap1", "wb") as f:  # what tcpdump does when it comes round again
        f.write(b"y")
    assert Path(new).read_bytes() == b"x" * 5000


def test_counter_lost_goes_on_after_the_highest(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    for i in range(3):
        spool_file(str(write(ring / "ring.pcap", b"%d" % i)), str(spool))
    (spool / COUNTER).unlink()
    new = spool_file(str(write(ring / "ring.pcap", b"3")), str(spool))
    assert os.path.basename(new) == "000000000003-ring.pcap"


# -- across filesystems -----------------------------------------------------------------------


def test_cross_filesystem_copy_is_complete_and_atomic(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ring, spool = dirs
    content = os.urandom(3 * hook.CHUNK + 12345)  # several copy chunks
    src = write(ring / "ring.pcap7", content)
    os.utime(src, ns=(1_600_000_000_000_000_000, 1_600_000_000_123_456_789))
    src.chmod(0o640)
    real_rename = os.rename
    calls: list[tuple[str, str]] = []

    def rename(a: str, b: str) -> None:
        calls.append((a, b))
        if len(calls) == 1:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        # The renamed file is a hidden, complete, synced copy: the reader never sees less.
        assert os.path.dirname(a) == str(spool)
        assert os.path.basename(a).startswith(".")
        assert Path(a).read_bytes() == content
        assert not os.path.exists(b)
        real_rename(a, b)

    monkeypatch.setattr(os, "rename", rename)
    new = spool_file(str(src), str(spool))
    assert len(calls) == 2
    assert calls[0] == (str(src), new)
    assert calls[1][1] == new
    assert os.path.basename(new) == "000000000000-ring.pcap7"
    assert Path(new).read_bytes() == content
    st = os.stat(new)
    assert st.st_mtime_ns == 1_600_000_000_123_456_789
    assert st.st_mode & 0o777 == 0o640
    assert not src.exists()  # moved: the original is removed
    assert hidden(spool) == []
    assert (spool / COUNTER).read_text().strip() == "000000000001"


def test_cross_filesystem_failure_leaves_no_partial_file(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy that fails (the spool full) leaves no temporary file and the original in place."""
    ring, spool = dirs
    src = write(ring / "ring.pcap8", os.urandom(2 * hook.CHUNK))

    def rename(a: str, b: str) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(".ring.pcap8"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(hook.SpoolError, match="No space left"):
        spool_file(str(src), str(spool))
    assert src.exists()
    assert hidden(spool) == []
    assert spooled(spool) == []


def test_real_cross_filesystem_move(tmp_path: Path) -> None:
    """The same through a real EXDEV, where /dev/shm is another filesystem than tmp_path."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    spool = tmp_path / "spool"
    spool.mkdir()
    if os.stat(shm).st_dev == os.stat(spool).st_dev:
        pytest.skip("/dev/shm and tmp_path are on the same filesystem")
    ring = shm / f"kwire-spool-test-{os.getpid()}"
    ring.mkdir()
    try:
        content = os.urandom(100_000)
        new = spool_file(str(write(ring / "ring.pcap2", content)), str(spool))
        assert Path(new).read_bytes() == content
        assert os.listdir(ring) == []
        assert hidden(spool) == []
    finally:
        shutil.rmtree(ring, ignore_errors=True)


# -- --stdin (dumpcap -b printname:stdout) ----------------------------------------------------


def test_stdin_spools_each_line_as_it_arrives(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    names = [f"ring_{i:05d}_20240101120000.pcapng" for i in range(1, 4)]
    for i, name in enumerate(names):
        write(ring / name, payload(i))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kwire.live.spool", "--stdin", str(spool)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    try:
        for i, name in enumerate(names):
            # One line at a time, the pipe left open, as dumpcap writes them.
            proc.stdin.write(f"{ring / name}\n".encode())
            proc.stdin.flush()
            deadline = time.monotonic() + 20
            while len(spooled(spool)) < i + 1:
                assert time.monotonic() < deadline, "the line was not spooled while stdin is open"
                time.sleep(0.02)
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    assert proc.stderr is not None and proc.stderr.read() == b""
    assert [(seq, name) for seq, name, _ in spooled(spool)] == list(enumerate(names))
    assert os.listdir(ring) == []


def test_stdin_forms_and_a_bad_line(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPOOL from the argument, --spool or the environment; CRLF and blank lines; a missing file
    is reported and the next line is still spooled."""
    ring, spool = dirs
    a = write(ring / "a.pcapng", b"a" * 10)
    b = write(ring / "b.pcapng", b"b" * 10)
    lines = f"{a}\r\n\n{ring / 'gone.pcapng'}\n{b}"  # the last line without a newline
    result = run_hook("--stdin", env={ENV: str(spool)}, stdin=lines)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"kwire-spool: {ring / 'gone.pcapng'}: no such file (already spooled, or removed?)"
    ]
    assert [(seq, name) for seq, name, _ in spooled(spool)] == [(0, "a.pcapng"), (1, "b.pcapng")]

    c = write(ring / "c.pcapng", b"c")
    result = run_hook("--stdin", "--spool", str(spool), stdin=f"{c}\n")
    assert result.returncode == 0, result.stderr
    assert spooled(spool)[-1][:2] == (2, "c.pcapng")

    assert run_hook("--stdin", str(spool), "--spool", str(spool), stdin="").returncode == 2
    assert run_hook("--stdin", str(spool), str(spool), stdin="").returncode == 2


def test_explicit_files(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    files = [write(ring / f"ring.pcap{i}", payload(i)) for i in range(3)]
    assert main(["--spool", str(spool), *map(str, files)]) == 0
    assert [name for _, name, _ in spooled(spool)] == ["ring.pcap0", "ring.pcap1", "ring.pcap2"]


# -- errors -----------------------------------------------------------------------------------


def test_missing_and_empty_files_are_reported_and_the_rest_spooled(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    good = write(ring / "ring.pcap1", b"good")
    empty = write(ring / "ring.pcap2", b"")
    missing = ring / "ring.pcap3"
    result = run_hook(str(missing), str(empty), str(good), str(ring), env={ENV: str(spool)})
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"kwire-spool: {missing}: no such file (already spooled, or removed?)",
        f"kwire-spool: {empty}: empty file (0 bytes), not spooled",
        f"kwire-spool: {ring}: not a regular file",
    ]
    assert spooled(spool) == [(0, "ring.pcap1", b"good")]
    assert empty.exists()  # left where it was


def test_missing_spool(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    src = write(ring / "ring.pcap0", b"data")
    result = run_hook(str(src), env={ENV: str(spool / "nope")})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == f"kwire-spool: spool directory {spool / 'nope'} does not exist"
    assert src.exists()

    result = run_hook("--stdin", str(src), stdin="")  # a file is not a spool directory
    assert result.returncode == 2
    assert result.stderr.strip() == f"kwire-spool: spool {src} is not a directory"


def test_no_spool_given_names_the_variable(dirs: tuple[Path, Path]) -> None:
    ring, _ = dirs
    result = run_hook(str(write(ring / "ring.pcap0", b"data")))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "KWIRE_SPOOL" in result.stderr and "sudo -E" in result.stderr
    assert run_hook(env={ENV: "/tmp"}).returncode == 2  # no file at all


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_unwritable_spool(dirs: tuple[Path, Path]) -> None:
    ring, spool = dirs
    spool.chmod(0o500)
    try:
        assert main(["--spool", str(spool), str(write(ring / "r.pcap", b"x"))]) == 2
    finally:
        spool.chmod(0o700)


def test_unwritable_counter_is_a_spool_error(
    dirs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A counter that cannot be opened (a directory in its place: fails for root too)."""
    ring, spool = dirs
    (spool / COUNTER).mkdir()
    src = write(ring / "ring.pcap0", b"data")
    assert main(["--spool", str(spool), str(src)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kwire-spool: cannot open the spool's counter ") and err.count("\n") == 1
    assert src.exists()


# -- a real capture ring (tcpdump -z, dumpcap -b printname) ----------------------------------

MARKER = b"kwire-spool-test "

# Runs inside a private network namespace: loopback up, the capture tool writing a 3-file ring
# with the hook, TCP traffic on loopback until at least 4 files were spooled (so the ring came
# round), then the tool stopped and the hooks left to finish. tcpdump: 1 MB files (tcpdump 4.99's
# -C counts millions of bytes, whole numbers only), `-z HOOK`, KWIRE_SPOOL in its environment.
# dumpcap: 100 kB files, `-b printname:stdout` piped into `HOOK --stdin SPOOL`. Exit 77: the tool
# could not capture.
DRIVER = textwrap.dedent("""
    import fcntl, os, signal, socket, struct, subprocess, sys, threading, time

    tool, ring, spool, hook_path = sys.argv[1:5]
    print("driver started", flush=True)
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifreq = struct.pack("16sH22x", b"lo", 0)
    flags = struct.unpack("16sH22x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))

    def visible():
        return sorted(n for n in os.listdir(spool) if not n.startswith("."))

    hook = None
    if tool == "tcpdump":
        cmd = ["tcpdump", "-i", "lo", "-n", "-C", "1", "-W", "3",
               "-w", os.path.join(ring, "ring.pcap"), "-z", hook_path]
        if os.geteuid() == 0:
            cmd[1:1] = ["-Z", "root"]  # the hook and the ring stay this user's
        env = {**os.environ, "KWIRE_SPOOL": spool}
        cap = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        ready = b"listening on"
    else:
        cmd = ["dumpcap", "-q", "-i", "lo", "-b", "filesize:100", "-b", "files:3",
               "-b", "printname:stdout", "-w", os.path.join(ring, "ring.pcapng")]
        env = {k: v for k, v in os.environ.items() if k != "KWIRE_SPOOL"}
        cap = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        hook = subprocess.Popen([hook_path, "--stdin", spool], stdin=cap.stdout, env=env)
        cap.stdout.close()
        ready = b"Capturing on"
    said = []
    while True:
        line = cap.stderr.readline()
        if not line:
            cap.wait()
            if hook:
                hook.wait()
            print(tool, "cannot capture:", b" ".join(said).decode(errors="replace").strip())
            sys.exit(77)
        said.append(line.strip())
        if ready in line:
            break
    threading.Thread(target=cap.stderr.read, daemon=True).start()

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname())
    conn, _ = server.accept()

    def drain():
        while conn.recv(1 << 20):
            pass

    threading.Thread(target=drain, daemon=True).start()
    chunk = MARKER * (60000 // len(MARKER))
    deadline = time.monotonic() + 30
    while len(visible()) < 4:
        if time.monotonic() > deadline:
            print("timed out; spooled:", visible())
            cap.kill()
            sys.exit(1)
        # A real ring takes minutes to come round (-C 100 -W 50); this one takes a fraction of
        # a second at full speed. On a busy machine tcpdump truncates a file it comes back to
        # before its hook (run at the lowest priority) has moved it, and dumpcap deletes the
        # oldest of its 3 files before kwire-spool has read its name. Write on only while the
        # ring holds no closed file still waiting for its hook, so no file is lost.
        if len(os.listdir(ring)) > 1:
            time.sleep(0.01)
            continue
        client.sendall(chunk)
        time.sleep(0.005)
    client.close()
    time.sleep(0.2)
    cap.send_signal(signal.SIGINT)
    cap.wait(10)
    if hook:
        print("hook exit", hook.wait(10))
    # tcpdump's hooks still running finish on their own: wait until the spool is still.
    last, still = None, time.monotonic()
    while time.monotonic() - still < 0.5 and time.monotonic() < deadline + 10:
        now = sorted(os.listdir(spool))
        if now != last:
            last, still = now, time.monotonic()
        time.sleep(0.05)
    print(tool, "exit", cap.returncode)
    """).replace("MARKER", repr(MARKER))


def _namespace(tool: str) -> list[str]:
    for needed in (tool, "unshare"):
        if shutil.which(needed) is None:
            pytest.skip(f"{needed} is not installed (apt-get install tcpdump tshark util-linux)")
    # As root a plain network namespace; otherwise a user namespace too (where tcpdump cannot
    # drop privileges to its user: the tcpdump test then skips saying so).
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def _capture_ring(tool: str, tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Run DRIVER for `tool`; the ring and spool directories and the spooled names."""
    prefix = _namespace(tool)
    ring, spool = tmp_path / "ring", tmp_path / "spool"
    ring.mkdir()
    spool.mkdir()
    hook_path = tmp_path / "kwire-spool-hook"
    hook_path.write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m kwire.live.spool "$@"\n'
    )
    hook_path.chmod(0o755)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    result = subprocess.run(
        [*prefix, sys.executable, str(driver), tool, str(ring), str(spool), str(hook_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "driver started" not in result.stdout:
        pytest.skip(
            f"no private network namespace to capture in ({' '.join(prefix)} failed: "
            f"{result.stderr.strip()[-300:]})"
        )
    if result.returncode == 77:
        pytest.skip(f"{result.stdout.strip().splitlines()[-1]} (in {' '.join(prefix)})")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "kwire-spool:" not in result.stderr, result.stderr
    assert hidden(spool) == []
    return ring, spool, sorted(n for n in os.listdir(spool) if not n.startswith("."))


def _check_capture(path: Path, fmt: str) -> None:
    stats = FileStats(str(path))
    with open(path, "rb") as f:
        packets = list(iter_packets(f, stats))
    assert stats.format == fmt and stats.warnings == [], (path, stats.warnings)
    assert len(packets) > 0 and {p.linktype for p in packets} == {dpkt.pcap.DLT_EN10MB}
    payloads = b"".join(
        bytes(dpkt.ethernet.Ethernet(p.data).data.data.data) for p in packets  # Ether/IP/TCP
    )
    assert MARKER in payloads


def _first_ts(path: Path) -> int:
    with open(path, "rb") as f:
        return next(iter_packets(f, FileStats(str(path)))).ts_us


def test_real_tcpdump_ring(tmp_path: Path) -> None:
    ring, spool, names = _capture_ring("tcpdump", tmp_path)
    assert len(names) >= 4
    matches = [SPOOLED.match(n) for n in names]
    assert all(m and re.fullmatch(r"ring\.pcap[012]", m.group(2)) for m in matches), names
    assert [int(m.group(1)) for m in matches if m] == list(range(len(names)))
    # tcpdump runs the hooks in parallel, at the lowest priority: on a busy machine any later
    # file's hook can take its number first, so the numbers follow the hooks, not the closes
    # (kwire live orders the files that arrive together by their first packet). In the order of
    # their packets, the spooled files are tcpdump's rotation: ring.pcap0, 1, 2, 0, 1, ...
    by_time = sorted(names, key=lambda n: _first_ts(spool / n))
    originals = [SPOOLED.match(n).group(2) for n in by_time]  # type: ignore[union-attr]
    assert originals == [f"ring.pcap{i % 3}" for i in range(len(names))], by_time
    # Left in the ring: at most the file tcpdump was writing when it stopped (no -z for that one).
    assert len(os.listdir(ring)) <= 1
    for name in names:
        assert (spool / name).stat().st_size >= 1_000_000  # closed by rotation: full
        _check_capture(spool / name, "pcap")


def test_real_dumpcap_ring(tmp_path: Path) -> None:
    ring, spool, names = _capture_ring("dumpcap", tmp_path)
    assert len(names) >= 4
    matches = [re.fullmatch(r"(\d{12})-ring_(\d{5})_\d{14}\.pcapng", n) for n in names]
    assert all(matches), names
    assert [int(m.group(1)) for m in matches if m] == list(range(len(names)))
    assert [int(m.group(2)) for m in matches if m] == list(range(1, len(names) + 1))
    # dumpcap names the last file too when it stops: the ring is left empty.
    assert os.listdir(ring) == []
    for name in names:
        _check_capture(spool / name, "pcapng")
