"""One consumer group's history from its protocol events, in plain Python (run per group on the
driver by kwire.groups.protocol, and directly by the tests).

Input: the group's events in time order, each a dict with the keys of kwire.groups.protocol.EVENTS
(kind is one of join, sync, heartbeat, leave, commit, cgh). Output: rows of the `generations`,
`members`, `assignments` and `assignment_changes` tables (kwire/groups/schema.py).

How verdicts are reached (the evidence columns quote what was seen):
- classic generations are the generation ids JoinGroup answered without error; a generation is
  `completed` when a SyncGroup of that generation was answered without error, `failed` when its
  SyncGroups all failed, else `open_at_end`;
- a generation's cause compares its members with the previous generation's: a member that left
  with LeaveGroup is `member_left` (`poll_timeout` when its reason says so); one that vanished
  without LeaveGroup is `member_evicted` (evidence: its last heartbeat and session timeout); new
  members are `member_joined`; a changed subscription is `subscription_changed`; the same members
  again is `unknown`, or `leader_rejoined` when the leader's JoinGroup opened the round;
- KIP-848 (`consumer` protocol) generations are the member epochs the coordinator handed out in
  ConsumerGroupHeartbeat answers; joins are epoch 0 requests, leaves -1 (static: -2).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from kwire.groups.errors import error_name

Event = dict[str, Any]


def _ms(a: datetime | None, b: datetime | None) -> float | None:
    if a is None or b is None:
        return None
    return (b - a) / timedelta(milliseconds=1)


def _detail(e: Event) -> dict[str, Any]:
    text = e.get("detail")
    return json.loads(text) if text else {}


def _is_poll_timeout(reason: str | None) -> bool:
    return bool(reason) and "poll" in str(reason).lower()


def _fmt(ts: datetime | None) -> str:
    return ts.strftime("%H:%M:%S.%f")[:-3] if ts is not None else "?"


def history(group_id: str, events: list[Event], capture_end: datetime | None) -> dict[str, list]:
    kinds = {e["kind"] for e in events}
    # The group's type: a group id is one type at a time on a cluster (the coordinator refuses
    # another type's requests with INCONSISTENT_GROUP_PROTOCOL or GROUP_ID_NOT_FOUND).
    for kind, protocol in (("stgh", "streams"), ("sgh", "share"), ("cgh", "consumer")):
        if kind in kinds:
            return _consumer_history(group_id, events, capture_end, kind, protocol)
    return _classic_history(group_id, events, capture_end)


# -- members, shared by both protocols ------------------------------------------------------------


class _Member:
    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.instance: str | None = None
        self.client_id: str | None = None
        self.client_addr: str | None = None
        self.first_seen: datetime | None = None
        self.last_seen: datetime | None = None
        self.generations: list[int] = []
        self.session_timeout_ms: int | None = None
        self.rebalance_timeout_ms: int | None = None
        self.heartbeats: list[datetime] = []
        self.errors: set[str] = set()
        self.left_at: datetime | None = None
        self.left_reason: str | None = None
        self.left_via = "LeaveGroup"  # the request that said so
        self.leave_word = "LeaveGroup"  # how this protocol leaves, for "no ..." evidence

    def seen(self, e: Event) -> None:
        ts = e["ts"]
        self.first_seen = ts if self.first_seen is None else min(self.first_seen, ts)
        self.last_seen = ts if self.last_seen is None else max(self.last_seen, ts)
        self.client_id = self.client_id or e.get("client_id")
        self.client_addr = self.client_addr or e.get("client_addr")
        self.instance = self.instance or e.get("instance_id")
        name = error_name(e.get("error"))
        if name:
            self.errors.add(name)


def _members_rows(
    group_id: str,
    members: dict[str, _Member],
    final: set[str],
    capture_end: datetime | None,
    software: dict[str, str],
    group_type: str = "classic",
) -> list[dict[str, Any]]:
    rows = []
    by_instance: dict[str, list[_Member]] = defaultdict(list)
    for m in members.values():
        if m.instance:
            by_instance[m.instance].append(m)
    for m in sorted(members.values(), key=lambda m: (m.first_seen or datetime.min, m.member_id)):
        gaps = [_ms(a, b) for a, b in zip(m.heartbeats, m.heartbeats[1:])]
        last_hb = m.heartbeats[-1] if m.heartbeats else None
        ending, at, evidence = _ending(m, final, by_instance, capture_end, last_hb)
        rows.append(
            {
                "group_id": group_id,
                "group_type": group_type,
                "member_id": m.member_id,
                "group_instance_id": m.instance,
                "client_id": m.client_id,
                "client_addr": m.client_addr,
                "client_software": software.get(m.client_addr or "", None),
                "first_seen": m.first_seen,
                "last_seen": m.last_seen,
                "first_generation": min(m.generations) if m.generations else None,
                "last_generation": max(m.generations) if m.generations else None,
                "session_timeout_ms": m.session_timeout_ms,
                "rebalance_timeout_ms": m.rebalance_timeout_ms,
                "last_heartbeat_at": last_hb,
                "max_heartbeat_gap_ms": max((g for g in gaps if g is not None), default=None),
                "ending": ending,
                "ending_at": at,
                "ending_evidence": evidence,
                "errors_seen": sorted(m.errors),
            }
        )
    return rows


def _ending(
    m: _Member,
    final: set[str],
    by_instance: dict[str, list[_Member]],
    capture_end: datetime | None,
    last_hb: datetime | None,
) -> tuple[str, datetime | None, str]:
    if m.left_at is not None:
        if _is_poll_timeout(m.left_reason):
            return "left_poll_timeout", m.left_at, f"LeaveGroup reason: {m.left_reason}"
        reason = f" (reason: {m.left_reason})" if m.left_reason else ""
        return "left", m.left_at, f"{m.left_via} at {_fmt(m.left_at)}{reason}"
    if "FENCED_INSTANCE_ID" in m.errors:
        return "fenced", m.last_seen, "FENCED_INSTANCE_ID: another member took its instance id"
    if m.instance:
        later = [
            o
            for o in by_instance.get(m.instance, [])
            if o is not m and o.first_seen and m.last_seen and o.first_seen > m.last_seen
        ]
        nxt = min(later, key=lambda o: o.first_seen or datetime.min) if later else None
        seen = last_hb or m.last_seen
        if nxt is not None and m.session_timeout_ms and seen is not None and nxt.first_seen:
            # Back within its session timeout: a restart; later, the coordinator had evicted it.
            if nxt.first_seen > seen + timedelta(milliseconds=m.session_timeout_ms):
                nxt = None
        if nxt is not None:
            return (
                "static_restart",
                nxt.first_seen,
                f"instance {m.instance} rejoined as {nxt.member_id} at {_fmt(nxt.first_seen)}",
            )
    if m.member_id in final:
        return "active_at_end", None, "member of the last generation"
    if m.generations:
        timeout = f", session timeout {m.session_timeout_ms} ms" if m.session_timeout_ms else ""
        seen = last_hb or m.last_seen
        return (
            "evicted",
            (
                (seen + timedelta(milliseconds=m.session_timeout_ms))
                if seen is not None and m.session_timeout_ms
                else seen
            ),
            f"last heartbeat {_fmt(seen)}{timeout}, no {m.leave_word}",
        )
    return "unknown", m.last_seen, "never in a generation"


# -- classic groups -------------------------------------------------------------------------------


def _classic_history(
    group_id: str, events: list[Event], capture_end: datetime | None
) -> dict[str, list]:
    members: dict[str, _Member] = {}
    software: dict[str, str] = {}
    gens: dict[int, dict[str, Any]] = {}
    assignments: dict[int, dict[str, dict[str, list[int]]]] = {}
    subscriptions: dict[int, dict[str, list[str]]] = defaultdict(dict)
    joins_open: list[Event] = []  # JoinGroup requests of the round in progress

    def member(mid: str | None) -> _Member | None:
        if not mid:
            return None
        if mid not in members:
            members[mid] = _Member(mid)
        return members[mid]

    for e in events:
        kind = e["kind"]
        if e.get("software") and e.get("client_addr"):
            software[e["client_addr"]] = e["software"]
        d = _detail(e)
        if kind == "join":
            joins_open.append(e)
            m = member(e.get("member_id") or e.get("req_member_id"))
            if m is not None:
                m.seen(e)
                m.session_timeout_ms = e.get("session_timeout_ms") or m.session_timeout_ms
                m.rebalance_timeout_ms = e.get("rebalance_timeout_ms") or m.rebalance_timeout_ms
            gen = e.get("generation")
            if gen is not None and gen >= 0 and not e.get("error"):
                g = gens.setdefault(
                    gen,
                    {
                        "requests": [],
                        "join_done": None,
                        "sync": [],
                        "leader": e.get("leader"),
                        "assignor": e.get("assignor"),
                        "members": set(),
                    },
                )
                g["requests"].extend(joins_open)
                joins_open = []
                g["join_done"] = max(filter(None, [g["join_done"], e.get("resp_ts")]), default=None)
                if m is not None:
                    g["members"].add(m.member_id)
                    m.generations.append(gen)
                    subscriptions[gen][m.member_id] = d.get("topics") or []
                for mid in d.get("members") or []:
                    g["members"].add(mid)
        elif kind == "sync":
            m = member(e.get("member_id"))
            if m is not None:
                m.seen(e)
            gen = e.get("generation")
            if gen in gens:
                gens[gen]["sync"].append(e)
                for mid, topics in (d.get("assignments") or {}).items():
                    assignments.setdefault(gen, {})[mid] = topics
                own = d.get("own")
                if own is not None and m is not None and not e.get("error"):
                    assignments.setdefault(gen, {}).setdefault(m.member_id, own)
        elif kind == "heartbeat":
            m = member(e.get("member_id"))
            if m is not None:
                m.seen(e)
                m.heartbeats.append(e["ts"])
        elif kind == "leave":
            for mid, reason in d.get("leaving") or []:
                m = member(mid)
                if m is not None:
                    m.seen(e)
                    m.left_at = e["ts"]
                    m.left_reason = reason
        elif kind == "commit":
            m = member(e.get("member_id"))
            if m is not None:
                m.seen(e)

    gen_rows: list[dict[str, Any]] = []
    previous: set[str] = set()
    prev_gen: int | None = None
    # In time order: a generation id that goes back starts the group over (see _classic_cause).
    in_time = sorted(gens, key=lambda n: (_started(gens[n]) or datetime.max, n))
    for gen in in_time:
        g = gens[gen]
        current = _latest_per_instance(set(g["members"]), members)
        started = _started(g)
        ok_sync = [s for s in g["sync"] if not s.get("error") and s.get("resp_ts")]
        completed = max((s["resp_ts"] for s in ok_sync), default=None)
        sync_start = min((s["ts"] for s in g["sync"]), default=None)
        if ok_sync:
            outcome = "completed"
        elif g["sync"]:
            outcome = "failed"
        else:
            outcome = "open_at_end"
        joined = sorted(current - previous)
        left = sorted(previous - current)
        cause, who, evidence = _classic_cause(
            gen, prev_gen, joined, left, members, g, subscriptions, started
        )
        if cause in ("unknown", "leader_rejoined") and prev_gen is not None and gen > prev_gen:
            cause, who, evidence = _second_round(
                gens, assignments, members, prev_gen, gen, gen_rows[-1]
            ) or (cause, who, evidence)
        gen_rows.append(
            {
                "group_id": group_id,
                "protocol": "classic",
                "generation": gen,
                "started_at": started,
                "completed_at": completed,
                "duration_ms": _ms(started, completed),
                "join_phase_ms": _ms(started, g["join_done"]),
                "sync_phase_ms": _ms(sync_start, completed),
                "leader_member_id": g["leader"],
                "assignor": g["assignor"],
                "members": len(current),
                "members_joined": joined,
                "members_left": left,
                "cause": cause,
                "cause_member_id": who,
                "cause_evidence": evidence,
                "outcome": outcome,
            }
        )
        previous, prev_gen = current, gen
    last = gens[prev_gen]["members"] if prev_gen is not None else set()
    final = _latest_per_instance(set(last), members)
    return {
        "generations": gen_rows,
        "members": _members_rows(group_id, members, final, capture_end, software),
        **_assignment_rows(group_id, assignments, "sync_group", in_time),
    }


def _second_round(
    gens: dict[int, dict[str, Any]],
    assignments: dict[int, dict[str, dict[str, list[int]]]],
    members: dict[str, _Member],
    prev_gen: int,
    gen: int,
    prev_row: dict[str, Any],
) -> tuple[str, str | None, str] | None:
    """The same members again, yet not for nothing: the round that finishes the previous one.

    - a static member's old id that the coordinator kept beside its replacement (librdkafka's
      mock does) drops out without LeaveGroup: its session timed out, an eviction;
    - a member's SyncGroup failed in the previous generation and it rejoined;
    - cooperative rebalancing: partitions revoked in the previous generation (owned by nobody
      there) are handed out now.
    The last two carry the previous generation's cause: one rebalance in two rounds."""
    for mid in sorted(set(gens[prev_gen]["members"]) - set(gens[gen]["members"])):
        m = members.get(mid)
        if m is not None and m.instance and m.left_at is None:
            return (
                "member_evicted",
                mid,
                f"old id {mid} of static member {m.instance}, kept in generation {prev_gen} "
                "beside its replacement, dropped without LeaveGroup (session timeout)",
            )
    cause, who = prev_row["cause"], prev_row["cause_member_id"]
    failed = [s for s in gens[prev_gen]["sync"] if s.get("error")]
    if failed:
        s = failed[0]
        return (
            cause,
            who,
            f"second round of generation {prev_gen} ({cause}): the SyncGroup of "
            f"{s.get('member_id')} failed ({error_name(s.get('error'))}) and it rejoined",
        )

    def owned(n: int) -> set[tuple[str, int]]:
        return {(t, p) for a in assignments.get(n, {}).values() for t, ps in a.items() for p in ps}

    handed = owned(gen) - owned(prev_gen)
    if "cooperative" in str(gens[gen].get("assignor")) and handed and owned(prev_gen):
        shown = ", ".join(f"{t}[{p}]" for t, p in sorted(handed))
        return (
            cause,
            who,
            f"second round of generation {prev_gen} ({cause}): partitions revoked there are "
            f"assigned now ({shown})",
        )
    return None


