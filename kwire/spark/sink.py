"""Writing kwire's tables so that a default Spark session reads them whole.

Parquet's vectorized reader (Spark's default) reads a batch of up to 4096 rows, never more than
the rows left in the current row group, and materialises each page it reads whole. Spark's
writer cuts row groups at 128 MB of *compressed* data and checks the size only every 100 rows or
more, so a frames table of 300 kB frames had row groups of hundreds of MB once uncompressed, and
a default session (1 GB heap) reading it with `SELECT *` ran out of memory in that reader. kwire
therefore writes every table with:

- row groups cut at ROW_GROUP_BYTES of compressed data, the size checked after every row at first
  (`parquet.page.size.row.check.min`, which parquet-mr also uses for row groups), so a row group
  of large rows closes after a few of them;
- where the caller knows how large a row may be (`row_bytes`: the job knows the frames' sizes
  before it writes the decoded tables), at most ROW_GROUP_UNCOMPRESSED / row_bytes rows per row
  group, which bounds compressible rows too (`parquet.block.row.count.limit`).

A reader batch then holds a few tens of MB whatever the frames are. `tests/spark/test_sink.py`
reads such tables whole in a fresh session with no settings.
"""

from __future__ import annotations

import os
import shutil

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kwire.capture.distributed import local_path
from kwire.spark.session import with_conf

ROW_GROUP_BYTES = 16 * 1024 * 1024
ROW_GROUP_UNCOMPRESSED = 64 * 1024 * 1024
PAGE_BYTES = 1024 * 1024
MAX_CHECK_ROWS = 64


def parquet_options(row_bytes: int | None = None) -> dict[str, str]:
    """Spark write options for Parquet row groups and pages that a default reader can hold."""
    options = {
        "parquet.block.size": str(ROW_GROUP_BYTES),
        "parquet.page.size": str(PAGE_BYTES),
        "parquet.page.size.row.check.min": "1",
        # parquet-mr guesses when to check next from the average row so far: after small rows
        # it waited up to 10,000 rows, and 10,000 large frames later the page (or row group)
        # was GBs, which ran the 1 GB heap out of memory in its close (the 5 GB capture). At
        # most MAX_CHECK_ROWS rows between checks bounds a page by that many rows.
        "parquet.page.size.row.check.max": str(MAX_CHECK_ROWS),
    }
    if row_bytes:
        rows = max(1, ROW_GROUP_UNCOMPRESSED // max(int(row_bytes), 1))
        options["parquet.block.row.count.limit"] = str(rows)
        options["parquet.page.row.count.limit"] = str(min(rows, 20000))
    return options


def has_parquet_files(table: str) -> bool:
    """Whether a local table directory holds any data file (Spark writes none for an empty
    DataFrame, and then cannot read the table back)."""
    return any(
        name.endswith(".parquet") and not name.startswith((".", "_"))
        for _root, _dirs, files in os.walk(table)
        for name in files
    )


def write_parquet(
    df: DataFrame,
    path: str,
    *,
    mode: str = "overwrite",
    partition_by: str | None = None,
    row_bytes: int | None = None,
) -> None:
    """df -> Parquet at path with kwire's row group and page sizes (see the module)."""
    writer = df.write.mode(mode).options(**parquet_options(row_bytes))
    if partition_by:
        writer = writer.partitionBy(partition_by)
    writer.parquet(path)


def resize_row_groups(spark: SparkSession, path: str, row_size: str | Column) -> bool:
    """Writes a local table again with a bound on rows per row group when one of its row groups
    holds more than 2 x ROW_GROUP_UNCOMPRESSED once uncompressed (Parquet's footers say, so this
    reads no data): the largest `row_size` (a column, or an expression of the row's columns) is
    then the row size. Returns whether it did. Tables in remote stores are left as written."""
    import pyarrow.parquet as pq

    local = local_path(path)
    if local is None:
        return False
    files = [
        os.path.join(d, f) for d, _, fs in os.walk(local) for f in fs if f.endswith(".parquet")
    ]
    too_big = False
    for name in files:
        meta = pq.ParquetFile(name).metadata
        if any(
            meta.row_group(i).total_byte_size > 2 * ROW_GROUP_UNCOMPRESSED
            for i in range(meta.num_row_groups)
        ):
            too_big = True
            break
    if not too_big:
        return False
    table = spark.read.parquet(path)
    # In batches of a few rows: a default batch of such rows is what runs a reader out of heap.
    # (The batch size only sizes buffers, so the queries of other steps planned meanwhile stay
    # right; turning the columnar reader off for a moment would not be safe for them.)
    with with_conf(spark, {"spark.sql.parquet.columnarReaderBatchSize": "4"}):
        largest = table.agg(F.max(row_size)).first()
    row_bytes = max(int(largest[0] or 0) if largest is not None else 0, 1)
    staging = path.rstrip("/") + ".resizing"
    # Reading those row groups needs reader batches bounded in bytes too.
    rows = max(1, min(4096, ROW_GROUP_UNCOMPRESSED // 2 // row_bytes))
    with with_conf(spark, {"spark.sql.parquet.columnarReaderBatchSize": str(rows)}):
        write_parquet(table, staging, row_bytes=row_bytes)
    shutil.rmtree(local)
    os.replace(local_path(staging) or staging, local)
    return True
