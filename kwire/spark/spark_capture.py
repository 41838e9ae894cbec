"""The capture step on Spark: capture files read by byte ranges, segments regrouped by TCP flow.

Stage 1 is the pcap data source (kwire.spark.source, `rows=segments`): every file is cut into
byte ranges (`split_size`, 128 MB by default) read by many tasks, each emitting the TCP segments
whose packet records start in its ranges, keyed by flow; stage 2 moves every flow's segments to one
task, sorts them into capture order (file time, file, byte offset) and runs the same connection
tracker as `kwire capture` (kwire.capture.distributed.track_segments), so connections that cross
range and file edges are stitched. Both stages also emit statistics rows, which `observe` collects
on the way (no second pass) and the driver merges into the capture summary, checking that every
range started reading where the one before it ended.

Inputs are local paths or directories, `file:` URLs, or any URL pyarrow's filesystems read
(s3://, s3a://, hdfs://, gs://, ...), listed and read by the executors through pyarrow (see
kwire.capture.distributed.open_capture).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from kwire.spark.driver import parallelism
from kwire.capture import Summary
from kwire.capture.distributed import (
    FRAMES_SCHEMA,
    NO_TIME,
    ORDER,
    SPLIT_BYTES,
    FileStamp,
    anchored,
    list_files,
    local_path,
    merge_stats,
    track_segments,
)
from kwire.capture.tls import KeyLog
from kwire.spark.sink import PartFile, write_batches, write_by_tasks
from kwire.spark.source import register_source

FRAMES_TYPE = from_arrow_schema(FRAMES_SCHEMA)
# The frames table's columns (FRAMES_SCHEMA without the statistics rows' column).
TABLE_SCHEMA = pa.schema([f for f in FRAMES_SCHEMA if f.name != "stats"])


@dataclass
class CaptureRun:
    """The frames of a capture on Spark (lazy), and its summary once an action has run."""

    frames: DataFrame
    files: list[tuple[str, bool, int]]
    _files_seen: Observation
    _tracked: Observation
    _segments: DataFrame
    _track: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    _summary: Summary | None = field(default=None)
    _tracker_states: list[str] | None = field(default=None)

    def write(self, path: str) -> int:
        """Writes the frames table to a local directory `path` (replaced if it exists) and
        returns its rows: each tracking task writes its frames to a Parquet file itself, as the
        single process does, instead of handing them to Spark's writer (which would take every
        payload byte into the JVM and encode it there), committed as Spark commits its own
        tables (kwire.spark.sink.write_by_tasks: the session's codec, row groups and pages a
        default session reads, no table left by a failed run). Remote tables: write `frames`
        with kwire.spark.sink.write_parquet instead."""
        track = self._track

        def task(
            batches: Iterator[pa.RecordBatch], open_file: Callable[[str], PartFile]
        ) -> Iterator[dict[str, Any]]:
            states: list[str] = []

            def frames() -> Iterator[pa.RecordBatch]:
                for batch in track(batches):
                    stats = batch.column(batch.num_columns - 1)
                    if stats.null_count < batch.num_rows:
                        states.extend(s for s in stats.to_pylist() if s is not None)
                    else:
                        yield pa.RecordBatch.from_arrays(batch.columns[:-1], schema=TABLE_SCHEMA)

            yield from write_batches(frames(), open_file, None)
            yield from ({"extra": state} for state in states)  # once the frames are all read

        done = write_by_tasks(self._segments, path, task, schema=TABLE_SCHEMA, size_column="frame")
        self._tracker_states = [r["extra"] for r in done if r["extra"] is not None]
        return sum(r["rows"] or 0 for r in done)

    def ranges_read(self) -> int:
        """How many byte ranges the executors read (after the frames were written)."""
        return len(self._files_seen.get["files"])

    def summary(self) -> Summary:
        """The capture summary; valid after the frames were written (or otherwise consumed).
        Raises kwire.capture.distributed.SplitError if two ranges disagreed."""
        if self._summary is None:
            ranges = self._files_seen.get["files"]
            ordered = sorted(ranges, key=lambda r: (r[0] == NO_TIME, r[0], r[1], r[2]))
            states = [r[3] for r in ordered]
            tracked = self._tracker_states
            if tracked is None:
                tracked = self._tracked.get["tracked"]
            self._summary = merge_stats(states, tracked)
        return self._summary


def tracking_tasks(spark: SparkSession) -> int:
    """How many tasks track the connections: four per core of the session."""
    return max(2, 4 * parallelism(spark))


def capture_frames(
    spark: SparkSession,
    inputs: Sequence[str],
    broker_ports: Sequence[int],
    *,
    infer_direction: bool = True,
    keep_auth_bytes: bool = False,
    split_size: int = SPLIT_BYTES,
    keylog: KeyLog | None = None,
) -> CaptureRun:
    """The frames table of the given captures, computed on the executors. TLS connections are
    decrypted with `keylog`'s secrets (kwire.capture.tls.KeyLog.load(paths)); they travel to the
    executors inside the tracking task's closure, in memory, and never into a table or a log."""
    files = list_files(inputs)
    if not files:
        raise FileNotFoundError(f"no files in {', '.join(inputs)}")
    paths = [p for p, _, _ in files]
    base = os.getcwd()  # relative paths name files here; the executors' directories differ
    locations = [anchored(p, base) for p in paths]
    ports = list(broker_ports)

    # Local files are read twice, as Spark reads a file source: the first stage moves where
    # each payload lies, not its bytes, to the task tracking its connection, which reads the
    # payloads from the file (kwire.capture.distributed.read_segments). Files in remote stores
    # move their payloads through the shuffle.
    stamps = {
        i: FileStamp.of(local)
        for i, (path, _, _) in enumerate(files)
        if (local := local_path(path)) is not None and os.path.isfile(local)
    }

    def track(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from track_segments(
            batches,
            paths,
            ports,
            infer_direction=infer_direction,
            keep_auth_bytes=keep_auth_bytes,
            keylog=keylog,
            stamps=stamps,
            locations=locations,
        )

    register_source(spark)
    files_seen = Observation("kwire_capture_files")
    tracked = Observation("kwire_capture_tracked")
    stats_rows = F.struct(F.col("file_time"), F.col("file_index"), F.col("offset"), F.col("stats"))
    segments = (
        spark.read.format("pcap")
        .option("rows", "segments")
        .option("files", json.dumps(files))
        .option("splitSize", str(split_size))
        .option("base", base)
        .option("positions", json.dumps(sorted(stamps)))
        .load()
        .observe(
            files_seen,
            F.collect_list(F.when(F.col("stats").isNotNull(), stats_rows)).alias("files"),
        )
    )
    # The ranges' statistics rows go through the shuffle too (one per range; the tracking
    # tasks pass over them): a shuffle of no rows (a capture without TCP, files no executor can
    # open) would let adaptive execution replace the rest of the plan with an empty relation,
    # and the observation of the ranges with it.
    # An explicit number of tasks: the runs are small once they carry positions, and adaptive
    # execution would coalesce Spark's 200 shuffle partitions into one or two tasks that track
    # every connection. Four per core evens out connections of unequal size (the largest of the
    # 1.2 GB ring's 139 carries 6% of its bytes).
    flows = segments.repartition(tracking_tasks(spark), "flow").sortWithinPartitions(*ORDER)
    frames = (
        flows.mapInArrow(track, FRAMES_TYPE)
        .observe(tracked, F.collect_list("stats").alias("tracked"))
        .where(F.col("stats").isNull())
        .drop("stats")
    )
    return CaptureRun(frames, files, files_seen, tracked, flows, track)