def _started(g: dict[str, Any]) -> datetime | None:
    return min((r["ts"] for r in g["requests"]), default=g["join_done"])


def _latest_per_instance(ids: set[str], members: dict[str, _Member]) -> set[str]:
    """A static member that restarted holds its instance id under a new member id: only the
    newest of the ids sharing an instance id is a member."""
    newest: dict[str, _Member] = {}
    out = set()
    for mid in ids:
        m = members.get(mid)
        if m is None or not m.instance:
            out.add(mid)
            continue
        held = newest.get(m.instance)
        if held is None or (m.first_seen or datetime.min) > (held.first_seen or datetime.min):
            newest[m.instance] = m
    return out | {m.member_id for m in newest.values()}


def _classic_cause(
    gen: int,
    prev_gen: int | None,
    joined: list[str],
    left: list[str],
    members: dict[str, _Member],
    g: dict[str, Any],
    subscriptions: dict[int, dict[str, list[str]]],
    started: datetime | None,
) -> tuple[str, str | None, str]:
    if prev_gen is None:
        return "first_join", joined[0] if joined else None, "first generation in the capture"
    if gen < prev_gen:
        return (
            "first_join",
            joined[0] if joined else None,
            f"generation went back from {prev_gen} to {gen}: the group was recreated, or a "
            "group of the same name on another cluster is in the same capture",
        )
    # A static member that restarted holds its instance id under a new member id: the old id
    # was replaced, not evicted (the coordinator may still rebalance, as librdkafka's mock does).
    replaced = {
        members[mid].instance: mid for mid in joined if mid in members and members[mid].instance
    }
    for mid in left:
        m = members.get(mid)
        if m is None:
            continue
        if m.instance and m.instance in replaced and m.left_at is None:
            new = replaced[m.instance]
            return (
                "member_joined",
                new,
                f"static member {m.instance} restarted: {new} replaced {mid}",
            )
        if m.left_at is not None:
            if _is_poll_timeout(m.left_reason):
                return "poll_timeout", mid, f"LeaveGroup reason: {m.left_reason}"
            return "member_left", mid, f"LeaveGroup at {_fmt(m.left_at)}"
        last = m.heartbeats[-1] if m.heartbeats else m.last_seen
        timeout = f", session timeout {m.session_timeout_ms} ms" if m.session_timeout_ms else ""
        return "member_evicted", mid, f"last heartbeat {_fmt(last)}{timeout}, no LeaveGroup"
    if joined:
        who = joined[0]
        m = members.get(who)
        instance = f" (instance {m.instance})" if m is not None and m.instance else ""
        return "member_joined", who, f"JoinGroup from a new member{instance}"
    before, now = subscriptions.get(prev_gen, {}), subscriptions.get(gen, {})
    for mid in sorted(now):
        if mid in before and sorted(before[mid]) != sorted(now[mid]):
            return "subscription_changed", mid, f"topics {before[mid]} -> {now[mid]}"
    first = min(g["requests"], key=lambda r: r["ts"], default=None)
    leader = g.get("leader")
    if first is not None and leader and (first.get("member_id") or "") == leader:
        return (
            "leader_rejoined",
            leader,
            f"the leader's JoinGroup opened the round at {_fmt(started)}",
        )
    return "unknown", None, "same members rejoined; no leave, join or subscription change seen"


