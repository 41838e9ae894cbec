"""The capture step split in two, for engines that run it in parallel (the decode job on Spark).

1. `read_segments`: one capture file -> its TCP segments as Arrow rows, each with the flow it
   belongs to and its place in the capture (the file's first packet time, the file's index, the
   packet's index in the file), then one row with the file's statistics.
2. `track_segments`: segments regrouped by flow (any set of whole flows), in capture order ->
   frames, with the same connection tracker, reassembly and pairing as `read_frames`, then one row
   with the tracker's statistics.

Between them the engine moves each flow's segments to one place and sorts them by `ORDER`. For
the same packets, however they are split over files, the frames are the rows `read_frames` gives
(tests/udfs/test_capture_spark.py). Nothing here imports Spark: both halves are plain iterators
of record batches, so they are tested and reused without it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

import pyarrow as pa

from .engine import Tracker
from .packets import SUPPORTED_LINKTYPES, Segment, Skip, decode
from .pcapfile import CaptureFileError, FileStats, is_capture_head, iter_packets
from .summary import Summary
from .table import SCHEMA, BatchBuilder

# The file's first packet time orders ring files as `expand_paths` does: files without one last.
NO_TIME = (1 << 63) - 1

SEGMENT_SCHEMA = pa.schema(
    [
        # A 64-bit digest of the connection's two ends (either direction): the regrouping key.
        pa.field("flow", pa.int64()),
        pa.field("file_time", pa.int64()),
        pa.field("file_index", pa.int32()),
        pa.field("packet", pa.int64()),
        pa.field("ts_us", pa.int64()),
        pa.field("src", pa.string()),
        pa.field("sport", pa.int32()),
        pa.field("dst", pa.string()),
        pa.field("dport", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("ack", pa.int64()),
        pa.field("flags", pa.int32()),
        pa.field("payload", pa.binary()),
        pa.field("missing", pa.int32()),
        # Set on the file's last row only, which carries no segment: Summary.state() as JSON.
        pa.field("stats", pa.string()),
    ]
)
ORDER = ("file_time", "file_index", "packet")

# The frames rows, plus the tracker's statistics on one extra row per task (all else null).
FRAMES_SCHEMA = pa.schema(
    [f.with_nullable(True) for f in SCHEMA] + [pa.field("stats", pa.string())]
)

# Segments per record batch (a segment is at most one packet, 64 KiB with offloads).
SEGMENT_BATCH_ROWS = 4096
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


def open_capture(path: str) -> BinaryIO:
    """Opens a local path, a file: URL, or any URL pyarrow's filesystems read (s3://, hdfs://,
    gs://, ...; s3a:// and s3n:// are read as s3://)."""
    local = local_path(path)
    if local is not None:
        return open(local, "rb")
    from pyarrow import fs

    url = path
    for alias in ("s3a://", "s3n://"):
        if url.startswith(alias):
            url = "s3://" + url[len(alias) :]
    filesystem, inner = fs.FileSystem.from_uri(url)
    raw: Any = filesystem.open_input_file(inner)
    return io.BufferedReader(raw, buffer_size=READ_BUFFER)


class _Columns:
    def __init__(self) -> None:
        self.cols: list[list[Any]] = [[] for _ in SEGMENT_SCHEMA]

    def add(self, row: tuple[Any, ...]) -> None:
        for col, value in zip(self.cols, row):
            col.append(value)

    def __len__(self) -> int:
        return len(self.cols[0])

    def take(self, file_time: int) -> pa.RecordBatch:
        # Rows are made before the file's first packet time is known only for the first batch:
        # the time column is filled at the cut.
        self.cols[1] = [file_time] * len(self.cols[0])
        arrays = [pa.array(c, type=f.type) for c, f in zip(self.cols, SEGMENT_SCHEMA)]
        self.cols = [[] for _ in SEGMENT_SCHEMA]
        return pa.RecordBatch.from_arrays(arrays, schema=SEGMENT_SCHEMA)


