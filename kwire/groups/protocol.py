"""The group protocol's pass on the driver: the group APIs' requests paired with their answers,
their events (EVENTS) and each group's history (kwire.groups.history), in
plain Python over the rows collected once from Spark.

Why on the driver: these frames are a capture's fewest (JoinGroup, SyncGroup, heartbeats,
commits, FindCoordinator: a few thousand even on a ring of gigabytes, against millions of
records), and in Spark each of the steps that made them (the pairing join, the events' union of
a dozen families, each group's history in a Python worker) cost a query's fixed price, about a
second warm, on a capture of any size. Here one collect of the requests and one of the answers
of these families replace them; what reads the results in Spark (clients, coordinators, commits
and their lags, each group's end of the capture) gets them as frames made from these rows.

The share groups' data frames (ShareFetch, ShareAcknowledge, DescribeShareGroupOffsets) are not
here: they come with every record a share consumer takes, and their pass stays on the executors
(kwire.groups.share_build).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from kwire.groups.clock import Clock
from kwire.groups.errors import error_name
from kwire.groups.history import history
from kwire.groups.pairs import _json_value

# The families paired here (kwire.groups.build._GROUP_APIS without the share groups' data).
PROTOCOL_APIS = (
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "consumer_group_heartbeat",
    "share_group_heartbeat",
    "streams_group_heartbeat",
    "find_coordinator",
    "api_versions",
)
PER_GROUP = ("generations", "members", "assignments", "assignment_changes")
# What an event says (events()), the keys of the dicts kwire.groups.history reads: the request's
# time and its answer's, where it came from, the member and generation asked and answered, the
# error, the rebalance's own fields, and a JSON `detail` of what varies by kind.
EVENTS = (
    "group_id",
    "kind",
    "ts",
    "resp_ts",
    "connection_id",
    "client_addr",
    "client_id",
    "software",
    "member_id",
    "req_member_id",
    "instance_id",
    "generation",
    "req_generation",
    "error",
    "leader",
    "assignor",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "reason",
    "detail",
)
# The request's columns a pair keeps (kwire.groups.build.pair_all's, in its order).
_REQUEST = (
    ("connection_id", "connection_id"),
    ("client_addr", "client_addr"),
    ("client_port", "client_port"),
    ("broker_addr", "broker_addr"),
    ("broker_port", "broker_port"),
    ("client_id", "client_id"),
    ("correlation_id", "correlation_id"),
    ("api_version", "version"),
    ("ts_first", "ts"),
)
_RESPONSE = (
    ("ts_first", "resp_ts"),
    ("latency_us", "latency_us"),
    ("status", "resp_status"),
)


def _naive(ts: datetime | None) -> datetime | None:
    """A timestamp as the history reads it: naive UTC."""
    if ts is None or ts.tzinfo is None:
        return ts
    return ts.astimezone(timezone.utc).replace(tzinfo=None)


def _any_of(df: DataFrame, columns: Sequence[str]) -> Any:
    test = F.lit(False)
    for c in columns:
        test = test | F.col(c).isNotNull()
    return test


def collect(requests: DataFrame, responses: DataFrame) -> tuple[pa.Table, pa.Table, list[str]]:
    """The requests of the protocol's families and their answers (the narrowed, held decoded
    tables' rows and columns they need), as Arrow tables on the driver, and the families the
    requests have."""
    apis = [a for a in PROTOCOL_APIS if a in requests.columns]
    if not apis:
        return pa.table({}), pa.table({}), []
    rq = requests.where(_any_of(requests, apis)).select(
        *[F.col(c) for c, _ in _REQUEST], *[F.col(a) for a in apis]
    )
    present = [a for a in apis if a in responses.columns]
    raw = ["raw_error"] if "raw_error" in responses.columns else []
    # And the Metadata answers (topic names, the brokers' clusters: metadata()).
    meta = ["metadata"] if "metadata" in responses.columns else []
    rs = responses.where(_any_of(responses, present + raw + meta)).select(
        "connection_id",
        "correlation_id",
        *[F.col(c) for c, _ in _RESPONSE],
        *[F.col(c).cast("int") for c in raw],
        *present,
        *meta,
    )
    return rq.toArrow(), rs.toArrow(), apis


def metadata(rs: pa.Table) -> tuple[dict[str, str], dict[str, str]]:
    """From the collected Metadata answers (collect()): topic id -> name, and broker
    "host:port" -> cluster id (the least, where answers differ; kwire.groups.delivery.clusters
    makes the same in Spark for the records' steps)."""
    names: dict[str, str] = {}
    endpoints: dict[str, str] = {}
    if "metadata" not in rs.column_names:
        return names, endpoints
    answers = rs.column("metadata")
    for m in answers.filter(answers.is_valid()).to_pylist():
        for t in m.get("topics") or []:
            if t.get("topic_id") is not None and t.get("name") is not None:
                names[t["topic_id"]] = t["name"]
        cluster = m.get("cluster_id")
        if cluster is None:
            continue
        for b in m.get("brokers") or []:
            at = ":".join(str(x) for x in (b.get("host"), b.get("port")) if x is not None)
            if at not in endpoints or cluster < endpoints[at]:
                endpoints[at] = cluster
    return names, endpoints


def pair(rq: pa.Table, rs: pa.Table, apis: Sequence[str]) -> pa.Table:
    """Each request with its answer, as kwire.groups.build.pair_all pairs them: on the same
    connection and correlation id, the first answer at or after the request (one row per
    connection, correlation id and request time). Columns: the request's (renamed as
    pair_all's), `req_<api>` and `resp_<api>` structs, the answer's time, latency, status and
    raw error code."""
    if not apis:
        return pa.table({})
    # The answers of these families (collect() took the Metadata answers too).
    mask = pa.array([False] * rs.num_rows)
    for c in [f for f in apis if f in rs.column_names] + ["raw_error"]:
        if c in rs.column_names:
            mask = pc.or_(mask, rs.column(c).is_valid())
    rs = rs.filter(mask)
    answers: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
    if rs.num_rows:
        conn = rs.column("connection_id").to_pylist()
        corr = rs.column("correlation_id").to_pylist()
        at = rs.column("ts_first").cast(pa.int64()).to_pylist()
        for i, key in enumerate(zip(conn, corr)):
            if at[i] is not None:
                answers.setdefault(key, []).append((at[i], i))
        for found in answers.values():
            found.sort()
    conn = rq.column("connection_id").to_pylist()
    corr = rq.column("correlation_id").to_pylist()
    at = rq.column("ts_first").cast(pa.int64()).to_pylist()
    seen: set[tuple[Any, Any, Any]] = set()
    keep: list[int] = []
    answer: list[int | None] = []
    for i, key in enumerate(zip(conn, corr)):
        once = (key[0], key[1], at[i])
        if once in seen:  # pair_all's window keeps one row per (connection, correlation, time)
            continue
        seen.add(once)
        keep.append(i)
        # A null time joins nothing (pair_all's join condition is then null).
        first = None
        if at[i] is not None:
            first = next((j for t, j in answers.get(key, ()) if t >= at[i]), None)
        answer.append(first)
    req = rq.take(pa.array(keep, pa.int64()))
    picks = pa.array(answer, pa.int64())
    columns: dict[str, pa.ChunkedArray | pa.Array] = {}
    for source, name in _REQUEST:
        columns[name] = req.column(source)
    for a in apis:
        columns[f"req_{a}"] = req.column(a)
    # (An unanswered request's index is null: its answer's columns are null, typed.)
    for source, name in _RESPONSE:
        columns[name] = rs.column(source).take(picks)
    raw = "raw_error" in rs.column_names
    columns["resp_raw_error"] = (
        rs.column("raw_error").take(picks) if raw else pa.nulls(len(keep), pa.int32())
    )
    for a in apis:
        if a in rs.column_names:
            columns[f"resp_{a}"] = rs.column(a).take(picks)
        else:
            columns[f"resp_{a}"] = pa.nulls(len(keep))
    return pa.table(columns)


_OWN = ("connection_id", "client_addr", "client_id", "ts", "resp_ts", "resp_raw_error")


# Every column of a pair but the families' structs.
_BASE = tuple(name for _, name in _REQUEST + _RESPONSE) + ("resp_raw_error",)


def _paired_all(pairs: pa.Table, family: str) -> list[dict[str, Any]]:
    """_paired() with every column of the pair."""
    return _paired(pairs, family, _BASE)


def _paired(pairs: pa.Table, family: str, own: Sequence[str] = _OWN) -> list[dict[str, Any]]:
    """A family's pairs as dicts: the pair's `own` columns, `req` and `resp`."""
    if f"req_{family}" not in pairs.column_names:
        return []
    mask = pairs.column(f"req_{family}").is_valid()
    own = [
        *own,
        f"req_{family}",
        f"resp_{family}",
    ]
    rows = pairs.select([c for c in own if c in pairs.column_names]).filter(mask).to_pylist()
    for r in rows:
        for c in own:
            r.setdefault(c, None)
        r["req"] = r.pop(f"req_{family}") or {}
        r["resp"] = r.pop(f"resp_{family}")
        r["ts"] = _naive(r["ts"])
        r["resp_ts"] = _naive(r["resp_ts"])
    return rows


def _topic_map(entries: list[dict[str, Any]] | None, key: str, value: str) -> dict[str, list]:
    """[{key, partitions}] -> {key: sorted distinct partitions}, keys in their first order (a
    topic listed twice has the union of its entries' partitions, as Kafka's ConsumerProtocol
    reads an assignment into one list)."""
    out: dict[str, set] = {}
    for e in entries or []:
        k = e.get(key)
        if k is None:
            continue
        out.setdefault(k, set()).update(e.get(value) or [])
    return {k: sorted(v, key=lambda p: (p is None, p)) for k, v in out.items()}


def _json(detail: dict[str, Any]) -> str:
    """As Spark's to_json writes a struct: its null fields left out."""
    return json.dumps({k: v for k, v in detail.items() if v is not None}, separators=(",", ":"))


def _error(r: dict[str, Any]) -> int | None:
    resp = r["resp"]
    code = resp.get("error_code") if resp is not None else None
    return code if code is not None else r["resp_raw_error"]


def _get(d: dict[str, Any] | None, *path: Any) -> Any:
    for p in path:
        if d is None:
            return None
        if isinstance(p, int):
            d = d[p] if isinstance(d, list) and len(d) > p else None
        else:
            d = d.get(p)
    return d


def _event(r: dict[str, Any], kind: str, **own: Any) -> dict[str, Any]:
    return {
        "group_id": r["req"].get("group_id"),
        "kind": kind,
        "ts": r["ts"],
        "resp_ts": r["resp_ts"],
        "connection_id": r["connection_id"],
        "client_addr": r["client_addr"],
        "client_id": r["client_id"],
        **own,
    }


def _epoch_heartbeat(
    r: dict[str, Any], kind: str, detail_assignor: Any, **own: Any
) -> dict[str, Any]:
    req, resp = r["req"], r["resp"]
    assignment = _get(resp, "assignment")
    detail = {
        "assignment_ids": (
            None
            if assignment is None
            else _topic_map(assignment.get("topic_partitions"), "topic_id", "partitions")
        ),
        "assignor": detail_assignor,
    }
    return _event(
        r,
        kind,
        member_id=_coalesce(_get(resp, "member_id"), req.get("member_id")),
        req_member_id=req.get("member_id"),
        generation=_get(resp, "member_epoch"),
        req_generation=req.get("member_epoch"),
        error=_error(r),
        detail=_json(detail),
        **own,
    )


def _streams(r: dict[str, Any]) -> dict[str, Any]:
    req, resp = r["req"], r["resp"]
    given: dict[str, list] = {}
    for kind in ("active", "standby", "warmup"):
        for t in _get(resp, f"{kind}_tasks") or []:
            given[f"{kind}:{t.get('subtopology_id')}"] = sorted(
                t.get("partitions") or [], key=lambda p: (p is None, p)
            )
    status = [
        {k: v for k, v in (("code", x.get("status_code")), ("detail", x.get("status_detail")))
         if v is not None}
        for x in _get(resp, "status") or []
    ]  # fmt: skip
    detail = {
        "assignment": given if _get(resp, "active_tasks") is not None else None,
        "topology_epoch": _get(req, "topology", "epoch"),
        "process_id": req.get("process_id"),
        "status": status,
    }
    return _event(
        r,
        "stgh",
        member_id=_coalesce(_get(resp, "member_id"), req.get("member_id")),
        req_member_id=req.get("member_id"),
        instance_id=req.get("instance_id"),
        generation=_get(resp, "member_epoch"),
        req_generation=req.get("member_epoch"),
        error=_error(r),
        rebalance_timeout_ms=req.get("rebalance_timeout_ms"),
        detail=_json(detail),
    )


def _coalesce(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _join(r: dict[str, Any]) -> dict[str, Any]:
    req, resp = r["req"], r["resp"]
    members = _get(resp, "members")
    detail = {
        "topics": _get(req, "protocols", 0, "consumer_subscription", "topics"),
        "members": None if members is None else [m.get("member_id") for m in members],
    }
    return _event(
        r,
        "join",
        member_id=_get(resp, "member_id"),
        req_member_id=req.get("member_id"),
        instance_id=req.get("group_instance_id"),
        generation=_get(resp, "generation_id"),
        error=_error(r),
        leader=_get(resp, "leader"),
        assignor=_get(resp, "protocol_name"),
        session_timeout_ms=req.get("session_timeout_ms"),
        rebalance_timeout_ms=req.get("rebalance_timeout_ms"),
        reason=req.get("reason"),
        detail=_json(detail),
    )


def _sync(r: dict[str, Any]) -> dict[str, Any]:
    req, resp = r["req"], r["resp"]
    per_member = {
        a.get("member_id"): _topic_map(
            _get(a, "consumer_assignment", "assigned_partitions"), "topic", "partitions"
        )
        for a in req.get("assignments") or []
    }
    own = _get(resp, "consumer_assignment")
    detail = {
        "assignments": per_member,
        "own": None if own is None else _topic_map(
            own.get("assigned_partitions"), "topic", "partitions"
        ),
    }  # fmt: skip
    return _event(
        r,
        "sync",
        member_id=req.get("member_id"),
        req_member_id=req.get("member_id"),
        instance_id=req.get("group_instance_id"),
        generation=req.get("generation_id"),
        req_generation=req.get("generation_id"),
        error=_error(r),
        assignor=req.get("protocol_name"),
        detail=_json(detail),
    )


def _leave(r: dict[str, Any]) -> dict[str, Any]:
    req = r["req"]
    members = req.get("members") or []
    # v0-2 name one member_id; v3+ a list of members, each with its reason.
    if members:
        leaving = [[m.get("member_id"), m.get("reason")] for m in members]
    else:
        leaving = [[req.get("member_id"), None]]
    first = _get(req, "members", 0)
    return _event(
        r,
        "leave",
        member_id=_coalesce(req.get("member_id"), _get(first, "member_id")),
        req_member_id=req.get("member_id"),
        instance_id=_get(first, "group_instance_id"),
        error=_error(r),
        reason=_get(first, "reason"),
        detail=_json({"leaving": leaving}),
    )


def _simple(r: dict[str, Any], kind: str, generation: str) -> dict[str, Any]:
    req = r["req"]
    return _event(
        r,
        kind,
        member_id=req.get("member_id"),
        req_member_id=req.get("member_id"),
        instance_id=req.get("group_instance_id"),
        generation=req.get(generation),
        req_generation=req.get(generation),
        error=_error(r) if kind == "heartbeat" else None,
    )


def software(rq: pa.Table) -> dict[str, str]:
    """connection_id -> 'name version' from its ApiVersions v3+ request (the first seen)."""
    if "api_versions" not in rq.column_names:
        return {}
    out: dict[str, str] = {}
    asked = rq.select(["connection_id", "api_versions"]).filter(
        rq.column("api_versions").is_valid()
    )
    for r in asked.to_pylist():
        name = r["api_versions"].get("client_software_name")
        if name is None or r["connection_id"] in out:
            continue
        version = r["api_versions"].get("client_software_version")
        out[r["connection_id"]] = name if version is None else f"{name} {version}"
    return out


def events(pairs: pa.Table, soft: dict[str, str]) -> list[dict[str, Any]]:
    """Every group's protocol events (dicts with the keys EVENTS), in the pairs' order family
    by family; those without a group id left out."""
    made: list[dict[str, Any]] = []
    for r in _paired(pairs, "join_group"):
        made.append(_join(r))
    for r in _paired(pairs, "sync_group"):
        made.append(_sync(r))
    for r in _paired(pairs, "heartbeat"):
        made.append(_simple(r, "heartbeat", "generation_id"))
    for r in _paired(pairs, "offset_commit"):
        made.append(_simple(r, "commit", "generation_id_or_member_epoch"))
    for r in _paired(pairs, "leave_group"):
        made.append(_leave(r))
    for r in _paired(pairs, "consumer_group_heartbeat"):
        req = r["req"]
        made.append(
            _epoch_heartbeat(
                r,
                "cgh",
                req.get("server_assignor"),
                instance_id=req.get("instance_id"),
                assignor=req.get("server_assignor"),
                rebalance_timeout_ms=req.get("rebalance_timeout_ms"),
            )
        )
    # Share groups (KIP-932): member epochs as KIP-848's; the broker's assignor is the simple one.
    for r in _paired(pairs, "share_group_heartbeat"):
        made.append(_epoch_heartbeat(r, "sgh", "simple"))
    for r in _paired(pairs, "streams_group_heartbeat"):
        made.append(_streams(r))
    out = []
    for e in made:
        if e["group_id"] is None:
            continue
        e["software"] = soft.get(e["connection_id"])
        out.append({key: e.get(key) for key in EVENTS})
    return out


def histories(
    ev: Iterable[dict[str, Any]], names: dict[str, str], ends: Clock
) -> list[tuple[str, str]]:
    """Each group's history (kwire.groups.history) as (table, row as JSON; times as epoch µs)."""
    per_group: dict[str, list[dict[str, Any]]] = {}
    for e in ev:
        per_group.setdefault(e["group_id"], []).append(e)
    out: list[tuple[str, str]] = []
    for group_id in sorted(per_group):
        rows = sorted(per_group[group_id], key=lambda r: (r["ts"] is None, r["ts"] or 0, r["kind"]))
        rows = [dict(r) for r in rows]
        for r in rows:
            if r["kind"] in ("cgh", "sgh") and r.get("detail"):
                d = json.loads(r["detail"])
                ids = d.pop("assignment_ids", None)
                if ids is not None:
                    d["assignment"] = {names.get(k, k): v for k, v in ids.items()}
                r["detail"] = json.dumps(d)
        told = history(group_id, rows, ends.of(group_id))
        out += [
            (table, json.dumps({k: _json_value(v) for k, v in row.items()}))
            for table in PER_GROUP
            for row in told[table]
        ]
    return out


def frame(spark: SparkSession, rows: list[dict[str, Any]], ddl: str | StructType) -> DataFrame:
    """`rows` (dicts, times naive UTC) as a Spark frame of schema `ddl` (a StructType, or its
    DDL text)."""
    schema = ddl if isinstance(ddl, StructType) else spark.createDataFrame([], ddl).schema
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC", prefers_large_types=False)
    table = pa.Table.from_pylist(rows, schema=arrow) if rows else arrow.empty_table()
    return spark.createDataFrame(table, schema)


def _named(name: str | None, topic_id: str | None, names: dict[str, str]) -> str | None:
    """As kwire.groups.pairs._named: the frame's name, else the capture's Metadata's for the id,
    else the id."""
    if name is not None:
        return name
    if topic_id is not None and topic_id in names:
        return names[topic_id]
    return topic_id


def commits(pairs: pa.Table, names: dict[str, str]) -> list[dict[str, Any]]:
    """One row per partition of each OffsetCommit request, with its answer's error (the
    commits table's columns but the lags). Version 10 names topics by id (`topic`: _named)."""
    out: list[dict[str, Any]] = []
    for r in _paired_all(pairs, "offset_commit"):
        req, resp = r["req"], r["resp"]
        coordinator = ":".join(
            str(x) for x in (r["broker_addr"], r["broker_port"]) if x is not None
        )
        for ti, topic in enumerate(req.get("topics") or []):
            named = _named(topic.get("name"), topic.get("topic_id"), names)
            for pi, part in enumerate(topic.get("partitions") or []):
                error: str | None
                if resp is None:
                    error = "no response"
                else:
                    answered = _get(resp, "topics", ti, "partitions", pi)
                    error = error_name(_get(answered, "error_code"))
                out.append(
                    {
                        "ts": r["ts"],
                        "group_id": req.get("group_id"),
                        "member_id": req.get("member_id"),
                        "group_instance_id": req.get("group_instance_id"),
                        "generation": req.get("generation_id_or_member_epoch"),
                        "topic": named,
                        "partition": part.get("partition_index"),
                        "offset": part.get("committed_offset"),
                        "leader_epoch": part.get("committed_leader_epoch"),
                        "metadata": part.get("committed_metadata"),
                        "error": error,
                        "latency_us": r["latency_us"],
                        "coordinator": coordinator,
                    }
                )
    return out


def _micros(ts: datetime) -> int:
    return (ts - datetime(1970, 1, 1)) // timedelta(microseconds=1)


def coordinators(pairs: pa.Table) -> list[dict[str, Any]]:
    """Which broker coordinated each group when, from FindCoordinator answers (v0-3 name one
    key, v4+ a list of coordinators; transaction coordinators left out): a row per change of
    node, with the group's NOT_COORDINATOR answers and how long COORDINATOR_LOAD_IN_PROGRESS
    lasted (first to last such answer)."""
    found: list[tuple[datetime, str | None, dict[str, Any]]] = []
    for r in _paired_all(pairs, "find_coordinator"):
        req, resp = r["req"], r["resp"]
        if resp is None:
            continue
        if req.get("key") is not None and req.get("key_type") == 0:
            found.append((r["resp_ts"], req.get("key"), resp))
        if resp.get("coordinators") is not None and (req.get("key_type") or 0) == 0:
            for c in resp["coordinators"]:
                found.append((r["resp_ts"], c.get("key"), c))
    per_group: dict[Any, list[tuple[datetime, dict[str, Any]]]] = {}
    for at, group, answer in found:
        per_group.setdefault(group, []).append((at, answer))
    out: list[dict[str, Any]] = []
    for group, answers in per_group.items():
        not_coordinator = sum(1 for _, a in answers if a.get("error_code") == 16)
        loading = [_micros(at) for at, a in answers if a.get("error_code") == 14 and at is not None]
        load_ms = (max(loading) / 1e6 - min(loading) / 1e6) * 1000.0 if loading else None
        ok = sorted(
            ((at, a) for at, a in answers if a.get("error_code") == 0),
            key=lambda x: (x[0] is not None, x[0] or datetime.min),
        )
        changes: list[tuple[datetime, dict[str, Any]]] = []
        prev: Any = None
        for i, (at, a) in enumerate(ok):
            node = a.get("node_id")
            if i == 0 or prev is None or (node is not None and node != prev):
                changes.append((at, a))
            prev = node
        for i, (at, a) in enumerate(changes):
            out.append(
                {
                    "group_id": group,
                    "node_id": a.get("node_id"),
                    "host": a.get("host"),
                    "port": a.get("port"),
                    "from_ts": at,
                    "to_ts": changes[i + 1][0] if i + 1 < len(changes) else None,
                    "not_coordinator_errors": not_coordinator,
                    "load_in_progress_ms": load_ms,
                }
            )
    return out


def group_ends(ev: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group's last protocol traffic (its events' answers, else requests): end_ts."""
    ends: dict[str, datetime] = {}
    for e in ev:
        at = e["resp_ts"] if e["resp_ts"] is not None else e["ts"]
        if at is not None and (e["group_id"] not in ends or at > ends[e["group_id"]]):
            ends[e["group_id"]] = at
    return [{"group_id": g, "end_ts": at} for g, at in ends.items()]


def clients(
    conns: list[dict[str, Any]], soft: dict[str, str], ev: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The clients table: each connection (kwire.groups.clock.connections) with its client's
    software (software()) and the members and groups its frames carried."""
    members: dict[str, set[str]] = {}
    groups: dict[str, set[str]] = {}
    for e in ev:
        conn = e["connection_id"]
        if e["member_id"] is not None:
            members.setdefault(conn, set()).add(e["member_id"])
        groups.setdefault(conn, set()).add(e["group_id"])
    out = []
    for c in conns:
        said = soft.get(c["connection_id"])
        name, _, version = said.partition(" ") if said is not None else (None, "", "")
        out.append(
            {
                **c,
                "software_name": name,
                "software_version": version if said is not None and " " in said else None,
                "member_ids": sorted(members.get(c["connection_id"], ())),
                "group_ids": sorted(groups.get(c["connection_id"], ())),
            }
        )
    return out
