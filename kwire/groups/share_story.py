"""A share group's story (KIP-932) in sentences, from OUT/share/ (kwire.groups.share's tables):
what happened to its records, told in runs of offsets that shared a fate.

    12:00:03.120 offsets 7-9 of q-0 were released 3 times by share-a and archived at the
                 delivery limit (inferred: later records went out, these did not)
    12:00:05.901 share-b held 3 records (q-0 4-6) past its 2.0 s lock; they went to share-a with
                 delivery count 2
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any, Callable

Row = dict[str, Any]
SHARE_TABLES = ("deliveries", "records", "sessions", "progress")


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if out and o == out[-1][1] + 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
    return out


def _offsets(offsets: list[int]) -> str:
    runs = _runs(offsets)
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    return ("offset " if len(offsets) == 1 else "offsets ") + text


def _key(ts: Any) -> tuple[int, Any]:
    return (1, datetime.max) if ts is None else (0, ts)


def share_lines(
    tables: dict[str, list[Row]],
    names: Callable[[str | None], str],
    clock: Callable[[Any], str],
    span: Callable[[float | None], str],
) -> list[tuple[Any, str]]:
    """Timed sentences of a share group's records and sessions (time, text)."""
    lines: list[tuple[Any, str]] = []
    deliveries = tables.get("deliveries", [])
    records = tables.get("records", [])
    # Each offset's attempts, looked up rather than scanned for (a group has many).
    attempts: dict[tuple[Any, Any, Any], list[Row]] = defaultdict(list)
    for d in deliveries:
        attempts[(d["topic"], d["partition"], d["offset"])].append(d)
    # Records that kept coming back, then archived or still waiting: one sentence per run of
    # offsets released the same number of times by the same members, with the same fate.
    fates: dict[Any, list[Row]] = defaultdict(list)
    for r in records:
        if not (r["releases"] or r["final_state"] == "archived"):
            continue
        releasers = tuple(
            sorted(
                {
                    names(d["member_id"])
                    for d in attempts[(r["topic"], r["partition"], r["offset"])]
                    if d["outcome"] == "released"
                }
            )
        )
        key = (
            r["topic"],
            r["partition"],
            r["releases"],
            releasers,
            r["final_state"],
            r["archived_reason"],
        )
        fates[key].append(r)
    for (topic, partition, releases, releasers, state, reason), rows in fates.items():
        for first, last in _runs([r["offset"] for r in rows]):
            run = [r for r in rows if first <= r["offset"] <= last]
            where = f"{_offsets(list(range(first, last + 1)))} of {topic}-{partition}"
            verb = "was" if first == last else "were"
            if releases:
                times = "once" if releases == 1 else f"{releases} times"
                text = f"{where} {verb} released {times} by {', '.join(releasers)}"
                joiner = " and"
            else:
                text, joiner = where, f" {verb}"
            if state == "archived" and reason == "delivery_limit":
                most = max(r["max_delivery_count"] or 0 for r in run)
                text += (
                    f"{joiner} archived at the delivery limit after {most} deliveries "
                    "(inferred: later records of the partition went out, these did not)"
                )
            elif state == "archived":
                text += f"{joiner} archived ({reason})"
            elif state == "acknowledged":
                text += f", then accepted by {', '.join(sorted({names(r['accepted_by']) for r in run}))}"
            elif state == "available":
                text += ", and were available again when the capture ended"
            else:
                text += ", and still in flight when the capture ended"
            at = max((r["archived_at"] or r["last_acquired_at"] for r in run), key=_key)
            lines.append((at, text))
    # Locks that ran out, and sessions that ended while holding records: per holder and
    # acquisition, where the records went.
    lost: dict[Any, list[Row]] = defaultdict(list)
    for d in deliveries:
        if d["outcome"] in ("lock_expired", "session_closed") and d["acquired_at"] is not None:
            nxt = next(
                (
                    n
                    for n in attempts[(d["topic"], d["partition"], d["offset"])]
                    if n["acquired_at"] == d["next_acquired_at"]
                    and n["member_id"] == d["next_member_id"]
                ),
                None,
            )
            held = (
                d["outcome"],
                d["member_id"],
                d["acquired_at"],
                d["lock_ms"],
                d["topic"],
                d["partition"],
                d["next_member_id"],
                nxt["delivery_count"] if nxt else None,
                d["evidence"] if d["outcome"] == "session_closed" else None,
            )
            lost[held].append(d)
    for (outcome, member, _acq, lock_ms, topic, partition, to, count, why), rows in lost.items():
        n = len(rows)
        what = f"{n} record{'s' if n != 1 else ''} ({topic}-{partition} {_offsets([r['offset'] for r in rows]).split(' ', 1)[1]})"
        if outcome == "lock_expired":
            text = f"{names(member)} held {what} past its {span(lock_ms)} lock"
        else:
            text = f"{names(member)}'s session ended while it held {what} ({why})"
        if to is not None:
            text += f"; they went to {names(to)}" + (
                f" with delivery count {count}" if count is not None else ""
            )
        else:
            text += "; nobody acquired them again in the capture"
        late = [r for r in rows if r["ack_type"] and r["ack_error"]]
        if late:
            text += (
                f"; its late {late[0]['ack_type'].upper()} was refused with "
                f"{late[0]['ack_error_name']}"
            )
        at = min((r["outcome_at"] for r in rows), key=_key)
        lines.append((at, text))
    # Acknowledgements the broker refused that the sentences above do not tell.
    refused: dict[Any, list[Row]] = defaultdict(list)
    for d in deliveries:
        if d["ack_error"] and d["outcome"] == "ack_refused":
            said = (d["member_id"], d["ack_type"], d["ack_error_name"], d["ack_sent_at"])
            refused[said].append(d)
    for (member, kind, error, sent), rows in refused.items():
        where = (
            f"{_offsets([r['offset'] for r in rows])} of {rows[0]['topic']}-{rows[0]['partition']}"
        )
        lines.append(
            (sent, f"{names(member)}'s {str(kind).upper()} of {where} was refused with {error}")
        )
    for s in tables.get("sessions", []):
        if s["ending"] == "lost":
            lines.append(
                (
                    s["ended_at"],
                    f"{names(s['member_id'])} lost its share session on {s['broker']}: {s['ending_evidence']}",
                )
            )
    lines.sort(key=lambda tl: _key(tl[0]))
    return lines


