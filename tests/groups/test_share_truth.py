"""OUT/share/ against ground truth that never came from kwire (issue 53).

Each share capture (tests/data/capture/*.json with "share_truth") was made by a script that wrote
down what its clients saw through their own APIs: every record each share consumer received with
its delivery count, every acknowledgement it made (ACCEPT, RELEASE, REJECT, RENEW; implicit mode's
acceptances at the next poll), what the acknowledgement callbacks and commits answered, joins,
closes, stalls and kills, and what each record's fate must therefore be. kwire's tables must
agree: every delivery a client saw has its row with that client and delivery count, every
acknowledgement its row with its type and error, and every record's final state is the truth's.

What the wire cannot carry (lock expiry instants, the delivery limit) kwire infers; the truth
says what happened, so the inferences are held to it too.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import share_captures

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "capture"
CAPTURES = share_captures()

pytestmark = [
    pytest.mark.xdist_group("groups_job"),
    pytest.mark.skipif(not CAPTURES, reason="no share capture with ground truth is committed"),
]

ACK = {"ACCEPT": "accept", "RELEASE": "release", "REJECT": "reject", "RENEW": "renew", "GAP": "gap"}


def _truth(capture: str) -> dict[str, Any]:
    meta = json.loads((DATA / (capture.rsplit(".", 1)[0] + ".json")).read_text())
    truth: dict[str, Any] = meta["share_truth"]
    return truth


def _table(out: Path, name: str, truth: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A share table's rows, only those of the truth's groups when given (the share captures
    are decoded by one job)."""
    rows = pq.read_table(out / "share" / name).to_pylist()
    if truth is None:
        return rows
    groups = set(_client_group(truth).values())
    return [r for r in rows if r["group_id"] in groups]


def _names_error(text: str, name: str) -> bool:
    """Whether a client's error text names Kafka's error: librdkafka quotes the name
    (INVALID_RECORD_STATE), Java the exception (InvalidRecordStateException)."""
    camel = "".join(part.capitalize() for part in name.split("_")) + "Exception"
    return name in text or camel in text


