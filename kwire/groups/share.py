"""One share group's records (KIP-932), attempt by attempt, from its frames, in plain Python (run
per group on the executors by kwire.groups.share_build, and directly by the tests).

Input: the group's share frames in time order, each a dict with the columns of
kwire.groups.share_build.SHARE_EVENTS: kind `fetch` (a ShareFetch and its answer), `ack` (a
ShareAcknowledge and its answer) or `offsets` (a DescribeShareGroupOffsets answer for the group),
with `detail` holding the acknowledgement batches sent and the acquired ranges and errors
answered. Output: rows of OUT/share/deliveries, OUT/share/records, OUT/share/sessions and
OUT/share/progress (kwire/groups/schema.py, SHARE_TABLES).

What the wire says and what is inferred (docs/groups.md, "Share groups"):
- an attempt is an offset inside an `AcquiredRecords` range of a ShareFetch answer: its member,
  its delivery count, when, and the lock the answer announced (`AcquisitionLockTimeoutMs`);
- its acknowledgement is the first later batch of the same member covering the offset (on a
  ShareFetch: piggybacked, or a ShareAcknowledge), with the answer's error for its partition;
- a session is (member, broker): epoch 0 opens it (replacing an open one), -1 closes it, and
  SHARE_SESSION_NOT_FOUND says the broker had lost it. Records the member still held when its
  session ended were released by the broker (`session_closed`);
- a lock expiry is never on the wire: an attempt with no acknowledgement whose offset was
  acquired again after its lock's deadline (or whose deadline passed before the capture ended)
  is `lock_expired`, and an attempt released earlier than its deadline with no frame saying why
  is `session_closed` (the holder's connection or session ended): both marked inferred;
- archiving at the delivery limit is never on the wire either: a record released or expired
  whose offset was not acquired again although later ShareFetches of the group acquired records
  of the same partition is archived by the limit (inferred), as the broker hands out the lowest
  available offsets first.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from operator import attrgetter
from typing import Any, NamedTuple

from kwire.groups.errors import error_name
from kwire.groups.history import _detail as _json_detail
from kwire.groups.history import _ms

Event = dict[str, Any]
Row = dict[str, Any]

ACK_TYPES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}
# An acknowledgement's outcome for the attempt it ends (RENEW ends nothing).
_TERMINAL = {0: "gap", 1: "accepted", 2: "released", 3: "rejected"}
OUTCOMES = (
    "accepted",
    "released",
    "rejected",
    "gap",
    "renewed",
    "lock_expired",
    "session_closed",
    "ack_refused",
    "open",
)
FINAL_STATES = ("acknowledged", "archived", "in_flight", "available")
SESSION_ENDINGS = ("closed", "replaced", "lost", "open_at_end")
SHARE_PROGRESS = ("OK", "STALL", "STOP", "ERR")
SESSION_LOST = (122,)  # SHARE_SESSION_NOT_FOUND: the broker no longer has the session
# A range wider than this is not acquired records but damage (Kafka acquires at most
# max.poll.records or a batch's records per partition): it is skipped and counted, never expanded.
MAX_RANGE = 1_000_000
# A partition is STOPped only after this long without an acquisition or acknowledgement while
# records wait (twice a client's default poll cadence at its longest lock).
STOP_AFTER_MS = 10_000


def _detail(e: Event) -> dict[str, Any]:
    d = e.get("detail")
    if isinstance(d, dict):
        return d
    return _json_detail(e)


class _Session:
    def __init__(self, member: str, broker: str, client_id: str | None) -> None:
        self.member = member
        self.broker = broker
        self.client_id = client_id
        self.opened_at: datetime | None = None
        self.first_epoch: int | None = None
        self.last_epoch: int | None = None
        self.first_seen: datetime | None = None
        self.last_seen: datetime | None = None
        self.fetches = 0
        self.acknowledges = 0
        self.acquired = 0
        self.ended_at: datetime | None = None
        self.ending: str | None = None
        self.evidence: str | None = None
        self.errors: set[str] = set()
        self.held: set[int] = set()  # attempt indices acquired in this session, not yet ended


class _Row:
    """A table's row as attributes, in slots (a group of 760k attempts held as dicts took about
    1 GB more), read by column name like a dict too (`row["offset"]`)."""

    __slots__: tuple[str, ...] = ()

    def __getitem__(self, column: str) -> Any:
        return getattr(self, column)


class _FromAnswer(NamedTuple):
    """An attempt's columns that come from the ShareFetch answer that acquired it (the same for
    every offset of the answer, made once: _Group.attempt_base)."""

    member_id: str
    consumer_client_id: str | None
    consumer_connection: str | None
    broker: str | None
    session_epoch: int | None
    fetch_requested_at: datetime | None
    acquired_at: datetime | None
    lock_ms: int | None
    lock_expires_by: datetime | None


@dataclass(slots=True, eq=False, init=False)
class _Attempt(_Row):
    """One attempt: a row of OUT/share/deliveries (the columns the pass knows; the records'
    produced instants are joined later) and the pass's own state after it."""

    group_id: str
    member_id: str
    consumer_client_id: str | None
    consumer_connection: str | None
    broker: str | None
    topic: str
    topic_id: str
    partition: int
    offset: int
    delivery_count: int | None
    session_epoch: int | None
    fetch_requested_at: datetime | None
    acquired_at: datetime | None
    lock_ms: int | None
    lock_expires_by: datetime | None
    ack_type: str | None
    ack_via: str | None
    ack_sent_at: datetime | None
    ack_confirmed_at: datetime | None
    ack_error: int | None
    ack_error_name: str | None
    renewals: int
    outcome: str
    outcome_at: datetime | None
    inferred: bool
    evidence: str | None
    next_member_id: str | None
    next_acquired_at: datetime | None
    # The pass's own: when it was last renewed, the acknowledgement that ended it, and when its
    # session ended while it was held (why, and whether that is inferred).
    last_renewed_at: datetime | None
    terminal: int | None
    closed_at: datetime | None
    closed_inferred: bool
    closed_why: str | None

    def __init__(
        self,
        group_id: str,
        base: _FromAnswer,
        topic_id: str,
        topic: str,
        partition: int,
        offset: int,
        count: int | None,
    ) -> None:
        # _FromAnswer's fields, by the same names in the same order.
        (
            self.member_id,
            self.consumer_client_id,
            self.consumer_connection,
            self.broker,
            self.session_epoch,
            self.fetch_requested_at,
            self.acquired_at,
            self.lock_ms,
            self.lock_expires_by,
        ) = base
        self.group_id = group_id
        self.topic_id = topic_id
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.delivery_count = count
        self.ack_type = self.ack_via = self.ack_sent_at = self.ack_confirmed_at = None
        self.ack_error = None
        self.ack_error_name = self.outcome_at = self.evidence = None
        self.outcome = ""  # finish() decides
        self.renewals = 0
        self.inferred = self.closed_inferred = False
        self.next_member_id = self.next_acquired_at = self.last_renewed_at = None
        self.terminal = None
        self.closed_at = self.closed_why = None


