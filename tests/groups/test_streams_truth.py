"""Streams groups (KIP-1071) against the truth of a real Kafka Streams application.

tests/data/capture/kafka_streams_group.pcap was made by scripts/capture/streams_capture.py: a
Kafka 4.4 broker and three instances of one Kafka Streams application (group.protocol=streams,
two subtopologies over four partitions, one standby replica), started one by one; then one closed
(it leaves the group) and one was killed with SIGKILL (the broker drops it after its session
timeout). The truth is what the instances and the admin client said: each instance's member id
(describeStreamsGroups), its own active and standby tasks after every move (ThreadMetadata),
and the member epochs the group settled at. kwire's group tables must tell the same from the
StreamsGroupHeartbeat traffic alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "capture"
CAPTURE = "kafka_streams_group.pcap"

pytestmark = [
    pytest.mark.xdist_group("groups_job"),
    pytest.mark.skipif(not (DATA / CAPTURE).exists(), reason=f"{CAPTURE} is not committed"),
]


def _truth() -> dict[str, Any]:
    truth: dict[str, Any] = json.loads((DATA / "kafka_streams_group.json").read_text())[
        "streams_truth"
    ]
    return truth


def _rows(out: Path, table: str, group: str) -> list[dict[str, Any]]:
    rows = pq.read_table(out / "groups" / table).to_pylist()
    return [r for r in rows if r["group_id"] == group]


@pytest.fixture(scope="module")
def out(share_out: dict[str, Path]) -> Path:
    return share_out[CAPTURE]


def test_members_and_how_they_ended(out: Path) -> None:
    truth = _truth()
    app = truth["application_id"]
    members = {m["member_id"]: m for m in _rows(out, "members", app)}
    ending = {}
    for name, info in truth["instances"].items():
        (member_id,) = info["member_ids"]
        m = members[member_id]
        assert m["group_type"] == "streams"
        assert m["client_id"] == info["consumer_client_id"]
        ending[name] = m["ending"]
    # The truth's events: s2 and s1 closed (leaving the group), s3 was killed.
    done = {
        e["instance"]: e["event"] for e in truth["events"] if e["event"] in ("closed", "killed")
    }
    want = {name: {"closed": "left", "killed": "evicted"}[what] for name, what in done.items()}
    assert ending == want
    gens = _rows(out, "generations", app)
    assert gens and {g["protocol"] for g in gens} == {"streams"}


def _tasks(rows: list[dict[str, Any]]) -> dict[str, set[str]]:
    """assignments rows of one member and epoch -> {"active": {"0_1", ...}, "standby": ...}."""
    held: dict[str, set[str]] = {"active": set(), "standby": set(), "warmup": set()}
    for r in rows:
        kind, subtopology = r["topic"].split(":", 1)
        held[kind] |= {f"{subtopology}_{p}" for p in r["partitions"]}
    return held


def test_the_tasks_at_the_end_and_the_epochs_of_every_move(out: Path) -> None:
    """The last tasks each remaining instance was given are the ones it held at the end, and
    every member epoch the group settled at after a move is a generation with that member.
    (Within one epoch a member may be given several assignments, a revocation on the way to the
    next epoch; the table keeps an epoch's last, so a move's tasks are checked at the end only.)"""
    truth = _truth()
    app = truth["application_id"]
    rows = [r for r in _rows(out, "assignments", app) if r["source"] == "streams_group_heartbeat"]
    last_move = truth["moves"][-1]
    for name, want in truth["expected"]["final_tasks"].items():
        member_id = last_move["members"][name]["member_id"]
        mine = [r for r in rows if r["member_id"] == member_id]
        latest = max(r["generation"] for r in mine)
        held = _tasks([r for r in mine if r["generation"] == latest])
        assert (held["active"], held["standby"]) == (set(want["active"]), set(want["standby"]))
    gens = {g["generation"] for g in _rows(out, "generations", app)}
    members = {m["member_id"]: m for m in _rows(out, "members", app)}
    for move in truth["moves"]:
        for name, member in move["members"].items():
            assert member["member_epoch"] in gens, (move["step"], name)
            m = members[member["member_id"]]
            assert m["first_generation"] <= member["member_epoch"] <= m["last_generation"]


def test_the_story_tells_the_streams_group(out: Path) -> None:
    from kwire.groups.story import tell

    truth = _truth()
    text = tell(out, truth["application_id"])
    assert text.startswith(f"group {truth['application_id']} (streams group")
    s3 = truth["instances"]["s3"]["consumer_client_id"]
    assert f"{s3} (127.0.0.1) evicted" in text, text
    # What the admin's describe calls were answered, the last with the group empty.
    describes = truth["describe_requests"]
    assert f"described {describes} times (by {truth['control_clients']['admin']})" in text, text
    final = truth["final_describe"]
    assert (
        f"{final['state']}, group epoch {final['group_epoch']}, assignment epoch "
        f"{final['target_assignment_epoch']}, topology epoch {final['topology_epoch']}: "
        "no members"
    ) in text, text


def test_topology_status_codes_are_named(out: Path) -> None:
    """The coordinator's status codes reach the members' errors_seen by name: the application's
    internal topics were missing until the broker made them (its first heartbeats said so)."""
    truth = _truth()
    seen = {
        e for m in _rows(out, "members", truth["application_id"]) for e in m["errors_seen"] or []
    }
    assert "status MISSING_INTERNAL_TOPICS" in seen, seen
    assert not [e for e in seen if e.startswith("status STATUS_")], seen


def _answer(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The rows of one describe answer (groups/described) in the admin client's shape."""
    first = rows[0]
    members = sorted(
        (
            {
                "member_id": r["member_id"],
                "member_epoch": r["member_epoch"],
                "client_id": r["member_client_id"],
                "client_host": r["client_host"],
                "process_id": r["process_id"],
                "assignment": {
                    "active": sorted(r["assigned"]),
                    "standby": sorted(r["standby"]),
                    "warmup": sorted(r["warmup"]),
                },
                "target_active": sorted(r["target"]),
            }
            for r in rows
            if r["member_id"] is not None
        ),
        key=lambda m: m["member_id"],
    )
    return {
        "group_id": first["group_id"],
        "state": first["state"],
        "group_epoch": first["group_epoch"],
        "target_assignment_epoch": first["assignment_epoch"],
        "topology_epoch": first["topology_epoch"],
        "assignor": first["assignor"],
        "members": members,
    }


