"""OUT/records: one row per record in Produce requests and Fetch / ShareFetch responses.

Frames are exploded on the executors (`mapInArrow`): each frame is decoded with the generated
codecs, each partition's `records` field is read by the `records` package (record batches v2 and
message sets v0/v1, any codec, CRC checked, decompression capped), and rows leave in Arrow batches
of bounded size, so a Fetch response of tens of MB never becomes one giant batch and nothing is
collected on the driver. A batch that cannot be read is one row with its `batch_status` and null
record columns. Topic names missing from a frame (Produce v13+, Fetch v13+, ShareFetch carry
topic ids) are resolved from the Metadata responses of the same capture by a Spark join.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

import generated
from kwire import records
from kwire.records.rows import to_record_batch
from kwire.records.trace import trace_ids
from kwire.spark.collector import few_collections
from kwire.spark.faults import fault_point
from generated import KwireError, kafka_uuid

TIMESTAMP = pa.timestamp("us", tz="UTC")

# Where the records of a message live: (direction, api key) -> (topic list, topic name attr or
# None, topic id attr or None, partition list, partition index attr, records attr).
# tests/spark/test_explode.py checks that these are all the request and response fields of type
# `records` in the generated package. FetchSnapshot (KRaft controllers) carries a slice of a
# snapshot that need not start or end on a batch boundary: its cut batches show as such.
RECORD_FIELDS: dict[tuple[str, int], tuple[str, str | None, str | None, str, str, str]] = {
    ("request", 0): ("topic_data", "name", "topic_id", "partition_data", "index", "records"),
    ("response", 1): (
        "responses", "topic", "topic_id", "partitions", "partition_index", "records"
    ),
    ("response", 59): ("topics", "name", None, "partitions", "index", "unaligned_records"),
    ("response", 78): (
        "responses", None, "topic_id", "partitions", "partition_index", "records"
    ),
}  # fmt: skip

FRAME_FIELDS = [
    pa.field("connection_id", pa.string()),
    pa.field("direction", pa.string()),
    pa.field("api_key", pa.int16()),
    pa.field("api_version", pa.int16()),
    pa.field("correlation_id", pa.int32()),
    pa.field("client_id", pa.string()),
    pa.field("frame_ts", TIMESTAMP),
    pa.field("topic", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("partition", pa.int32()),
]
TRACE_FIELDS = [pa.field("trace_id", pa.string()), pa.field("span_id", pa.string())]
# A ShareFetch response carries whole log batches, but only the offsets inside its
# AcquiredRecords ranges were delivered to the member: `acquired` says which (null for the
# other APIs), `delivery_count` is the range's count for an acquired record.
SHARE_FIELDS = [pa.field("acquired", pa.bool_()), pa.field("delivery_count", pa.int16())]
_RECORDS_SCHEMA = records.arrow_schema()
SCHEMA = pa.schema(FRAME_FIELDS + list(_RECORDS_SCHEMA) + TRACE_FIELDS + SHARE_FIELDS)
_OFFSET = len(records.BATCH_COLUMNS)  # a row's offset, after its batch's columns
INPUT_COLUMNS = [
    "connection_id", "direction", "api_key", "api_version", "client_id", "ts_first", "frame"
]  # fmt: skip

MAX_ROWS = 8192
MAX_BYTES = 16 << 20
_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


def _partitions(direction: str, api_key: int, message: Any) -> Iterator[tuple[Any, ...]]:
    """(topic, topic id, partition, records bytes, acquired ranges) for each partition of a
    decoded message; the ranges ([(first, last, delivery count)]) for ShareFetch alone, else
    None."""
    topics, name_attr, id_attr, parts, index_attr, data_attr = RECORD_FIELDS[(direction, api_key)]
    share = api_key == 78
    for t in getattr(message, topics):
        name = getattr(t, name_attr) if name_attr else None
        topic_id = kafka_uuid(getattr(t, id_attr)) if id_attr else _ZERO_UUID
        for p in getattr(t, parts):
            yield (
                name or None,
                None if topic_id == _ZERO_UUID else topic_id,
                getattr(p, index_attr),
                getattr(p, data_attr),
                (
                    [(r.first_offset, r.last_offset, r.delivery_count) for r in p.acquired_records]
                    if share
                    else None
                ),
            )


def _acquired(offset: int | None, ranges: list[tuple[int, int, int]] | None) -> tuple[Any, Any]:
    """(acquired, delivery count) of a record at `offset` given a ShareFetch partition's
    acquired ranges; (None, None) outside ShareFetch."""
    if ranges is None:
        return None, None
    if offset is None:
        return False, None
    for first, last, count in ranges:
        if first <= offset <= last:
            return True, count
    return False, None


def _decode(row: dict[str, Any]) -> tuple[Any, Any] | None:
    try:
        if row["direction"] == "request":
            return generated.decode_request(row["frame"])
        return generated.decode_response(row["frame"], row["api_key"], row["api_version"])
    except KwireError:
        return None  # the frame's error is in OUT/requests or OUT/responses


def explode_batch(
    batch: pa.RecordBatch, max_decompressed: int = records.DEFAULT_MAX_DECOMPRESSED
) -> Iterator[pa.RecordBatch]:
    """One Arrow batch of frames -> Arrow batches of record rows (SCHEMA), bounded in size."""
    prefixes: list[tuple[Any, ...]] = []
    rows: list[tuple[Any, ...]] = []
    traces: list[tuple[Any, ...]] = []
    size = 0
    for row in batch.to_pylist():
        key = (row["direction"], row["api_key"])
        if row["frame"] is None or key not in RECORD_FIELDS:
            continue
        decoded = _decode(row)
        if decoded is None:
            continue
        header, message = decoded
        frame = (
            row["connection_id"],
            row["direction"],
            row["api_key"],
            row["api_version"],
            header.correlation_id,
            # A response header has no client id: the capture gives the paired request's.
            header.client_id if row["direction"] == "request" else row["client_id"],
            row["ts_first"],
        )
        for topic, topic_id, partition, data, ranges in _partitions(*key, message):
            prefix = frame + (topic, topic_id, partition)
            for r in records.iter_rows(data, max_decompressed=max_decompressed):
                prefixes.append(prefix)
                rows.append(r)
                traces.append(trace_ids(r[18]) + _acquired(r[_OFFSET], ranges))
                size += 64 + len(r[16] or b"") + len(r[17] or b"")
                if len(rows) >= MAX_ROWS or size >= MAX_BYTES:
                    yield _arrow(prefixes, rows, traces)
                    prefixes, rows, traces, size = [], [], [], 0
    if rows:
        yield _arrow(prefixes, rows, traces)


def _arrow(
    prefixes: list[tuple[Any, ...]],
    rows: list[tuple[Any, ...]],
    traces: list[tuple[Any, ...]],
) -> pa.RecordBatch:
    tail = to_record_batch(rows, _RECORDS_SCHEMA)
    head = [pa.array(c, type=f.type) for c, f in zip(zip(*prefixes), FRAME_FIELDS)]
    ids = [pa.array(c, type=f.type) for c, f in zip(zip(*traces), TRACE_FIELDS + SHARE_FIELDS)]
    return pa.RecordBatch.from_arrays(head + tail.columns + ids, schema=SCHEMA)


def _explode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # A Python object per record: the collector at a pace for that (kwire.spark.collector), in
    # records_table's tasks as in those writing their own files (6,000 churny frames, 724k
    # records: 6.5-6.9 s at the collector's defaults, 2.3-2.8 s at this pace).
    with few_collections():
        for batch in batches:
            fault_point("records")
            yield from explode_batch(batch)


def row_size() -> Column:
    """An OUT/records row's size, near enough to bound its row groups (its key, value and
    headers, plus the fixed columns): kwire.spark.sink.resize_row_groups."""
    header = F.aggregate(
        "headers",
        F.lit(0),
        lambda n, h: n
        + F.coalesce(F.length(h["key"]), F.lit(0))
        + F.coalesce(F.length(h["value"]), F.lit(0)),
    )
    return (
        F.coalesce(F.length("key"), F.lit(0))
        + F.coalesce(F.length("value"), F.lit(0))
        + F.coalesce(header, F.lit(0))
        + F.lit(512)
    )


def _wanted(frames: DataFrame) -> DataFrame:
    """The frames that carry records, with the columns the explosion reads."""
    types = {
        "connection_id": "string",
        "client_id": "string",
        "ts_first": "timestamp",
        "api_version": "smallint",
    }
    for name, kind in types.items():  # a frames table made elsewhere may lack these
        if name not in frames.columns:
            frames = frames.withColumn(name, F.lit(None).cast(kind))
    if "api_key" not in frames.columns:  # requests carry it in the frame; responses cannot
        key = F.conv(F.hex(F.substring("frame", 1, 2)), 16, 10).cast("smallint")
        frames = frames.withColumn("api_key", F.when(F.col("direction") == "request", key))
    wanted = F.lit(False)
    for direction, api_key in RECORD_FIELDS:
        wanted = wanted | ((F.col("direction") == direction) & (F.col("api_key") == api_key))
    return frames.where(wanted & F.col("frame").isNotNull()).select(*INPUT_COLUMNS)


def _names(responses: DataFrame | None) -> DataFrame | None:
    """Topic id -> name, from the capture's Metadata responses (None without any)."""
    if responses is None or "metadata" not in responses.columns:
        return None
    return (
        responses.where(F.col("api_key") == 3)
        .select(F.explode("metadata.topics").alias("t"))
        .select(F.col("t.topic_id").alias("_id"), F.col("t.name").alias("_name"))
        .where(F.col("_id").isNotNull() & (F.col("_id") != _ZERO_UUID) & F.col("_name").isNotNull())
        .groupBy("_id")
        .agg(F.min("_name").alias("_name"))
    )


