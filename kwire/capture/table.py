"""The frames table: its Arrow schema (the contract with the Spark side) and a batch builder."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

TIMESTAMP = pa.timestamp("us", tz="UTC")

SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("connection_id", pa.string(), nullable=False),
        pa.field("client_addr", pa.string(), nullable=False),
        pa.field("client_port", pa.int32(), nullable=False),
        pa.field("broker_addr", pa.string(), nullable=False),
        pa.field("broker_port", pa.int32(), nullable=False),
        pa.field("direction", pa.string(), nullable=False),
        pa.field("ts_first", TIMESTAMP, nullable=False),
        pa.field("ts_last", TIMESTAMP, nullable=False),
        pa.field("frame", pa.binary()),
        pa.field("frame_length", pa.int32()),
        pa.field("api_key", pa.int16()),
        pa.field("api_version", pa.int16()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_id", pa.string()),
        pa.field("latency_us", pa.int64()),
        pa.field("error", pa.string()),
    ]
)

COLUMNS = SCHEMA.names
(
    SOURCE_FILE,
    CONNECTION_ID,
    CLIENT_ADDR,
    CLIENT_PORT,
    BROKER_ADDR,
    BROKER_PORT,
    DIRECTION,
    TS_FIRST,
    TS_LAST,
    FRAME,
    FRAME_LENGTH,
    API_KEY,
    API_VERSION,
    CORRELATION_ID,
    CLIENT_ID,
    LATENCY_US,
    ERROR,
) = range(len(COLUMNS))

Row = list[Any]


# A batch is also cut when its frames add up to this much, so big frames do not pile up.
MAX_BATCH_BYTES = 64 * 1024 * 1024


class BatchBuilder:
    """Collects rows column-wise and cuts them into record batches of about `size` rows."""

    def __init__(self, size: int, max_bytes: int = MAX_BATCH_BYTES) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._cols: list[list[Any]] = [[] for _ in COLUMNS]
        self.rows = 0
        self.bytes = 0

    def add(self, row: Row) -> None:
        for col, value in zip(self._cols, row):
            col.append(value)
        self.rows += 1
        if row[FRAME] is not None:
            self.bytes += len(row[FRAME])

    def full(self) -> bool:
        return self.rows >= self.size or self.bytes >= self.max_bytes

    def take(self) -> pa.RecordBatch:
        arrays = [pa.array(col, type=f.type) for col, f in zip(self._cols, SCHEMA)]
        self._cols = [[] for _ in COLUMNS]
        self.rows = 0
        self.bytes = 0
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
