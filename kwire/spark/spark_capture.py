"""The capture step on Spark: capture files read by the executors, segments regrouped by TCP flow.

Stage 1 reads each capture file in a task of its own (kwire.capture.distributed.read_segments) and
emits its TCP segments, each keyed by its flow; stage 2 moves every flow's segments to one task,
sorts them into capture order and runs the same connection tracker as `kwire capture`
(kwire.capture.distributed.track_segments). Both stages also emit one statistics row per task, which
`observe` collects on the way (no second pass) and the driver merges into the capture summary.

Inputs are local paths or directories, `file:` URLs, or any URL Spark lists (hdfs://, s3a://,
...): Spark lists remote directories, and the executors read the bytes through pyarrow's
filesystems (the same stores; see kwire.capture.distributed.open_capture).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
import pyarrow as pa
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from kwire.capture import Summary
from kwire.capture.distributed import (
    FRAMES_SCHEMA,
    NO_TIME,
    ORDER,
    SEGMENT_SCHEMA,
    expand_local,
    local_path,
    merge_stats,
    read_segments,
    track_segments,
)

# Spark's types for the two halves' Arrow schemas (timestamps with a zone are TIMESTAMP).
SEGMENTS_TYPE = from_arrow_schema(SEGMENT_SCHEMA)
FRAMES_TYPE = from_arrow_schema(FRAMES_SCHEMA)
FILES_DDL = "file_index int, path string, in_directory boolean, size bigint"


@dataclass
class CaptureRun:
    """The frames of a capture on Spark (lazy), and its summary once an action has run."""

    frames: DataFrame
    files: list[tuple[str, bool, int]]
    _files_seen: Observation
    _tracked: Observation
    _summary: Summary | None = field(default=None)

    def summary(self) -> Summary:
        """The capture summary; valid after the frames were written (or otherwise consumed)."""
        if self._summary is None:
            files = self._files_seen.get["files"]
            ordered = sorted(files, key=lambda r: (r[0] == NO_TIME, r[0], r[1]))
            states = [r[2] for r in ordered]
            self._summary = merge_stats(states, self._tracked.get["tracked"])
        return self._summary


def list_inputs(spark: SparkSession, inputs: Sequence[str]) -> list[tuple[str, bool, int]]:
    """(path, came from a directory, size) of every file to read, directories expanded."""
    local = [p for p in inputs if local_path(p) is not None]
    remote = [p for p in inputs if local_path(p) is None]
    out: list[tuple[str, bool, int]] = []
    for path, in_dir in expand_local(local):
        try:
            size = os.path.getsize(local_path(path) or path)
        except OSError:
            size = 0
        out.append((path, in_dir, size))
    for url in remote:
        # Spark's own listing (its filesystems, its credentials); `content` is never read.
        listed = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "false")
            .load(url)
            .select("path", "length")
            .orderBy("path")
            .collect()
        )
        in_dir = not (len(listed) == 1 and listed[0]["path"].rstrip("/") == url.rstrip("/"))
        out.extend((r["path"], in_dir, int(r["length"])) for r in listed)
    return out


def capture_frames(
    spark: SparkSession,
    inputs: Sequence[str],
    broker_ports: Sequence[int],
    *,
    infer_direction: bool = True,
    keep_auth_bytes: bool = False,
) -> CaptureRun:
    """The frames table of the given captures, computed on the executors."""
    files = list_inputs(spark, inputs)
    if not files:
        raise FileNotFoundError(f"no files in {', '.join(inputs)}")
    paths = [p for p, _, _ in files]
    ports = list(broker_ports)
    rows = [(i, p, d, s) for i, (p, d, s) in enumerate(files)]
    # One file per task: parallelize slices a list evenly, so n rows in n slices is one each.
    listing = spark.createDataFrame(
        spark.sparkContext.parallelize(rows, len(rows)), schema=FILES_DDL
    )

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                yield from read_segments(
                    row["file_index"],
                    row["path"],
                    in_directory=row["in_directory"],
                    size=row["size"],
                )

    def track(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from track_segments(
            batches,
            paths,
            ports,
            infer_direction=infer_direction,
            keep_auth_bytes=keep_auth_bytes,
        )

    files_seen = Observation("kwire_capture_files")
    tracked = Observation("kwire_capture_tracked")
    stats_rows = F.struct(F.col("file_time"), F.col("file_index"), F.col("stats"))
    segments = (
        listing.mapInArrow(read, SEGMENTS_TYPE)
        .observe(
            files_seen,
            F.collect_list(F.when(F.col("stats").isNotNull(), stats_rows)).alias("files"),
        )
        .where(F.col("stats").isNull())
    )
    frames = (
        segments.repartition("flow")
        .sortWithinPartitions(*ORDER)
        .mapInArrow(track, FRAMES_TYPE)
        .observe(tracked, F.collect_list("stats").alias("tracked"))
        .where(F.col("stats").isNull())
        .drop("stats")
    )
    return CaptureRun(frames, files, files_seen, tracked)
