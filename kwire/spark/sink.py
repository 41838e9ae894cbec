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

import errno
import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from kwire.capture.distributed import local_path
from kwire.spark.collector import few_collections
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


# Spark's Parquet codecs by their names in spark.sql.parquet.compression.codec -> pyarrow's.
CODECS = {"none": "none", "uncompressed": "none", "snappy": "snappy", "gzip": "gzip",
          "zstd": "zstd", "lz4": "lz4", "lz4_raw": "lz4", "brotli": "brotli"}  # fmt: skip
# What a task that wrote its own files sends back: each file, its partition, its rows, and
# whatever else the step needs (the capture's statistics).
WRITTEN = pa.schema(
    [
        pa.field("file", pa.string()),
        pa.field("partition", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("extra", pa.string()),
        pa.field("errno", pa.int32()),
        pa.field("error", pa.string()),
    ]
)


class PartFile:
    """Arrow batches -> one Parquet file that a default Spark session reads whole, as
    parquet_options bounds Spark's own: row groups of at most `group_bytes` (each row's size
    `factor` times its `size_column` bytes, plus 64; one row alone when it is larger), pages of at
    most `page_rows` rows (pyarrow checks a page's size only between such mini-batches, so a page of
    300 kB frames closes after that many of them). Dictionaries and statistics only for the
    top-level columns of fixed-size or string values: none for binary payloads, whose min/max
    would bloat the footer. The file is created by the first batch with rows; batches are held
    until they fill a row group, so small rows do not make small groups."""

    def __init__(
        self,
        path: str,
        schema: pa.Schema | None,
        compression: str,
        size_column: str | Sequence[str],
        factor: int = 1,
        group_bytes: int = ROW_GROUP_BYTES,
        page_bytes: int = PAGE_BYTES,
        page_rows: int = MAX_CHECK_ROWS,
    ) -> None:
        self.path = path
        self.schema = schema
        self.compression = compression
        self.size_column = size_column
        self.factor = factor
        self.group_bytes = group_bytes
        self.page_bytes = page_bytes
        self.page_rows = page_rows
        self.rows = 0
        self._writer: Any = None
        self._held: list[pa.RecordBatch] = []
        self._sizes: list[int] = []
        self._held_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return
        names = [self.size_column] if isinstance(self.size_column, str) else self.size_column
        lengths = [
            pc.fill_null(pc.binary_length(batch.column(name)), 0).to_pylist() for name in names
        ]
        sizes = [sum(row) * self.factor + 64 for row in zip(*lengths)]
        self._held.append(batch)
        self._sizes += sizes
        self._held_bytes += sum(sizes)
        self.rows += batch.num_rows
        if self._held_bytes >= self.group_bytes:
            self._flush()

    def _flush(self, last: bool = False) -> None:
        if not self._held:
            return
        if self.schema is None:
            self.schema = self._held[0].schema
        if self._writer is None:
            import pyarrow.parquet as pq

            small = [
                f.name
                for f in self.schema
                if not pa.types.is_nested(f.type) and not pa.types.is_binary(f.type)
            ]
            self._writer = pq.ParquetWriter(
                self.path,
                self.schema,
                compression=self.compression,
                data_page_size=self.page_bytes,
                write_batch_size=self.page_rows,
                use_dictionary=small,
                write_statistics=small,
            )
        table = pa.Table.from_batches(self._held, schema=self.schema)
        # Row groups cut before their rows pass group_bytes; what is left waits for the next
        # batches, but the last.
        start = size = 0
        for i, n in enumerate(self._sizes):
            if i > start and size + n > self.group_bytes:
                self._writer.write_table(table.slice(start, i - start))
                start, size = i, 0
            size += n
        if last:
            self._writer.write_table(table.slice(start))
            start = len(self._sizes)
        self._held = table.slice(start).to_batches()
        self._sizes = self._sizes[start:]
        self._held_bytes = sum(self._sizes)

    def close(self) -> None:
        self._flush(last=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def session_codec(spark: SparkSession) -> tuple[str, str]:
    """(Spark's name, pyarrow's name) of the session's Parquet codec."""
    codec = (spark.conf.get("spark.sql.parquet.compression.codec", "snappy") or "snappy").lower()
    return codec, CODECS.get(codec, "snappy")


TaskWrite = Callable[[Iterator[pa.RecordBatch], Callable[[str], "PartFile"]], Iterator[dict]]


def write_by_tasks(
    df: DataFrame,
    path: str,
    task: TaskWrite,
    *,
    schema: pa.Schema | None = None,
    size_column: str | Sequence[str] = "frame",
    factor: int = 1,
    empty: pa.Schema | None = None,
) -> list[dict[str, Any]]:
    """Runs `task` over each partition of `df` (mapInArrow), letting it write its own Parquet
    files under `path/_temporary`: it asks for a file by calling its second argument with the
    file's partition directory ("" or "api_key=3") and gets a PartFile (of `schema`, or of its
    first batch's; rows sized by `size_column` x `factor`) in the session's codec; it yields
    dicts of WRITTEN's fields. Once every task has succeeded, the files are moved into `path`
    (replaced if it exists) and `_SUCCESS` is written, as Spark commits its own tables; a
    failed run leaves no table. Returns the tasks' dicts. Local tables only. A table of no rows
    gets one empty file of `empty` (default: `schema`), so that it reads as a table of no rows
    with its columns rather than failing to infer a schema (Spark's own writer gives a
    partitioned table of no rows no file at all)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    local = local_path(path)
    if local is None:
        raise ValueError(f"{path}: only local tables are written by their tasks")
    # The executors' working directory is not the driver's (a standalone worker's is its own).
    local = os.path.abspath(local)
    name, compression = session_codec(df.sparkSession)
    if os.path.exists(local):
        shutil.rmtree(local)
    job = uuid.uuid4().hex
    staging = os.path.join(local, "_temporary", job)
    os.makedirs(staging)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        prefix = f"{context.partitionId():05d}-{context.taskAttemptId()}" if context else "0"
        opened: list[PartFile] = []

        def open_file(partition: str) -> PartFile:
            where = os.path.join(staging, partition) if partition else staging
            os.makedirs(where, exist_ok=True)
            file = os.path.join(where, f"{prefix}-{len(opened)}.parquet")
            opened.append(PartFile(file, schema, compression, size_column, factor))
            return opened[-1]

        try:
            try:
                # Decoding and exploding make a Python object per frame and record: the
                # collector at a pace for that (kwire.spark.collector).
                with few_collections():
                    rows = list(task(batches, open_file))
            finally:
                for part in opened:
                    part.close()
        except OSError as e:
            # A full disk or a lost directory: said once by the driver, not retried by Spark.
            number = e.errno or (errno.ENOSPC if "No space left" in str(e) else errno.EIO)
            rows = [{"errno": number, "error": f"{e.strerror or e}"}]
        yield pa.RecordBatch.from_pylist(rows, schema=WRITTEN)

    try:
        done = [r.asDict() for r in df.mapInArrow(run, from_arrow_schema(WRITTEN)).collect()]
        for r in done:
            if r["errno"] is not None:
                raise OSError(r["errno"], r["error"], path)
        suffix = "" if compression == "none" else f".{name}"
        files = sorted({(r["partition"] or "", r["file"]) for r in done if r["file"]})
        for i, (partition, file) in enumerate(files):
            where = os.path.join(local, partition)
            os.makedirs(where, exist_ok=True)
            os.replace(file, os.path.join(where, f"part-{i:05d}-{job}{suffix}.parquet"))
        empty = empty or schema
        if not files and empty is not None:
            import pyarrow.parquet as pq

            pq.write_table(empty.empty_table(), os.path.join(local, f"part-00000-{job}.parquet"))
    except BaseException:
        shutil.rmtree(local, ignore_errors=True)
        raise
    shutil.rmtree(os.path.join(local, "_temporary"), ignore_errors=True)
    open(os.path.join(local, "_SUCCESS"), "wb").close()
    return done


def write_batches(
    batches: Iterator[pa.RecordBatch],
    open_file: Callable[[str], PartFile],
    partition_by: str | None,
) -> Iterator[dict[str, Any]]:
    """A write_by_tasks task that writes a DataFrame's rows as they come, into a directory per
    value of `partition_by` (Spark's `key=value` layout, the column left out of the files)."""
    import pyarrow.compute as pc

    files: dict[str, PartFile] = {}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if partition_by is None:
            parts = [("", batch)]
        else:
            column = batch.column(partition_by)
            kept = [n for n in batch.schema.names if n != partition_by]
            rest = pa.RecordBatch.from_arrays([batch.column(n) for n in kept], names=kept)
            parts = []
            for value in pc.unique(column).to_pylist():
                where = pc.is_null(column) if value is None else pc.equal(column, value)
                text = "__HIVE_DEFAULT_PARTITION__" if value is None else str(value)
                parts.append((f"{partition_by}={text}", rest.filter(where)))
        for partition, rows in parts:
            if partition not in files:
                files[partition] = open_file(partition)
            files[partition].write(rows)
    for partition, part in files.items():
        part.close()
        yield {"file": part.path, "partition": partition, "rows": part.rows, "extra": None}