@dataclass(slots=True, eq=False, kw_only=True)
class _Record(_Row):
    """A row of OUT/share/records (the columns the pass knows)."""

    group_id: str
    topic: str
    topic_id: str
    partition: int
    offset: int
    attempts: int
    max_delivery_count: int | None
    members: list[str]
    first_acquired_at: datetime | None
    last_acquired_at: datetime | None
    final_state: str
    archived_reason: str | None
    archived_at: datetime | None
    inferred: bool
    accepted_at: datetime | None
    accepted_by: str | None
    acquire_to_accept_ms: float | None
    releases: int
    lock_expiries: int
    session_releases: int
    refused_acks: int


class _Group:
    def __init__(self, group_id: str, names: dict[str, str]) -> None:
        self.group_id = group_id
        self.names = names
        self.attempts: list[_Attempt] = []
        self.latest: dict[tuple[str, int, int], int] = {}  # offset -> its latest attempt
        self.mine: dict[tuple[str, str, int, int], int] = {}  # member + offset -> attempt
        self.sessions: dict[tuple[str, str], _Session] = {}
        self.done: list[_Session] = []
        self.pending: dict[int, list[tuple[int, str, int, int]]] = {}  # event -> acks sent
        self.acquisitions: dict[tuple[str, int], list[tuple[datetime, datetime | None, int]]] = (
            defaultdict(list)
        )  # partition -> (acquired_at, requested_at, highest offset acquired)
        self.described: dict[tuple[str, int], Row] = {}
        self.problems: list[str] = []
        self.ack_errors: dict[tuple[str, int], tuple[datetime, int | None]] = {}

    # -- sessions --------------------------------------------------------------------------------

    def session(self, e: Event) -> _Session:
        key = (e["member_id"], e.get("broker") or "")
        s = self.sessions.get(key)
        if s is None:
            s = self.sessions[key] = _Session(key[0], key[1], e.get("client_id"))
        return s

    def end_session(self, s: _Session, at: datetime, ending: str, evidence: str, inferred: bool):
        for i in sorted(s.held):
            a = self.attempts[i]
            if a.terminal is None and a.closed_at is None:
                a.closed_at = at
                a.closed_inferred = inferred
                a.closed_why = evidence
        s.held.clear()
        s.ended_at, s.ending, s.evidence = at, ending, evidence
        self.done.append(s)
        del self.sessions[(s.member, s.broker)]

    # -- requests --------------------------------------------------------------------------------

    def request(self, n: int, e: Event) -> None:
        member = e.get("member_id")
        if not member:
            return
        ts: datetime = e["ts"]
        epoch = e.get("epoch")
        d = _detail(e)
        s = self.session(e)
        if epoch == 0 and (s.first_seen is not None):
            # A new session replaces the open one: the broker released what it held.
            self.end_session(s, ts, "replaced", f"epoch 0 again at {_clock(ts)}", False)
            s = self.session(e)
        if s.first_seen is None:
            s.first_seen = ts
            s.first_epoch = epoch
            if epoch == 0:
                s.opened_at = ts
        s.last_seen = ts
        s.last_epoch = epoch if epoch is not None else s.last_epoch
        if e["kind"] == "fetch":
            s.fetches += 1
        else:
            s.acknowledges += 1
        sent: list[tuple[int, str, int, int]] = []
        for topic_id, partition, first, last, types in d.get("acks") or []:
            if first is None or last is None or last < first or last - first >= MAX_RANGE:
                self.problems.append(
                    f"acknowledgement batch {first}-{last} of {topic_id}:{partition} skipped"
                )
                continue
            types = list(types or [])
            for k, offset in enumerate(range(first, last + 1)):
                kind = types[0] if len(types) == 1 else (types[k] if k < len(types) else None)
                if kind is None:
                    continue
                i = self.ack(member, e, ts, topic_id, partition, offset, int(kind))
                if i is not None:
                    sent.append((i, topic_id, partition, int(kind)))
        self.pending[n] = sent
        if epoch == -1:
            # Closing: what the member still holds on this broker goes back once the close is
            # processed (its acknowledgements in the same request come first).
            self.end_session(s, ts, "closed", f"epoch -1 at {_clock(ts)}", False)

    def ack(
        self,
        member: str,
        e: Event,
        ts: datetime,
        topic_id: str,
        partition: int,
        offset: int,
        kind: int,
    ) -> int | None:
        i = self.mine.get((member, topic_id, partition, offset))
        if i is None:
            # Acquired before the capture began: the acknowledgement still gets its row.
            i = self.new_attempt(e, None, topic_id, partition, offset, None, None)
        a = self.attempts[i]
        if a.terminal is not None:
            return None  # already ended by an earlier acknowledgement of this attempt
        if kind == 4:
            a.renewals += 1
            a.last_renewed_at = ts
            return i
        a.terminal = kind
        a.ack_type = ACK_TYPES.get(kind, f"type_{kind}")
        a.ack_via = "share_fetch" if e["kind"] == "fetch" else "share_acknowledge"
        a.ack_sent_at = ts
        return i

    # -- answers ---------------------------------------------------------------------------------

    def answer(self, n: int, e: Event) -> None:
        at: datetime = e["resp_ts"]
        d = _detail(e)
        top = e.get("error") or 0
        key = (str(e.get("member_id")), e.get("broker") or "")
        s = self.sessions.get(key)
        if top and s is not None:
            s.errors.add(error_name(top) or str(top))
        parts = {(p[0], p[1]): p for p in d.get("parts") or []}
        for i, topic_id, partition, kind in self.pending.pop(n, []):
            a = self.attempts[i]
            p = parts.get((topic_id, partition))
            if top:
                code = top
            elif p is None:
                continue  # the answer does not mention the partition: unconfirmed
            else:
                code = p[3] if e["kind"] == "fetch" else p[2]
            a.ack_confirmed_at = at
            a.ack_error = code or None
            self.ack_errors[(topic_id, partition)] = (at, code or None)
        if top in SESSION_LOST and s is not None:
            self.end_session(
                s, at, "lost", f"{error_name(top)} at {_clock(at)}", True  # released earlier
            )
            s = None
        if e["kind"] != "fetch" or top:
            return
        lock_ms = e.get("lock_ms")
        base = self.attempt_base(e, at, lock_ms)
        for topic_id, partition, perr, _ack_err, ranges in parts.values():
            if perr and s is not None:
                s.errors.add(error_name(perr) or str(perr))
            for first, last, count in ranges or []:
                if first is None or last is None or last < first or last - first >= MAX_RANGE:
                    self.problems.append(
                        f"acquired range {first}-{last} of {topic_id}:{partition} skipped"
                    )
                    continue
                if s is None:
                    s = self.session(e)
                    s.first_seen = s.last_seen = e["ts"]
                    s.first_epoch = s.last_epoch = e.get("epoch")
                held = s.held
                for offset in range(first, last + 1):
                    held.add(
                        self.new_attempt(e, at, topic_id, partition, offset, count, lock_ms, base)
                    )
                s.acquired += last - first + 1
                self.acquisitions[(topic_id, partition)].append((at, e["ts"], last))

    def new_attempt(
        self,
        e: Event,
        at: datetime | None,
        topic_id: str,
        partition: int,
        offset: int,
        count: int | None,
        lock_ms: int | None,
        base: _FromAnswer | None = None,
    ) -> int:
        """An attempt at `offset`; `base` (attempt_base(e, at, lock_ms)) when the caller makes
        many from one answer: the event's columns computed once."""
        key = (topic_id, partition, offset)
        member = e["member_id"]
        prev = self.latest.get(key)
        i = len(self.attempts)
        if at is not None and prev is not None:
            p = self.attempts[prev]
            if p.next_acquired_at is None:
                p.next_member_id = member
                p.next_acquired_at = at
        self.attempts.append(
            _Attempt(
                self.group_id,
                base if base is not None else self.attempt_base(e, at, lock_ms),
                topic_id,
                self.names.get(topic_id, topic_id),
                partition,
                offset,
                count,
            )
        )
        if at is not None or prev is None:
            self.latest[key] = i
        self.mine[(member, topic_id, partition, offset)] = i
        return i

    def attempt_base(self, e: Event, at: datetime | None, lock_ms: int | None) -> _FromAnswer:
        """An attempt's columns that come from its answer `e` alone (new_attempt adds the
        record's)."""
        return _FromAnswer(
            member_id=e["member_id"],
            consumer_client_id=e.get("client_id"),
            consumer_connection=e.get("connection_id"),
            broker=e.get("broker"),
            session_epoch=e.get("epoch"),
            fetch_requested_at=e["ts"] if at is not None else None,
            acquired_at=at,
            lock_ms=lock_ms,
            lock_expires_by=(
                at + timedelta(milliseconds=lock_ms) if at is not None and lock_ms else None
            ),
        )

    def offsets(self, e: Event) -> None:
        """A DescribeShareGroupOffsets answer: the broker's own start offsets and lags."""
        at = e.get("resp_ts") or e["ts"]
        for topic_id, topic, partition, start, lag, err in _detail(e).get("parts") or []:
            if err:
                continue
            key = (topic_id or topic, partition)
            self.described[key] = {"start": start, "lag": lag, "at": at, "topic": topic}

    # -- the verdicts ----------------------------------------------------------------------------

    def finish(self, capture_end: datetime | None) -> None:
        for a in self.attempts:
            a.outcome, a.outcome_at, a.inferred, a.evidence = _outcome(a, capture_end)


