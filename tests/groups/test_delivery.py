"""kwire.groups.delivery.produced on hand-made rows: which produced records are one record sent
again (an idempotent producer's retry) and which are records of their own.

The rows are what OUT/records and OUT/responses hold for the Produce exchanges written out
below; ground truth is those exchanges (Kafka's idempotent producer numbers records per topic
partition, so two topics' partition 0 both start at sequence 0).
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import SparkSession

from kwire.groups.delivery import produced

RECORDS = (
    "connection_id string, direction string, api_key short, correlation_id int, "
    "client_id string, frame_ts timestamp, topic string, topic_id string, partition int, "
    "batch_index int, batch_status string, is_control boolean, producer_id long, "
    "producer_epoch short, offset long, sequence int, timestamp timestamp, trace_id string, "
    "span_id string"
)
RESPONSES = (
    "connection_id string, correlation_id int, ts_first timestamp, api_key short, "
    "produce struct<responses: array<struct<name: string, topic_id: string, "
    "partition_responses: array<struct<index: int, error_code: short, base_offset: long>>>>>"
)
CONN = "10.0.0.5:40000->10.0.0.9:9092"
A, B = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"  # topic ids, no names in the capture


def _at(ms: int) -> datetime:
    return datetime(2026, 11, 28, 8, 0, 0, ms * 1000, tzinfo=timezone.utc)


def _record(corr: int, topic_id: str, ms: int) -> tuple:
    # One batch of one record: producer 7, epoch 0, sequence 0 (the first of its partition).
    head = (CONN, "request", 0, corr, "p1", _at(ms), None, topic_id, 0, 0, "ok", False)
    return head + (7, 0, 0, 0, _at(ms), None, None)


def test_ids_only_topics_keep_their_records_apart_and_retries_merge(spark: SparkSession) -> None:
    """Produce v13 (topics by id). Request 1 sends topic A's first record and is refused
    (NOT_LEADER_OR_FOLLOWER); request 2 sends it again with topic B's first record, both
    appended (base offsets 10 and 20). Two records: A's at offset 10 in two attempts, B's at
    offset 20 in one. Their producer, partition and sequence are the same, and without names
    the topics differ only by id."""
    records = [
        _record(1, A, 0),
        _record(2, A, 100),
        _record(2, B, 100),
    ]
    responses = [
        (CONN, 1, _at(50), 0, ([(None, A, [(0, 6, -1)])],)),
        (CONN, 2, _at(150), 0, ([(None, A, [(0, 0, 10)]), (None, B, [(0, 0, 20)])],)),
    ]
    rows = produced(
        spark.createDataFrame(records, RECORDS),
        spark.createDataFrame(responses, RESPONSES),
        None,
    ).collect()
    got = sorted((r["offset"], r["attempts"], r["produced_at"], r["acked_at"]) for r in rows)
    # Collected as the session's UTC wall clock, without a zone.
    first, second, acked = (_at(ms).replace(tzinfo=None) for ms in (0, 100, 150))
    assert got == [(10, 2, first, acked), (20, 1, second, acked)]