def read_segments(
    file_index: int,
    path: str,
    *,
    in_directory: bool = False,
    size: int | None = None,
    opener: Callable[[str], BinaryIO] = open_capture,
    batch_rows: int = SEGMENT_BATCH_ROWS,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The TCP segments of one capture file, then its statistics row (see SEGMENT_SCHEMA).

    A file inside a directory that is not a capture is passed over (as `read_frames` does); a
    file named on its own that cannot be read gets an error in its statistics. `progress` is
    called with the bytes read so far, now and then.
    """
    summary = Summary()
    if size is None:
        local = local_path(path)
        try:
            size = os.path.getsize(local) if local is not None else 0
        except OSError:
            size = 0
    stats = FileStats(path, size=size)
    entry: dict[str, Any] = {"path": path, "bytes": stats.size}
    cols = _Columns()
    file_time = NO_TIME
    n = 0
    try:
        f = opener(path)
    except (OSError, ValueError) as e:
        entry["error"] = f"cannot open: {getattr(e, 'strerror', None) or e}"
        f = None
    if f is not None:
        with f:
            if in_directory and not _looks_like_capture(f):
                entry = {"path": path, "skipped": "not a capture file (in a directory)"}
            else:
                summary.file_bytes += stats.size
                try:
                    for packet in iter_packets(f, stats):
                        summary.packets += 1
                        if file_time == NO_TIME:
                            file_time = packet.ts_us
                        try:
                            seg = decode(packet.linktype, packet.data, packet.orig_len)
                        except Skip as why:
                            summary.skipped_packets[str(why)] += 1
                            continue
                        summary.tcp_segments += 1
                        cols.add(_segment_row(seg, file_index, n, packet.ts_us))
                        n += 1
                        if len(cols) >= batch_rows:
                            yield cols.take(file_time)
                            if progress is not None:
                                progress(f.tell())
                except CaptureFileError as e:
                    entry["error"] = str(e)
                finally:
                    entry["format"] = stats.format
                    entry["packets"] = stats.packets
                    entry["link_types"] = sorted(
                        SUPPORTED_LINKTYPES.get(t, f"unsupported ({t})") for t in stats.linktypes
                    )
                if stats.warning:
                    entry["warning"] = stats.warning
    if len(cols):
        yield cols.take(file_time)
    summary.files.append(entry)
    last: list[Any] = [None] * len(SEGMENT_SCHEMA)
    last[1], last[2], last[-1] = file_time, file_index, json.dumps(summary.state())
    yield pa.RecordBatch.from_pylist([dict(zip(SEGMENT_SCHEMA.names, last))], schema=SEGMENT_SCHEMA)


def _looks_like_capture(f: BinaryIO) -> bool:
    head = f.read(4)
    f.seek(0)
    return is_capture_head(head)


def _segment_row(seg: Segment, file_index: int, n: int, ts: int) -> tuple[Any, ...]:
    return (
        flow_key(seg.src, seg.sport, seg.dst, seg.dport),
        0,
        file_index,
        n,
        ts,
        seg.src,
        seg.sport,
        seg.dst,
        seg.dport,
        seg.seq,
        seg.ack,
        seg.flags,
        seg.payload,
        seg.missing,
        None,
    )


def track_segments(
    batches: Iterable[pa.RecordBatch],
    paths: list[str],
    broker_ports: Iterable[int],
    *,
    infer_direction: bool = True,
    keep_auth_bytes: bool = False,
    batch_rows: int = FRAME_BATCH_ROWS,
    batch_bytes: int = FRAME_BATCH_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Frames (FRAMES_SCHEMA) from segments of whole flows in capture order, then one row with
    the tracker's statistics. `paths[file_index]` names each segment's file (source_file)."""
    summary = Summary()
    builder = BatchBuilder(batch_rows, batch_bytes)
    tracker = Tracker(broker_ports, infer_direction, builder.add, summary, keep_auth_bytes)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        cols = [batch.column(name).to_pylist() for name in _TRACKED]
        for index, ts, src, sport, dst, dport, seq, ack, flags, payload, missing in zip(*cols):
            if src is None:
                continue  # a statistics row, should one come this far
            tracker.src = paths[index]
            tracker.segment(Segment(src, sport, dst, dport, seq, ack, flags, payload, missing), ts)
            if builder.full():
                yield _with_stats(builder.take(), None)
    tracker.finish()
    if builder.rows:
        yield _with_stats(builder.take(), None)
    row: dict[str, Any] = {name: None for name in FRAMES_SCHEMA.names}
    row["stats"] = json.dumps(summary.state())
    yield pa.RecordBatch.from_pylist([row], schema=FRAMES_SCHEMA)


_TRACKED = (
    "file_index",
    "ts_us",
    "src",
    "sport",
    "dst",
    "dport",
    "seq",
    "ack",
    "flags",
    "payload",
    "missing",
)


def _with_stats(batch: pa.RecordBatch, stats: str | None) -> pa.RecordBatch:
    arrays = list(batch.columns) + [pa.nulls(batch.num_rows, pa.string())]
    return pa.RecordBatch.from_arrays(arrays, schema=FRAMES_SCHEMA)


def merge_stats(file_states: Iterable[str], tracker_states: Iterable[str]) -> Summary:
    """One summary from the statistics rows of both halves, files in capture order."""
    files = []
    total = Summary()
    for text in file_states:
        part = Summary.from_state(json.loads(text))
        files.extend(part.files)
        part.files = []
        total.merge(part)
    for text in tracker_states:
        total.merge(Summary.from_state(json.loads(text)))
    # Files passed over in directories are listed first, as `read_frames` lists them.
    total.files = [f for f in files if "skipped" in f] + [f for f in files if "skipped" not in f]
    return total


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