def _outcome(a: _Attempt, end: datetime | None) -> tuple[str, datetime | None, bool, str | None]:
    kind = a.terminal
    deadline = a.lock_expires_by
    if a.last_renewed_at is not None and a.lock_ms:
        deadline = a.last_renewed_at + timedelta(milliseconds=a.lock_ms)
    nxt = a.next_acquired_at
    late = None
    if kind is not None and nxt is not None and a.ack_sent_at is not None:
        if nxt < a.ack_sent_at:
            # The offset had gone to another attempt before this acknowledgement was sent: the
            # broker ignored it (error 0 when the record was already terminal) or refused it.
            late = f"its {a.ack_type} came late, at {_clock(a.ack_sent_at)}"
            if a.ack_error is not None:
                late += f", refused with {error_name(a.ack_error)}"
            kind = None
    if kind is not None and a.ack_error is None:
        return _TERMINAL.get(kind, "accepted"), a.ack_sent_at, False, None
    if kind is not None:
        refused = f"{a.ack_type} refused with {error_name(a.ack_error)}"
        if nxt is not None and (deadline is None or nxt >= deadline):
            return "lock_expired", deadline, True, f"{refused}; acquired again at {_clock(nxt)}"
        return "ack_refused", a.ack_confirmed_at, False, refused
    suffix = f"; {late}" if late else ""
    if a.closed_at is not None and (nxt is None or a.closed_at <= nxt):
        why = f"{a.closed_why}{suffix}"
        return "session_closed", a.closed_at, bool(a.closed_inferred), why
    if nxt is not None:
        if deadline is not None and nxt < deadline:
            why = f"acquired again at {_clock(nxt)}, before its lock ran out, with no release"
            return "session_closed", nxt, True, why + suffix
        why = f"acquired again at {_clock(nxt)}{suffix}"
        return "lock_expired", deadline or nxt, True, why
    if deadline is not None and end is not None and deadline <= end:
        return "lock_expired", deadline, True, "its lock ran out before the capture ended"
    if a.renewals:
        return "renewed", a.last_renewed_at, False, None
    return "open", None, False, None


