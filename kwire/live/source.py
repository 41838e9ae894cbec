"""`spark.readStream.format("kwire-ring")`: the closed files of a rotating capture ring, as TCP
segments, for `kwire live`.

    spark.readStream.format("kwire-ring").option("registry", "OUT/_live/files.jsonl").load(DIR)

The streaming side of the pcap source (kwire.spark.source): a Python streaming data source
(`pyspark.sql.datasource.DataSourceStreamReader`) whose offsets are the sequence numbers it gives
the files it admits, in the order they were closed. Only closed files are admitted:

- a spool (`layout=spool`): a directory that a rotation hook (`kwire-spool`, for tcpdump -z and
  dumpcap -b printname) moves closed files into; every visible file there is closed, and its
  name (`<seq>-<name>`) gives the order;
- a ring (`layout=ring`): the directory tcpdump -C/-W or dumpcap -b writes into; the newest file
  (by modification time) counts as open until a newer one exists.

Files are known by identity (name, inode, size, modification time), not by path: tcpdump -W
writes the same names again, and a name that comes back with other contents is a new file. The
registry (a JSON-lines file under the job's checkpoint) maps every admitted file to its number, so
a batch replayed after a crash reads the same files as the first time (the offsets in Spark's
write-ahead log are those numbers). A ring file that changed between its admission and its
reading (the writer lapped the reader) is not read: its statistics row says so, and the job
reports it as lost.

Rows are those of the pcap source's `segments` (kwire.capture.distributed.SEGMENT_SCHEMA) with
`file_index` = the file's number.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kwire.capture.distributed import (
    SEGMENT_SCHEMA,
    SPLIT_BYTES,
    Range,
    parse_size,
    plan_ranges,
    read_segments,
)
from kwire.capture.pcapfile import first_timestamp
from kwire.capture.summary import Summary
from kwire.spark.faults import fault_point

NAME = "kwire-ring"
SPOOL_NAME = re.compile(r"^\d{12}-")
# Files admitted per trigger at most (a ring that fell far behind catches up in steps).
MAX_FILES = 8
LOST = "changed after it was closed, before it was read (the ring's writer overwrote it): lost"


def _hidden(name: str) -> bool:
    return name.startswith(".") or name.startswith("_")


def identity(path: str, st: os.stat_result) -> dict[str, Any]:
    return {
        "path": path,
        "name": os.path.basename(path),
        "inode": st.st_ino,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
    }


def _same(entry: dict[str, Any], st: os.stat_result) -> bool:
    return (
        entry["inode"] == st.st_ino
        and entry["size"] == st.st_size
        and entry["mtime_ns"] == st.st_mtime_ns
    )


class Registry:
    """The admitted files (one JSON object per line: seq, path, name, inode, size, mtime_ns)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[dict[str, Any]] = []
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        try:
                            self.entries.append(json.loads(line))
                        except ValueError:
                            break  # a line cut by a crash: it was never handed out
        self.known = {(e["path"], e["inode"], e["size"], e["mtime_ns"]) for e in self.entries}

    @property
    def last(self) -> int:
        return self.entries[-1]["seq"] if self.entries else 0

    def add(self, files: list[dict[str, Any]]) -> None:
        """Admits the files not admitted yet, numbered by their first packet's time (then as
        given): hooks that run in parallel (tcpdump -z) can spool two files out of order, and
        the files that arrive together are put back in capture order."""
        fresh = [
            f for f in files if (f["path"], f["inode"], f["size"], f["mtime_ns"]) not in self.known
        ]
        if len(fresh) > 1:
            firsts = [_first_time(f["path"]) for f in fresh]
            order = sorted(range(len(fresh)), key=lambda i: (firsts[i] is None, firsts[i] or 0, i))
            fresh = [fresh[i] for i in order]
        new = []
        for f in fresh:
            ident = (f["path"], f["inode"], f["size"], f["mtime_ns"])
            self.known.add(ident)
            entry = {"seq": self.last + 1, **f}
            self.entries.append(entry)
            new.append(entry)
        if new:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as log:
                for e in new:
                    log.write(json.dumps(e, sort_keys=True) + "\n")
                log.flush()
                os.fsync(log.fileno())

    def between(self, start: int, end: int) -> list[dict[str, Any]]:
        return [e for e in self.entries if start < e["seq"] <= end]


def _first_time(path: str) -> int | None:
    try:
        return first_timestamp(path)
    except Exception:  # unreadable: its reading reports it
        return None


