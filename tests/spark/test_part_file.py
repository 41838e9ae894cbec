"""kwire.spark.sink.PartFile: a Parquet file as the tasks that write their own files write it
(the capture's frames, the decoded tables), with row groups bounded by their frames' bytes (so a
default Spark session's reader holds a row group of large frames) and the frames' bytes kept out
of the dictionaries and statistics."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kwire.capture.table import SCHEMA
from kwire.spark.sink import PartFile

GROUP = 100_000


def _batch(rng: random.Random, lengths: list[int], first: int) -> pa.RecordBatch:
    rows = []
    for i, n in enumerate(lengths):
        rows.append(
            {
                "source_file": "c.pcap",
                "connection_id": "10.0.0.1:40000->10.0.0.2:9092",
                "client_addr": "10.0.0.1",
                "client_port": 40000,
                "broker_addr": "10.0.0.2",
                "broker_port": 9092,
                "direction": rng.choice(["request", "response"]),
                "ts_first": first + i,
                "ts_last": first + i,
                "frame": rng.randbytes(n),
                "frame_length": n,
                "api_key": 1,
                "api_version": 12,
                "correlation_id": first + i,
                "client_id": "c",
                "latency_us": None,
                "error": None,
            }
        )
    return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)


def test_row_groups_are_cut_by_their_frames_bytes(tmp_path: Path) -> None:
    rng = random.Random(7)
    batches, lengths, first = [], [], 0
    for _ in range(40):
        sizes = [rng.choice([10, 200, 3_000, 30_000, 250_000]) for _ in range(rng.randint(0, 30))]
        batches.append(_batch(rng, sizes, first))
        lengths += sizes
        first += len(sizes)
    path = tmp_path / "f.parquet"
    out = PartFile(str(path), SCHEMA, "snappy", "frame", 1, GROUP, 1 << 20, 64)
    for b in batches:
        out.write(b)
    out.close()
    assert out.rows == len(lengths)
    table = pq.read_table(path)
    assert table.column("correlation_id").to_pylist() == list(range(len(lengths)))
    assert table.column("frame").to_pylist() == [
        f for b in batches for f in b.column("frame").to_pylist()
    ]
    meta = pq.ParquetFile(path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(groups) == len(lengths)
    at = 0
    sizes = []
    for rows in groups:
        sizes.append([n + 64 for n in lengths[at : at + rows]])
        at += rows
    for i, group in enumerate(sizes):
        # within the bound, or one frame larger than it alone
        assert sum(group) <= GROUP or len(group) == 1, i
        # and cut only where the next frame would pass it: no needless small groups
        if i + 1 < len(sizes):
            assert sum(group) + sizes[i + 1][0] > GROUP, i
    frame = SCHEMA.get_field_index("frame")
    for i in range(meta.num_row_groups):
        column = meta.row_group(i).column(frame)
        assert not column.is_stats_set
        assert not any("DICTIONARY" in e for e in column.encodings)
        assert meta.row_group(i).column(SCHEMA.get_field_index("direction")).is_stats_set


def test_no_rows_no_file(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    out = PartFile(str(path), SCHEMA, "snappy", "frame", 1, GROUP, 1 << 20, 64)
    out.write(_batch(random.Random(1), [], 0))
    out.close()
    assert out.rows == 0 and not path.exists()


def test_a_relative_table_is_written_where_the_driver_means(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Executors do not share the driver's working directory (a standalone worker has its own;
    local mode's Python workers keep the one they started in): `-o out/decoded` is the
    driver's."""
    from kwire.spark.sink import write_batches, write_by_tasks

    monkeypatch.chdir(tmp_path)
    df = spark.createDataFrame([(i, bytes([i]) * i) for i in range(50)], "n int, frame binary")
    done = write_by_tasks(df, "rel/table", lambda b, f: write_batches(b, f, None))
    assert sum(r["rows"] for r in done) == 50
    table = pq.read_table(tmp_path / "rel" / "table")
    assert sorted(table.column("n").to_pylist()) == list(range(50))
    assert (tmp_path / "rel" / "table" / "_SUCCESS").exists()