def _clock(ts: datetime | None) -> str:
    return ts.strftime("%H:%M:%S.%f")[:-3] if ts is not None else "?"


def share_history(
    group_id: str,
    events: list[Event],
    capture_end: datetime | None,
    names: dict[str, str] | None = None,
) -> dict[str, list[Any]]:
    """The share tables' rows of one group from its events (any order: sorted here): the
    deliveries and records as _Row objects (by far the most rows), the sessions and progress
    as dicts; either is read by column name (`row["offset"]`). `events` is emptied once
    replayed, so that a large group's events are let go of before its rows are made."""
    g = _Group(group_id, names or {})
    steps: list[tuple[datetime, int, int, str]] = []
    for n, e in enumerate(events):
        if e["kind"] in ("fetch", "ack"):
            steps.append((e["ts"], 0, n, "request"))
            if e.get("resp_ts") is not None and e.get("answered", True):
                steps.append((e["resp_ts"], 1, n, "answer"))
        elif e["kind"] == "offsets" and e.get("resp_ts") is not None:
            steps.append((e["resp_ts"], 1, n, "offsets"))
    steps.sort(key=lambda s: (s[0], s[1], s[2]))
    for _, _, n, what in steps:
        e = events[n]
        if what == "request":
            g.request(n, e)
        elif what == "answer":
            g.answer(n, e)
        else:
            g.offsets(e)
    g.finish(capture_end)
    del steps
    events.clear()
    # Only the replay above looks offsets up (a key per attempt, about 225 MB for 760k).
    g.latest.clear()
    g.mine.clear()
    deliveries = _delivery_rows(g)
    records = _record_rows(g, capture_end)
    return {
        "deliveries": deliveries,
        "records": records,
        "sessions": _session_rows(g),
        "progress": _progress_rows(g, records, deliveries, capture_end),
    }


