"""`spark.read.format("pcap")`: pcap and pcapng captures as a Spark table, read by byte ranges.

    import kwire.spark
    kwire.spark.register(spark)              # the SQL functions and this source
    packets = spark.read.format("pcap").load("s3://bucket/ring/")

A Python data source (Spark 4's `pyspark.sql.datasource`). Planning (on the driver) lists the
files, local or in any store pyarrow's filesystems reach (s3://, hdfs://, gs://, file:), and cuts
every file into byte ranges of `splitSize` (default 128 MB, as Spark's own file sources), small
files packed into one task. Each task reads the packets whose records start in its ranges,
resynchronising at a range's start (kwire.capture.pcapfile), so one big file is read by many
tasks. Rows come out as Arrow batches.

Options:
- `path` (the argument of `load`) or `paths` (a JSON list, or several comma-separated): files,
  directories (their files, by name; non-captures in them are passed over) or URLs.
- `files`: instead of paths, files already listed, as a JSON list of [path, came from a
  directory, size] (what kwire's capture step passes: the file indexes are positions in it).
- `splitSize`: bytes per range and per task (default 134217728).
- `rows`: `packets` (default): one row per packet, with its IP and TCP fields, or `segments`:
  what kwire's capture step regroups by TCP flow (runs of a flow's segments, see
  kwire.capture.distributed.SEGMENT_SCHEMA), each range then followed by a statistics row.
- `base`: the directory relative local paths are read from (default: the working directory of
  the driver's planning process, or over Spark Connect the client's where it registered the
  source; the executors' own working directories do not count).
- `positions` (with `rows=segments`): a JSON list of file indexes (positions in `files`) whose
  runs carry where their payloads lie in the file instead of the bytes (local files only).

The `packets` rows: path, offset (the record's byte offset in its file), ts, linktype, caplen,
length (on the wire), src, sport, dst, dport, seq, ack, flags, payload (the TCP payload), note
(why a packet has no TCP fields: "not TCP", "IP fragment", ...). A file that cannot be read is
one row with null packet fields and the reason in `note` (`error: ...`), so nothing disappears.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kwire.capture.distributed import (
    SEGMENT_SCHEMA,
    SPLIT_BYTES,
    Range,
    anchored,
    list_files,
    parse_size,
    plan_ranges,
    read_range_packets,
    read_segments,
)
from kwire.capture.packets import Skip, decode
from kwire.spark.faults import fault_point

NAME = "pcap"

PACKET_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("offset", pa.int64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("linktype", pa.int32()),
        pa.field("caplen", pa.int32()),
        pa.field("length", pa.int32()),
        pa.field("src", pa.string()),
        pa.field("sport", pa.int32()),
        pa.field("dst", pa.string()),
        pa.field("dport", pa.int32()),
        pa.field("seq", pa.int64()),
        pa.field("ack", pa.int64()),
        pa.field("flags", pa.int32()),
        pa.field("payload", pa.binary()),
        pa.field("note", pa.string()),
    ]
)
PACKET_BATCH_ROWS = 8192
PACKET_BATCH_BYTES = 16 * 1024 * 1024


def _spark_type(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class RangesPartition(InputPartition):
    """One task: byte ranges of capture files."""

    def __init__(self, ranges: list[Range]) -> None:
        super().__init__(None)
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"RangesPartition({len(self.ranges)} range(s))"


def parse_paths(options: dict[str, str]) -> list[str]:
    """The inputs named by `path` and `paths` (a JSON list or comma-separated)."""
    out: list[str] = []
    raw = options.get("paths")
    if raw:
        text = raw.strip()
        out.extend(json.loads(text) if text.startswith("[") else [p for p in text.split(",") if p])
    if options.get("path"):
        out.append(options["path"])
    return out


class PcapDataSource(DataSource):
    """Captures (pcap, pcapng) as packets or TCP segment runs; see the module's docstring."""

    # Where relative local paths are read from when no `base` is given: the client's working
    # directory when registered on a Spark Connect session (register_source), whose planning
    # runs in the server's Python; unset, the planning process's own.
    client_cwd: str | None = None

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return _spark_type(self._arrow_schema())

    def _arrow_schema(self) -> pa.Schema:
        rows = self._options().get("rows", "packets")
        if rows == "packets":
            return PACKET_SCHEMA
        if rows == "segments":
            return SEGMENT_SCHEMA
        raise ValueError(f"pcap source: rows must be 'packets' or 'segments', not {rows!r}")

    def reader(self, schema: StructType) -> DataSourceReader:
        return PcapReader(self._options(), self._arrow_schema())

    def _options(self) -> dict[str, str]:
        """The options with lower-case keys, as Spark hands them over (a case-insensitive dict)."""
        found = {str(k).lower(): v for k, v in self.options.items()}
        if self.client_cwd and not found.get("base"):
            found["base"] = self.client_cwd
        return found


