"""Each consumer group's story in plain language, told from the tables under OUT/groups/.

`kwire groups OUT [--group G]` prints it. It reads the tables the decode job wrote (with pyarrow,
on the driver: they hold one row per generation, member, partition or commit, not per frame, and
only the rows of the groups asked for are read) and turns them into short timed sentences:

    15:24:08.665 generation 5: rdk-coop-c joined; clicks 0 taken from rdk-coop-b (revoked
                 first, cooperative); 3 members; rebalance took 5.0 s (join 5.0 s, sync 0.3 ms)

The story says what the tables say and no more: a cause or an ending comes with the evidence the
table quotes, and "unknown" stays unknown.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

Row = dict[str, Any]
# The per-group tables (all but latency and clients, which are per connection or api).
PER_GROUP = (
    "generations",
    "members",
    "assignments",
    "assignment_changes",
    "commits",
    "progress",
    "coordinators",
)


class StoryError(Exception):
    """OUT is not a decode job's output with group tables (named in the message)."""


@dataclass
class Group:
    """One group's rows of every per-group table, in time order."""

    group_id: str
    tables: dict[str, list[Row]] = field(default_factory=dict)

    def rows(self, table: str) -> list[Row]:
        return self.tables.get(table, [])

    @property
    def protocol(self) -> str:
        gens = self.rows("generations")
        if gens:
            return str(gens[0]["protocol"])
        return "share" if self.share_tables() else "classic"

    def share_tables(self) -> dict[str, list[Row]]:
        """The group's OUT/share rows by table (deliveries, records, sessions, progress)."""
        return {
            name[len("share_") :]: rows
            for name, rows in self.tables.items()
            if name.startswith("share_") and rows
        }


def _read(path: Path, group: str | None, columns: list[str] | None = None) -> list[Row]:
    import pyarrow.dataset as ds

    dataset = ds.dataset(str(path), format="parquet")
    filt = (ds.field("group_id") == group) if group is not None else None
    rows: list[Row] = dataset.to_table(columns=columns, filter=filt).to_pylist()
    return rows


def load(out: str | Path, group: str | None = None) -> dict[str, Group]:
    """The groups under OUT/groups (only `group` when given), each with its rows. OUT must be
    a finished job's (its manifest says so) that wrote the group tables."""
    from kwire.spark import manifest

    base = Path(out) / "groups"
    try:
        for name in PER_GROUP:
            manifest.require(str(out), f"groups/{name}", "with --no-groups")
    except manifest.IncompleteOutput as e:
        raise StoryError(str(e)) from None
    missing = [name for name in PER_GROUP if not (base / name).exists()]
    if missing:
        raise StoryError(
            f"{base}: no group tables ({', '.join(missing)} missing), though its manifest "
            "lists them; run the decode job again with --overwrite"
        )
    groups: dict[str, Group] = {}
    for name in PER_GROUP:
        for row in _read(base / name, group):
            gid = row["group_id"]
            groups.setdefault(gid, Group(gid)).tables.setdefault(name, []).append(row)
    order = {
        "generations": ("generation",),
        "members": ("first_seen", "member_id"),
        "assignments": ("generation", "member_id", "topic"),
        "assignment_changes": ("to_generation", "topic", "partition"),
        "commits": ("ts",),
        "progress": ("topic", "partition"),
        "coordinators": ("from_ts",),
    }
    # What describe calls answered (older outputs have no such table), for the groups the
    # tables above know: a group seen only in describe answers has its rows there alone.
    described = base / "described"
    if described.exists():
        for row in _read(described, group):
            if row["group_id"] in groups:
                groups[row["group_id"]].tables.setdefault("described", []).append(row)
    order["described"] = ("described_at", "member_id")
    # Share groups' records (OUT/share, from outputs that have it: older ones do not).
    from kwire.groups.share_story import SHARE_TABLES

    for name in SHARE_TABLES:
        path = Path(out) / "share" / name
        if not path.exists():
            continue
        for row in _read(path, group):
            gid = row["group_id"]
            groups.setdefault(gid, Group(gid)).tables.setdefault(f"share_{name}", []).append(row)
    for g in groups.values():
        for name, keys in order.items():
            g.tables.get(name, []).sort(key=lambda r: tuple(_sortable(r[k]) for k in keys))
    return dict(sorted(groups.items()))


def _sortable(v: Any) -> tuple[int, Any]:
    return (1, "") if v is None else (0, v)


# -- wording --------------------------------------------------------------------------------------