def _delivery_rows(g: _Group) -> list[_Attempt]:
    """The attempts in the table's order (each is its row)."""
    for a in g.attempts:
        if a.ack_error is not None:
            a.ack_error_name = error_name(a.ack_error)
    # Stable: attempts of one offset at the same instant stay in the order they were made.
    return sorted(
        g.attempts,
        key=lambda a: (
            a.topic or "",
            a.partition,
            a.offset,
            a.acquired_at or a.ack_sent_at or datetime.min,
        ),
    )


class _Later:
    """Per partition, whether the group acquired offsets past `offset` in a ShareFetch requested
    at or after `at`: acquisitions in time order with the highest offset acquired from each on
    (a binary search and a lookup, not a scan per record)."""

    def __init__(self, acquisitions: list[tuple[datetime, datetime | None, int]]) -> None:
        order = sorted((requested or acquired, top) for acquired, requested, top in acquisitions)
        self.times = [t for t, _ in order]
        self.highest = [top for _, top in order]
        for i in range(len(self.highest) - 2, -1, -1):
            self.highest[i] = max(self.highest[i], self.highest[i + 1])

    def past(self, at: datetime | None, offset: int) -> bool:
        if at is None:
            return False
        i = bisect_left(self.times, at)
        return i < len(self.times) and self.highest[i] > offset