def _assignment_rows(
    group_id: str,
    assignments: dict[int, dict[str, dict[str, list[int]]]],
    source: str,
    order: list[int] | None = None,
) -> dict[str, list]:
    """Assignments per generation and the partitions that changed hands between consecutive
    generations (in `order`, time order, when given); none across a generation that went back
    (the group started over)."""
    if source == "share_group_heartbeat":
        return _shared_assignment_rows(group_id, assignments, source)
    rows = []
    changes = []
    previous: dict[tuple[str, int], str] | None = None
    prev_gen: int | None = None
    ranked = [g for g in order if g in assignments] if order is not None else sorted(assignments)
    for gen in ranked:
        if prev_gen is not None and gen < prev_gen:
            previous = None
        owners: dict[tuple[str, int], str] = {}
        for mid in sorted(assignments[gen]):
            for topic, parts in sorted(assignments[gen][mid].items()):
                rows.append(
                    {
                        "group_id": group_id,
                        "generation": gen,
                        "member_id": mid,
                        "topic": topic,
                        "partitions": sorted(parts),
                        "source": source,
                    }
                )
                for p in parts:
                    owners[(topic, p)] = mid
        if previous is not None:
            for tp in sorted(set(previous) | set(owners)):
                a, b = previous.get(tp), owners.get(tp)
                if a == b:
                    continue
                kind = "moved" if a and b else ("added" if b else "unassigned")
                changes.append(_change(group_id, prev_gen, gen, tp, a, b, kind))
        previous, prev_gen = owners, gen
    return {"assignments": rows, "assignment_changes": changes}


