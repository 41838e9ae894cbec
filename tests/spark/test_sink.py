"""kwire's tables are read whole by a default Spark session (no settings, 1 GB heap).

The reader is a fresh `SparkSession.builder.getOrCreate()` in its own process, reading every
column of a table with the vectorized Parquet reader (a `noop` write of `SELECT *`). The table:
240 rows of 4 MB of compressible bytes (960 MB once read, a few MB on disk), as frames of
uncompressed records are. Written by Spark as it comes, its row groups are hundreds of MB once
uncompressed (its pages checked per row, or the writer itself runs out of memory) and the
default session dies reading it (the control below, run by make sweep, shows the test can
fail); written by kwire.spark.sink, it reads whole. make test writes and reads 80 of the rows
(370 MB), in row groups bounded as the full table's are; make sweep all 240.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kwire.spark.sink import ROW_GROUP_UNCOMPRESSED, resize_row_groups, write_parquet
from tests.sampling import SWEEP

# Row i holds str(i) + "abcdefghij" 400,000 times: at most 13 x 400,000 bytes.
ROWS, ROW_BYTES = 240, 5_200_000
# The sizing and resizing tests need a table several times the bound (80 rows: 370 MB, in one
# row group as Spark writes them, 5.8 times ROW_GROUP_UNCOMPRESSED); make sweep takes all ROWS.
RESIZED_ROWS = ROWS if SWEEP else 80

READ_WHOLE = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
for path in sys.argv[1:]:
    spark.read.parquet(path).write.format("noop").mode("overwrite").save()
    print("read whole:", path, flush=True)
"""


def read_whole_in_a_default_session(*paths: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    return subprocess.run(
        [sys.executable, "-c", READ_WHOLE, *paths],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd="/",
    )


def _big_rows(spark: SparkSession, rows: int = ROWS) -> DataFrame:
    text = F.concat(F.col("id").cast("string"), F.lit("abcdefghij"))
    frame = F.repeat(text, 400_000).cast("binary")
    return spark.range(rows).select(
        "id", F.length(frame).alias("frame_length"), frame.alias("frame")
    )


def _as_spark_writes_them(df: DataFrame, path: str) -> None:
    """Spark's own row groups (128 MB of compressed data); pages checked after every row, or
    this test's writer (1 GB heap) would itself run out of memory on pages of 100 rows."""
    df.coalesce(1).write.option("parquet.page.size.row.check.min", "1").parquet(path)


def _row_groups(path: str) -> list[tuple[int, int]]:
    out = []
    for name in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True):
        meta = pq.ParquetFile(name).metadata
        out += [
            (meta.row_group(i).num_rows, meta.row_group(i).total_byte_size)
            for i in range(meta.num_row_groups)
        ]
    return out


@pytest.mark.long(45)
def test_large_compressible_rows_read_whole(spark: SparkSession, tmp_path: Path) -> None:
    """Frames written by kwire.spark.sink with their row size known, and records written as they
    come, then bounded by their largest record (key, value and headers:
    kwire.spark.explode.row_size), as the job does: a default session reads both whole (one
    session for both tables: each costs a JVM's start)."""
    from kwire.spark.explode import row_size

    # The session is shared with the worker's other tests: what they cached goes, as a job's
    # own JVM would start without it. (The heap those tests leave in pieces is compacted by the
    # session's collector, kwire.spark.session.LOCAL_GC.)
    spark.catalog.clearCache()
    sized, plain = str(tmp_path / "sized"), str(tmp_path / "plain")
    # make test writes and reads RESIZED_ROWS (370 MB), bounded as the full table is; make sweep
    # the full 960 MB beside its control.
    write_parquet(_big_rows(spark, RESIZED_ROWS).coalesce(1), sized, row_bytes=ROW_BYTES)
    groups = _row_groups(sized)
    assert sum(n for n, _ in groups) == RESIZED_ROWS
    assert len(groups) >= 4
    assert max(size for _, size in groups) <= ROW_GROUP_UNCOMPRESSED + ROW_BYTES

    records = str(tmp_path / "records")
    big = _big_rows(spark, RESIZED_ROWS).select(
        F.lit(None).cast("binary").alias("key"),
        F.col("frame").alias("value"),
        F.array(F.struct(F.lit("h").alias("key"), F.lit(b"v").alias("value"))).alias("headers"),
    )
    write_parquet(big.coalesce(1), records)
    assert resize_row_groups(spark, records, row_size()) is True
    groups = _row_groups(records)
    assert sum(n for n, _ in groups) == RESIZED_ROWS
    assert max(size for _, size in groups) <= 2 * ROW_GROUP_UNCOMPRESSED

    done = read_whole_in_a_default_session(sized, records)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("read whole:") == 2, done.stdout
    if SWEEP:
        # The control: the same rows as Spark writes them are too much for a default session
        # (their row groups, asserted here, are what kills it). A minute of writing them and of
        # a JVM filling its heap, so make sweep runs it (again with each Spark upgrade), make
        # test does not.
        _as_spark_writes_them(_big_rows(spark), plain)
        assert max(size for _, size in _row_groups(plain)) > 4 * ROW_GROUP_UNCOMPRESSED
        control = read_whole_in_a_default_session(plain)
        assert control.returncode != 0
        assert "read whole" not in control.stdout


@pytest.mark.long(11)
def test_a_table_written_as_it_comes_is_resized(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "frames.parquet")
    _as_spark_writes_them(_big_rows(spark, RESIZED_ROWS), path)
    assert max(size for _, size in _row_groups(path)) > 4 * ROW_GROUP_UNCOMPRESSED
    assert resize_row_groups(spark, path, "frame_length") is True
    groups = _row_groups(path)
    assert sum(n for n, _ in groups) == RESIZED_ROWS
    assert max(size for _, size in groups) <= 2 * ROW_GROUP_UNCOMPRESSED
    assert spark.read.parquet(path).count() == RESIZED_ROWS
    # A table whose row groups are already small is left alone.
    assert resize_row_groups(spark, path, "frame_length") is False
