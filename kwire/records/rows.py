"""Flat OUT/records rows and their Arrow form, for the Spark job.

One row per record, carrying its batch's columns; a batch without records (unreadable, cut,
too large, or an empty batch left by compaction) still gives one row whose record columns are
null, so every batch of every frame is visible in the output.  Rows are plain tuples in
:data:`ROW_COLUMNS` order: cheap to make on executors, and :func:`rows_to_arrow` turns any
iterable of them into Arrow record batches of bounded size, so a frame's records never have to
be held at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .compression import DEFAULT_MAX_DECOMPRESSED
from .decode import iter_batches

BATCH_COLUMNS = (
    "batch_index",
    "batch_offset",
    "magic",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "partition_leader_epoch",
    "batch_status",
    "batch_error",
)
RECORD_COLUMNS = (
    "offset",
    "sequence",
    "timestamp",
    "key",
    "value",
    "headers",
    "control_type",
)
ROW_COLUMNS = BATCH_COLUMNS + RECORD_COLUMNS

Row = tuple[Any, ...]

_NULL_RECORD: Row = (None,) * len(RECORD_COLUMNS)
_TS_LIMIT = (2**63 - 1) // 1000  # ms values whose microseconds still fit in int64

DEFAULT_MAX_ROWS = 65536
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
_ROW_OVERHEAD = 120  # fixed-width columns and strings of one row, roughly, in Arrow bytes


def arrow_schema() -> pa.Schema:
    """The Arrow schema of :data:`ROW_COLUMNS` (timestamps in microseconds, UTC)."""
    return pa.schema(
        [
            ("batch_index", pa.int32()),
            ("batch_offset", pa.int64()),
            ("magic", pa.int8()),
            ("compression", pa.string()),
            ("timestamp_type", pa.string()),
            ("is_transactional", pa.bool_()),
            ("is_control", pa.bool_()),
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int16()),
            ("base_sequence", pa.int32()),
            ("partition_leader_epoch", pa.int32()),
            ("batch_status", pa.string()),
            ("batch_error", pa.string()),
            ("offset", pa.int64()),
            ("sequence", pa.int32()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("key", pa.binary()),
            ("value", pa.binary()),
            (
                "headers",
                pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
            ("control_type", pa.string()),
        ]
    )


def iter_rows(
    data: bytes | bytearray | memoryview | None,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[Row]:
    """Rows (tuples in :data:`ROW_COLUMNS` order) for one records field.

    ``timestamp`` is epoch milliseconds, None where Kafka has none (-1: magic 0, or unset);
    headers are a list of ``(key, value)`` tuples in wire order.
    """
    for index, b in enumerate(iter_batches(data, max_decompressed=max_decompressed)):
        head = (
            index,
            b.base_offset,
            b.magic,
            b.compression,
            b.timestamp_type,
            b.is_transactional,
            b.is_control,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.partition_leader_epoch,
            b.status,
            b.error,
        )
        if not b.records:
            yield head + _NULL_RECORD
            continue
        for r in b.records:
            yield head + (
                r.offset,
                r.sequence,
                None if r.timestamp == -1 else r.timestamp,
                r.key,
                r.value,
                r.headers,
                r.control_type,
            )


def _row_bytes(row: Row) -> int:
    size = _ROW_OVERHEAD
    key, value, headers = row[16], row[17], row[18]
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    if row[12] is not None:
        size += len(row[12])
    if headers:
        for hkey, hvalue in headers:
            size += 16 + len(hkey) + (len(hvalue) if hvalue is not None else 0)
    return size


def _clean_key(key: str) -> str:
    """Header keys that were not UTF-8 (kept with surrogate escapes) made printable for Arrow."""
    if key.isascii():
        return key
    try:
        key.encode("utf-8")
        return key
    except UnicodeEncodeError:
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _timestamps(ms: Any, kind: pa.DataType) -> pa.Array:
    """Epoch milliseconds (None for none) -> microseconds; null where they would overflow."""
    values = pa.array(ms, type=pa.int64())
    fits = pc.and_(pc.greater_equal(values, -_TS_LIMIT), pc.less_equal(values, _TS_LIMIT))
    return pc.multiply(pc.if_else(fits, values, None), 1000).cast(kind)


def _headers(values: Any, kind: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type=kind)
    except UnicodeEncodeError:  # a key kept with surrogate escapes: rare, so only then
        return pa.array(
            [None if hs is None else [(_clean_key(k), v) for k, v in hs] for hs in values],
            type=kind,
        )


def to_record_batch(rows: list[Row], schema: pa.Schema | None = None) -> pa.RecordBatch:
    """One Arrow batch of `rows` (in :data:`ROW_COLUMNS` order), however many; see
    :func:`rows_to_arrow` for batches of bounded size."""
    schema = schema or arrow_schema()
    columns: list[Any] = list(zip(*rows)) if rows else [()] * len(schema)
    arrays: list[pa.Array] = []
    for values, f in zip(columns, schema):
        if f.name == "timestamp":
            arrays.append(_timestamps(values, f.type))
        elif f.name == "headers":
            arrays.append(_headers(values, f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_arrow(
    rows: Iterable[Row],
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of at most ``max_rows`` rows and about ``max_bytes`` bytes each.

    A single row larger than ``max_bytes`` still makes its own batch (rows are never split).
    Timestamps outside what microseconds can hold become null.
    """
    schema = arrow_schema()
    pending: list[Row] = []
    size = 0
    for row in rows:
        row_size = _row_bytes(row)
        if pending and (len(pending) >= max_rows or size + row_size > max_bytes):
            yield to_record_batch(pending, schema)
            pending = []
            size = 0
        pending.append(row)
        size += row_size
    if pending:
        yield to_record_batch(pending, schema)
