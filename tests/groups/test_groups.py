"""OUT/groups/ from the decode job on real captures: each group's story as its scenario played it.

Ground truth is scripts/capture/scenarios.py (what each scenario did, in order), restated below
per group; kwire's tables must tell the same story.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kwire.groups.schema import CAUSES, ENDINGS, OUTCOMES, PROGRESS, TABLES
from tests.conftest import GROUP_CAPTURES as CAPTURES

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"

pytestmark = pytest.mark.xdist_group("groups_job")


@pytest.fixture(scope="module")
def out(groups_out: Path) -> Path:
    return groups_out


def _table(out: Path, capture: str, name: str, group: str | None = None) -> list[dict[str, Any]]:
    rows = pq.read_table(out / "groups" / name).to_pylist()
    if group is not None:
        rows = [r for r in rows if r["group_id"] == group]
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def _generations(out: Path, capture: str, group: str) -> list[dict[str, Any]]:
    return sorted(_table(out, capture, "generations", group), key=lambda r: r["generation"])


def _members(out: Path, capture: str, group: str) -> dict[str, list[dict[str, Any]]]:
    by_client: dict[str, list[dict[str, Any]]] = {}
    members = _table(out, capture, "members", group)
    for m in sorted(members, key=lambda r: (r["first_seen"] is None, r["first_seen"] or 0)):
        by_client.setdefault(m["client_id"], []).append(m)
    return by_client


def test_every_table_is_written_with_its_columns_and_vocabularies(out: Path) -> None:
    for name, schema in TABLES.items():
        table = pq.read_table(out / "groups" / name)
        assert table.column_names == schema.fieldNames(), name
    for capture in CAPTURES:
        for g in _table(out, capture, "generations"):
            assert g["cause"] in CAUSES and g["outcome"] in OUTCOMES, g
        for m in _table(out, capture, "members"):
            assert m["ending"] in ENDINGS, m
        for p in _table(out, capture, "progress"):
            assert p["status"] in PROGRESS, p


def test_classic_group_two_members_join_then_leave(out: Path) -> None:
    """group-classic: rdk-a joins, rdk-b joins, both close (LeaveGroup) at the end."""
    capture = "mock_group_classic.pcap"
    gens = _generations(out, capture, "g-classic")
    assert [g["cause"] for g in gens] == ["first_join", "member_joined"]
    assert [g["members"] for g in gens] == [1, 2]
    assert all(g["outcome"] == "completed" and g["assignor"] == "range" for g in gens)
    members = _members(out, capture, "g-classic")
    assert sorted(members) == ["rdk-a", "rdk-b"]
    assert gens[0]["cause_member_id"] == members["rdk-a"][0]["member_id"]
    assert gens[1]["cause_member_id"] == members["rdk-b"][0]["member_id"]
    assert [m[0]["ending"] for m in members.values()] == ["left", "left"]
    # Both members committed what they consumed; every commit names its group and generation.
    commits = _table(out, capture, "commits", "g-classic")
    assert commits and all(c["topic"] == "orders" and c["generation"] >= 2 for c in commits)
    assert {c["error"] for c in commits} <= {None, "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"}


def test_cooperative_sticky_members_join_and_leave_one_by_one(out: Path) -> None:
    """cooperative-sticky: a, b, c join one by one, then c, b, a leave one by one."""
    capture = "mock_cooperative_sticky_sll2.pcap"
    gens = _generations(out, capture, "g-coop")
    members = _members(out, capture, "g-coop")
    ids = {client: rows[0]["member_id"] for client, rows in members.items()}
    joined = [ids_ for g in gens for ids_ in g["members_joined"]]
    assert joined == [ids["rdk-coop-a"], ids["rdk-coop-b"], ids["rdk-coop-c"]]
    left = [ids_ for g in gens for ids_ in g["members_left"]]
    assert left == [ids["rdk-coop-c"], ids["rdk-coop-b"]]  # a's leave empties the group
    assert [g["cause"] for g in gens if g["members_left"]] == ["member_left", "member_left"]
    assert all(rows[0]["ending"] == "left" for rows in members.values())
    assert max(g["members"] for g in gens) == 3
    # Partitions changed hands as members came and went, and the changes say so.
    changes = _table(out, capture, "assignment_changes", "g-coop")
    assert {c["kind"] for c in changes} >= {"moved"}
    assert all(c["topic"] == "clicks" for c in changes)


def test_static_member_restart_is_recognised(out: Path) -> None:
    """static-members: inst-a and inst-b join; rdk-static-b closes and comes back under inst-b;
    the static members then close, which sends no LeaveGroup (static membership)."""
    capture = "mock_static_members.pcapng"
    members = _members(out, capture, "g-static")
    first_b, second_b = members["rdk-static-b"]
    assert first_b["group_instance_id"] == second_b["group_instance_id"] == "inst-b"
    assert first_b["ending"] == "static_restart"
    assert "inst-b" in first_b["ending_evidence"]
    assert second_b["member_id"] in first_b["ending_evidence"]
    assert second_b["ending"] == "active_at_end"
    assert members["rdk-static-a"][0]["ending"] == "active_at_end"
    last = _generations(out, capture, "g-static")[-1]
    assert last["members"] == 2  # the restarted member replaced its old id


def test_kip848_group_epochs_join_and_leave(out: Path) -> None:
    """consumer-protocol: rdk-848-a joins, rdk-848-b joins, both leave (epoch -1)."""
    capture = "mock_consumer_protocol_sll.pcap"
    gens = _generations(out, capture, "g-848")
    assert {g["protocol"] for g in gens} == {"consumer"}
    assert [g["cause"] for g in gens][:2] == ["first_join", "member_joined"]
    members = _members(out, capture, "g-848")
    assert sorted(members) == ["rdk-848-a", "rdk-848-b"]
    assert all(rows[0]["ending"] == "left" for rows in members.values())
    # Assignments come from the heartbeat answers, with topic names from Metadata where the
    # capture has them.
    assignments = _table(out, capture, "assignments", "g-848")
    assert assignments and {a["source"] for a in assignments} == {"consumer_group_heartbeat"}


def test_latency_notes_rebalance_waits_and_clients_name_their_software(out: Path) -> None:
    capture = "mock_group_classic.pcap"
    latency = _table(out, capture, "latency")
    joins = [r for r in latency if r["api_key"] == 11]
    assert joins and all(r["note"] and "rebalance" in r["note"] for r in joins)
    assert all(r["note"] is None for r in latency if r["api_key"] not in (11, 14))
    assert all(r["p50_ms"] <= r["p95_ms"] <= r["max_ms"] for r in latency)
    clients = _table(out, capture, "clients")
    software = {c["client_id"]: c["software_name"] for c in clients if c["software_name"]}
    assert software.get("rdk-a") == "confluent-kafka-python" or "librdkafka" in str(
        software.get("rdk-a")
    )
    groups = {g for c in clients for g in c["group_ids"]}
    assert {"g-classic", "g-kpy"} <= groups


def test_a_topic_listed_twice_in_an_assignment_has_the_union_of_its_partitions() -> None:
    """Kafka's ConsumerProtocol reads an assignment into one list of partitions, so a topic in
    two entries is both entries' partitions (a Spark map refused the second key and failed the
    job on a 5 GB capture)."""
    from kwire.groups.protocol import _topic_map

    entries = [
        {"topic": "t", "partitions": [1, 0]},
        {"topic": "u", "partitions": [2]},
        {"topic": "t", "partitions": [3, 1]},
        {"topic": None, "partitions": [9]},
    ]
    assert _topic_map(entries, "topic", "partitions") == {"t": [0, 1, 3], "u": [2]}
    assert _topic_map(None, "topic", "partitions") == {}


def test_commits_name_topics_given_by_id(spark) -> None:  # type: ignore[no-untyped-def]
    """OffsetCommit v10 names topics by id (KIP-848's consumers, Kafka 4.1+): its rows in
    OUT/groups/commits take the name the capture's Metadata gives the id, else the id itself,
    as the assignments do; v9 keeps its name. Frames made by the generated encoders, decoded by
    the UDFs, as the job does."""
    import uuid
    from datetime import datetime

    from pyspark.sql import functions as F

    from generated import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        RequestHeader,
        ResponseHeader,
        encode_request,
        encode_response,
        kafka_uuid,
    )
    from generated.offset_commit_request import OffsetCommitRequestPartition as ReqPart
    from generated.offset_commit_request import OffsetCommitRequestTopic as ReqTopic
    from generated.offset_commit_response import OffsetCommitResponsePartition as RespPart
    from generated.offset_commit_response import OffsetCommitResponseTopic as RespTopic
    from kwire.groups import protocol
    from kwire.spark.api import decode_requests, decode_responses

    named, unnamed = uuid.UUID(int=0x1234), uuid.UUID(int=0x5678)
    sent = [  # (version, correlation id, name, topic id, committed offset)
        (9, 1, "orders", None, 5),
        (10, 2, "", named, 7),
        (10, 3, "", unnamed, 9),
    ]
    conn = ("10.0.0.5:40000->10.0.0.9:9092", "10.0.0.5", 40000, "10.0.0.9", 9092)
    requests, responses = [], []
    for version, corr, name, topic_id, offset in sent:
        ids = {"topic_id": topic_id} if topic_id else {}
        ask = OffsetCommitRequest(
            group_id="g",
            topics=[
                ReqTopic(
                    name=name,
                    partitions=[ReqPart(partition_index=0, committed_offset=offset)],
                    **ids,
                )
            ],
        )
        answer = OffsetCommitResponse(
            topics=[RespTopic(name=name, partitions=[RespPart(partition_index=0)], **ids)]
        )
        at = datetime(2026, 11, 28, 8, 0, corr)
        frame = encode_request(RequestHeader(8, version, corr, "c1"), ask)[4:]
        back = encode_response(ResponseHeader(corr), answer, version)[4:]
        requests.append((*conn, at, frame))
        responses.append((*conn, at.replace(microsecond=1000), 8, version, back))
    where = (
        "connection_id string, client_addr string, client_port int, broker_addr string, "
        "broker_port int, ts_first timestamp"
    )
    rq = decode_requests(spark.createDataFrame(requests, f"{where}, frame binary"))
    rs = decode_responses(
        spark.createDataFrame(responses, f"{where}, api_key short, api_version short, frame binary")
    ).withColumn("latency_us", F.lit(1000))
    rows = protocol.commits(
        protocol.pair(*protocol.collect(rq, rs)), {kafka_uuid(named): "payments"}
    )
    got = sorted((r["offset"], r["topic"], r["error"]) for r in rows)
    assert got == [(5, "orders", None), (7, "payments", None), (9, kafka_uuid(unnamed), None)]
