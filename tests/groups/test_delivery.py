"""kwire.groups.delivery.produced on hand-made rows: which produced records are one record sent
again (an idempotent producer's retry) and which are records of their own.

The rows are what OUT/records and OUT/responses hold for the Produce exchanges written out
below; ground truth is those exchanges (Kafka's idempotent producer numbers records per topic
partition, so two topics' partition 0 both start at sequence 0).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kwire.groups.delivery import delivery, produced

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
    got = sorted(
        (r["topic"], r["offset"], r["attempts"], r["produced_at"], r["acked_at"]) for r in rows
    )
    # Collected as the session's UTC wall clock, without a zone.
    first, second, acked = (_at(ms).replace(tzinfo=None) for ms in (0, 100, 150))
    assert got == [(A, 10, 2, first, acked), (B, 20, 1, second, acked)]


def test_ids_only_topics_are_matched_with_their_fetches_by_id(spark: SparkSession) -> None:
    """Produce v13 and Fetch v13 (both by id, no Metadata naming either id). One request
    writes topic A's and topic B's first records, both at offset 10 of partition 0; a consumer
    fetches A's at 300 ms and B's at 400 ms (records carry their log offset in a Fetch
    response). Each produced record meets its own fetch: the partition and offset are the same,
    the topic ids are not."""
    fetcher = "10.0.0.6:41000->10.0.0.9:9092"

    def fetched(corr: int, topic_id: str, ms: int) -> tuple:
        head = (fetcher, "response", 1, corr, "c1", _at(ms), None, topic_id, 0, 0, "ok", False)
        return head + (7, 0, 10, 0, _at(0), None, None)

    records = spark.createDataFrame(
        [_record(1, A, 0), _record(1, B, 0), fetched(5, A, 300), fetched(6, B, 400)], RECORDS
    )
    responses = spark.createDataFrame(
        [(CONN, 1, _at(50), 0, ([(None, A, [(0, 0, 10)]), (None, B, [(0, 0, 10)])],))],
        RESPONSES,
    )
    prod = produced(records, responses, None)
    rows = delivery(records, prod, None).collect()
    got = sorted(
        (r["topic"], r["offset"], r["consumer_client_id"], r["first_fetched_at"]) for r in rows
    )
    at_a, at_b = (_at(ms).replace(tzinfo=None) for ms in (300, 400))
    assert got == [(A, 10, "c1", at_a), (B, 10, "c1", at_b)]


COMMITS = "ts timestamp, group_id string, topic string, partition int, offset long, error string"
ASKS = (
    "group_id string, topic string, partition int, offset long, fetched_at timestamp, "
    "consumer string"
)


def _first_commit_by_scan(commits: list[tuple], ask: tuple) -> datetime | None:
    """The definition, read plainly: the earliest successful commit of the record's group and
    partition past its offset, at or after the group's first fetch of it (any time if none)."""
    group, topic, partition, offset, fetched_at, _ = ask
    times = [
        ts
        for ts, g, t, p, o, error in commits
        if (g, t, p) == (group, topic, partition)
        and error is None
        and o is not None
        and o > offset
        and (fetched_at is None or ts >= fetched_at)
    ]
    return min(times) if times else None


