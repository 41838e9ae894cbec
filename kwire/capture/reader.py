"""From capture files to record batches of frames: the pipeline behind the API and the CLI."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .engine import Tracker
from .packets import SUPPORTED_LINKTYPES, Skip, decode
from .pcapfile import (
    CaptureFileError,
    FileStats,
    first_timestamp,
    iter_packets,
    looks_like_capture,
)
from .summary import Summary
from .tls import KeyLog
from .table import SCHEMA, BatchBuilder

DEFAULT_BROKER_PORTS = (9092,)
PathLike = str | os.PathLike[str]
Progress = Callable[[dict[str, Any]], None]


def expand_paths(paths: PathLike | Iterable[PathLike]) -> list[str]:
    """Files named, plus the capture files inside directories named, by first capture time.

    Ordering by time lets ring files (name0, name1, ... name10) be given in any order or as a
    directory and still be read as one continuous capture. Inside a directory, files that do
    not start like a pcap or pcapng file are passed over (see `skipped_in_directories`).
    """
    return _expand(paths)[0]


def _expand(paths: PathLike | Iterable[PathLike]) -> tuple[list[str], list[str]]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[str] = []
    skipped: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                full = os.path.join(p, name)
                if name.startswith(".") or not os.path.isfile(full):
                    continue
                (files if looks_like_capture(full) else skipped).append(full)
        else:
            files.append(p)
    keyed = [(first_timestamp(f), i, f) for i, f in enumerate(files)]
    # Unreadable files keep their place at the end; the reader reports them.
    keyed.sort(key=lambda k: (k[0] is None, k[0] or 0, k[1]))
    return [f for _, _, f in keyed], skipped


def read_frames(
    paths: PathLike | Iterable[PathLike],
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    *,
    infer_direction: bool = True,
    batch_size: int = 8192,
    summary: Summary | None = None,
    errors: str = "raise",
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
    keep_auth_bytes: bool = False,
    keylog: KeyLog | None = None,
) -> Iterator[pa.RecordBatch]:
    """Yield the frames of the given captures as record batches with schema `SCHEMA`.

    Several files (or a directory) are read as one capture: connections continue across them.
    `errors="raise"` raises CaptureFileError for a file that is not a readable capture;
    `errors="report"` records it in `summary.files` and goes on. A file that ends inside a
    packet is always read up to that point, with a warning. TLS connections are decrypted with
    the secrets of `keylog` (kwire.capture.tls.KeyLog); without them they become rows with the
    error "encrypted: ..." (never frames read from ciphertext).
    """
    if errors not in ("raise", "report"):
        raise ValueError("errors must be 'raise' or 'report'")
    summary = summary if summary is not None else Summary()
    builder = BatchBuilder(batch_size)
    tracker = Tracker(broker_ports, infer_direction, builder.add, summary, keep_auth_bytes, keylog)
    files, passed_over = _expand(paths)
    for path in passed_over:
        summary.files.append({"path": path, "skipped": "not a capture file (in a directory)"})
    sizes = [_size(f) for f in files]
    total = sum(sizes)
    done = 0
    last_report = time.monotonic()
    skipped = summary.skipped_packets
    for index, path in enumerate(files):
        stats = FileStats(path, size=sizes[index])
        entry: dict[str, Any] = {"path": path, "bytes": stats.size}
        summary.files.append(entry)
        summary.file_bytes += stats.size
        tracker.src = path
        try:
            f = open(path, "rb")
        except OSError as e:
            message = f"cannot open: {e.strerror or e}"
            entry["error"] = message
            if errors == "raise":
                raise CaptureFileError(f"{path}: {message}") from None
            continue
        with f:
            try:
                n = 0
                for packet in iter_packets(f, stats):
                    summary.packets += 1
                    try:
                        seg = decode(packet.linktype, packet.data, packet.orig_len)
                    except Skip as why:
                        skipped[str(why)] += 1
                        continue
                    summary.tcp_segments += 1
                    tracker.segment(seg, packet.ts_us)
                    if builder.full():
                        yield builder.take()
                    n += 1
                    if progress is not None and not n & 0xFFF:
                        now = time.monotonic()
                        if now - last_report >= 1.0:
                            last_report = now
                            progress(
                                _progress(index, files, path, f.tell(), sizes, done, total, summary)
                            )
            except CaptureFileError as e:
                entry["error"] = str(e)
                if errors == "raise":
                    raise CaptureFileError(f"{path}: {e}") from None
                continue
            finally:
                entry["format"] = stats.format
                entry["packets"] = stats.packets
                entry["link_types"] = sorted(
                    SUPPORTED_LINKTYPES.get(t, f"unsupported ({t})") for t in stats.linktypes
                )
        done += sizes[index]
        if stats.warning:
            entry["warning"] = stats.warning
            if warn is not None:
                warn(f"{path}: {stats.warning}; the packets before it were used")
    tracker.finish()
    if progress is not None and files:
        progress(
            _progress(
                len(files) - 1, files, files[-1], sizes[-1], sizes, done, total, summary, final=True
            )
        )
    if builder.rows:
        yield builder.take()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _progress(
    index: int,
    files: list[str],
    path: str,
    pos: int,
    sizes: list[int],
    done: int,
    total: int,
    summary: Summary,
    final: bool = False,
) -> dict[str, Any]:
    return {
        "file_index": index,
        "files": len(files),
        "path": path,
        "file_done": pos,
        "file_size": sizes[index],
        "done": total if final else done + pos,
        "total": total,
        "frames": summary.frames["request"] + summary.frames["response"],
        "final": final,
    }


def frames_table(
    paths: PathLike | Iterable[PathLike],
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    **options: Any,
) -> pa.Table:
    """All frames of the given captures as one table (for captures that fit in memory)."""
    batches = list(read_frames(paths, broker_ports, **options))
    return pa.Table.from_batches(batches, schema=SCHEMA)


def write_parquet(
    paths: PathLike | Iterable[PathLike],
    out: PathLike,
    broker_ports: Iterable[int] = DEFAULT_BROKER_PORTS,
    **options: Any,
) -> Summary:
    """Stream the frames of the given captures into a Parquet file; returns the summary.

    The file appears only when complete (written beside it, then renamed).
    """
    summary = options.pop("summary", None) or Summary()
    out_path = Path(out)
    tmp = out_path.with_name(f".{out_path.name}.partial")
    try:
        with pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer:
            for batch in read_frames(paths, broker_ports, summary=summary, **options):
                writer.write_batch(batch)
        os.replace(tmp, out_path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return summary