def _client_group(truth: dict[str, Any]) -> dict[str, str]:
    return {c: info["group"] for c, info in truth["clients"].items() if info.get("kind") == "share"}


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_delivery_a_client_saw_has_its_row(share_out: dict[str, Path], capture: str) -> None:
    truth = _truth(capture)
    groups = _client_group(truth)
    rows = _table(share_out[capture], "deliveries", truth)
    have = defaultdict(list)
    for r in rows:
        if r["acquired_at"] is not None:
            key = (r["consumer_client_id"], r["topic"], r["partition"], r["offset"])
            have[key].append(r)
    seen = [e for e in truth["events"] if e["event"] == "received" and e["client_id"] in groups]
    assert seen, "the truth has no records received by share consumers"
    missing = []
    for e in seen:
        key = (e["client_id"], e["topic"], e["partition"], e["offset"])
        match = [r for r in have.get(key, []) if r["delivery_count"] == e["delivery_count"]]
        if not match or match[0]["group_id"] != groups[e["client_id"]]:
            missing.append((key, e["delivery_count"], [r["delivery_count"] for r in have[key]]))
    assert not missing, f"{len(missing)} of {len(seen)} deliveries have no matching row: {missing}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_no_delivery_row_the_clients_did_not_see(share_out: dict[str, Path], capture: str) -> None:
    """An acquired offset is a delivery; the clients received each one (a consumer killed
    before its poll returned is the truth's only exception, listed as such)."""
    truth = _truth(capture)
    seen = {
        (e["client_id"], e["topic"], e["partition"], e["offset"], e["delivery_count"])
        for e in truth["events"]
        if e["event"] == "received"
    }
    unseen_ok = {(c, t, p, o, n) for c, t, p, o, n in map(tuple, truth.get("acquired_unseen", []))}
    clients = set(_client_group(truth))
    extra = [
        (r["consumer_client_id"], r["topic"], r["partition"], r["offset"], r["delivery_count"])
        for r in _table(share_out[capture], "deliveries", truth)
        if r["acquired_at"] is not None and r["consumer_client_id"] in clients
    ]
    extra = [k for k in extra if k not in seen and k not in unseen_ok]
    assert not extra, f"rows for deliveries no client received: {extra}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_acknowledgement_is_matched_with_its_outcome(
    share_out: dict[str, Path], capture: str
) -> None:
    truth = _truth(capture)
    rows = _table(share_out[capture], "deliveries", truth)
    by_key = defaultdict(list)
    for r in rows:
        by_key[(r["consumer_client_id"], r["topic"], r["partition"], r["offset"])].append(r)
    acks = [e for e in truth["events"] if e["event"] == "ack"]
    assert acks, "the truth has no acknowledgements"
    wrong = []
    for e in acks:
        key = (e["client_id"], e["topic"], e["partition"], e["offset"])
        kind = ACK[e["type"]]
        # The attempt acknowledged is the client's latest delivery of the offset before the ack.
        ok = [
            r
            for r in by_key.get(key, [])
            if (r["ack_type"] == kind or (kind == "renew" and r["renewals"]))
        ]
        if not ok:
            wrong.append((key, e["type"], [(r["ack_type"], r["outcome"]) for r in by_key[key]]))
    assert not wrong, f"{len(wrong)} of {len(acks)} acknowledgements not matched: {wrong}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_acknowledgement_errors_are_the_callbacks(share_out: dict[str, Path], capture: str) -> None:
    truth = _truth(capture)
    rows = _table(share_out[capture], "deliveries", truth)
    results = [e for e in truth["events"] if e["event"] == "ack_result"]
    acks = [e for e in truth["events"] if e["event"] == "ack"]
    wrong = []
    for e in results:
        for offset in e["offsets"]:
            said = [
                a
                for a in acks
                if (a["client_id"], a["topic"], a["partition"], a["offset"])
                == (e["client_id"], e["topic"], e["partition"], offset)
                and a["t"] <= e["t"]
            ]
            if said and said[-1]["type"] == "RENEW":
                # A renewal ends nothing: the attempt's row counts it.
                renewed = [
                    r
                    for r in rows
                    if (r["consumer_client_id"], r["topic"], r["partition"], r["offset"])
                    == (e["client_id"], e["topic"], e["partition"], offset)
                    and r["renewals"]
                ]
                if not renewed:
                    wrong.append((e["client_id"], offset, "RENEW not counted"))
                continue
            mine = [
                r
                for r in rows
                if r["consumer_client_id"] == e["client_id"]
                and r["topic"] == e["topic"]
                and r["partition"] == e["partition"]
                and r["offset"] == offset
                and r["ack_type"] is not None
                and r["ack_sent_at"] is not None
                and r["ack_sent_at"].timestamp() * 1000 <= e["t"] + 5
            ]
            if not mine:
                wrong.append((e["client_id"], offset, "no acknowledged row before the result"))
                continue
            last = max(mine, key=lambda r: r["ack_sent_at"])
            if (e["error"] is None) != (last["ack_error"] is None):
                wrong.append((e["client_id"], offset, e["error"], last["ack_error"]))
            elif e["error"] is not None and not _names_error(e["error"], last["ack_error_name"]):
                wrong.append((e["client_id"], offset, e["error"], last["ack_error_name"]))
    assert not wrong, f"acknowledgement results differ: {wrong}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_record_ends_as_it_did(share_out: dict[str, Path], capture: str) -> None:
    truth = _truth(capture)
    expected = truth["expected"]["records"]
    got = {
        (r["group_id"], r["topic"], r["partition"], r["offset"]): r
        for r in _table(share_out[capture], "records", truth)
    }
    wrong = []
    for x in expected:
        key = (x["group"], x["topic"], x["partition"], x["offset"])
        r = got.get(key)
        if r is None:
            wrong.append((key, x["final_state"], "no row"))
        elif (r["final_state"], r["archived_reason"]) != (x["final_state"], x["archived_reason"]):
            wrong.append(
                (
                    key,
                    (x["final_state"], x["archived_reason"]),
                    (r["final_state"], r["archived_reason"]),
                    x.get("why"),
                )
            )
    assert not wrong, f"{len(wrong)} of {len(expected)} records end otherwise: {wrong}"


