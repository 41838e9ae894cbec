"""kwire.groups.share's rules on hand-made share frames: what each attempt's outcome is, which are
inferred, and each record's final state. The real captures (tests/groups/test_share_truth.py)
hold the same rules against what real clients saw; these pin each rule alone."""

from __future__ import annotations

from datetime import datetime, timedelta

from kwire.groups.share import share_history

T0 = datetime(2026, 12, 1, 12, 0, 0)
TOPIC = "AAAAAAAAAAAAAAAAAAAAAQ"


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def fetch(ms, member, epoch, acks=(), acquired=(), ack_error=0, error=0, lock=1000, broker="b:1"):
    """A ShareFetch at `ms` answered 5 ms later: acks [(first, last, [types])], acquired
    [(first, last, count)] on partition 0."""
    return {
        "group_id": "g",
        "kind": "fetch",
        "ts": at(ms),
        "resp_ts": at(ms + 5),
        "answered": True,
        "connection_id": f"{member}->{broker}",
        "client_id": f"client-{member}",
        "broker": broker,
        "member_id": member,
        "epoch": epoch,
        "error": error,
        "lock_ms": lock,
        "detail": {
            "acks": [[TOPIC, 0, f, l, k] for f, l, k in acks],
            "parts": [[TOPIC, 0, 0, ack_error, [list(r) for r in acquired]]],
        },
    }


def ack(ms, member, epoch, acks, error=0, part_error=0, broker="b:1"):
    return {
        "group_id": "g",
        "kind": "ack",
        "ts": at(ms),
        "resp_ts": at(ms + 5),
        "answered": True,
        "connection_id": f"{member}->{broker}",
        "client_id": f"client-{member}",
        "broker": broker,
        "member_id": member,
        "epoch": epoch,
        "error": error,
        "lock_ms": None,
        "detail": {
            "acks": [[TOPIC, 0, f, l, k] for f, l, k in acks],
            "parts": [[TOPIC, 0, part_error]],
        },
    }


def told(events, end_ms=60_000):
    return share_history("g", events, at(end_ms), {TOPIC: "q"})


def attempts(out, offset):
    return [
        (d["member_id"], d["delivery_count"], d["outcome"], d["inferred"])
        for d in out["deliveries"]
        if d["offset"] == offset
    ]


def record(out, offset):
    return next(r for r in out["records"] if r["offset"] == offset)


def test_accept_piggybacked_and_in_share_acknowledge():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 2, 1)]),
            fetch(100, "a", 1, acks=[(0, 1, [1])], acquired=[]),
            ack(200, "a", 2, acks=[(2, 2, [1])]),
        ]
    )
    rows = {d["offset"]: d for d in out["deliveries"]}
    assert [rows[o]["outcome"] for o in (0, 1, 2)] == ["accepted"] * 3
    assert [rows[o]["ack_via"] for o in (0, 1, 2)] == ["share_fetch"] * 2 + ["share_acknowledge"]
    assert rows[0]["topic"] == "q" and rows[0]["lock_expires_by"] == at(1005)
    assert all(record(out, o)["final_state"] == "acknowledged" for o in (0, 1, 2))
    assert out["progress"][0]["start_offset"] == 3 and out["progress"][0]["status"] == "OK"


def test_per_offset_types_release_reject_gap():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 3, 1)]),
            ack(100, "a", 1, acks=[(0, 3, [1, 2, 3, 0])]),
        ]
    )
    assert [attempts(out, o)[0][2] for o in range(4)] == ["accepted", "released", "rejected", "gap"]
    assert record(out, 2)["final_state"] == "archived"
    assert record(out, 2)["archived_reason"] == "rejected"
    assert record(out, 1)["final_state"] == "available"


def test_released_to_the_limit_is_archived_when_later_records_go_out():
    events = [fetch(0, "a", 0, acquired=[(0, 0, 1)])]
    for n in range(1, 3):  # released, delivered again with counts 2 and 3
        events.append(fetch(100 * n, "a", n, acks=[(0, 0, [2])], acquired=[(0, 0, n + 1)]))
    events.append(fetch(400, "a", 3, acks=[(0, 0, [2])], acquired=[(1, 1, 1)]))
    out = told(events)
    assert [(c, o) for _, c, o, _ in attempts(out, 0)] == [
        (1, "released"),
        (2, "released"),
        (3, "released"),
    ]
    r = record(out, 0)
    assert (r["final_state"], r["archived_reason"], r["inferred"]) == (
        "archived",
        "delivery_limit",
        True,
    )
    assert r["attempts"] == 3 and r["releases"] == 3
    assert out["progress"][0]["poison_records"] == 1


def test_lock_expiry_is_inferred_and_a_late_ack_is_refused():
    out = told(
        [
            fetch(0, "b", 0, acquired=[(5, 6, 1)], lock=1000),
            fetch(1500, "a", 0, acquired=[(5, 6, 2)]),  # after b's lock ran out
            fetch(1600, "a", 1, acks=[(5, 6, [1])]),
            ack(2000, "b", 1, acks=[(5, 6, [1])], part_error=121),
        ]
    )
    b, a = [d for d in out["deliveries"] if d["offset"] == 5]
    assert (b["member_id"], b["outcome"], b["inferred"], b["ack_error"]) == (
        "b",
        "lock_expired",
        True,
        121,
    )
    assert b["ack_error_name"] == "INVALID_RECORD_STATE"
    assert b["next_member_id"] == "a" and b["outcome_at"] == at(1005)
    assert (a["delivery_count"], a["outcome"]) == (2, "accepted")
    assert record(out, 5)["final_state"] == "acknowledged"
    assert record(out, 5)["lock_expiries"] == 1 and record(out, 5)["refused_acks"] == 1