class PcapReader(DataSourceReader):
    def __init__(self, options: dict[str, Any], schema: pa.Schema) -> None:
        """`options` with lower-case keys."""
        self.paths = parse_paths(options)
        # Files already listed (path, in a directory, size), as the capture step passes them.
        listed = options.get("files")
        self.files = [(p, bool(d), int(n)) for p, d, n in json.loads(listed)] if listed else None
        if not self.paths and not self.files:
            raise ValueError("pcap source: no input (load(PATH) or option('paths', ...))")
        try:
            self.split = parse_size(options.get("splitsize", SPLIT_BYTES))
        except ValueError as e:
            raise ValueError(f"pcap source: splitSize: {e}") from None
        self.rows = options.get("rows", "packets")
        self.positions = frozenset(json.loads(options.get("positions") or "[]"))
        self.base = options.get("base") or None
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        paths = [anchored(p, self.base) for p in self.paths] if self.base else self.paths
        files = self.files if self.files is not None else list_files(paths)
        if not files:
            raise FileNotFoundError(f"pcap source: no files in {', '.join(self.paths)}")
        return [RangesPartition(task) for task in plan_ranges(files, self.split, base=self.base)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangesPartition)
        fault_point("capture")
        if self.rows == "segments":
            yield from read_segments(partition.ranges, positions=self.positions)
        else:
            yield from read_packets(partition.ranges)


def read_packets(ranges: list[Range]) -> Iterator[pa.RecordBatch]:
    """The `packets` rows of some byte ranges, in batches of at most PACKET_BATCH_ROWS rows or
    about PACKET_BATCH_BYTES of payload."""
    cols: list[list[Any]] = [[] for _ in PACKET_SCHEMA]
    size = 0
    for piece in ranges:
        entry: dict[str, Any] = {}
        for offset, packet in read_range_packets(piece, entry):
            try:
                seg = decode(packet.linktype, packet.data, packet.orig_len)
                tcp: tuple[Any, ...] = (
                    seg.src,
                    seg.sport,
                    seg.dst,
                    seg.dport,
                    seg.seq,
                    seg.ack,
                    seg.flags,
                    seg.payload,
                    None,
                )
                size += len(seg.payload)
            except Skip as why:
                tcp = (None,) * 8 + (str(why),)
            row = (piece.path, offset, packet.ts_us, packet.linktype, len(packet.data))
            for col, value in zip(cols, row + (packet.orig_len,) + tcp):
                col.append(value)
            if len(cols[0]) >= PACKET_BATCH_ROWS or size >= PACKET_BATCH_BYTES:
                yield _packets_batch(cols)
                cols, size = [[] for _ in PACKET_SCHEMA], 0
        problem = entry.get("error") if piece.start == 0 or not entry.get("head_error") else None
        passed_over = entry.get("skipped") if piece.start == 0 else None
        notes = (
            ([f"error: {problem}"] if problem else [])
            + ([f"skipped: {passed_over}"] if passed_over else [])
            + [f"warning: {w}" for w in entry.get("warnings", [])]
        )
        for note in notes:
            told: tuple[Any, ...] = (piece.path, piece.start) + (None,) * 12 + (note,)
            for col, value in zip(cols, told):
                col.append(value)
    if cols[0]:
        yield _packets_batch(cols)


def _packets_batch(cols: list[list[Any]]) -> pa.RecordBatch:
    arrays = [pa.array(c, f.type) for c, f in zip(cols, PACKET_SCHEMA)]
    return pa.RecordBatch.from_arrays(arrays, schema=PACKET_SCHEMA)


def register_source(spark: Any) -> str:
    """Registers the pcap source with a session; returns its format name. On a Spark Connect
    session, relative local paths are then read from this process's working directory, where
    the user is, not the server's (the source's class goes to the server by value, with it)."""
    import os

    from kwire.spark.driver import is_connect

    source: type[PcapDataSource] = PcapDataSource
    if is_connect(spark):
        source = type("PcapDataSourceOfClient", (PcapDataSource,), {"client_cwd": os.getcwd()})
    spark.dataSource.register(source)
    return NAME