@pytest.mark.parametrize("capture", CAPTURES)
def test_sessions_open_and_close_as_the_clients_did(
    share_out: dict[str, Path], capture: str
) -> None:
    truth = _truth(capture)
    sessions = _table(share_out[capture], "sessions", truth)
    share = set(_client_group(truth))
    closed = {e["client_id"] for e in truth["events"] if e["event"] == "closed"} & share
    killed = {e["client_id"] for e in truth["events"] if e["event"] == "killed"} & share
    for client in closed:
        mine = [s for s in sessions if s["client_id"] == client]
        assert mine, f"{client} closed but has no share session"
        assert mine[-1]["ending"] == "closed", (client, [s["ending"] for s in mine])
    for client in killed:
        mine = [s for s in sessions if s["client_id"] == client]
        assert mine and mine[-1]["ending"] != "closed", (client, [s["ending"] for s in mine])


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_story_tells_the_share_group(share_out: dict[str, Path], capture: str) -> None:
    from kwire.groups.story import tell

    truth = _truth(capture)
    text = tell(share_out[capture])
    for group in {
        info["group"] for info in truth["clients"].values() if info.get("kind") == "share"
    }:
        assert f"group {group} (share group" in text, text
    archived = [x for x in truth["expected"]["records"] if x["archived_reason"] == "delivery_limit"]
    if archived:
        assert "archived at the delivery limit" in text, text
    if any(e["event"] == "stall_begin" for e in truth["events"]):
        assert " lock; they went to " in text, text


@pytest.mark.parametrize("capture", CAPTURES)
def test_delivery_counts_what_share_members_acquired(
    share_out: dict[str, Path], capture: str
) -> None:
    """OUT/delivery: a share group consumed a record when a member acquired it (first_fetched_at)
    and settled it when it was accepted (committed_at); records its ShareFetch answers carried
    but did not acquire are not consumed."""
    truth = _truth(capture)
    produced = {
        (e["topic"], e["partition"], e["offset"])
        for e in truth["events"]
        if e["event"] == "produced"
    }
    rows = pq.read_table(share_out[capture] / "delivery").to_pylist()
    accepted = {
        (x["group"], x["topic"], x["partition"], x["offset"])
        for x in truth["expected"]["records"]
        if x["final_state"] == "acknowledged"
        and (x["topic"], x["partition"], x["offset"]) in produced
    }
    assert accepted, "no accepted record whose production the capture saw"
    got = {
        (r["group_id"], r["topic"], r["partition"], r["offset"]): r
        for r in rows
        if r["group_id"] is not None
    }
    missing = [k for k in accepted if k not in got or got[k]["committed_at"] is None]
    assert not missing, missing
    groups = _client_group(truth)
    received = {
        (groups[e["client_id"]], e["topic"], e["partition"], e["offset"])
        for e in truth["events"]
        if e["event"] == "received" and e["client_id"] in groups
    }
    shared = {k for k in got if k[0] in set(groups.values())}
    assert shared <= received, sorted(shared - received)