def _admin(describe: dict[str, Any]) -> dict[str, Any]:
    """What the admin client's describeStreamsGroups returned, in the same shape."""
    members = sorted(
        (
            {
                "member_id": m["member_id"],
                "member_epoch": m["member_epoch"],
                "client_id": m["client_id"],
                "client_host": m["client_host"],
                "process_id": m["process_id"],
                "assignment": {k: sorted(v) for k, v in m["assignment"].items()},
                "target_active": sorted(m["target_assignment"]["active"]),
            }
            for m in describe["members"]
        ),
        key=lambda m: m["member_id"],
    )
    keys = ("group_id", "state", "group_epoch", "target_assignment_epoch", "topology_epoch")
    return {**{k: describe[k] for k in keys}, "assignor": describe["assignor"], "members": members}


def test_every_describe_answer_the_admin_got_is_in_groups_described(out: Path) -> None:
    """The admin client described the group after every move and at the end; each answer it
    got (state, epochs, assignor, every member with its epoch, client, process and tasks) is
    one answer in groups/described, read from the StreamsGroupDescribe responses."""
    truth = _truth()
    rows = [r for r in _rows(out, "described", truth["application_id"])]
    assert rows and {r["group_type"] for r in rows} == {"streams"}
    by_answer: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_answer.setdefault(r["described_at"], []).append(r)
    # One answer per StreamsGroupDescribe request the capture holds.
    assert len(by_answer) == truth["describe_requests"]
    answers = [_answer(a) for _, a in sorted(by_answer.items())]
    for describe in [*truth["describes"], truth["final_describe"]]:
        assert _admin(describe) in answers, describe["group_epoch"]
    assert answers[-1] == _admin(truth["final_describe"])
    assert {r["asked_by"] for r in rows} == {truth["control_clients"]["admin"]}