_RECORD_KEY = attrgetter("topic_id", "partition", "offset")


def _record_rows(g: _Group, end: datetime | None) -> list[_Record]:
    # Each offset's attempts in time order (stable: made first, first at the same instant),
    # the offsets in order: one sort, not a list per offset.
    in_order = sorted(
        g.attempts,
        key=lambda a: (
            a.topic_id,
            a.partition,
            a.offset,
            a.acquired_at or a.ack_sent_at or datetime.min,
        ),
    )
    later = {key: _Later(acq) for key, acq in g.acquisitions.items()}
    rows = []
    for (topic_id, partition, offset), run in groupby(in_order, _RECORD_KEY):
        tries = list(run)
        last = tries[-1]
        outcome = last.outcome
        reason = None
        inferred = bool(last.inferred)
        archived_at = None
        if outcome == "accepted":
            state = "acknowledged"
        elif outcome in ("rejected", "gap"):
            state, reason, archived_at = "archived", outcome, last.outcome_at
        elif outcome in ("open", "renewed"):
            state = "in_flight"
        else:
            # Back to available; archived instead when its count was the limit, which shows
            # as the group acquiring later records of the partition after the release without
            # this one among them (the broker hands out the lowest available offsets first).
            released_at = last.outcome_at
            went_on = later.get((topic_id, partition))
            if went_on is not None and went_on.past(released_at, offset):
                state, reason, inferred, archived_at = "archived", "delivery_limit", True, None
                archived_at = released_at
            else:
                state = "available"
        if len(tries) == 1:  # most records: one attempt (the same values, without the scans)
            count, at = last.delivery_count, last.acquired_at
            counts = [count] if count is not None else []
            acquired = [at] if at is not None else []
            members = [last.member_id]
            outcomes = {last.outcome: 1}
            refused = int(last.ack_error is not None)
        else:
            counts = [a.delivery_count for a in tries if a.delivery_count is not None]
            acquired = [a.acquired_at for a in tries if a.acquired_at is not None]
            members = list(dict.fromkeys(a.member_id for a in tries))
            outcomes = {}
            for a in tries:
                outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
            refused = sum(a.ack_error is not None for a in tries)
        accepted_at = last.ack_sent_at if state == "acknowledged" else None
        first_at = min(acquired) if acquired else None
        rows.append(
            _Record(
                group_id=g.group_id,
                topic=g.names.get(topic_id, topic_id),
                topic_id=topic_id,
                partition=partition,
                offset=offset,
                attempts=len(acquired),
                max_delivery_count=max(counts) if counts else None,
                members=members,
                first_acquired_at=first_at,
                last_acquired_at=max(acquired) if acquired else None,
                final_state=state,
                archived_reason=reason,
                archived_at=archived_at,
                inferred=inferred,
                accepted_at=accepted_at,
                accepted_by=last.member_id if state == "acknowledged" else None,
                acquire_to_accept_ms=_ms(first_at, accepted_at),
                releases=outcomes.get("released", 0),
                lock_expiries=outcomes.get("lock_expired", 0),
                session_releases=outcomes.get("session_closed", 0),
                refused_acks=refused,
            )
        )
    return rows


