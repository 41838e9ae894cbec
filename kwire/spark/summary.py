"""The decode job's summary: what was decoded, what failed, which consumer groups were seen."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kwire.spark.api import api_names
from kwire.spark.decode import STATUSES
from kwire.spark.model import FAMILIES, rows_of
from kwire.spark.session import hold, release

NO_SCHEMA = "unknown api key"
_NAMES = api_names()


def api_name(key: Any) -> str:
    if key is None:
        return "?"
    return _NAMES.get(key, f"ApiKey{key}")


@dataclass
class Summary:
    by_version: list[tuple[Any, Any, int, int]] = field(default_factory=list)
    responses: dict[Any, tuple[int, int]] = field(default_factory=dict)
    no_schema: dict[Any, int] = field(default_factory=dict)
    top_errors: list[tuple[str, str, int]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    # (direction, status) -> rows: ok, unsupported, malformed, incomplete, unpaired, redacted.
    statuses: dict[tuple[str, str], int] = field(default_factory=dict)
    # direction -> rows read as Kafka's Java readers read them (status ok, with warnings).
    warned: dict[str, int] = field(default_factory=dict)
    top_warnings: list[tuple[str, Any, Any, str, int]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return sum(n for _, _, n, _ in self.by_version)

    @property
    def request_errors(self) -> int:
        return sum(e for _, _, _, e in self.by_version)

    @property
    def response_count(self) -> int:
        return sum(n for n, _ in self.responses.values())

    @property
    def response_errors(self) -> int:
        return sum(e for _, e in self.responses.values())

    def format(self) -> str:
        lines = ["rows by status"]
        for direction in ("request", "response"):
            counts = {st: n for (d, st), n in self.statuses.items() if d == direction}
            text = ", ".join(f"{st} {counts[st]:,}" for st in STATUSES if st in counts)
            if self.warned.get(direction):
                text += f" ({self.warned[direction]:,} with warnings)"
            lines.append(f"  {direction}s: {text or 'none'}")
        lines.append("")
        lines.append("requests per api key and version")
        rows = [[api_name(k), k, v, n, e] for k, v, n, e in self.by_version]
        lines.append(_table(rows, ["api", "key", "version", "requests", "errors"]))
        lines.append("")
        lines.extend(
            textwrap.wrap(
                ", ".join(
                    f"{api_name(k)} {n}" + (f" ({e} errors)" if e else "")
                    for k, (n, e) in sorted(self.responses.items(), key=_key_order)
                ),
                width=100,
                initial_indent="responses per api key (the paired request's): ",
                subsequent_indent="  ",
            )
        )
        lines.append("")
        no_schema = sum(self.no_schema.values())
        lines.append(
            f"errors: {self.request_errors} of {self.requests} requests, {self.response_errors} "
            f"of {self.response_count} responses"
            + (f"; {no_schema} of them are api keys kwire has no schema for" if no_schema else "")
        )
        if self.no_schema:
            lines.extend(
                textwrap.wrap(
                    ", ".join(
                        f"{api_name(k)} {n}"
                        for k, n in sorted(self.no_schema.items(), key=_key_order)
                    ),
                    width=100,
                    initial_indent="  no schema: ",
                    subsequent_indent="    ",
                )
            )
        for direction, error, n in self.top_errors:
            text = error if len(error) <= 110 else error[:107] + "..."
            lines.append(f"  {n:>6}  {direction:<8}  {text}")
        if self.top_warnings:
            lines.append("")
            lines.append(
                f"warnings: {self.warned.get('request', 0)} requests and "
                f"{self.warned.get('response', 0)} responses read as Kafka's own readers read them "
                "(--strict refuses them)"
            )
            for direction, key, version, warning, n in self.top_warnings:
                text = f"{api_name(key)} v{version}: {warning}"
                text = text if len(text) <= 110 else text[:107] + "..."
                lines.append(f"  {n:>6}  {direction:<8}  {text}")
        lines.append("")
        lines.append(f"consumer groups seen: {len(self.groups)}")
        if self.groups:
            rows = [
                [g["group_id"], g["requests"], g["clients"], g["members"], ",".join(g["topics"])]
                for g in self.groups
            ]
            lines.append(
                _table(rows, ["group", "requests", "clients", "members", "subscribed topics"])
            )
        return "\n".join(lines)


def _key_order(item: tuple[Any, Any]) -> tuple[bool, int]:
    return (item[0] is None, item[0] or 0)


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for j, r in enumerate(cells):
        parts = [c.rjust(w) if j and c.isdigit() else c.ljust(w) for c, w in zip(r, widths)]
        out.append(("  " + "  ".join(parts)).rstrip())
    return "\n".join(out)


def _struct_fields(df: DataFrame, name: str) -> list[str]:
    if name not in df.columns:
        return []
    return list(df.schema[name].dataType.fieldNames())  # type: ignore[attr-defined]


def _groups(requests: DataFrame) -> list[dict[str, Any]]:
    """Groups named at the top of request messages (a group_id field), with their members and
    the topics their consumers subscribe to (JoinGroup payloads, ConsumerGroupHeartbeat)."""
    parts = []
    for name in FAMILIES:
        fields = _struct_fields(requests, name)
        if "group_id" not in fields:
            continue
        member = F.col(name)["member_id"] if "member_id" in fields else F.lit(None)
        parts.append(
            rows_of(requests, name).select(
                F.col(name)["group_id"].alias("group_id"),
                member.cast("string").alias("member_id"),
                F.col("client_id"),
            )
        )
    if not parts:
        return []
    topics = []
    jg = _struct_fields(requests, "join_group")
    if "protocols" in jg:
        topics.append(
            rows_of(requests, "join_group")
            .select(
                F.col("join_group.group_id").alias("group_id"),
                F.explode("join_group.protocols").alias("p"),
            )
            .select("group_id", F.explode("p.consumer_subscription.topics").alias("topic"))
        )
    if "subscribed_topic_names" in _struct_fields(requests, "consumer_group_heartbeat"):
        topics.append(
            rows_of(requests, "consumer_group_heartbeat").select(
                F.col("consumer_group_heartbeat.group_id").alias("group_id"),
                F.explode("consumer_group_heartbeat.subscribed_topic_names").alias("topic"),
            )
        )
    stats = (
        reduce(DataFrame.unionByName, parts)
        .where(F.col("group_id").isNotNull())
        .groupBy("group_id")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            F.countDistinct("client_id").alias("clients"),
            F.countDistinct(F.when(F.col("member_id") != "", F.col("member_id"))).alias("members"),
        )
    )
    if topics:
        subscribed = (
            reduce(DataFrame.unionByName, topics)
            .groupBy("group_id")
            .agg(F.array_sort(F.collect_set("topic")).alias("topics"))
        )
        stats = stats.join(subscribed, "group_id", "left")
    else:
        stats = stats.withColumn("topics", F.lit(None).cast("array<string>"))
    # Sorted here: a sorted collect is a query more (the sort's sample of its keys).
    rows = sorted(stats.collect(), key=lambda r: r["group_id"])
    return [{**r.asDict(), "topics": r["topics"] or []} for r in rows]


def _narrow(df: DataFrame, direction: str) -> DataFrame:
    """The few columns the summary counts, with the row's direction."""

    def have(name: str, kind: str) -> Any:
        return F.col(name) if name in df.columns else F.lit(None).cast(kind)

    return df.select(
        F.lit(direction).alias("d"),
        have("status", "string").alias("status"),
        "api_key",
        "api_version",
        have("error", "string").alias("error"),
        have("warnings", "array<string>").alias("warnings"),
    )