def _shared_assignment_rows(
    group_id: str, assignments: dict[int, dict[str, dict[str, list[int]]]], source: str
) -> dict[str, list]:
    """A share group's assignments: a partition may be given to several members at once (Kafka's
    `simple` assignor), so a change is a member added to or taken off a partition, never a move.
    Epochs are per member: each member's latest assignment holds until its next one."""
    rows = []
    changes = []
    held: dict[str, dict[str, list[int]]] = {}  # member -> its latest assignment
    previous: dict[tuple[str, int], set[str]] | None = None
    prev_gen: int | None = None
    for gen in sorted(assignments):
        for mid in sorted(assignments[gen]):
            held[mid] = assignments[gen][mid]
            for topic, parts in sorted(assignments[gen][mid].items()):
                rows.append(
                    {
                        "group_id": group_id,
                        "generation": gen,
                        "member_id": mid,
                        "topic": topic,
                        "partitions": sorted(parts),
                        "source": source,
                    }
                )
        holders: dict[tuple[str, int], set[str]] = defaultdict(set)
        for mid, topics in held.items():
            for topic, parts in topics.items():
                for p in parts:
                    holders[(topic, p)].add(mid)
        if previous is not None:
            for tp in sorted(set(previous) | set(holders)):
                before, after = previous.get(tp, set()), holders.get(tp, set())
                for mid in sorted(after - before):
                    changes.append(_change(group_id, prev_gen, gen, tp, None, mid, "added"))
                for mid in sorted(before - after):
                    changes.append(_change(group_id, prev_gen, gen, tp, mid, None, "unassigned"))
        previous, prev_gen = dict(holders), gen
    return {"assignments": rows, "assignment_changes": changes}


