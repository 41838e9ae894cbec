"""The capture step split in two, for engines that run it in parallel (the decode job on Spark).

1. `read_segments`: one capture file -> its TCP segments as Arrow rows, each with the flow it
   belongs to and its place in the capture (the file's first packet time, the file's index, the
   packet's index in the file), then one row with the file's statistics.
2. `track_segments`: segments regrouped by flow (any set of whole flows), in capture order ->
   frames, with the same connection tracker, reassembly and pairing as `read_frames`, then one row
   with the tracker's statistics.

Between them the engine moves each flow's segments to one place and sorts them by `ORDER`. For
the same packets, however they are split over files, the frames are the rows `read_frames` gives
(tests/spark/test_capture_spark.py). Nothing here imports Spark: both halves are plain iterators
of record batches, so they are tested and reused without it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
from dataclasses import dataclass
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import pyarrow as pa

from .engine import Tracker
from .packets import SUPPORTED_LINKTYPES, Segment, Skip, decode
from .pcapfile import (
    CaptureFileError,
    FileStats,
    Packet,
    Source,
    is_capture_head,
    iter_range,
    read_head,
)
from .summary import Summary
from .tls import KeyLog
from .table import SCHEMA, BatchBuilder

# The file's first packet time orders ring files as `expand_paths` does: files without one last.
NO_TIME = (1 << 63) - 1

SEGMENT_SCHEMA = pa.schema(
    [
        # A 64-bit digest of the connection's two ends (either direction): the regrouping key.
        pa.field("flow", pa.int64()),
        pa.field("file_time", pa.int64()),
        pa.field("file_index", pa.int32()),
        # The byte offset of the record of the run's first segment in its file.
        pa.field("offset", pa.int64()),
        # The connection's two ends, the lower (address, port) first.
        pa.field("a_addr", pa.string()),
        pa.field("a_port", pa.int32()),
        pa.field("b_addr", pa.string()),
        pa.field("b_port", pa.int32()),
        # The run's segments, one SEGMENT_RECORD each, one after the other.
        pa.field("segments", pa.binary()),
        # The time of the run's latest segment (microseconds since the epoch).
        pa.field("max_us", pa.int64()),
        # The segments' payloads one after the other (their lengths cut them apart); null when
        # the run carries positions instead (read_segments' `positions`).
        pa.field("payload", pa.binary()),
        # Set on the file's last row only, which carries no segment: Summary.state() as JSON.
        pa.field("stats", pa.string()),
    ]
)
ORDER = ("file_time", "file_index", "offset")

# A segment of a run, little-endian: the side that sent it (0: end a, 1: end b), its time in
# microseconds since the epoch, TCP sequence and acknowledgement numbers, TCP flags, payload
# length, payload bytes the capture did not keep (snaplen), and where the payload lies in its
# file (-1 when the run carries its payloads). One binary value per run, not eight lists: the
# JVM moves it through the shuffle as one value, where it converted and copied every element of
# every list twice (Arrow to rows and back), and Python packs and unpacks it in C.
SEGMENT_RECORD = struct.Struct("<BqIIBiIq")

# The frames rows, plus the tracker's statistics on one extra row per task (all else null).
FRAMES_SCHEMA = pa.schema(
    [f.with_nullable(True) for f in SCHEMA] + [pa.field("stats", pa.string())]
)

# A run is a flow's consecutive segments within one file, moved as one row: a 300 kB frame in
# MTU-sized packets is ~200 segments, and rows, not bytes, are what a shuffle and a sort pay
# for. A run ends at RUN_BYTES of payload or RUN_SEGMENTS segments; runs waiting in a task
# are flushed when together they hold more than RUNS_BYTES.
RUN_BYTES = 256 * 1024
RUN_SEGMENTS = 2048
RUNS_BYTES = 32 * 1024 * 1024
# Rows per record batch, and the payload bytes at which a batch is cut sooner.
SEGMENT_BATCH_ROWS = 1024
SEGMENT_BATCH_BYTES = 8 * 1024 * 1024
# Frames per batch, and the bytes at which a batch is cut sooner (frames can be tens of MB).
FRAME_BATCH_ROWS = 2048
FRAME_BATCH_BYTES = 16 * 1024 * 1024
# Reads from remote storage go through a buffer of this size.
READ_BUFFER = 1 << 20


def flow_key(a: str, ap: int, b: str, bp: int) -> int:
    """The same signed 64-bit number for both directions of a connection, in every process."""
    lo, hi = sorted(((a, ap), (b, bp)))
    text = f"{lo[0]}|{lo[1]}|{hi[0]}|{hi[1]}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


def local_path(path: str) -> str | None:
    """The local file a path names (a plain path or a file: URL), or None for remote storage."""
    if path.startswith("file://"):
        return path[len("file://") :] or "/"
    if path.startswith("file:"):
        return path[len("file:") :]
    return None if "://" in path else path


def anchored(path: str, base: str | None = None) -> str:
    """A relative local path (plain or file:) made absolute against `base` (default: this
    process's working directory), as Spark qualifies the paths its own file sources are given;
    other paths as they are."""
    local = local_path(path)
    if local is None or os.path.isabs(local):
        return path
    return os.path.abspath(os.path.join(base or os.getcwd(), local))


def open_capture(path: str) -> BinaryIO:
    """Opens a local path, a file: URL, or any URL pyarrow's filesystems read (s3://, hdfs://,
    gs://, ...; s3a:// and s3n:// are read as s3://)."""
    local = local_path(path)
    if local is not None:
        return open(local, "rb")
    filesystem, inner, _, _ = _remote(path)
    raw: Any = filesystem.open_input_file(inner)
    return io.BufferedReader(raw, buffer_size=READ_BUFFER)


def _remote(url: str) -> tuple[Any, str, str, str]:
    """(pyarrow filesystem, path inside it, the URL's scheme, its query) of a remote URL."""
    from pyarrow import fs

    scheme = url.split("://", 1)[0]
    inner_url = url
    if scheme in ("s3a", "s3n"):
        inner_url = "s3://" + url.split("://", 1)[1]
    query = inner_url.split("?", 1)[1] if "?" in inner_url else ""
    filesystem, inner = fs.FileSystem.from_uri(inner_url)
    return filesystem, inner, scheme, query


def filesystem(path: str) -> tuple[Any, str]:
    """(pyarrow filesystem, the path inside it) of a local path, a file: URL or a remote URL
    (s3a:// and s3n:// as s3://)."""
    from pyarrow import fs

    local = local_path(path)
    if local is not None:
        return fs.LocalFileSystem(), os.path.abspath(local)
    filesystem, inner, _, _ = _remote(path)
    return filesystem, inner


def load_keylog(paths: list[str]) -> KeyLog | None:
    """The key logs of --keylog (local paths or URLs, as captures), merged; None when none was
    given. Raises KeyLogError naming the file (and line)."""
    return KeyLog.load(paths, opener=open_capture) if paths else None


def list_files(paths: Iterable[str]) -> list[tuple[str, bool, int]]:
    """(path, came from a directory, size) of every file named or inside a directory named
    (by name; hidden files passed over), local or in any store pyarrow's filesystems reach. A
    path that does not exist is kept (its reading reports it)."""
    out: list[tuple[str, bool, int]] = []
    for p in paths:
        local = local_path(p)
        if local is not None:
            if os.path.isdir(local):
                for name, in_dir in expand_local([p]):
                    out.append((name, in_dir, _local_size(name)))
            else:
                out.append((p, False, _local_size(p)))
            continue
        from pyarrow import fs

        filesystem, inner, scheme, query = _remote(p)
        info = filesystem.get_file_info(inner)
        if info.type == fs.FileType.Directory:
            children = filesystem.get_file_info(fs.FileSelector(inner, recursive=False))
            for child in sorted(children, key=lambda c: c.path):
                if child.type != fs.FileType.File or child.base_name.startswith("."):
                    continue
                url = f"{scheme}://{child.path}" + (f"?{query}" if query else "")
                out.append((url, True, int(child.size or 0)))
        else:
            out.append((p, False, int(info.size or 0)))
    return out


def _local_size(path: str) -> int:
    try:
        return os.path.getsize(local_path(path) or path)
    except OSError:
        return 0


class _Run:
    """A run being filled: its first record's offset, payload bytes, its segments as packed
    SEGMENT_RECORDs (one bytes each), and the latest segment's time."""

    __slots__ = ("first", "size", "records", "max_us", "payload")

    def __init__(self, first: int) -> None:
        self.first = first
        self.size = 0
        self.records: list[bytes] = []
        self.max_us = -(1 << 63)
        self.payload: list[bytes] = []


_PACK = SEGMENT_RECORD.pack


class _Runs:
    """Runs being filled, per flow, and the finished rows of the current batch."""

    def __init__(self, file_index: int, positions: bool = False) -> None:
        self.file_index = file_index
        # Keep where the payloads are in the file rather than the bytes (see read_segments).
        self.positions = positions
        self.file_time = NO_TIME
        self.open: dict[tuple[str, int, str, int], _Run] = {}
        self.open_bytes = 0
        self.rows: list[tuple[tuple[str, int, str, int], _Run]] = []
        self.rows_bytes = 0
        self.keys: dict[tuple[str, int, str, int], tuple[tuple[str, int, str, int], int]] = {}

    def add(self, seg: Segment, n: int, ts: int, at: int = -1) -> None:
        """Adds a segment of the packet record at byte n, its data at byte `at` of the file."""
        key = (seg.src, seg.sport, seg.dst, seg.dport)
        known = self.keys.get(key)
        if known is None:
            if (seg.src, seg.sport) <= (seg.dst, seg.dport):
                known = (key, 0)
            else:
                known = ((seg.dst, seg.dport, seg.src, seg.sport), 1)
            if len(self.keys) > 100_000:
                self.keys.clear()
            self.keys[key] = known
        ends, side = known
        run = self.open.get(ends)
        if run is None:
            run = self.open[ends] = _Run(n)
        size = len(seg.payload)
        where = at + seg.at if self.positions else -1
        run.records.append(_PACK(side, ts, seg.seq, seg.ack, seg.flags, size, seg.missing, where))
        if ts > run.max_us:
            run.max_us = ts
        run.size += size
        if not self.positions:
            run.payload.append(seg.payload)
            self.open_bytes += size
        if len(run.records) >= RUN_SEGMENTS or run.size >= RUN_BYTES:
            self._finish(ends, run)
        if self.open_bytes > RUNS_BYTES:
            for ends, run in list(self.open.items()):
                self._finish(ends, run)

    def _finish(self, ends: tuple[str, int, str, int], run: _Run) -> None:
        del self.open[ends]
        self.rows.append((ends, run))
        if not self.positions:
            self.open_bytes -= run.size
            self.rows_bytes += run.size

    def full(self) -> bool:
        return len(self.rows) >= SEGMENT_BATCH_ROWS or self.rows_bytes >= SEGMENT_BATCH_BYTES

    def flush(self) -> None:
        for ends, run in list(self.open.items()):
            self._finish(ends, run)

    def take(self) -> pa.RecordBatch:
        rows, self.rows, self.rows_bytes = self.rows, [], 0
        n = len(rows)
        arrays = [
            pa.array([flow_key(*e) for e, _ in rows], pa.int64()),
            pa.array([self.file_time] * n, pa.int64()),
            pa.array([self.file_index] * n, pa.int32()),
            pa.array([r.first for _, r in rows], pa.int64()),
            pa.array([e[0] for e, _ in rows], pa.string()),
            pa.array([e[1] for e, _ in rows], pa.int32()),
            pa.array([e[2] for e, _ in rows], pa.string()),
            pa.array([e[3] for e, _ in rows], pa.int32()),
            pa.array([b"".join(r.records) for _, r in rows], pa.binary()),
            pa.array([r.max_us for _, r in rows], pa.int64()),
            pa.array(
                [None if self.positions else b"".join(r.payload) for _, r in rows], pa.binary()
            ),
            pa.nulls(n, pa.string()),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=SEGMENT_SCHEMA)


@dataclass(frozen=True)
class Range:
    """Bytes [start, end) of one capture file: its task reads the packets that start there."""

    file_index: int
    path: str
    start: int
    end: int
    size: int
    in_directory: bool = False
    # Where the task opens the file: `path` itself, or for a relative local path that path
    # made absolute where the ranges were planned (the driver), since an executor's working
    # directory is its own (a standalone worker's is its work directory).
    location: str = ""

    def where(self) -> str:
        return self.location or self.path


# Spark's own defaults for file sources: a task reads about 128 MB, and opening a file counts as
# 4 MB when small files are packed into one task (spark.sql.files.maxPartitionBytes,
# spark.sql.files.openCostInBytes).
SPLIT_BYTES = 128 * 1024 * 1024


def parse_size(text: str) -> int:
    """A byte count: 4096, 64k, 128m, 1g (binary units, an optional trailing b); ValueError with
    what was wrong otherwise."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = str(text).strip().lower().removesuffix("b")
    try:
        value = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (e.g. 128m, 4096)") from None
    if value < 1:
        raise ValueError(f"a size must be at least 1 byte, not {text!r}")
    return value


OPEN_COST = 4 * 1024 * 1024


def plan_ranges(
    files: Iterable[tuple[str, bool, int]],
    split_bytes: int = SPLIT_BYTES,
    open_cost: int = OPEN_COST,
    base: str | None = None,
) -> list[list[Range]]:
    """Tasks of byte ranges: each file (path, in a directory, size) cut into ranges of at most
    `split_bytes`, consecutive ranges packed into one task while the task stays within
    `split_bytes` (each range counting `open_cost` more), as Spark packs file splits. Relative
    local paths are opened from `base` (default: this process's working directory), see
    Range.location."""
    if split_bytes < 1:
        raise ValueError("the split size must be at least one byte")
    tasks: list[list[Range]] = []
    current: list[Range] = []
    load = 0
    for index, (path, in_dir, size) in enumerate(files):
        starts = range(0, max(size, 1), split_bytes)
        for start in starts:
            end = min(start + split_bytes, size) if start + split_bytes < size else max(size, 1)
            piece = Range(index, path, start, end, size, in_dir, anchored(path, base))
            cost = (end - start) + open_cost
            if current and load + cost > split_bytes:
                tasks.append(current)
                current, load = [], 0
            current.append(piece)
            load += cost
    if current:
        tasks.append(current)
    return tasks


def read_range_packets(
    piece: Range,
    entry: dict[str, Any],
    opener: Callable[[str], BinaryIO] = open_capture,
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Packet]]:
    """(byte offset, packet) of every packet record starting in the range; what happened goes
    into `entry`: the range's part of the file's summary entry (format, packets, link types,
    warning or error) and where it synchronised and ended (`synced`, `next`). The first packet
    time of the file goes into entry["file_time"]."""
    stats = FileStats(piece.path, size=piece.size)
    entry.update(path=piece.path, size=piece.size, start=piece.start, end=piece.end)
    try:
        f = opener(piece.where())
    except (OSError, ValueError) as e:
        entry["error"] = f"cannot open: {getattr(e, 'strerror', None) or e}"
        entry["head_error"] = True
        return
    with f:
        src = Source(f, piece.size)
        if piece.in_directory and not is_capture_head(src.get(0, 4)):
            entry.clear()
            entry.update(path=piece.path, skipped="not a capture file (in a directory)")
            return
        try:
            try:
                head = read_head(src, stats)
            except CaptureFileError:
                entry["head_error"] = True
                raise
            entry["file_time"] = NO_TIME if head.first_ts is None else head.first_ts
            entry["data_start"] = head.data_start
            last = 0
            for offset, packet in iter_range(src, head, stats, piece.start, piece.end):
                yield offset, packet
                if progress is not None and offset - last > (4 << 20):
                    last = offset
                    progress(offset - piece.start)
        except CaptureFileError as e:
            entry["error"] = str(e)
        finally:
            entry["format"] = stats.format
            entry["packets"] = stats.packets
            entry["link_types"] = sorted(
                SUPPORTED_LINKTYPES.get(t, f"unsupported ({t})") for t in stats.linktypes
            )
            entry["synced"], entry["next"] = stats.synced, stats.next
            if stats.warnings:
                entry["warnings"] = stats.warnings


def read_segments(
    ranges: Iterable[Range],
    *,
    opener: Callable[[str], BinaryIO] = open_capture,
    progress: Callable[[int], None] | None = None,
    positions: Collection[int] = (),
) -> Iterator[pa.RecordBatch]:
    """The TCP segments of the given byte ranges, each range's then followed by one statistics
    row (see SEGMENT_SCHEMA). A file inside a directory that is not a capture is passed over (as
    `read_frames` does); a file named on its own that cannot be read gets an error in its
    statistics (from the file's first range only). `progress` is called with bytes read now and
    then.

    For the files whose indexes are in `positions` (local files that stay as they are), runs
    carry where each payload lies in the file (in their SEGMENT_RECORDs) instead of the bytes:
    the engine then moves a few bytes per segment between the two halves, and `track_segments`
    reads the payloads from the file itself."""
    for piece in ranges:
        summary = Summary()
        entry: dict[str, Any] = {}
        runs = _Runs(piece.file_index, piece.file_index in positions)
        for offset, packet in read_range_packets(piece, entry, opener, progress):
            summary.packets += 1
            try:
                seg = decode(packet.linktype, packet.data, packet.orig_len)
            except Skip as why:
                summary.skipped_packets[str(why)] += 1
                continue
            summary.tcp_segments += 1
            runs.add(seg, offset, packet.ts_us, packet.at)
            if runs.full():
                runs.file_time = entry.get("file_time", NO_TIME)
                yield runs.take()
        runs.file_time = entry.get("file_time", NO_TIME)
        runs.flush()
        if runs.rows:
            yield runs.take()
        if "skipped" not in entry and "error" not in entry:
            summary.file_bytes += piece.end - piece.start if piece.size else 0
        if piece.start > 0 and ("skipped" in entry or entry.get("head_error")):
            entry = {}  # the file's first range reports it
        summary.files.append(entry)
        last: list[Any] = [None] * len(SEGMENT_SCHEMA)
        last[1], last[2] = runs.file_time, piece.file_index
        last[3], last[-1] = piece.start, json.dumps(summary.state())
        yield pa.RecordBatch.from_pylist(
            [dict(zip(SEGMENT_SCHEMA.names, last))], schema=SEGMENT_SCHEMA
        )


def track_segments(
    batches: Iterable[pa.RecordBatch],
    paths: list[str],
    broker_ports: Iterable[int],
    *,
    infer_direction: bool = True,
    keep_auth_bytes: bool = False,
    keylog: KeyLog | None = None,
    batch_rows: int = FRAME_BATCH_ROWS,
    batch_bytes: int = FRAME_BATCH_BYTES,
    stamps: Mapping[int, FileStamp] | None = None,
    locations: list[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Frames (FRAMES_SCHEMA) from segments of whole flows in capture order, then one row with
    the tracker's statistics. `paths[file_index]` names each segment's file (source_file).
    Runs that carry positions (no `payload`) have their payloads read from `locations[file_index]`
    (default: the path), which must still be the file `stamps[file_index]` describes
    (FileChanged otherwise)."""
    summary = Summary()
    builder = BatchBuilder(batch_rows, batch_bytes)
    tracker = Tracker(broker_ports, infer_direction, builder.add, summary, keep_auth_bytes, keylog)
    views = _Views(paths, stamps or {}, locations)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            cols = [batch.column(name).to_pylist() for name in TRACKED]
            for index, a, ap, b, bp, records, payload in zip(*cols):
                if a is None:
                    continue  # a range's statistics row (no connection ends)
                tracker.src = paths[index]
                view = None if payload is not None else views.get(index)
                for done in feed_run(tracker, builder, (a, ap, b, bp), records, payload, view):
                    yield _with_stats(done, None)
        tracker.finish()
    finally:
        views.close()
    if builder.rows:
        yield _with_stats(builder.take(), None)
    row: dict[str, Any] = {name: None for name in FRAMES_SCHEMA.names}
    row["stats"] = json.dumps(summary.state())
    yield pa.RecordBatch.from_pylist([row], schema=FRAMES_SCHEMA)


def feed_run(
    tracker: Tracker,
    builder: BatchBuilder,
    ends: tuple[str, int, str, int],
    records: bytes,
    payload: bytes | None,
    view: _File | None = None,
) -> list[pa.RecordBatch]:
    """Feeds one run (a flow's consecutive segments: its two `ends` a_addr, a_port, b_addr,
    b_port, its `segments` and `payload`, see SEGMENT_SCHEMA) to the tracker; returns the frame
    batches the builder filled meanwhile (a run is at most RUN_BYTES of payload, so a batch or
    two). Without `payload`, the payloads are read from `view` (the file, see read_payloads)
    where the records say they lie."""
    a, ap, b, bp = ends
    sides = ((a, ap, b, bp), (b, bp, a, ap))
    segs = list(SEGMENT_RECORD.iter_unpack(records))
    full: list[pa.RecordBatch] = []
    if payload is None:
        payloads = read_payloads(view, [s[7] for s in segs], [s[5] for s in segs])
    else:
        payloads = []
        cut = 0
        for s in segs:
            payloads.append(payload[cut : cut + s[5]])
            cut += s[5]
    for (side, ts, seq, ack, flags, _, missing, _), data in zip(segs, payloads):
        src, sport, dst, dport = sides[side]
        tracker.segment(Segment(src, sport, dst, dport, seq, ack, flags, data, missing), ts)
        if builder.full():
            full.append(builder.take())
    return full


@dataclass(frozen=True)
class FileStamp:
    """What a local file was when the capture step listed it: its size, modification time and a
    digest of its first HEAD_BYTES. The payloads of runs carrying positions are read from the
    file again, so by then it may have grown (a capture still being written: the bytes listed
    are unchanged) but not been written anew (a ring's oldest file rotated over: other packets,
    so other first bytes)."""

    size: int
    mtime_ns: int
    head: str

    HEAD_BYTES = 64 * 1024

    @classmethod
    def of(cls, path: str) -> FileStamp:
        fd = os.open(path, os.O_RDONLY)
        try:
            return cls._of(fd)
        finally:
            os.close(fd)

    @classmethod
    def _of(cls, fd: int) -> FileStamp:
        st = os.fstat(fd)
        head = hashlib.blake2b(os.pread(fd, cls.HEAD_BYTES, 0), digest_size=16).hexdigest()
        return cls(st.st_size, st.st_mtime_ns, head)

    def still(self, fd: int) -> FileStamp | None:
        """None when the open file still holds the bytes this stamp describes, else what it is
        now."""
        st = os.fstat(fd)
        if st.st_size == self.size and st.st_mtime_ns == self.mtime_ns:
            return None
        now = self._of(fd)
        return None if now.size >= self.size and now.head == self.head else now


class FileChanged(CaptureFileError):
    """A capture file changed between the capture step's two reads of it."""


# Payloads of a run that lie at most READ_GAP bytes apart in the file are read together, up to
# READ_SPAN bytes at a time: a big frame in MTU-sized packets is one read, not hundreds.
READ_GAP = 16 * 1024
READ_SPAN = 1 << 20


@dataclass
class _File:
    path: str
    fd: int


def read_payloads(
    f: _File | None, ats: list[int], lengths: list[int], gap: int = READ_GAP, span: int = READ_SPAN
) -> list[bytes]:
    """The payloads of lengths[i] bytes at byte ats[i] of the file (in file order), by
    positional reads of nearby payloads together."""
    if f is None:
        raise ValueError("a run with positions needs its file")
    out: list[bytes] = []
    n, i = len(ats), 0
    while i < n:
        lo = ats[i]
        hi, j = lo + lengths[i], i + 1
        while j < n:
            at, length = ats[j], lengths[j]
            if length:  # a segment without payload (an ACK) reads nothing
                if at < hi or at - hi > gap or at + length - lo > span:
                    break
                hi = at + length
            j += 1
        buf = os.pread(f.fd, hi - lo, lo) if hi > lo else b""
        if len(buf) < hi - lo:
            raise FileChanged(
                f"{f.path}: the file changed while the capture step read it (it ends at byte "
                f"{lo + len(buf):,}, where a payload of bytes {lo:,}-{hi:,} was)"
            )
        for k in range(i, j):
            length = lengths[k]
            out.append(buf[ats[k] - lo : ats[k] - lo + length] if length else b"")
        i = j
    return out


class _Views:
    """The local files that runs point into, opened once each and checked first."""

    def __init__(
        self,
        paths: list[str],
        stamps: Mapping[int, FileStamp],
        locations: list[str] | None = None,
    ) -> None:
        self.paths = paths
        self.stamps = stamps
        self.locations = locations or paths
        self.open: dict[int, _File] = {}

    def get(self, index: int) -> _File:
        f = self.open.get(index)
        if f is None:
            name, where = self.paths[index], self.locations[index]
            try:
                fd = os.open(local_path(where) or where, os.O_RDONLY)
            except OSError as e:
                raise FileChanged(
                    f"{name}: cannot open it again to read its payloads: {e.strerror or e}"
                ) from None
            f = self.open[index] = _File(name, fd)
            want = self.stamps.get(index)
            now = want.still(fd) if want is not None else None
            if now is not None:
                assert want is not None
                raise FileChanged(
                    f"{name}: the file changed while the capture step read it "
                    f"({want.size:,} bytes when listed, {now.size:,} now, "
                    + (
                        "its first bytes rewritten"
                        if now.size and now.head != want.head
                        else "cut short"
                    )
                    + "). Copy a ring that rotates before reading it, or follow it with "
                    "`kwire live`."
                )
        return f

    def close(self) -> None:
        for f in self.open.values():
            os.close(f.fd)
        self.open.clear()


TRACKED = ("file_index", "a_addr", "a_port", "b_addr", "b_port", "segments", "payload")


def _with_stats(batch: pa.RecordBatch, stats: str | None) -> pa.RecordBatch:
    arrays = list(batch.columns) + [pa.nulls(batch.num_rows, pa.string())]
    return pa.RecordBatch.from_arrays(arrays, schema=FRAMES_SCHEMA)


class SplitError(CaptureFileError):
    """Two byte ranges of one file disagree on where a packet record starts."""


def merge_stats(file_states: Iterable[str], tracker_states: Iterable[str]) -> Summary:
    """One summary from the statistics rows of both halves, ranges in capture order (file time,
    file index, start). The ranges of each file become the one entry `read_frames` gives it.
    Raises SplitError when a range synchronised somewhere other than where the range before it
    ended (a record look-alike inside a packet's bytes): the frames cannot be trusted then."""
    parts: dict[str, list[dict[str, Any]]] = {}
    total = Summary()
    for text in file_states:
        part = Summary.from_state(json.loads(text))
        for entry in part.files:
            if entry:
                parts.setdefault(entry["path"], []).append(entry)
        part.files = []
        total.merge(part)
    for text in tracker_states:
        total.merge(Summary.from_state(json.loads(text)))
    files = [_merge_entries(entries) for entries in parts.values()]
    # Files passed over in directories are listed first, as `read_frames` lists them.
    total.files = [f for f in files if "skipped" in f] + [f for f in files if "skipped" not in f]
    return total


def _merge_entries(entries: list[dict[str, Any]]) -> dict[str, Any]:
    first = entries[0]
    if "skipped" in first:
        return {"path": first["path"], "skipped": first["skipped"]}
    entries = sorted(entries, key=lambda e: e.get("start", 0))
    out: dict[str, Any] = {"path": first["path"]}
    out["bytes"] = first.get("size", 0)
    for e in entries:
        if e.get("error"):
            out["error"] = e["error"]
            break
    if any("format" in e for e in entries):  # the file was opened
        out["format"] = next((e["format"] for e in entries if e.get("format")), "")
        out["packets"] = sum(e.get("packets", 0) for e in entries)
        out["link_types"] = sorted({t for e in entries for t in e.get("link_types", [])})
    warnings = [w for e in entries for w in e.get("warnings", [])]
    if warnings:
        out["warning"] = "; ".join(warnings)
    if "error" not in out:
        _check_meeting(first["path"], entries)
    return out


def _check_meeting(path: str, entries: list[dict[str, Any]]) -> None:
    """Each range must start reading where the records of the ranges before it ended."""
    carry: int | None = None
    for e in entries:
        synced, end = e.get("synced"), e.get("end", 0)
        if synced is not None:
            if carry is not None and carry != synced:
                raise SplitError(
                    f"{path}: the byte range from {e.get('start')} found a packet record at "
                    f"byte {synced}, but the records before it end at byte {carry} (a record "
                    "look-alike inside a packet): read the file with a larger split size"
                )
            carry = e.get("next")
        elif carry is not None and carry < end and carry >= e.get("start", 0):
            raise SplitError(
                f"{path}: the byte range from {e.get('start')} found no packet record, but one "
                f"starts at byte {carry}: read the file with a larger split size"
            )


def file_order(entries: Iterable[tuple[int, int | None]]) -> list[int]:
    """File indexes in the order the capture is read: by first packet time, then as given."""
    keyed = sorted(entries, key=lambda e: (e[1] is None or e[1] == NO_TIME, e[1] or 0, e[0]))
    return [i for i, _ in keyed]


def expand_local(paths: Iterable[str]) -> list[tuple[str, bool]]:
    """Local files named, and the files inside local directories named (by name), each with
    whether it came from a directory. Order by time happens when the files are read."""
    out: list[tuple[str, bool]] = []
    for p in paths:
        local = local_path(p)
        if local is not None and os.path.isdir(local):
            for name in sorted(os.listdir(local)):
                full = os.path.join(p, name)
                if not name.startswith(".") and os.path.isfile(os.path.join(local, name)):
                    out.append((full, True))
        else:
            out.append((p, False))
    return out
