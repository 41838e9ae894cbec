"""kwire.live.carried: the produced records carried from one live rebuild to the next are, after
every rebuild, what kwire.groups.delivery.produced() gives from every batch at once.

The batches are hand-made rows of OUT/records and OUT/responses (the shapes of
tests/groups/test_delivery.py) for Produce exchanges written out below, each batch a file named
as kwire live names its narrow inputs. Ground truth is produced() over all the batches so far:
the batch job's own function, on the same rows. The cases that make carrying hard are in them:
an idempotent producer's retries that span rebuilds (refused, then acked; acked twice), records
without a producer id that look alike, a Metadata answer naming a broker's cluster after its
records were carried, and a broker answering an acks=0 request in a later batch.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from kwire.groups.delivery import clusters, produced
from kwire.live.carried import INDEX, MERGE_AT, CarriedProduced
from tests.groups.test_delivery import RECORDS

RESPONSES = (
    "connection_id string, correlation_id int, ts_first timestamp, api_key short, "
    "produce struct<responses: array<struct<name: string, topic_id: string, "
    "partition_responses: array<struct<index: int, error_code: short, base_offset: long>>>>>, "
    "metadata struct<cluster_id: string, brokers: array<struct<host: string, port: int>>>"
)
P1 = "10.0.0.5:40000->10.0.0.9:9092"  # an idempotent producer (id 7)
P2 = "10.0.0.6:40000->10.0.0.9:9092"  # a producer without an id
OTHER = "10.0.0.5:40001->10.0.0.8:9092"  # producer 7 on another broker


def _at(ms: int) -> datetime:
    return datetime(2026, 12, 5, 8, 0, 0, tzinfo=timezone.utc).replace(
        microsecond=(ms % 1000) * 1000, second=ms // 1000
    )


def _rec(conn: str, corr: int, ms: int, seq: int, pid: int = 7, part: int = 0) -> tuple:
    head = (conn, "request", 0, corr, "p", _at(ms), "t", None, part, 0, "ok", False)
    return head + (pid, 0, seq % 3, seq, _at(ms), None, None)


def _ack(conn: str, corr: int, ms: int, base: int, error: int = 0, part: int = 0) -> tuple:
    return (conn, corr, _at(ms), 0, ([("t", None, [(part, error, base)])],), None)


def _metadata(ms: int, broker: str, cluster: str) -> tuple:
    host, port = broker.split(":")
    return ("10.0.0.1:1->" + broker, 99, _at(ms), 3, None, (cluster, [(host, int(port))]))


# Each batch: (records, responses). Times grow with the batches, as a ring's files do.
BATCHES: list[tuple[list[tuple], list[tuple]]] = [
    # 0: producer 7 sends sequences 0-2 (acked at 100), and 3-4, refused (NOT_LEADER).
    (
        [_rec(P1, 1, 0, 0), _rec(P1, 1, 0, 1), _rec(P1, 1, 0, 2)]
        + [_rec(P1, 2, 10, 3), _rec(P1, 2, 10, 4)],
        [_ack(P1, 1, 20, 100), _ack(P1, 2, 30, -1, error=6)],
    ),
    # 1: a producer without an id sends the same-looking record twice, in two requests.
    ([_rec(P2, 1, 1000, -1, pid=-1), _rec(P2, 2, 1000, -1, pid=-1)],
     [_ack(P2, 1, 1010, 500), _ack(P2, 2, 1010, 501)]),  # fmt: skip
    # 2: no Produce at all (a batch of other traffic).
    ([], []),
    # 3: producer 7 retries 3-4 (acked at 103) and sends 5 on partition 1.
    ([_rec(P1, 3, 3000, 3), _rec(P1, 3, 3000, 4), _rec(P1, 4, 3000, 5, part=1)],
     [_ack(P1, 3, 3010, 103), _ack(P1, 4, 3010, 7, part=1)]),  # fmt: skip
    # 4: ... and 3 once more, a duplicate the broker acks with its first offset.
    ([_rec(P1, 5, 4000, 3)], [_ack(P1, 5, 4010, 103)]),
    # 5: more of producer 7.
    ([_rec(P1, 6, 5000, 6), _rec(P1, 6, 5000, 7)], [_ack(P1, 6, 5010, 105)]),
    # 6: producer 7 on a broker Metadata has not named yet.
    ([_rec(OTHER, 1, 6000, 8)], [_ack(OTHER, 1, 6010, 108)]),
    # 7: Metadata names both brokers' clusters: the carried rows' clusters change.
    ([_rec(P1, 9, 7000, 10)],
     [_ack(P1, 9, 7010, 109), _metadata(7020, "10.0.0.9:9092", "c1"),
      _metadata(7020, "10.0.0.8:9092", "c2")]),  # fmt: skip
    # 8: more, carried again (Metadata names a broker no carried record went to), and a
    # request without a producer id sent with acks=0 ...
    ([_rec(P1, 10, 8000, 11), _rec(P2, 40, 8005, -1, pid=-1)],
     [_ack(P1, 10, 8010, 110), _metadata(8020, "10.0.0.7:9092", "c3")]),  # fmt: skip
    # 9: ... which its broker answers anyway, in the next batch.
    ([_rec(P1, 11, 9000, 12)], [_ack(P1, 11, 9010, 111), _ack(P2, 40, 9010, 600)]),
]


def _tag(n: int) -> str:
    return f"{n:09d}"


def _put(spark: SparkSession, rows: list[tuple], schema: str, folder: Path, n: int) -> None:
    """One batch's rows as kwire live keeps them: a file `b<tag>-part-....parquet`."""
    tmp = folder.parent / f".tmp-{folder.name}"
    spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(tmp))
    folder.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(tmp):
        if name.endswith(".parquet"):
            os.replace(tmp / name, folder / f"b{_tag(n)}-{name}")
    shutil.rmtree(tmp)


