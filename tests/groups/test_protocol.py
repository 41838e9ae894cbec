"""The group protocol's pass on the driver (kwire.groups.protocol) on hand-made rows: how requests
find their answers, and the tables made from the pairs without Spark. (Its rows against the
Spark pass it replaced, on every test capture: benchmarks/results/history.md, 2026-12-05 seventh
session; the end-to-end truth: tests/groups/test_group_truth.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa

from kwire.groups import protocol
from kwire.groups.clock import Clock, clock, endpoint

T0 = datetime(2026, 12, 5, 8, 0, 0)
TS = pa.timestamp("us", tz="UTC")
HB = pa.struct([("group_id", pa.string()), ("generation_id", pa.int32())])
HB_RESP = pa.struct([("error_code", pa.int16())])


def _at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def _requests(rows: list[tuple[str, int, int, int]]) -> pa.Table:
    """(connection, correlation id, time in ms, generation) heartbeats."""
    return pa.table(
        {
            "connection_id": [r[0] for r in rows],
            "client_addr": ["10.0.0.1"] * len(rows),
            "client_port": pa.array([40000] * len(rows), pa.int32()),
            "broker_addr": ["10.0.0.9"] * len(rows),
            "broker_port": pa.array([9092] * len(rows), pa.int32()),
            "client_id": ["c1"] * len(rows),
            "correlation_id": pa.array([r[1] for r in rows], pa.int32()),
            "api_version": pa.array([4] * len(rows), pa.int16()),
            "ts_first": pa.array([_at(r[2]) for r in rows], TS),
            "heartbeat": pa.array([{"group_id": "g", "generation_id": r[3]} for r in rows], HB),
        }
    )


def _responses(rows: list[tuple[str, int, int, int]]) -> pa.Table:
    """(connection, correlation id, time in ms, error code) heartbeat answers."""
    return pa.table(
        {
            "connection_id": [r[0] for r in rows],
            "correlation_id": pa.array([r[1] for r in rows], pa.int32()),
            "ts_first": pa.array([_at(r[2]) for r in rows], TS),
            "latency_us": pa.array([1000] * len(rows), pa.int64()),
            "status": ["ok"] * len(rows),
            "raw_error": pa.array([None] * len(rows), pa.int32()),
            "heartbeat": pa.array([{"error_code": r[3]} for r in rows], HB_RESP),
        }
    )


def test_a_request_takes_the_first_answer_at_or_after_it_on_its_connection() -> None:
    rq = _requests(
        [
            ("a", 1, 100, 1),  # answered at 150 (the earlier answer at 50 is another request's)
            ("a", 1, 100, 1),  # the same frame twice: one pair, as the Spark join's window kept
            ("a", 2, 200, 1),  # unanswered
            ("b", 1, 300, 2),  # the same correlation id on another connection: its own answer
        ]
    )
    rs = _responses([("a", 1, 50, 99), ("a", 1, 170, 22), ("a", 1, 150, 0), ("b", 1, 310, 27)])
    pairs = protocol.pair(rq, rs, ["heartbeat"])
    got = [
        (r["connection_id"], r["correlation_id"], r["resp_ts"], r["resp_heartbeat"])
        for r in pairs.to_pylist()
    ]
    utc = [_at(150), _at(310)]
    assert [(c, n, None if t is None else t.replace(tzinfo=None), a) for c, n, t, a in got] == [
        ("a", 1, utc[0], {"error_code": 0}),
        ("a", 2, None, None),
        ("b", 1, utc[1], {"error_code": 27}),
    ]
    # The events: a heartbeat's error is its answer's, a request's time and answer's are kept.
    ev = protocol.events(pairs, {"b": "librdkafka 2.16.0"})
    assert [(e["kind"], e["generation"], e["error"], e["software"]) for e in ev] == [
        ("heartbeat", 1, 0, None),
        ("heartbeat", 1, None, None),
        ("heartbeat", 2, 27, "librdkafka 2.16.0"),
    ]
    assert set(ev[0]) == set(protocol.EVENTS)


def _find_coordinator(rows: list[tuple[int, int, int]]) -> pa.Table:
    """FindCoordinator v4 pairs: (answer time in ms, node id, error code) for group g."""
    coordinator = pa.struct(
        [
            ("key", pa.string()),
            ("node_id", pa.int32()),
            ("host", pa.string()),
            ("port", pa.int32()),
            ("error_code", pa.int16()),
        ]
    )
    return pa.table(
        {
            "ts": pa.array([_at(r[0] - 1) for r in rows], TS),
            "resp_ts": pa.array([_at(r[0]) for r in rows], TS),
            "req_find_coordinator": pa.array(
                [{"key": None, "key_type": 0} for _ in rows],
                pa.struct([("key", pa.string()), ("key_type", pa.int8())]),
            ),
            "resp_find_coordinator": pa.array(
                [
                    {"coordinators": [{"key": "g", "node_id": n, "host": f"b{n}", "port": 9092,
                                       "error_code": e}]}
                    for _, n, e in rows
                ],
                pa.struct([("coordinators", pa.list_(coordinator))]),
            ),
        }
    )  # fmt: skip


def test_coordinators_are_periods_of_one_node_with_the_errors_between() -> None:
    pairs = _find_coordinator(
        [(0, 1, 0), (1000, 1, 0), (2000, -1, 14), (2500, -1, 14), (3000, 2, 0), (4000, -1, 16)]
    )
    keys = ("node_id", "from_ts", "to_ts", "not_coordinator_errors", "load_in_progress_ms")
    got = [tuple(r[k] for k in keys) for r in protocol.coordinators(pairs)]
    assert got == [(1, _at(0), _at(3000), 1, 500.0), (2, _at(3000), None, 1, 500.0)]


def test_each_group_ends_when_its_own_cluster_was_last_seen() -> None:
    """Two clusters decoded together: a group of the one whose capture ended first is measured
    at that end, not at the other's."""
    assert endpoint("10.0.0.1:40000->10.0.0.9:9092") == "10.0.0.9:9092"
    assert endpoint("[::1]:40000->[::1]:9093#2") == "::1:9093"
    conns = [
        {"connection_id": "c:1->b1:9092", "last_seen": _at(1000)},
        {"connection_id": "c:2->b2:9092", "last_seen": _at(9000)},
        {"connection_id": "c:3->unknown:9092", "last_seen": _at(99000)},
    ]
    endpoints = {"b1:9092": "cluster-1", "b2:9092": "cluster-2"}
    ev = [
        {"group_id": "g1", "connection_id": "c:1->b1:9092"},
        {"group_id": "g2", "connection_id": "c:2->b2:9092"},
    ]
    told = clock(conns, endpoints, ev)
    assert told == Clock(_at(99000), {"g1": _at(1000), "g2": _at(9000)})
    assert told.of("elsewhere") == _at(99000)


def test_clients_name_their_software_members_and_groups() -> None:
    conns = [
        {"connection_id": "a", "client_addr": "h", "client_port": 1, "client_id": "x",
         "first_seen": _at(0), "last_seen": _at(5)},
        {"connection_id": "b", "client_addr": "h", "client_port": 2, "client_id": "y",
         "first_seen": _at(0), "last_seen": _at(5)},
    ]  # fmt: skip
    ev = [
        {"connection_id": "a", "member_id": "m2", "group_id": "g"},
        {"connection_id": "a", "member_id": "m1", "group_id": "g"},
        {"connection_id": "a", "member_id": None, "group_id": "h"},
    ]
    rows = protocol.clients(conns, {"a": "confluent-kafka-python 2.6.1-rdkafka-2.6.1"}, ev)
    assert [
        (r["software_name"], r["software_version"], r["member_ids"], r["group_ids"]) for r in rows
    ] == [
        ("confluent-kafka-python", "2.6.1-rdkafka-2.6.1", ["m1", "m2"], ["g", "h"]),
        (None, None, [], []),
    ]