@pytest.mark.parametrize("by_number", [False, True], ids=["groups by name", "groups by number"])
@pytest.mark.parametrize("how", ["looked up in the tasks", "windows"])
def test_first_commits_agree_with_a_scan_of_every_commit(
    spark: SparkSession, how: str, by_number: bool
) -> None:
    """first_commits() on 400 partitions of generated commits: offsets that mostly climb, with
    resets and seeks back, repeats, commits at the same instant, failed commits and commits
    without an offset; records asked about before, at and after each commit's time and offset,
    some with no fetch time. Every answer is the plain scan's, null where it finds none; every
    record asked has its row, and its other columns stay as they were. Both ways: the commits
    shipped to the tasks (a capture's usual few), and the windows (more than LOOKUP_COMMITS); and
    with the records naming their group by a number (delivery's `_group`), one group of the
    commits having none (its commits answer no record)."""
    import random

    from kwire.groups.delivery import LOOKUP_COMMITS, first_commits

    lookup = LOOKUP_COMMITS if how == "looked up in the tasks" else 10

    rng = random.Random(20261128)
    commits: list[tuple] = []
    asks: list[tuple] = []
    for n in range(400):
        group, topic, partition = f"g{n % 7}", f"t{n % 5}", n
        ms, offset = 0, rng.randrange(0, 50)
        for _ in range(rng.randrange(0, 12)):
            ms += rng.choice([0, 0, 5, 10, 40])  # same instant sometimes
            roll = rng.random()
            if roll < 0.15:
                offset = rng.randrange(0, max(1, offset))  # a reset or a seek back
            elif roll < 0.3:
                pass  # the same offset again
            else:
                offset += rng.randrange(1, 30)
            error = "REBALANCE_IN_PROGRESS" if rng.random() < 0.1 else None
            kept = None if rng.random() < 0.05 else offset
            commits.append((_at(ms), group, topic, partition, kept, error))
        times = [c[0] for c in commits if c[3] == partition] or [_at(0)]
        for _ in range(rng.randrange(1, 10)):
            at = rng.choice(times)
            at = datetime.fromtimestamp(
                at.timestamp() + rng.choice([-0.001, 0, 0, 0.001]), tz=timezone.utc
            )
            asks.append(
                (
                    group,
                    topic,
                    partition,
                    rng.randrange(0, offset + 20),
                    None if rng.random() < 0.15 else at,
                    f"c{rng.randrange(3)}",  # a column first_commits() only carries
                )
            )
    asks = list(dict.fromkeys(asks))
    asked = spark.createDataFrame(asks, ASKS)
    groups = None
    if by_number:
        # g6 has no number: its records ask as group 99, which names no group.
        numbers = [(f"g{n}", 10 + n) for n in range(6)]
        groups = spark.createDataFrame(numbers, "group_id string, _group int")
        number = F.coalesce(
            F.create_map(*[F.lit(x) for pair in numbers for x in pair])[F.col("group_id")],
            F.lit(99),
        )
        asked = asked.select(number.alias("_group"), *[c for c in asked.columns if c != "group_id"])
    rows = first_commits(asked, spark.createDataFrame(commits, COMMITS), lookup, groups).collect()
    name = {10 + n: f"g{n}" for n in range(6)} | {99: "g6"}
    got = sorted(
        (
            (name[r["_group"]] if by_number else r["group_id"],)
            + (r["topic"], r["partition"], r["offset"], _utc(r["fetched_at"]))
            + (r["consumer"], _utc(r["committed_at"]))
            for r in rows
        ),
        key=repr,
    )
    unnumbered = [c for c in commits if c[1] != "g6"] if by_number else commits
    want = sorted((a + (_first_commit_by_scan(unnumbered, a),) for a in asks), key=repr)
    answered = sum(1 for w in want if w[-1] is not None)
    assert answered > 1000 and len(want) - answered > 300  # both kinds, many of each
    assert got == want


def _utc(at: datetime | None) -> datetime | None:
    # Collected as the session's UTC wall clock, without a zone.
    return None if at is None else at.replace(tzinfo=timezone.utc)