def clock(ts: datetime | None) -> str:
    return ts.strftime("%H:%M:%S.%f")[:-3] if ts is not None else "--:--:--.---"


def span(ms: float | None) -> str:
    """A duration as people say it: 0.3 ms, 12 ms, 3.1 s, 2 min 5 s."""
    if ms is None:
        return "?"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60_000)} min {ms % 60_000 / 1000:.0f} s"


def ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3,5'."""
    parts: list[str] = []
    ns = sorted(set(numbers))
    i = 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        parts.append(str(ns[i]) if i == j else f"{ns[i]}-{ns[j]}")
        i = j + 1
    return ",".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


class Names:
    """How members are called in a group's story: their client id, with the member id added
    where one client id stands for several members (restarts, several consumers per client id).
    """

    def __init__(self, members: list[Row]) -> None:
        by_client: dict[str, list[str]] = defaultdict(list)
        for m in members:
            by_client[m["client_id"] or "?"].append(m["member_id"])
        self._names: dict[str, str] = {}
        for client, ids in by_client.items():
            for mid in ids:
                self._names[mid] = client if len(ids) == 1 else f"{client} [{_short(mid)}]"
        self.addr = {m["member_id"]: m["client_addr"] for m in members}

    def in_text(self, text: str) -> str:
        """Member ids quoted in an evidence text, called by their names."""
        for mid in sorted(self._names, key=len, reverse=True):
            if mid in text and self._names[mid] != mid:
                text = text.replace(mid, self._names[mid])
        return text

    def __call__(self, member_id: str | None) -> str:
        if member_id is None:
            return "?"
        return self._names.get(member_id, _short(member_id))

    def with_addr(self, member_id: str | None) -> str:
        addr = self.addr.get(member_id or "")
        return f"{self(member_id)} ({addr})" if addr else self(member_id)


def _short(member_id: str) -> str:
    """A member id short enough to read: Java's '<client>-<uuid>' keeps 8 chars of the uuid."""
    if len(member_id) <= 16:
        return member_id
    return member_id[:6] + "…" + member_id[-6:]


# -- one group ------------------------------------------------------------------------------------


def _cause(g: Row, names: Names, members: dict[str, Row]) -> str:
    who = g["cause_member_id"]
    cause = g["cause"]
    evidence = names.in_text(g["cause_evidence"] or "")
    if evidence.startswith("second round of generation"):
        # The same rebalance again (a failed SyncGroup, a cooperative hand-over): say why.
        return evidence.replace(evidence.split(":")[0], evidence.split(" (")[0], 1)
    if cause == "first_join":
        first = "first generation seen"
        if evidence.startswith("generation went back"):
            first = f"the group started over ({evidence})"
        if g["leader_member_id"]:
            return f"{first}, led by {names.with_addr(g['leader_member_id'])}"
        return f"{first}, {names.with_addr(who)} joined" if who else first
    if cause == "member_joined" and evidence.startswith("static member"):
        return f"{names.with_addr(who)} came back: {evidence}"
    if cause == "member_joined":
        joined = g["members_joined"] or ([who] if who else [])
        return " and ".join(names.with_addr(m) for m in joined) + " joined"
    if cause == "member_left":
        return f"{names.with_addr(who)} left ({evidence})"
    if cause == "poll_timeout":
        return f"{names.with_addr(who)} left after a poll timeout ({evidence})"
    if cause == "member_evicted":
        m = members.get(who or "")
        gap = ""
        if m is not None and m["last_heartbeat_at"] is not None and g["started_at"] is not None:
            quiet = (g["started_at"] - m["last_heartbeat_at"]).total_seconds() * 1000
            gap = f", silent for {span(quiet)} before this rebalance"
        timeout = ""
        if m is not None and m["session_timeout_ms"]:
            timeout = f", session timeout {span(m['session_timeout_ms'])}"
        leave = "LeaveGroup" if g["protocol"] == "classic" else "leave (heartbeat epoch -1)"
        return f"{names.with_addr(who)} evicted{gap}{timeout}, no {leave}"
    if cause == "subscription_changed":
        return f"{names(who)} changed its subscription ({evidence})"
    if cause == "metadata_changed":
        return f"topic metadata changed ({evidence})"
    if cause == "leader_rejoined":
        return f"the leader {names(who)} rejoined ({evidence})"
    return f"cause unknown ({evidence})" if evidence else "cause unknown"


