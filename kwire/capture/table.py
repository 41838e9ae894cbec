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


class FramesFile:
    """Frames batches -> one Parquet file that a default Spark session reads whole: row groups
    of at most `group_bytes` of frames (and `group_rows` rows), pages of at most `page_rows` rows
    (pyarrow checks a page's size only between such mini-batches, so a page of 300 kB frames
    closes after that many of them), no dictionary or statistics for the frames' bytes (min/max
    of 300 kB values would bloat the footer). The file is created by the first batch with rows;
    batches are held until they fill a row group, so small frames do not make small groups."""

    def __init__(
        self,
        path: str,
        schema: pa.Schema,
        compression: str,
        group_bytes: int,
        page_bytes: int,
        page_rows: int,
        group_rows: int = 1 << 20,
    ) -> None:
        self.path = path
        self.schema = schema
        self.compression = compression
        self.group_bytes = group_bytes
        self.group_rows = group_rows
        self.page_bytes = page_bytes
        self.page_rows = page_rows
        self.rows = 0
        self._writer: Any = None
        self._held: list[pa.RecordBatch] = []
        self._lengths: list[int] = []
        self._held_bytes = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        lengths = [(n or 0) + 64 for n in batch.column("frame_length").to_pylist()]
        self._held.append(batch)
        self._lengths += lengths
        self._held_bytes += sum(lengths)
        self.rows += batch.num_rows
        if self._held_bytes >= self.group_bytes or len(self._lengths) >= self.group_rows:
            self._flush()

    def _flush(self, last: bool = False) -> None:
        if not self._held:
            return
        if self._writer is None:
            import pyarrow.parquet as pq

            small = [name for name in self.schema.names if name != "frame"]
            self._writer = pq.ParquetWriter(
                self.path,
                self.schema,
                compression=self.compression,
                data_page_size=self.page_bytes,
                write_batch_size=self.page_rows,
                use_dictionary=small,
                write_statistics=small,
            )
        table = pa.Table.from_batches(self._held)
        # Row groups cut before their frames pass group_bytes (a row group of one frame when
        # that frame alone is larger); what is left waits for the next batches, but the last.
        start = size = 0
        for i, n in enumerate(self._lengths):
            if i > start and (size + n > self.group_bytes or i - start >= self.group_rows):
                self._writer.write_table(table.slice(start, i - start))
                start, size = i, 0
            size += n
        if last:
            self._writer.write_table(table.slice(start))
            start = len(self._lengths)
        self._held = table.slice(start).to_batches()
        self._lengths = self._lengths[start:]
        self._held_bytes = sum(self._lengths)

    def close(self) -> None:
        self._flush(last=True)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