def test_known_gives_the_offsets_asked_within_each_brokers_cluster(spark: SparkSession) -> None:
    """Two clusters (Metadata names broker 10.0.0.9 in one, 10.0.0.8 in the other) each get
    topic t's partition 0 written at offset 100: producer 7 appends two records there in cluster
    one (offsets 100 and 101, acked at 50 ms), producer 8 one record in cluster two (acked at
    60 ms); a consumer of cluster one fetches offset 101, whose log timestamp is 7 ms. Asked for
    t-0 at 101 alone (a commit's offset), Known gives that one record, from cluster one; asked
    for everything, the three, each in the cluster of its broker."""
    from kwire.groups.delivery import Known

    one, two = "10.0.0.5:40000->10.0.0.9:9092", "10.0.0.5:40001->10.0.0.8:9092"
    fetcher = "10.0.0.6:41000->10.0.0.9:9092"

    def row(conn: str, direction: str, api: int, corr: int, ms: int, pid: int, off: int, seq: int,
            ts: int) -> tuple:  # fmt: skip
        head = (conn, direction, api, corr, "c", _at(ms), "t", None, 0, 0, "ok", False)
        return head + (pid, 0, off, seq, _at(ts), None, None)

    records = spark.createDataFrame(
        [
            row(one, "request", 0, 1, 0, 7, 0, 0, 1),
            row(one, "request", 0, 1, 0, 7, 1, 1, 1),
            row(two, "request", 0, 1, 10, 8, 0, 0, 2),
            row(fetcher, "response", 1, 4, 300, 7, 101, 1, 7),
        ],
        RECORDS,
    )
    responses = spark.createDataFrame(
        [
            (one, 1, _at(50), 0, ([("t", None, [(0, 0, 100)])],)),
            (two, 1, _at(60), 0, ([("t", None, [(0, 0, 100)])],)),
        ],
        RESPONSES,
    )
    endpoints = spark.createDataFrame(
        [("10.0.0.9:9092", "c-one"), ("10.0.0.8:9092", "c-two")], "_ep string, cluster string"
    )
    known = Known(records, produced(records, responses, endpoints), endpoints)
    wanted = spark.createDataFrame([("g", "t", 0, 101)], "group_id string, topic string, "
                                   "partition int, offset long")  # fmt: skip

    def rows(df: object) -> list[tuple]:
        keys = ("cluster", "topic", "partition", "offset", "produced_at", "acked_at")
        return sorted(
            tuple(r[k] for k in keys) + (r["record_timestamp"],) for r in df.collect()  # type: ignore[attr-defined]
        )

    at = {ms: _at(ms).replace(tzinfo=None) for ms in (0, 1, 2, 7, 10, 50, 60)}
    assert rows(known.at(wanted)) == [("c-one", "t", 0, 101, at[0], at[50], at[7])]
    assert rows(known.at(wanted, small=False)) == [
        ("c-one", "t", 0, 100, at[0], at[50], at[1]),
        ("c-one", "t", 0, 101, at[0], at[50], at[7]),
        ("c-two", "t", 0, 100, at[10], at[60], at[2]),
    ]


def test_a_consumer_is_one_however_many_connections_it_fetched_over(spark: SparkSession) -> None:
    """One record (topic A, offset 10) fetched four times: client c1 over its first connection at
    300 ms and, reconnected from another port, again at 200 ms (a retry answered first) and 500 ms;
    client c2 at 400 ms; and a Fetch response whose request named no client id at 600 ms.
    Delivery has one row per consumer (cluster, group and client id, not connection), with its
    first fetch: c1 at 200 ms, c2 at 400 ms, the nameless one at 600 ms."""

    def fetched(port: int, client: str | None, corr: int, ms: int) -> tuple:
        conn = f"10.0.0.6:{port}->10.0.0.9:9092"
        head = (conn, "response", 1, corr, client, _at(ms), None, A, 0, 0, "ok", False)
        return head + (7, 0, 10, 0, _at(0), None, None)

    records = spark.createDataFrame(
        [
            _record(1, A, 0),
            fetched(41000, "c1", 5, 300),
            fetched(41001, "c1", 1, 200),
            fetched(41001, "c1", 2, 500),
            fetched(42000, "c2", 5, 400),
            fetched(43000, None, 5, 600),
        ],
        RECORDS,
    )
    responses = spark.createDataFrame(
        [(CONN, 1, _at(50), 0, ([(None, A, [(0, 0, 10)])],))], RESPONSES
    )
    rows = delivery(records, produced(records, responses, None), None).collect()
    got = sorted(
        ((r["offset"], r["consumer_client_id"], r["first_fetched_at"]) for r in rows), key=repr
    )
    at = {ms: _at(ms).replace(tzinfo=None) for ms in (200, 400, 600)}
    assert got == sorted([(10, "c1", at[200]), (10, "c2", at[400]), (10, None, at[600])], key=repr)