def _changes(rows: list[Row], names: Names) -> list[str]:
    """'clicks 3,4 moved rdk-a -> rdk-b', grouped by kind, members and topic."""
    grouped: dict[tuple[str, str | None, str | None, str], list[int]] = defaultdict(list)
    for c in rows:
        grouped[(c["kind"], c["from_member"], c["to_member"], c["topic"])].append(c["partition"])
    said = []
    for (kind, src, dst, topic), parts in sorted(
        grouped.items(), key=lambda kv: tuple(_sortable(x) for x in kv[0])
    ):
        what = f"{topic} {ranges(parts)}"
        if kind == "moved":
            said.append(f"{what} moved {names(src)} -> {names(dst)}")
        elif kind == "added":
            said.append(f"{what} to {names(dst)}")
        else:
            said.append(f"{what} taken from {names(src)}")
    return said


def _assignment(rows: list[Row], names: Names) -> str:
    by_member: dict[str, list[str]] = defaultdict(list)
    for a in rows:
        by_member[a["member_id"]].append(f"{a['topic']} {ranges(a['partitions'] or [])}")
    if not by_member:
        return "nothing assigned"
    return "; ".join(f"{names(m)}: {', '.join(ts)}" for m, ts in sorted(by_member.items()))


def _outcome(g: Row, protocol: str) -> str:
    if protocol != "classic":
        return ""
    if g["outcome"] == "completed":
        phases = []
        if g["join_phase_ms"] is not None:
            phases.append(f"join {span(g['join_phase_ms'])}")
        if g["sync_phase_ms"] is not None:
            phases.append(f"sync {span(g['sync_phase_ms'])}")
        detail = f" ({', '.join(phases)})" if phases else ""
        return f"rebalance took {span(g['duration_ms'])}{detail}"
    if g["outcome"] == "failed":
        return "the rebalance failed: no SyncGroup of this generation succeeded"
    return "still rebalancing when the capture ended"


def _timeline(group: Group, names: Names) -> list[tuple[datetime | None, str]]:
    members = {m["member_id"]: m for m in group.rows("members")}
    gens = group.rows("generations")
    word = "generation" if group.protocol == "classic" else "epoch"
    assignments: dict[int, list[Row]] = defaultdict(list)
    for a in group.rows("assignments"):
        assignments[a["generation"]].append(a)
    changes: dict[int, list[Row]] = defaultdict(list)
    for c in group.rows("assignment_changes"):
        changes[c["to_generation"]].append(c)
    lines: list[tuple[datetime | None, str]] = []
    for i, g in enumerate(gens):
        parts = [_cause(g, names, members)]
        if i == 0 or not changes.get(g["generation"]):
            if assignments.get(g["generation"]):
                parts.append(_assignment(assignments[g["generation"]], names))
        else:
            parts.extend(_changes(changes[g["generation"]], names))
        parts.append(_plural(g["members"] or 0, "member"))
        outcome = _outcome(g, group.protocol)
        if outcome:
            parts.append(outcome)
        lines.append((g["started_at"], f"{word} {g['generation']}: " + "; ".join(parts)))
    # Endings no generation tells (the last member leaving, a static member coming back under its
    # instance id without a rebalance, a member evicted after the last generation).
    told = {
        g["cause_member_id"]
        for g in gens
        if g["cause"] in ("member_left", "member_evicted", "poll_timeout")
    }
    # A static restart the coordinator answered with a rebalance is told by that generation.
    rejoined = {g["cause_member_id"] for g in gens if g["cause"] == "member_joined"}
    for m in group.rows("members"):
        ending, evidence = m["ending"], m["ending_evidence"] or ""
        if ending in ("active_at_end", "unknown") or m["member_id"] in told:
            continue
        who = names.with_addr(m["member_id"])
        if ending == "static_restart":
            successors = {
                o["member_id"]
                for o in group.rows("members")
                if o["group_instance_id"] == m["group_instance_id"]
                and o["first_seen"] == m["ending_at"]
            }
            if successors & rejoined:
                continue
            text = f"{who} restarted under its instance id {m['group_instance_id']}: {evidence}"
            text += ", without a rebalance"
        elif ending == "evicted":
            text = f"{who} evicted: {evidence}"
        elif ending == "left_poll_timeout":
            text = f"{who} left after a poll timeout ({evidence})"
        elif ending == "fenced":
            text = f"{who} fenced: {evidence}"
        else:
            text = f"{who} left ({evidence})"
        lines.append((m["ending_at"], text))
    share = group.share_tables()
    if share:
        from kwire.groups.share_story import share_lines

        lines.extend(share_lines(share, names, clock, span))
    lines.sort(key=lambda tl: _sortable(tl[0]))
    return lines