def _session_rows(g: _Group) -> list[Row]:
    for s in list(g.sessions.values()):
        s.ending, s.evidence = "open_at_end", "no close seen"
        g.done.append(s)
    g.sessions.clear()
    rows = []
    for s in sorted(g.done, key=lambda s: (s.first_seen or datetime.min, s.member, s.broker)):
        rows.append(
            {
                "group_id": g.group_id,
                "member_id": s.member,
                "client_id": s.client_id,
                "broker": s.broker,
                "opened_at": s.opened_at,
                "first_seen": s.first_seen,
                "last_seen": s.last_seen,
                "first_epoch": s.first_epoch,
                "last_epoch": s.last_epoch,
                "fetches": s.fetches,
                "acknowledges": s.acknowledges,
                "records_acquired": s.acquired,
                "ended_at": s.ended_at,
                "ending": s.ending,
                "ending_evidence": s.evidence,
                "errors_seen": sorted(s.errors),
            }
        )
    return rows


def _progress_rows(
    g: _Group, records: list[_Record], deliveries: list[_Attempt], end: datetime | None
) -> list[Row]:
    parts: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        p = parts.setdefault((r.topic_id, r.partition), {"records": [], "deliveries": []})
        p["records"].append(r)
    for d in deliveries:
        key = (d.topic_id, d.partition)
        parts.setdefault(key, {"records": [], "deliveries": []})["deliveries"].append(d)
    for key in g.described:
        parts.setdefault(key, {"records": [], "deliveries": []})
    group_end = max(
        (
            t
            for d in deliveries
            for t in (d.acquired_at, d.ack_confirmed_at, d.ack_sent_at)
            if t is not None
        ),
        default=end,
    )
    rows = []
    for (topic_id, partition), p in sorted(parts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        recs, dels = p["records"], p["deliveries"]
        states: dict[str, int] = defaultdict(int)
        for r in recs:
            states[r.final_state] += 1
        acquired = [d for d in dels if d.acquired_at is not None]
        redeliveries = sum((d.delivery_count or 1) > 1 for d in acquired)
        open_offsets = sorted(r.offset for r in recs if r.final_state in ("in_flight", "available"))
        seen = sorted(r.offset for r in recs)
        start = open_offsets[0] if open_offsets else (seen[-1] + 1 if seen else None)
        desc = g.described.get((topic_id, partition))
        last_touch = max(
            (t for d in dels for t in (d.acquired_at, d.ack_sent_at) if t is not None),
            default=None,
        )
        ack_at, ack_err = g.ack_errors.get((topic_id, partition), (None, None))
        poison = sum(
            r.final_state == "archived" and r.archived_reason in ("delivery_limit", "rejected")
            for r in recs
        )
        stuck = [
            r
            for r in recs
            if r.final_state in ("in_flight", "available") and (r.attempts or 0) >= 2
        ]
        waiting = len(open_offsets)
        quiet = _ms(last_touch, group_end)
        if ack_err:
            status = "ERR"
        elif waiting and quiet is not None and quiet > STOP_AFTER_MS:
            status = "STOP"
        elif stuck and start is not None and any(r.offset == start for r in stuck):
            status = "STALL"
        else:
            status = "OK"
        rows.append(
            {
                "group_id": g.group_id,
                "topic": g.names.get(topic_id, (desc or {}).get("topic") or topic_id),
                "topic_id": topic_id,
                "partition": partition,
                "records": len(recs),
                "deliveries": len(acquired),
                "redeliveries": redeliveries,
                "redelivery_rate": (redeliveries / len(acquired)) if acquired else None,
                "acknowledged": states["acknowledged"],
                "archived": states["archived"],
                "in_flight": states["in_flight"],
                "available": states["available"],
                "poison_records": poison,
                "start_offset": start,
                "settled_past_start": sum(
                    r.final_state in ("acknowledged", "archived")
                    for r in recs
                    if start is not None and r.offset >= start
                ),
                "described_start_offset": desc["start"] if desc else None,
                "described_lag": desc["lag"] if desc and (desc["lag"] or 0) >= 0 else None,
                "described_at": desc["at"] if desc else None,
                "last_acquired_at": max((d.acquired_at for d in acquired), default=None),
                "last_ack_error": error_name(ack_err),
                "last_ack_error_at": ack_at if ack_err else None,
                "status": status,
            }
        )
    return rows