@pytest.mark.parametrize("capture", CAPTURES)
def test_assignments_give_each_member_the_partitions_it_read(
    share_out: dict[str, Path], capture: str
) -> None:
    """From ShareGroupHeartbeat answers (topic ids named through Metadata): a member that
    received records of a partition was assigned it, several members sharing one partition
    where Kafka's assignor gave it to several (kafka_share_implicit: three on one)."""
    truth = _truth(capture)
    groups = _client_group(truth)
    members = {
        r["member_id"]: r["client_id"]
        for r in pq.read_table(share_out[capture] / "groups" / "members").to_pylist()
    }
    held = defaultdict(set)
    for r in pq.read_table(share_out[capture] / "groups" / "assignments").to_pylist():
        if r["source"] == "share_group_heartbeat":
            for p in r["partitions"]:
                held[(r["group_id"], r["topic"], p)].add(members.get(r["member_id"]))
    read = defaultdict(set)
    for e in truth["events"]:
        if e["event"] == "received" and e["client_id"] in groups:
            read[(groups[e["client_id"]], e["topic"], e["partition"])].add(e["client_id"])
    assert read
    for key, clients in read.items():
        assert clients <= held[key], (key, clients, held[key])
    changes = pq.read_table(share_out[capture] / "groups" / "assignment_changes").to_pylist()
    assert not [c for c in changes if c["kind"] == "moved" and c["group_id"] in groups.values()]


def test_the_report_draws_each_share_groups_redeliveries(
    share_out: dict[str, Path], tmp_path: Path
) -> None:
    """kwire report over the share captures, opened in Debian's headless chromium: every share
    group has its redeliveries chart drawn with its traces, and its share tables; the overview
    counts each group's redeliveries as the truth's received events do."""
    from kwire.groups import report, story
    from tests.browser import read_page

    out = share_out[CAPTURES[0]]
    page_file = tmp_path / "report.html"
    report.write_report(out, page_file)
    text = page_file.read_text()
    groups = story.load(out)
    share = [gid for gid, g in groups.items() if g.protocol == "share"]
    assert share and all(f'data-group="{gid}"' in text for gid in share)
    assert text.count('id="redeliveries-') == len(share)
    assert text.count('class="share-progress"') == len(share)
    # Redeliveries per group in the overview, against what the clients received.
    want: dict[str, int] = defaultdict(int)
    for capture in CAPTURES:
        truth = _truth(capture)
        groups_of = _client_group(truth)
        for e in truth["events"]:
            if e["event"] == "received" and e["client_id"] in groups_of:
                want[groups_of[e["client_id"]]] += e["delivery_count"] > 1
    from kwire.groups.overview import group_rows

    rows = {r["group"]: r for r in group_rows(groups)}
    assert {g: rows[g]["redeliveries"] for g in want} == dict(want)
    ready = f"document.querySelectorAll('[id^=redeliveries-] .main-svg').length >= {len(share)}"
    traces, errors = read_page(
        page_file,
        ready,
        lambda page: page.eval_on_selector_all(
            "[id^=redeliveries-]", "els => els.map(e => e.querySelectorAll('.trace').length)"
        ),
    )
    assert errors == []
    assert len(traces) == len(share) and all(n >= 2 for n in traces), traces


DESCRIBED = [
    c
    for c in CAPTURES
    if any(
        e["event"] == "admin" and e.get("call") == "listShareGroupOffsets"
        for e in _truth(c)["events"]
    )
]


@pytest.mark.parametrize("capture", DESCRIBED)
def test_described_start_offsets_are_the_admin_clients(
    share_out: dict[str, Path], capture: str
) -> None:
    """share/progress keeps the last DescribeShareGroupOffsets answer per partition: the start
    offset and lag the admin client's listShareGroupOffsets returned (after an alter, the
    altered ones; an answer for a deleted group's offsets names no partition)."""
    truth = _truth(capture)
    answers = [
        e["answer"]
        for e in truth["events"]
        if e["event"] == "admin" and e.get("call") == "listShareGroupOffsets" and e["answer"]
    ]
    assert answers
    want = {
        (topic, int(p)): (v["start_offset"], v["lag"])
        for topic, parts in answers[-1].items()
        for p, v in parts.items()
    }
    got = {
        (r["topic"], r["partition"]): (r["described_start_offset"], r["described_lag"])
        for r in _table(share_out[capture], "progress", truth)
        if r["described_start_offset"] is not None
    }
    assert got == want