def _change(
    group_id: str,
    from_gen: int | None,
    to_gen: int,
    tp: tuple[str, int],
    from_member: str | None,
    to_member: str | None,
    kind: str,
) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "from_generation": from_gen,
        "to_generation": to_gen,
        "topic": tp[0],
        "partition": tp[1],
        "from_member": from_member,
        "to_member": to_member,
        "kind": kind,
    }


# -- KIP-848 groups -------------------------------------------------------------------------------


# StreamsGroupHeartbeat answers' status codes (KIP-1071; 5 and 6 as Kafka 4.4's clients name them).
STREAMS_STATUS = {
    0: "STALE_TOPOLOGY",
    1: "MISSING_SOURCE_TOPICS",
    2: "INCORRECTLY_PARTITIONED_TOPICS",
    3: "MISSING_INTERNAL_TOPICS",
    4: "SHUTDOWN_APPLICATION",
    5: "ASSIGNMENT_DELAYED",
    6: "MISSING_CLIENT_TAGS",
}
_SOURCES = {
    "cgh": ("consumer_group_heartbeat", "ConsumerGroupHeartbeat"),
    "sgh": ("share_group_heartbeat", "ShareGroupHeartbeat"),
    "stgh": ("streams_group_heartbeat", "StreamsGroupHeartbeat"),
}