def _member_line(m: Row, names: Names) -> str:
    bits = [names(m["member_id"])]
    ident = f"member {m['member_id']}"
    if m["group_instance_id"]:
        ident += f", instance {m['group_instance_id']}"
    bits.append(ident)
    if m["client_addr"]:
        bits.append(f"from {m['client_addr']}")
    if m["client_software"]:
        bits.append(m["client_software"])
    first, last = m["first_generation"], m["last_generation"]
    if first is not None:
        bits.append(f"generation {first}" if first == last else f"generations {first}-{last}")
    if m["session_timeout_ms"]:
        bits.append(f"session timeout {span(m['session_timeout_ms'])}")
    if m["max_heartbeat_gap_ms"] is not None:
        bits.append(f"longest heartbeat gap {span(m['max_heartbeat_gap_ms'])}")
    ending = m["ending"].replace("_", " ")
    when = f" at {clock(m['ending_at'])}" if m["ending_at"] is not None else ""
    evidence = f" ({m['ending_evidence']})" if m["ending_evidence"] else ""
    text = ", ".join(bits) + f": {ending}{when}{evidence}"
    if m["errors_seen"]:
        text += f"; errors seen: {', '.join(m['errors_seen'])}"
    return text


def _commit_lines(group: Group, names: Names) -> list[str]:
    commits = group.rows("commits")
    if not commits:
        return ["commits: none in the capture"]
    failed = [c for c in commits if c["error"]]
    parts = {(c["topic"], c["partition"]) for c in commits}
    lines = [
        f"commits: {len(commits)} over {_plural(len(parts), 'partition')}, " f"{len(failed)} failed"
    ]
    why: dict[tuple[str, str | None, int | None], list[Row]] = defaultdict(list)
    for c in failed:
        why[(c["error"], c["member_id"], c["generation"])].append(c)
    for (error, member, gen), rows in sorted(
        why.items(), key=lambda kv: tuple(_sortable(x) for x in kv[0])
    ):
        first = min(r["ts"] for r in rows)
        lines.append(
            f"  {clock(first)} {error}: {_plural(len(rows), 'commit')} by {names(member)} "
            f"at generation {gen if gen is not None else '?'}"
        )
    return lines


def _progress_lines(group: Group) -> list[str]:
    rows = group.rows("progress")
    if not rows:
        return []
    grouped: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for p in rows:
        grouped[(p["topic"], p["status"])].append(p)
    lines = ["progress (Burrow's rules over the capture window):"]
    for (topic, status), ps in sorted(grouped.items()):
        text = f"  {topic} {ranges([p['partition'] for p in ps])}: {status}"
        offsets = [
            f"{p['partition']}@{p['last_offset']}" for p in ps if p["last_offset"] is not None
        ]
        if offsets:
            text += f", last committed {' '.join(offsets[:8])}" + (
                " ..." if len(offsets) > 8 else ""
            )
        lags = [p for p in ps if p["lag"] is not None]
        if lags:
            total = sum(p["lag"] for p in lags)
            source = sorted({p["lag_source"] for p in lags if p["lag_source"]})
            text += f", lag {total}" + (f" (from {', '.join(source)})" if source else "")
        lines.append(text)
    behind = _behind(group.group_id, rows)
    if behind:
        lines.append(behind)
    return lines


def time_lag(progress: Row) -> float | None:
    """A progress row's time lag at the end: by the wire where the capture saw the record
    produced, else by its record timestamp (None when neither is known)."""
    ms = progress.get("time_lag_ms")
    return ms if ms is not None else progress.get("timestamp_lag_ms")