def records_table(frames: DataFrame, responses: DataFrame | None = None) -> DataFrame:
    """The OUT/records rows of a frames table; `responses` (decoded) resolves topic ids."""
    from pyspark.sql.pandas.types import from_arrow_schema

    out = _wanted(frames).mapInArrow(_explode, from_arrow_schema(SCHEMA))
    names = _names(responses)
    if names is None:
        return out
    columns = [
        F.coalesce("topic", "_name").alias("topic") if c == "topic" else c for c in SCHEMA.names
    ]
    # Broadcast: the names are a few rows per topic, and a shuffle join would move every
    # record (values and all) to look them up.
    return out.join(F.broadcast(names), out["topic_id"] == names["_id"], "left").select(*columns)


def named(batch: pa.RecordBatch, names: dict[str, str]) -> pa.RecordBatch:
    """A batch of records with the topics its frames gave by id alone named (records_table's
    join, in Arrow)."""
    topic = batch.column("topic")
    if not names or topic.null_count == 0:
        return batch
    ids = batch.column("topic_id").to_pylist()
    filled = pa.array(
        [t if t is not None else names.get(i) for t, i in zip(topic.to_pylist(), ids)],
        type=topic.type,
    )
    at = batch.schema.get_field_index("topic")
    columns = [filled if i == at else c for i, c in enumerate(batch.columns)]
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def write_records(frames: DataFrame, path: str, responses: DataFrame | None = None) -> int:
    """records_table(frames, responses) written to a local table by the tasks that explode the
    frames (kwire.spark.sink.write_by_tasks): the same table as Spark's writer makes of it
    (tests/spark/test_explode.py), without taking every record back into the JVM to encode it.
    The topic names are collected on the driver first (a few rows per topic). Returns the rows."""
    from kwire.spark.sink import write_batches, write_by_tasks

    names_df = _names(responses)
    names = {r["_id"]: r["_name"] for r in names_df.collect()} if names_df is not None else {}

    def task(batches: Iterable[pa.RecordBatch], open_file: Any) -> Iterator[dict[str, Any]]:
        rows = (named(b, names) for b in _explode(batches))
        yield from write_batches(rows, open_file, None)

    done = write_by_tasks(_wanted(frames), path, task, schema=SCHEMA, size_column=("key", "value"))
    return sum(r["rows"] for r in done)