def summarize(
    requests: DataFrame,
    responses: DataFrame,
    top: int = 8,
    held: tuple[DataFrame, DataFrame] | None = None,
) -> Summary:
    """What was decoded. The counts read one held frame of a few columns of both tables: each
    of them would otherwise scan every file of both (a file per api key and task). `held`:
    frames of (requests, responses) already held with at least those columns (the group
    tables' narrow ones, kwire.groups.build), counted instead of holding a frame of their own."""
    if held is not None:
        s = _counted(_narrow(held[0], "request").unionByName(_narrow(held[1], "response")), top)
    else:
        both = hold(_narrow(requests, "request").unionByName(_narrow(responses, "response")))
        try:
            s = _counted(both, top)
        finally:
            release(both)
    s.groups = _groups(requests)
    return s


def _nulls_first(row: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    """A sort key ordering as Spark's ascending orderBy does: nulls first."""
    return tuple((v is not None, v) for v in row)


def _counted(both: DataFrame, top: int) -> Summary:
    s = Summary()
    warned = F.col("warnings").isNotNull()
    no_schema = F.col("error").startswith(NO_SCHEMA)
    # The statuses and the counts per api key and version in one query (its rows are the
    # directions, keys, versions and statuses that occur: a few hundred at most), summed here;
    # the errors and warnings are read again only when there are some.
    by_version: dict[tuple[Any, Any, Any], list[int]] = {}
    others = 0
    for r in (
        both.groupBy("d", "api_key", "api_version", "status", warned.alias("warned"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.count("error").alias("errors"),
            F.count(F.when(no_schema, 1)).alias("no_schema"),
        )
        .collect()
    ):
        if r["status"] is not None:
            key = (r["d"], r["status"])
            s.statuses[key] = s.statuses.get(key, 0) + r["n"]
            if r["warned"]:
                s.warned[r["d"]] = s.warned.get(r["d"], 0) + r["n"]
        counts = by_version.setdefault((r["d"], r["api_key"], r["api_version"]), [0, 0, 0])
        counts[0] += r["n"]
        counts[1] += r["errors"]
        counts[2] += r["no_schema"]
        others += r["errors"] - r["no_schema"]
    for (d, api_key, api_version), (n, errors, unknown) in sorted(
        by_version.items(), key=lambda kv: _nulls_first(kv[0])
    ):
        if d == "request":
            s.by_version.append((api_key, api_version, n, errors))
        else:
            n_before, errors_before = s.responses.get(api_key, (0, 0))
            s.responses[api_key] = (n_before + n, errors_before + errors)
        if unknown:
            s.no_schema[api_key] = s.no_schema.get(api_key, 0) + unknown
    if others:
        s.top_errors = _top_errors(both, ~no_schema, top)
    if s.warned:
        s.top_warnings = _top_warnings(both, warned, top)
    return s


def _top_errors(both: DataFrame, known: Column, top: int) -> list[tuple[str, str, int]]:
    """The most frequent errors of the rows whose api and version are `known` (a schema read
    them), by kind."""
    # One line per kind of TLS failure: the client random and the byte count vary per connection.
    kind = F.regexp_replace(
        F.regexp_replace("error", r"client random [0-9a-f]+…", "client random …"),
        r"\(\d+ bytes of (.*) not decrypted\)$",
        "($1)",
    )
    return [
        (r["d"], r["error"], r["count"])
        for r in both.where(F.col("error").isNotNull() & known)
        .withColumn("error", kind)
        .groupBy("d", "error")
        .count()
        .orderBy(F.desc("count"), "error")
        .limit(top)
        .collect()
    ]


def _top_warnings(
    both: DataFrame, warned: Column, top: int
) -> list[tuple[str, Any, Any, str, int]]:
    """The most frequent kinds of warning of the rows read with some."""
    # One line per kind of warning: byte offsets vary from frame to frame.
    kind = F.regexp_replace("w", r" \(from byte \d+\)| at byte \d+", "")
    return [
        (r["d"], r["api_key"], r["api_version"], r["kind"], r["count"])
        for r in both.where(warned)
        .select("d", "api_key", "api_version", F.explode("warnings").alias("w"))
        .groupBy("d", "api_key", "api_version", kind.alias("kind"))
        .count()
        .orderBy(F.desc("count"), "d", "api_key", "api_version", "kind")
        .limit(top)
        .collect()
    ]