def _behind(group_id: str, rows: list[Row]) -> str | None:
    """How far behind the group was at the end of the capture, in time: its worst partition
    (the time lag of the oldest record it had not consumed, by when the capture saw the record
    produced, else by the record's timestamp)."""
    timed = [(ms, p) for ms, p in ((time_lag(p), p) for p in rows) if ms is not None]
    if not timed:
        return None
    ms, worst = max(timed, key=lambda t: (t[0], str(t[1]["topic"]), t[1]["partition"]))
    if ms == 0:
        return f"at the end of the capture {group_id} had consumed all there was (time lag 0)"
    text = f"at the end of the capture {group_id} is {span(ms)} behind on {worst['topic']}-{worst['partition']}"
    notes = []
    if worst.get("lag") is not None:
        notes.append(f"offset lag {worst['lag']}")
    if worst.get("time_lag_ms") is None:
        notes.append("by record timestamp: the capture did not see it produced")
    elif worst.get("timestamp_lag_ms") is not None:
        notes.append(f"{span(worst['timestamp_lag_ms'])} by record timestamp")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def tell_group(group: Group) -> list[str]:
    """The story of one group as lines of text."""
    names = Names(group.rows("members"))
    gens = group.rows("generations")
    members = group.rows("members")
    kind = {"share": "share group", "streams": "streams group"}.get(group.protocol)
    head = f"group {group.group_id} ({kind or group.protocol + ' protocol'}"
    assignors = sorted({g["assignor"] for g in gens if g["assignor"]})
    if assignors:
        head += f", assignor {', '.join(assignors)}"
    coords = group.rows("coordinators")
    if coords:
        c = coords[-1]
        head += f", coordinator node {c['node_id']} at {c['host']}:{c['port']}"
    lines = [head + ")"]
    seen = [t for m in members for t in (m["first_seen"], m["last_seen"]) if t is not None]
    endings: dict[str, int] = defaultdict(int)
    for m in members:
        endings[m["ending"].replace("_", " ")] += 1
    if seen:
        window = (max(seen) - min(seen)).total_seconds() * 1000
        word = "rebalance" if group.protocol == "classic" else "epoch"
        lines.append(
            f"  seen {clock(min(seen))} to {clock(max(seen))} ({span(window)}): "
            f"{_plural(len(gens), word)}, {_plural(len(members), 'member')} ("
            + ", ".join(f"{n} {e}" for e, n in sorted(endings.items()))
            + ")"
        )
    for ts, text in _timeline(group, names):
        lines.append(f"  {clock(ts)} {text}")
    if members:
        lines.append("  members:")
        lines.extend(f"    {_member_line(m, names)}" for m in members)
    lines.extend("  " + line for line in _described_lines(group, names))
    if group.protocol == "share":
        from kwire.groups.share_story import summary_lines

        # Share groups commit nothing: their records' fates and partitions' progress instead.
        lines.extend("  " + line for line in summary_lines(group.share_tables(), names, span))
        return lines
    lines.extend("  " + line for line in _commit_lines(group, names))
    lines.extend("  " + line for line in _progress_lines(group))
    return lines


def _described_lines(group: Group, names: Names) -> list[str]:
    """What describe calls answered: how many, by whom, and each answer that differs from the
    one before (state, epochs, members and what each held)."""
    rows = group.rows("described")
    if not rows:
        return []
    answers: dict[Any, list[Row]] = defaultdict(list)
    for r in rows:
        answers[(r["described_at"], r["asked_by"], r["coordinator"])].append(r)
    askers = sorted({r["asked_by"] or "?" for r in rows})
    lines = [
        f"described {_plural(len(answers), 'time')} (by {', '.join(askers)}); "
        "each answer that differed from the one before:"
    ]
    before = None
    for (at, _, _), answer in sorted(answers.items(), key=lambda kv: _sortable(kv[0][0])):
        first = answer[0]
        if first["error"]:
            text = f"refused: {first['error']}"
        else:
            text = first["state"] or "?"
            for key, word in (
                ("group_epoch", "group epoch"),
                ("assignment_epoch", "assignment epoch"),
                ("topology_epoch", "topology epoch"),
            ):
                if first[key] is not None and first[key] >= 0:
                    text += f", {word} {first[key]}"
            held = []
            for m in answer:
                if m["member_id"] is None:
                    continue
                part = names(m["member_id"])
                if m["member_epoch"] is not None:
                    part += f" (epoch {m['member_epoch']})"
                tasks = [
                    f"{word} {' '.join(sorted(m[key]))}"
                    for key, word in (
                        ("assigned", "active" if first["group_type"] == "streams" else "holds"),
                        ("standby", "standby"),
                        ("warmup", "warmup"),
                    )
                    if m[key]
                ]
                held.append(part + (" " + ", ".join(tasks) if tasks else ""))
            text += ": " + ("; ".join(held) if held else "no members")
        if text != before:
            lines.append(f"  {clock(at)} {text}")
        before = text
    return lines


def tell(out: str | Path, group: str | None = None) -> str:
    """Every group's story (or one group's), as the CLI prints it."""
    groups = load(out, group)
    if not groups:
        if group is not None:
            raise StoryError(f"no group {group!r} in {Path(out) / 'groups'}")
        return f"{Path(out) / 'groups'}: the capture holds no consumer group traffic\n"
    blocks = ["\n".join(tell_group(g)) for g in groups.values()]
    return "\n\n".join(blocks) + "\n"