def closed_files(directory: str, layout: str, include_newest: bool = False) -> list[dict[str, Any]]:
    """The closed capture files of `directory`, oldest first, with their identities."""
    found = []
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    for name in names:
        if _hidden(name):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        if not os.path.isfile(path) or st.st_size == 0:
            continue
        found.append((path, st))
    if layout == "spool":
        found.sort(key=lambda f: os.path.basename(f[0]))
        return [identity(p, st) for p, st in found]
    found.sort(key=lambda f: (f[1].st_mtime_ns, os.path.basename(f[0])))
    if found and not include_newest:
        found = found[:-1]  # the file being written
    return [identity(p, st) for p, st in found]


def detect_layout(directory: str) -> str:
    """'spool' when the directory's files carry the hook's sequence prefix, else 'ring'."""
    try:
        names = [n for n in os.listdir(directory) if not _hidden(n)]
    except FileNotFoundError:
        return "spool"
    if names and all(SPOOL_NAME.match(n) for n in names):
        return "spool"
    return "ring" if names else "spool"


class FilesPartition(InputPartition):
    """One task: byte ranges of admitted files, and admitted files that cannot be read."""

    def __init__(self, ranges: list[Range], lost: list[tuple[int, str, str]]) -> None:
        super().__init__(None)
        self.ranges = ranges
        self.lost = lost


class RingDataSource(DataSource):
    """See the module's docstring. Options: `path` (the directory), `registry` (required: a
    local file under the checkpoint), `layout` (spool, ring or auto), `maxFilesPerTrigger`,
    `splitSize`, `final` (a file whose existence says the run is ending: the newest ring file is
    then read as it stands)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(SEGMENT_SCHEMA)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = {str(k).lower(): v for k, v in self.options.items()}
        return RingReader(options)


class RingReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.directory = options.get("path") or ""
        if not self.directory:
            raise ValueError("kwire-ring: no directory (load(DIR))")
        if not options.get("registry"):
            raise ValueError("kwire-ring: option 'registry' is required")
        self.registry = Registry(options["registry"])
        layout = options.get("layout", "auto")
        self.layout = detect_layout(self.directory) if layout == "auto" else layout
        if self.layout not in ("spool", "ring"):
            raise ValueError(f"kwire-ring: layout must be spool, ring or auto, not {layout!r}")
        self.max_files = int(options.get("maxfilespertrigger") or MAX_FILES)
        self.split = parse_size(options.get("splitsize") or str(SPLIT_BYTES))
        self.final = options.get("final")

    def initialOffset(self) -> dict:
        return {"seq": 0}

    def latestOffset(self, start: dict, limit: Any) -> dict:
        ending = bool(self.final) and os.path.exists(self.final or "")
        self.registry.add(closed_files(self.directory, self.layout, include_newest=ending))
        end = min(self.registry.last, int(start["seq"]) + self.max_files)
        return {"seq": max(end, int(start["seq"]))}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        entries = self.registry.between(int(start["seq"]), int(end["seq"]))
        readable: list[tuple[str, bool, int]] = []
        seqs: list[int] = []
        lost: list[tuple[int, str, str]] = []
        for e in entries:
            try:
                st = os.stat(e["path"])
                changed = not _same(e, st)
            except FileNotFoundError:
                changed = True
            if changed:
                lost.append((e["seq"], e["path"], LOST))
                continue
            readable.append((e["path"], True, e["size"]))
            seqs.append(e["seq"])
        tasks: list[InputPartition] = []
        for task in plan_ranges(readable, self.split) if readable else []:
            tasks.append(
                FilesPartition([replace(r, file_index=seqs[r.file_index]) for r in task], [])
            )
        if lost:
            tasks.append(FilesPartition([], lost))
        return tasks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        fault_point("capture")
        yield from read_segments(partition.ranges)
        for seq, path, why in partition.lost:
            summary = Summary()
            summary.files.append({"path": path, "error": why})
            row: dict[str, Any] = {name: None for name in SEGMENT_SCHEMA.names}
            row.update(file_time=0, file_index=seq, offset=0, stats=json.dumps(summary.state()))
            yield pa.RecordBatch.from_pylist([row], schema=SEGMENT_SCHEMA)

    def commit(self, end: dict) -> None:
        pass


def register_ring(spark: Any) -> str:
    spark.dataSource.register(RingDataSource)
    return NAME