def _rows(df: DataFrame) -> list[tuple]:
    cols = sorted(df.columns)
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=repr)


def test_carried_produced_records_equal_the_batch_jobs_after_every_rebuild(
    spark: SparkSession, tmp_path: Path
) -> None:
    inputs, root = tmp_path / "inputs", tmp_path / "produced"
    logs: list[dict[str, Any]] = []
    for n, (recs, resps) in enumerate(BATCHES):
        if recs:
            _put(spark, recs, RECORDS, inputs / "records", n)
        if resps:
            _put(spark, resps, RESPONSES, inputs / "responses", n)
        if n == 5:
            # A rebuild killed after writing its new file, before its index: the next one
            # finds a directory no index names.
            (root / "000000004-deadbeef").mkdir()
            (root / "000000004-deadbeef" / "part-0.parquet").write_bytes(b"half")
        if n == 2:
            continue  # no rebuild after this batch: the next one reads two
        records = spark.read.parquet(str(inputs / "records"))
        responses = spark.read.parquet(str(inputs / "responses"))
        endpoints = clusters(responses)
        committed = {_tag(i) for i in range(n + 1)}
        carried = CarriedProduced(str(root), _tag(n), str(inputs), committed, from_bytes=0)
        got = carried.rows(records, responses, endpoints)
        assert _rows(got) == _rows(produced(records, responses, endpoints)), f"batch {n}"
        logs.append({"batch": n, **carried.log})
    by_batch = {log["batch"]: log for log in logs}
    # What was carried and what was computed again, and why.
    assert by_batch[0]["full"] == "nothing carried"
    assert by_batch[3]["carried_through"] == 1 and by_batch[3]["batches"] == 2
    # Sequences 3-4 (refused in batch 0; the full file may hold them apart), then 3 again.
    assert by_batch[3]["retried_files"] >= 1 and by_batch[4]["retried_files"] == 1
    assert by_batch[5]["retried_files"] == 0
    assert "full" not in by_batch[6]  # a broker no Metadata names: null cluster, carried
    assert by_batch[7]["full"] == "the brokers' cluster ids changed"
    assert "full" not in by_batch[8]
    assert by_batch[9]["full"] == "a Produce answer without its request in its batch"
    # The killed rebuild's directory is gone; the index names every file there is.
    assert not (root / "000000004-deadbeef").exists()
    index = json.loads((root / INDEX).read_text())
    assert index["through"] == len(BATCHES) - 1
    named = {e["file"].split("/")[0] for e in index["files"]}
    assert named == {p.name for p in root.iterdir() if p.is_dir()}


def test_files_of_a_level_are_merged_into_one(spark: SparkSession, tmp_path: Path) -> None:
    """A run of rebuilds each adding a file: every MERGE_AT files of a level become one file of
    the next, so the files stay few (at most MERGE_AT - 1 per level)."""
    inputs, root = tmp_path / "inputs", tmp_path / "produced"
    rebuilds = MERGE_AT + 2
    for n in range(rebuilds):
        _put(spark, [_rec(P1, n + 1, n * 100, n)], RECORDS, inputs / "records", n)
        _put(spark, [_ack(P1, n + 1, n * 100 + 10, n)], RESPONSES, inputs / "responses", n)
        records = spark.read.parquet(str(inputs / "records"))
        responses = spark.read.parquet(str(inputs / "responses"))
        committed = {_tag(i) for i in range(n + 1)}
        carried = CarriedProduced(str(root), _tag(n), str(inputs), committed, from_bytes=0)
        got = carried.rows(records, responses, None)
        assert _rows(got) == _rows(produced(records, responses, None)), f"batch {n}"
    index = json.loads((root / INDEX).read_text())
    levels = [e["level"] for e in index["files"]]
    # The first rebuild's full file, then 5 level-0 files: 4 merged into 1 of level 1, and 1.
    assert sorted(levels) == [0, 1, 99], levels
    assert sum(e["rows"] for e in index["files"]) == rebuilds


def test_a_small_history_is_computed_and_not_carried(spark: SparkSession, tmp_path: Path) -> None:
    """Below CARRY_FROM_BYTES of narrow records the rows come from the history (one Spark job,
    cheaper than carrying), and nothing is kept."""
    inputs, root = tmp_path / "inputs", tmp_path / "produced"
    recs, resps = BATCHES[0]
    _put(spark, recs, RECORDS, inputs / "records", 0)
    _put(spark, resps, RESPONSES, inputs / "responses", 0)
    records = spark.read.parquet(str(inputs / "records"))
    responses = spark.read.parquet(str(inputs / "responses"))
    carried = CarriedProduced(str(root), _tag(0), str(inputs), {_tag(0)}, from_bytes=1 << 30)
    got = carried.rows(records, responses, None)
    assert _rows(got) == _rows(produced(records, responses, None))
    size = sum(p.stat().st_size for p in (inputs / "records").glob("*.parquet"))
    assert carried.log == {"from_history": size} and size > 0
    assert not root.exists()