def summary_lines(
    tables: dict[str, list[Row]],
    names: Callable[[str | None], str],
    span: Callable[[float | None], str],
) -> list[str]:
    """The group's records in numbers, its sessions and its partitions' progress."""
    deliveries = tables.get("deliveries", [])
    records = tables.get("records", [])
    if not deliveries and not tables.get("progress"):
        return ["records: no share fetches in the capture"]
    states: dict[str, int] = defaultdict(int)
    for r in records:
        states[r["final_state"]] += 1
    acquired = [d for d in deliveries if d["acquired_at"] is not None]
    again = sum((d["delivery_count"] or 1) > 1 for d in acquired)
    outcomes: dict[str, int] = defaultdict(int)
    for d in deliveries:
        outcomes[d["outcome"]] += 1
    lines = [
        f"records: {len(records)} offsets, {len(acquired)} deliveries ({again} redeliveries); "
        + ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in sorted(states.items()))
    ]
    lines.append(
        "  attempts ended: "
        + ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in sorted(outcomes.items()))
    )
    sessions = tables.get("sessions", [])
    if sessions:
        per: dict[str, int] = defaultdict(int)
        for s in sessions:
            per[s["ending"].replace("_", " ")] += 1
        lines.append(
            f"share sessions: {len(sessions)} ("
            + ", ".join(f"{n} {e}" for e, n in sorted(per.items()))
            + ")"
        )
        # Per member and broker: how its sessions went, in order.
        mine: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for s in sessions:
            mine[(s["member_id"], s["broker"])].append(s)
        for (member, broker), rows in mine.items():
            told = [
                f"{s['ending'].replace('_', ' ')}"
                + (f" after epoch {s['last_epoch']}" if s["ending"] != "closed" else "")
                + (f" ({', '.join(s['errors_seen'])})" if s["errors_seen"] else "")
                for s in rows
            ]
            taken = sum(s["records_acquired"] or 0 for s in rows)
            lines.append(
                f"  {names(member)} on {broker}: {len(rows)} session"
                + ("s" if len(rows) != 1 else "")
                + f", {taken} records acquired: "
                + "; ".join(told)
            )
    progress = tables.get("progress", [])
    if progress:
        lines.append("progress (start offset, records waiting, redeliveries, poison records):")
        for p in progress:
            text = (
                f"  {p['topic']}-{p['partition']}: {p['status']}, start offset {p['start_offset']}"
            )
            if p["described_start_offset"] is not None:
                text += f" (the broker said {p['described_start_offset']} at its last describe)"
            text += f", {p['in_flight']} in flight, {p['available']} available"
            if p["lag"] is not None:
                text += f", lag {p['lag']}"
            if p["redelivery_rate"] is not None:
                text += f", {p['redeliveries']} of {p['deliveries']} deliveries were redeliveries"
            if p["poison_records"]:
                text += f", {p['poison_records']} poison (archived after rejects or at the limit)"
            if p["last_ack_error"]:
                text += f", last acknowledgement refused: {p['last_ack_error']}"
            lines.append(text)
    return lines