def test_a_late_ack_accepted_silently_does_not_count():
    out = told(
        [
            fetch(0, "b", 0, acquired=[(5, 5, 1)], lock=1000),
            fetch(1500, "a", 0, acquired=[(5, 5, 2)]),
            fetch(1600, "a", 1, acks=[(5, 5, [1])]),
            ack(2000, "b", 1, acks=[(5, 5, [1])]),  # below the start offset: error 0
        ]
    )
    b = attempts(out, 5)[0]
    assert b[2] == "lock_expired" and b[3] is True


def test_session_close_releases_what_is_held():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 1, 1)]),
            ack(100, "a", -1, acks=[(0, 0, [1])]),
            fetch(200, "c", 0, acquired=[(1, 1, 2)]),
        ]
    )
    assert attempts(out, 0) == [("a", 1, "accepted", False)]
    assert attempts(out, 1)[0] == ("a", 1, "session_closed", False)
    s = next(s for s in out["sessions"] if s["member_id"] == "a")
    assert (s["ending"], s["first_epoch"], s["last_epoch"]) == ("closed", 0, -1)


def test_redelivery_before_the_lock_ran_out_is_a_lost_session():
    out = told(
        [
            fetch(0, "k", 0, acquired=[(0, 0, 1)], lock=30_000),
            fetch(500, "a", 0, acquired=[(0, 0, 2)]),
        ]
    )
    assert attempts(out, 0)[0] == ("k", 1, "session_closed", True)


def test_open_at_the_end_and_renew():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 1, 1)], lock=30_000),
            ack(100, "a", 1, acks=[(1, 1, [4])]),
        ],
        end_ms=1000,
    )
    assert attempts(out, 0)[0][2] == "open"
    assert attempts(out, 1)[0][2] == "renewed"
    assert record(out, 0)["final_state"] == "in_flight"
    assert out["progress"][0]["in_flight"] == 2


def test_epoch_zero_again_replaces_the_session():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 0, 1)], lock=30_000),
            fetch(100, "a", 0, acquired=[(0, 0, 2)]),
        ],
        end_ms=1000,
    )
    assert [o for _, _, o, _ in attempts(out, 0)] == ["session_closed", "open"]
    assert [s["ending"] for s in out["sessions"]] == ["replaced", "open_at_end"]


def test_session_not_found_ends_the_session():
    out = told(
        [
            fetch(0, "a", 0, acquired=[(0, 0, 1)], lock=30_000),
            fetch(100, "a", 1, acks=[(0, 0, [1])], error=122),
        ]
    )
    row = out["deliveries"][0]
    assert (row["ack_error"], row["outcome"]) == (122, "ack_refused")
    assert out["sessions"][0]["ending"] == "lost"
    assert out["progress"][0]["status"] == "ERR"


def test_damaged_ranges_are_skipped_not_expanded():
    out = told([fetch(0, "a", 0, acquired=[(0, 10**12, 1), (5, 4, 1)])])
    assert out["deliveries"] == []


def test_ack_for_a_record_acquired_before_the_capture():
    out = told([ack(0, "a", 7, acks=[(3, 3, [1])])])
    row = out["deliveries"][0]
    assert (row["acquired_at"], row["delivery_count"], row["outcome"]) == (None, None, "accepted")
    assert out["sessions"][0]["first_epoch"] == 7 and out["sessions"][0]["opened_at"] is None


def test_a_large_groups_rows_go_back_to_spark_in_bounded_batches():
    # Spark reads each Arrow batch of a group's pass whole into the JVM's direct memory: one
    # batch of a group's 770k deliveries asked for 507 MB and failed a job on the churny ring.
    # The batches are made one at a time, from rows the pass then lets go of.
    from kwire.groups.share_build import BATCH_ROWS, _arrow_batches

    n = 3 * BATCH_ROWS + 5
    told = share_history(
        "g",
        [
            fetch(0, "m-1", 0, acquired=[(0, n - 1, 1)]),
            fetch(100, "m-1", 1, acks=[(0, n - 1, [1])]),
        ],
        at(200),
        {},
    )
    deliveries = told["deliveries"]
    batches = _arrow_batches(told)
    first = next(batches)
    assert first.num_rows == BATCH_ROWS
    # The first batch's rows are let go of once it is made; the others' are still there.
    assert deliveries[:BATCH_ROWS] == [None] * BATCH_ROWS and deliveries[BATCH_ROWS] is not None
    rest = list(batches)
    assert max(b.num_rows for b in rest) <= BATCH_ROWS
    kinds = [k for b in (first, *rest) for k in b.column("table").to_pylist()]
    assert kinds.count("deliveries") == n and kinds.count("records") == n
    got = [d for b in (first, *rest) for d in b.column("deliveries").to_pylist() if d is not None]
    assert sorted(d["offset"] for d in got) == list(range(n))
    # Every attempt accepted by m-1, its columns as the pass made them (the records' produced
    # instants, joined later, null).
    assert {(d["member_id"], d["outcome"], d["ack_type"], d["produced_at"]) for d in got} == {
        ("m-1", "accepted", "accept", None)
    }