def _consumer_history(
    group_id: str,
    events: list[Event],
    capture_end: datetime | None,
    kind: str = "cgh",
    protocol: str = "consumer",
) -> dict[str, list]:
    """KIP-848 consumer groups, and the share (KIP-932) and streams (KIP-1071) groups whose
    heartbeats have the same member epochs: 0 joins, -1 leaves, -2 leaves a static member."""
    source, api = _SOURCES[kind]
    members: dict[str, _Member] = {}
    software: dict[str, str] = {}
    epochs: dict[int, dict[str, Any]] = {}
    assignments: dict[int, dict[str, dict[str, list[int]]]] = {}
    joins: list[tuple[datetime, str]] = []
    for e in events:
        if e.get("software") and e.get("client_addr"):
            software[e["client_addr"]] = e["software"]
        if e["kind"] != kind:
            mid = e.get("member_id")
            if mid and mid in members:
                members[mid].seen(e)
            continue
        d = _detail(e)
        mid = e.get("member_id") or e.get("req_member_id")
        if not mid:
            continue
        m = members.setdefault(mid, _Member(mid))
        m.leave_word = f"{api} with epoch -1"
        m.seen(e)
        m.heartbeats.append(e["ts"])
        for status in d.get("status") or []:
            # Streams groups: what the coordinator says is wrong with the topology.
            name = STREAMS_STATUS.get(status.get("code"), f"STATUS_{status.get('code')}")
            m.errors.add(f"status {name}")
        m.rebalance_timeout_ms = e.get("rebalance_timeout_ms") or m.rebalance_timeout_ms
        req_epoch = e.get("req_generation")
        if req_epoch == 0:
            joins.append((e["ts"], mid))
        if req_epoch in (-1, -2):
            m.left_at = e["ts"]
            m.left_via = f"{api} with epoch {req_epoch}"
            m.left_reason = "static leave (epoch -2)" if req_epoch == -2 else None
            continue
        epoch = e.get("generation")
        if epoch is None or epoch <= 0 or e.get("error"):
            continue
        x = epochs.setdefault(
            epoch, {"first": e.get("resp_ts") or e["ts"], "members": set(), "assignor": None}
        )
        x["members"].add(mid)
        x["assignor"] = x["assignor"] or d.get("assignor")
        if epoch not in m.generations:
            m.generations.append(epoch)
        if d.get("assignment") is not None:
            assignments.setdefault(epoch, {})[mid] = d["assignment"]
    rows = []
    previous: set[str] = set()
    prev_epoch: int | None = None
    for epoch in sorted(epochs):
        x = epochs[epoch]
        current = set(x["members"])
        joined, left = sorted(current - previous), sorted(previous - current)
        if prev_epoch is None:
            cause, who, evidence = "first_join", joined[0] if joined else None, "first epoch seen"
        elif left and members[left[0]].left_at is not None:
            cause, who = "member_left", left[0]
            evidence = f"{api} with epoch -1 at {_fmt(members[left[0]].left_at)}"
        elif left:
            m = members[left[0]]
            cause, who = "member_evicted", left[0]
            evidence = f"last heartbeat {_fmt(m.heartbeats[-1] if m.heartbeats else None)}"
        elif joined:
            cause, who, evidence = "member_joined", joined[0], f"{api} with epoch 0"
        else:
            cause, who, evidence = "unknown", None, "epoch bumped with the same members"
        rows.append(
            {
                "group_id": group_id,
                "protocol": protocol,
                "generation": epoch,
                "started_at": x["first"],
                "completed_at": x["first"],
                "duration_ms": 0.0,
                "join_phase_ms": None,
                "sync_phase_ms": None,
                "leader_member_id": None,
                "assignor": x["assignor"],
                "members": len(current),
                "members_joined": joined,
                "members_left": left,
                "cause": cause,
                "cause_member_id": who,
                "cause_evidence": evidence,
                "outcome": "completed",
            }
        )
        previous, prev_epoch = current, epoch
    # Members present in the last epoch and not leaving after it are active at the end.
    final = {mid for mid in previous if members[mid].left_at is None}
    return {
        "generations": rows,
        "members": _members_rows(group_id, members, final, capture_end, software, protocol),
        **_assignment_rows(group_id, assignments, source),
    }
