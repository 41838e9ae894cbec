"""OUT/groups/: the consumer groups' tables, built from the decoded tables.

The group protocol's frames (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, the
KIP-848, share and streams heartbeats, FindCoordinator, ApiVersions) and the Metadata answers
are few: they are collected once and, on the driver (kwire.groups.protocol), paired with their
answers, narrowed to events and read group by group in order by kwire.groups.history
(`generations`, `members`, `assignments`, `assignment_changes`), and made into `coordinators`,
`clients` (with each connection's requests in one collected row) and the commits. What reads
many rows stays Spark SQL: the commits' lags and `progress` (every Fetch answer's log end
offsets, every record's offset), `latency` (percentiles of every answer), `described`. The
share groups' data frames are paired here in Spark (pair_all) for their own pass
(kwire.groups.share_build).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kwire.spark.driver import derived_partitions
from kwire.groups.clock import Clock, clock, connections
from kwire.groups.delivery import Known, names_clusters
from kwire.groups.described import described
from kwire.groups.errors import ERROR_AT
from kwire.groups import protocol
from kwire.spark.session import hold, hold_per_core, release
from kwire.spark.steps import Steps
from kwire.groups.pairs import _from_rows, _named, write_typed
from kwire.groups.schema import SHARE_TABLES, TABLES
from pyspark.sql.types import StructType

REBALANCE_APIS = (11, 14)  # JoinGroup, SyncGroup: their latency is the group's wait


def pair_all(requests: DataFrame, responses: DataFrame, families: Sequence[str]) -> DataFrame:
    """The requests of `families`, each with its response: one join and one window for all of
    them (per API they would be stages of near-empty tasks). Columns: the request's,
    `req_<api>` and `resp_<api>` structs, and the response's time, latency and status."""
    apis = [a for a in families if a in requests.columns]
    if not apis:
        return requests.limit(0)
    any_api = F.lit(False)
    for a in apis:
        any_api = any_api | F.col(a).isNotNull()
    rq = requests.where(any_api).select(
        "connection_id",
        "client_addr",
        "client_port",
        "broker_addr",
        "broker_port",
        "client_id",
        "correlation_id",
        F.col("api_version").alias("version"),
        F.col("ts_first").alias("ts"),
        *[F.col(a).alias(f"req_{a}") for a in apis],
    )
    present = [a for a in apis if a in responses.columns]
    rs_any = F.lit(False)
    for a in present:
        rs_any = rs_any | F.col(a).isNotNull()
    raw_error = F.col("raw_error") if "raw_error" in responses.columns else F.lit(None)
    rs_any = rs_any | raw_error.isNotNull()
    rs = responses.where(rs_any).select(
        F.col("connection_id").alias("r_conn"),
        F.col("correlation_id").alias("r_corr"),
        F.col("ts_first").alias("resp_ts"),
        F.col("latency_us"),
        F.col("status").alias("resp_status"),
        raw_error.cast("int").alias("resp_raw_error"),
        *[F.col(a).alias(f"resp_{a}") for a in present],
    )
    joined = rq.join(
        rs,
        (rq.connection_id == rs.r_conn) & (rq.correlation_id == rs.r_corr) & (rs.resp_ts >= rq.ts),
        "left",
    )
    first = Window.partitionBy("connection_id", "correlation_id", "ts").orderBy(
        F.col("resp_ts").asc_nulls_last()
    )
    out = (
        joined.withColumn("_n", F.row_number().over(first))
        .where("_n = 1")
        .drop("_n", "r_conn", "r_corr")
    )
    for a in apis:
        if a not in present:
            out = out.withColumn(f"resp_{a}", F.lit(None))
    return out


def _has(df: DataFrame, family: str) -> bool:
    return family in df.columns


PER_GROUP = protocol.PER_GROUP
# One pass per group gives all four tables as (table, row as JSON); times as epoch µs.
HISTORY_ROWS = "table string, row string"


def _from_history(rows: DataFrame, table: str) -> DataFrame:
    """One table's rows back from JSON, timestamps from epoch µs."""
    return _from_rows(rows, table, TABLES[table])


@dataclass
class Basis:
    """What build_base() holds for build_lagged(): the narrowed, held decoded tables."""

    requests: DataFrame
    responses: DataFrame
    share_pairs: DataFrame  # the share groups' data frames, paired (_SHARE_APIS)
    committed: DataFrame  # the commits table's rows without their lags
    group_end: DataFrame  # each group's last protocol traffic (group_id, end_ts)
    names: dict[str, str]
    clock: Clock


def build_base(
    requests: DataFrame, responses: DataFrame, held: list[DataFrame]
) -> tuple[dict[str, DataFrame], Basis]:
    """The seven group tables that need no records (all but commits and progress), lazy, and
    what those two are built from (build_lagged). The intermediate frames it holds
    (kwire.spark.session.hold) are appended to `held`, for the caller to release once the
    tables are written: Spark finds cached data by plan, and a later build over the same paths
    with new files in them (kwire live) would otherwise be answered from the old cache."""
    # The decoded tables are wide (a struct per API): keep only what the group tables read, so
    # every query below plans against a few columns, not a thousand.
    # Held, narrow: the tables below read them a dozen times, and a scan of the decoded tables
    # opens a file per api key and task.
    # Per core: read from a file per api key and task, they kept 14 partitions of a few hundred
    # rows, and each of the dozen queries below paid 14 tasks to read them.
    requests = hold_per_core(_narrow_requests(requests))
    read_responses = responses
    responses = hold_per_core(_narrow_responses(responses))
    held += [requests, responses]
    spark = requests.sparkSession
    # The share groups' data frames, paired in Spark for their pass (kwire.groups.share_build):
    # there are as many as the records their consumers took. Computed when that pass asks.
    share_pairs = hold(pair_all(requests, responses, _SHARE_APIS))
    held.append(share_pairs)
    # The group protocol's frames, paired, their events, each group's history, commits and
    # coordinators, on the driver (kwire.groups.protocol): a few thousand rows, where each of
    # Spark's queries costs its fixed price. Each connection's requests in a row, collected too:
    # each group's end of the capture and the clients table.
    rq, rs, apis = protocol.collect(requests, responses)
    names, endpoints = protocol.metadata(rs)
    paired_rows = protocol.pair(rq, rs, apis)
    soft = protocol.software(rq)
    del rq, rs
    ev = protocol.events(paired_rows, soft)
    conns = connections(requests)
    ends = clock(conns, endpoints, ev)
    told = protocol.histories(ev, names, ends)

    def made(rows: list[dict[str, Any]], schema: str | StructType) -> DataFrame:
        return protocol.frame(spark, rows, schema)

    told_df = made([{"table": t, "row": r} for t, r in told], HISTORY_ROWS)
    tables: dict[str, DataFrame] = {table: _from_history(told_df, table) for table in PER_GROUP}
    tables["latency"] = latency(responses)
    tables["clients"] = made(protocol.clients(conns, soft, ev), TABLES["clients"])
    tables["coordinators"] = made(protocol.coordinators(paired_rows), TABLES["coordinators"])
    # From the decoded answers as read (partitioned by api key: their files alone), not the
    # held frames, which the coordinator's answers would widen for every other table.
    tables["described"] = described(read_responses, names)
    committed = made(protocol.commits(paired_rows, names), _COMMITS)
    group_end = made(protocol.group_ends(ev), "group_id string, end_ts timestamp")
    return tables, Basis(requests, responses, share_pairs, committed, group_end, names, ends)


def build_lagged(
    basis: Basis,
    held: list[DataFrame],
    known: Known | None = None,
    endpoints: DataFrame | None = None,
) -> dict[str, DataFrame]:
    """commits and progress (lazy; held frames appended to `held`, see build_base). `known`
    (kwire.groups.delivery.Known, from OUT/records) gives them their time lag (topics
    matched within the cluster that `endpoints`, delivery.clusters(), names); without it those
    columns are null."""
    requests, responses, names = basis.requests, basis.responses, basis.names
    # Every log end offset the capture shows, held: the commits' lags, progress and the share
    # groups' progress read it (an explode of every Fetch answer's partitions, once).
    seen = hold(log_end_seen(requests, responses, names))
    held.append(seen)
    log_ends = seen if known is not None else None
    asked = None
    # Made on the driver (kwire.groups.protocol.commits): progress reads it again, and what is
    # known of the records at its offsets.
    committed = basis.committed
    if known is not None:
        # The records at the committed offsets (progress's last ones among them), held: the
        # commits' lags and progress's read them.
        asked = hold(known.at(committed))
        held.append(asked)
    done = hold(commit_lag(committed, asked, endpoints, log_ends))
    held.append(done)
    latest = latest_log_ends(seen)
    lag = end_lag(progress(done, latest, basis.group_end), asked, endpoints, basis.clock)
    return {"commits": done, "progress": lag, LOG_ENDS: latest}


_BASE = (
    "connection_id",
    "client_addr",
    "client_port",
    "broker_addr",
    "broker_port",
    "direction",
    "ts_first",
    "ts_last",
    "api_key",
    "api_version",
    "correlation_id",
    "client_id",
    "latency_us",
    "status",
    # Not read by the group tables: the job's summary counts them from these held frames
    # (kwire.spark.summary.summarize), which saves it a scan of every file of both tables.
    "error",
    "warnings",
)
# The share groups' data frames: their pass pairs them in Spark (build_base).
_SHARE_APIS = ("share_fetch", "share_acknowledge", "describe_share_group_offsets")
# Share groups' records (OUT/share): narrowed below, never their records.
_GROUP_APIS = protocol.PROTOCOL_APIS + _SHARE_APIS
# The commits table's columns but the lags (commit_lag adds them).
_COMMITS = StructType(
    [f for f in TABLES["commits"] if f.name not in ("time_lag_ms", "timestamp_lag_ms")]
)
_REQUEST_COLUMNS = frozenset(_BASE + _GROUP_APIS + ("list_offsets",))


_FETCH_PARTITION = ("partition_index", "error_code", "high_watermark")
_SHARE_FETCH_PARTITION = (
    "partition_index",
    "error_code",
    "acknowledge_error_code",
    "acquired_records",
)
_LIST_OFFSETS_PARTITION = ("partition_index", "error_code", "timestamp", "offset")


def _metadata_cluster(responses: DataFrame) -> list[Column]:
    """The Metadata answer's cluster id and brokers' addresses (kwire.groups.delivery.clusters),
    where its versions carry them (the id from v2)."""
    if not names_clusters(responses):
        return []
    brokers = F.transform(
        "metadata.brokers", lambda b: F.struct(b["host"].alias("host"), b["port"].alias("port"))
    )
    return [F.col("metadata.cluster_id").alias("cluster_id"), brokers.alias("brokers")]


def _keep(array: str, fields: tuple[str, ...], inner: str, inner_fields: tuple[str, ...]) -> Any:
    """An array<struct> column with only `fields` of each element and, of its array `inner`,
    only `inner_fields`: the group tables read a few numbers of wide response structs."""
    return F.transform(
        array,
        lambda r: F.struct(
            *[r[f].alias(f) for f in fields],
            F.transform(r[inner], lambda p: F.struct(*[p[f].alias(f) for f in inner_fields])).alias(
                inner
            ),
        ),
    )


def _narrow_requests(requests: DataFrame) -> DataFrame:
    """The decoded requests' columns that the group tables read."""
    return requests.select(*[c for c in requests.columns if c in _REQUEST_COLUMNS])


def _narrow_responses(responses: DataFrame) -> DataFrame:
    cols = [F.col(c) for c in responses.columns if c in _BASE + _GROUP_APIS + ("metadata",)]
    if "fetch" in responses.columns:
        # Only the high watermarks: never the records.
        kept = _keep("fetch.responses", ("topic", "topic_id"), "partitions", _FETCH_PARTITION)
        cols.append(F.struct(kept.alias("responses")).alias("fetch"))
    if "list_offsets" in responses.columns:
        # A partition answered with timestamp -1 was asked for its latest offset: the log end.
        kept = _keep("list_offsets.topics", ("name",), "partitions", _LIST_OFFSETS_PARTITION)
        cols.append(F.struct(kept.alias("topics")).alias("list_offsets"))
    if "share_fetch" in responses.columns:
        # The acquired ranges and errors: never the records.
        cols = [c for c in cols if str(c) != str(F.col("share_fetch"))]
        kept = _keep("share_fetch.responses", ("topic_id",), "partitions", _SHARE_FETCH_PARTITION)
        # Tested on a leaf (every decoded answer has an error code): a test of the whole struct
        # would read its records.
        cols.append(
            F.when(
                F.col("share_fetch.error_code").isNotNull(),
                F.struct(
                    F.col("share_fetch.error_code").alias("error_code"),
                    F.col("share_fetch.acquisition_lock_timeout_ms").alias(
                        "acquisition_lock_timeout_ms"
                    ),
                    kept.alias("responses"),
                ),
            ).alias("share_fetch")
        )
    if "metadata" in responses.columns:
        cols = [c for c in cols if str(c) != str(F.col("metadata"))]
        cols.append(
            F.struct(
                F.transform(
                    "metadata.topics",
                    lambda t: F.struct(t["topic_id"].alias("topic_id"), t["name"].alias("name")),
                ).alias("topics"),
                # Which cluster each broker is in: each group's end of the capture (Clock).
                *_metadata_cluster(responses),
            ).alias("metadata")
        )
    if "frame" not in responses.columns:
        return responses.select(*cols)
    # The frame is read only where its error code may be needed, the classic group APIs'
    # responses: OUT/responses is partitioned by api_key, so the Fetch and Produce frames (the
    # bulk of a capture's bytes) are never read here.
    grouped = F.coalesce(F.col("api_key").isin(*ERROR_AT), F.lit(False))
    return (
        responses.where(~grouped)
        .select(*cols, F.lit(None).cast("int").alias("raw_error"))
        .unionByName(responses.where(grouped).select(*cols, _raw_error().alias("raw_error")))
    )


def narrow_inputs(requests: DataFrame, responses: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The columns of the decoded `requests` and `responses` that the group, share and delivery
    tables read (responses as kwire.pipeline reads them, without the fetched records), row for
    row: derived from these, every table is what the whole decoded tables give. The frame is
    kept only for the answers whose error code may be read from it (_raw_error). kwire live
    writes them with each batch, so its rebuild reads a narrow file per batch, not a wide one
    per api key and batch."""
    from kwire.groups.described import DESCRIBES

    req = _narrow_requests(requests)
    wanted = set(_BASE + _GROUP_APIS) | {"metadata", "fetch", "list_offsets", "produce"}
    wanted |= {api for api, _ in DESCRIBES}
    cols = [F.col(c) for c in responses.columns if c in wanted]
    if "frame" in responses.columns:
        grouped = F.coalesce(F.col("api_key").isin(*ERROR_AT), F.lit(False))
        cols.append(F.when(grouped, F.col("frame")).alias("frame"))
    return req, responses.select(*cols)


def _raw_error() -> Any:
    """The error code of a classic group API response the decoder refused (status malformed),
    read from the frame: it sits after the correlation id, the header's tag buffer (flexible
    versions) and throttle_time_ms (where the version has it). librdkafka's mock answers a
    failed SyncGroup with a null assignment, which the schema does not allow: without this the
    failure (INVALID_REQUEST) was lost and the request looked unanswered."""
    out = F.lit(None).cast("int")
    for key, (throttled, flexible) in ERROR_AT.items():
        v = F.col("api_version")
        pos = 5 + F.when(v >= flexible, 1).otherwise(0) + F.when(v >= throttled, 4).otherwise(0)
        raw = F.conv(F.hex(F.substring("frame", pos, 2)), 16, 10).cast("int")
        code = F.when(raw >= 32768, raw - 65536).otherwise(raw)
        is_it = (F.col("status") == "malformed") & (F.col("api_key") == key)
        out = F.when(is_it & (F.length("frame") >= pos + 1), code).otherwise(out)
    return out


def _no_lag(df: DataFrame) -> DataFrame:
    """The time lag columns, null: the job kept no records to find the records in."""
    return df.select(
        "*",
        F.lit(None).cast("double").alias("time_lag_ms"),
        F.lit(None).cast("double").alias("timestamp_lag_ms"),
    )


def commit_lag(
    commits_df: DataFrame,
    known: DataFrame | None,
    endpoints: DataFrame | None,
    log_ends: DataFrame | None = None,
) -> DataFrame:
    """commits with `time_lag_ms` and `timestamp_lag_ms` at each successful commit: how old
    the oldest record the group had not consumed was (kwire.groups.delivery.time_lag); null for
    a failed commit, which committed nothing. Where the capture does not show the record at the
    committed offset, the lags are 0 if the last log end offset seen before the commit
    (`log_ends`, log_end_seen()) was not past it: the group had read all there was."""
    from kwire.groups.delivery import lag_columns_dropped, time_lag, with_cluster

    if known is None:
        return _no_lag(commits_df)
    df = with_cluster(commits_df, F.col("coordinator"), endpoints, "_cluster")
    caught_up = F.lit(False)
    if log_ends is not None:
        df, seen = _log_end_before(df, log_ends)
        caught_up = seen.isNotNull() & (seen <= F.col("offset"))
    joined, by_wire, by_ts = time_lag(df, known, F.col("ts"), F.col("offset"), F.col("_cluster"))
    ok = F.col("error").isNull()
    unseen = F.col("_k_produced").isNull() & F.col("_k_ts").isNull()
    out = joined.select(
        "*",
        F.when(ok, F.when(unseen & caught_up, F.lit(0.0)).otherwise(by_wire)).alias("time_lag_ms"),
        F.when(ok, F.when(unseen & caught_up, F.lit(0.0)).otherwise(by_ts)).alias(
            "timestamp_lag_ms"
        ),
    )
    return lag_columns_dropped(out).drop("_cluster", "_seen_hw")


def _log_end_before(df: DataFrame, log_ends: DataFrame) -> tuple[DataFrame, Any]:
    """`df` (rows with ts, topic, partition) with `_seen_hw`: the last log end offset seen for
    its partition at or before its ts. An as-of join done as one ordered pass (a union and a
    running last value), not a join of every row with every observation."""
    rows = df.withColumn("_obs", F.lit(1))
    obs = log_ends.select(
        F.col("hw_ts").alias("ts"),
        "topic",
        "partition",
        F.col("hw").alias("_seen_hw"),
        F.lit(0).alias("_obs"),
    )
    both = rows.unionByName(obs, allowMissingColumns=True)
    w = (
        Window.partitionBy("topic", "partition")
        .orderBy("ts", "_obs")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    both = both.withColumn("_seen_hw", F.last("_seen_hw", ignorenulls=True).over(w))
    return both.where("_obs = 1").drop("_obs"), F.col("_seen_hw")


def end_lag(
    progress_df: DataFrame,
    known: DataFrame | None,
    endpoints: DataFrame | None,
    ends: Clock,
) -> DataFrame:
    """progress with the time lags at the end of the capture (each group's: Clock), of the
    record at the last committed offset (0 when the offset lag is 0: nothing was left to
    consume)."""
    from kwire.groups.delivery import lag_columns_dropped, time_lag, with_cluster

    if known is None or ends.end is None:
        return _no_lag(progress_df.drop("coordinator"))
    df = with_cluster(progress_df, F.col("coordinator"), endpoints, "_cluster")
    at = F.lit(ends.end).cast("timestamp")
    if ends.groups:
        spark = progress_df.sparkSession
        own = spark.createDataFrame(
            list(ends.groups.items()), "_end_group string, _end_at timestamp"
        )
        df = df.join(F.broadcast(own), F.col("group_id") == F.col("_end_group"), "left")
        df = df.drop("_end_group")
        at = F.coalesce(F.col("_end_at"), at)
    joined, by_wire, by_ts = time_lag(df, known, at, F.col("last_offset"), F.col("_cluster"))
    caught_up = F.col("lag") == 0
    out = joined.select(
        "*",
        F.when(caught_up, F.lit(0.0)).otherwise(by_wire).alias("time_lag_ms"),
        F.when(caught_up, F.lit(0.0)).otherwise(by_ts).alias("timestamp_lag_ms"),
    )
    return lag_columns_dropped(out).drop("_cluster", "coordinator", "_end_at")


# build_lagged's result also holds the latest log end offsets (latest_log_ends) under this key.
LOG_ENDS = "_log_ends"


def latest_log_ends(every: DataFrame) -> DataFrame:
    """The latest log end offset seen per topic and partition, of log_end_seen()'s rows."""
    last = Window.partitionBy("topic", "partition").orderBy(F.col("hw_ts").desc())
    return every.withColumn("_n", F.row_number().over(last)).where("_n = 1").drop("_n")


def log_end_seen(requests: DataFrame, responses: DataFrame, names: dict[str, str]) -> DataFrame:
    """Every log end offset the capture shows (topic, partition, hw, hw_ts, hw_source): Fetch
    responses' high watermarks and the answers to ListOffsets requests for the latest offset
    (timestamp -1; the answer says -1 for the earliest too, so the request decides)."""
    spark = responses.sparkSession
    seen = []
    if _has(responses, "fetch"):
        f = responses.where(F.col("fetch").isNotNull()).select(
            "ts_first", F.explode("fetch.responses").alias("r")
        )
        topic = _named(F.col("r.topic"), F.col("r.topic_id"), names)
        p = f.select("ts_first", topic.alias("topic"), F.explode("r.partitions").alias("p"))
        p = p.where("p.error_code = 0 AND p.high_watermark >= 0")
        seen.append(
            p.select(
                "topic",
                F.col("p.partition_index").alias("partition"),
                F.col("p.high_watermark").alias("hw"),
                F.col("ts_first").alias("hw_ts"),
                F.lit("fetch high watermark").alias("hw_source"),
            )
        )
    if _has(responses, "list_offsets") and _has(requests, "list_offsets"):
        keys = ["connection_id", "correlation_id"]
        asked = (
            requests.where(F.col("list_offsets").isNotNull())
            .select(*keys, F.explode("list_offsets.topics").alias("t"))
            .select(*keys, F.col("t.name").alias("topic"), F.explode("t.partitions").alias("q"))
            .where("q.timestamp = -1")
            .select(*keys, "topic", F.col("q.partition_index").alias("partition"))
        )
        answered = (
            responses.where(F.col("list_offsets").isNotNull())
            .select(*keys, "ts_first", F.explode("list_offsets.topics").alias("t"))
            .select(
                *keys,
                "ts_first",
                F.col("t.name").alias("topic"),
                F.explode("t.partitions").alias("p"),
            )
            .where("p.error_code = 0 AND p.offset >= 0")
            .withColumn("partition", F.col("p.partition_index"))
        )
        latest = answered.join(asked, [*keys, "topic", "partition"], "inner")
        seen.append(
            latest.select(
                "topic",
                "partition",
                F.col("p.offset").alias("hw"),
                F.col("ts_first").alias("hw_ts"),
                F.lit("list offsets (latest)").alias("hw_source"),
            )
        )
    if not seen:
        return spark.createDataFrame(
            [], "topic string, partition int, hw long, hw_ts timestamp, hw_source string"
        )
    return seen[0] if len(seen) == 1 else seen[0].unionByName(seen[1])


# A partition is STOPped only after this long without a commit (twice the clients' default
# auto-commit interval of 5 s), however short its committing span was.
STOP_AFTER_MS = 10_000


def progress(commits_df: DataFrame, hw: DataFrame, group_end: DataFrame) -> DataFrame:
    """Burrow's verdicts per group and partition over the capture window: ERR (the last commit
    attempt failed), REWIND (a committed offset went back), then, as Burrow does, nothing is
    wrong unless the partition lags at the end (its log end offset, from a Fetch high watermark
    or a ListOffsets answer for the latest offset, is past the last committed offset): STOP
    when no commit came from the last one to the group's last traffic for longer than the
    partition's committing span (and at least STOP_AFTER_MS), STALL when the last commits
    repeat one offset; else OK. Where the capture shows no log end offset the lag is unknown
    (`lag` null): the verdict is OK and `lag_source` is empty. Offsets are those of successful
    commits: a failed commit committed nothing. `group_end` holds each group's last traffic
    (group_id, end_ts)."""
    w = Window.partitionBy("group_id", "topic", "partition").orderBy("ts")
    ok = commits_df.where("error IS NULL").withColumn("prev", F.lag("offset").over(w))
    attempts = commits_df.groupBy("group_id", "topic", "partition").agg(
        F.count("*").alias("attempts"), F.max_by("error", "ts").alias("last_error")
    )
    agg = ok.groupBy("group_id", "topic", "partition").agg(
        F.min("ts").alias("first_commit_at"),
        F.max("ts").alias("last_commit_at"),
        F.min_by("offset", "ts").alias("first_offset"),
        F.max_by("offset", "ts").alias("last_offset"),
        F.count("*").alias("commits"),
        F.max(F.when(F.col("offset") < F.col("prev"), 1).otherwise(0)).alias("rewound"),
        F.max_by(F.col("offset") == F.col("prev"), "ts").alias("repeating"),
        F.max_by("coordinator", "ts").alias("coordinator"),
    )
    joined = (
        attempts.join(agg, ["group_id", "topic", "partition"], "left")
        .join(hw, ["topic", "partition"], "left")
        .join(group_end, ["group_id"], "left")
    )
    lag = F.when(
        F.col("hw").isNotNull() & F.col("last_offset").isNotNull(),
        F.greatest(F.col("hw") - F.col("last_offset"), F.lit(0)),
    )
    quiet_ms = (F.unix_micros("end_ts") - F.unix_micros("last_commit_at")) / 1000
    span_ms = (F.unix_micros("last_commit_at") - F.unix_micros("first_commit_at")) / 1000
    status = (
        F.when(F.col("last_error").isNotNull() | F.col("last_offset").isNull(), "ERR")
        .when(F.col("rewound") == 1, "REWIND")
        .when(
            lag > 0,
            F.when((quiet_ms > span_ms) & (quiet_ms > STOP_AFTER_MS), "STOP").when(
                F.coalesce(F.col("repeating"), F.lit(False)), "STALL"
            ),
        )
        .otherwise("OK")
    )
    return joined.select(
        "group_id",
        "topic",
        "partition",
        "first_commit_at",
        "last_commit_at",
        "first_offset",
        "last_offset",
        F.coalesce(F.col("commits"), F.lit(0)).alias("commits"),
        F.coalesce(status, F.lit("OK")).alias("status"),
        F.col("hw").alias("log_end_offset"),
        lag.alias("lag"),
        F.when(lag.isNotNull(), F.col("hw_source")).alias("lag_source"),
        "coordinator",
    )


def latency(responses: DataFrame) -> DataFrame:
    from kwire.spark.summary import api_name

    names = F.create_map(*[x for k in range(0, 100) for x in (F.lit(k), F.lit(api_name(k)))])
    r = responses.where("latency_us IS NOT NULL AND api_key IS NOT NULL")
    ms = F.col("latency_us") / 1000.0
    return (
        r.groupBy(
            "api_key",
            "api_version",
            F.concat_ws(":", "broker_addr", F.col("broker_port").cast("string")).alias("broker"),
            "client_id",
        )
        .agg(
            F.count("*").alias("requests"),
            F.sum(F.when(F.col("status") != "ok", 1).otherwise(0)).alias("errors"),
            F.percentile_approx(ms, 0.5).alias("p50_ms"),
            F.percentile_approx(ms, 0.95).alias("p95_ms"),
            F.percentile_approx(ms, 0.99).alias("p99_ms"),
            F.max(ms).alias("max_ms"),
        )
        .select(
            F.col("api_key").cast("short").alias("api_key"),
            names[F.col("api_key").cast("int")].alias("api_name"),
            F.col("api_version").cast("short").alias("api_version"),
            "broker",
            "client_id",
            "requests",
            "errors",
            F.col("p50_ms").cast("double"),
            F.col("p95_ms").cast("double"),
            F.col("p99_ms").cast("double"),
            F.col("max_ms").cast("double"),
            F.when(
                F.col("api_key").isin(*REBALANCE_APIS),
                F.lit("rebalance wait: the group's time, not the broker's"),
            ).alias("note"),
        )
    )


def write_table(name: str, df: DataFrame, out: str) -> str:
    """Writes OUT/groups/<name> (Parquet) in the table's schema; returns its path."""
    path = os.path.join(out, "groups", name)
    write_typed(df, TABLES[name], path)
    return path


def settings(spark: SparkSession) -> dict[str, str]:
    """Session settings for building the group tables (add_steps gives them to the steps): the
    tables are small next to the frames (protocol events, not records), and Spark's 200 shuffle
    partitions would be hundreds of near-empty tasks per join, window and grouped map."""
    return {
        "spark.sql.shuffle.partitions": str(derived_partitions(spark)),
        # A member listed twice in one SyncGroup: the last entry, as a broker's map keeps it,
        # rather than a failed job.
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    }


LAGGED = ("commits", "progress")


def add_steps(
    steps: Steps,
    spark: SparkSession,
    decoded: Callable[[], tuple[DataFrame, DataFrame]],
    lag: Callable[[], tuple[Known | None, DataFrame | None]],
    out: str,
    after: Sequence[str] = (),
    after_lag: Sequence[str] = (),
    tell: Callable[[str], None] | None = None,
    share: bool = True,
) -> list[tuple[str, str]]:
    """Adds the group tables to a job's steps, with settings(spark) for the steps' run:
    - "group tables" (build_base: the queries planned, their shared frames held), once the steps
      in `after` are done and `decoded()` gives (requests, responses);
    - "group tables: lag" (build_lagged), once the steps in `after_lag` are done too and `lag()`
      gives (known, endpoints);
    - one step per table, "group tables: <name>", side by side, after the one that builds it;
    - with `share`, "share tables" (kwire.groups.share_build.told_share: each share group's pass,
      held) after "group tables", "share tables: joined" (finish_share) once the lag's inputs are
      there too (the records' produced instants), and a step per share table (OUT/share).
    Returns (name, path) of the tables the steps write."""
    tell = tell or (lambda _: None)
    state: dict[str, Any] = {"left": len(TABLES)}
    cached: list[DataFrame] = []

    def base() -> tuple[dict[str, DataFrame], Basis]:
        state["started"] = time.monotonic()
        requests, responses = decoded()
        return build_base(requests, responses, cached)

    def lagged() -> dict[str, DataFrame]:
        known, endpoints = lag()
        return build_lagged(steps.result("group tables")[1], cached, known, endpoints)

    def close() -> None:
        for df in cached:
            release(df)

    def write_one(name: str) -> str:
        if name in LAGGED:
            df = steps.result("group tables: lag")[name]
        else:
            df = steps.result("group tables")[0][name]
        path = write_table(name, df, out)
        with steps.lock:
            state["left"] -= 1
            last = state["left"] == 0
        if last:
            took = time.monotonic() - state["started"]
            tell(f"group tables -> {os.path.join(out, 'groups')} ({took:.1f} s)")
        return path

    with_share = share

    def tell_share() -> dict[str, DataFrame] | None:
        from kwire.groups.share_build import told_share

        basis = steps.result("group tables")[1]
        return told_share(basis.share_pairs, basis.names, basis.clock, cached)

    def finish_share_tables() -> dict[str, DataFrame] | None:
        from kwire.groups.share_build import finish_share

        told = steps.result("share tables")
        if told is None:
            return None
        known, _ = lag()
        return finish_share(told, cached, known, steps.result("group tables: lag")[LOG_ENDS])

    def write_share(name: str) -> str:
        from kwire.groups.share_build import write_empty, write_share_table

        tables = steps.result("share tables: joined")
        if tables is None:
            return write_empty(spark, name, out)
        return write_share_table(name, tables[name], out)

    steps.configure(settings(spark))
    steps.add("group tables", base, after=after)
    if with_share:
        # Each group's pass first, beside the group tables (OUT/delivery waits for its
        # acceptances), then what the records' produced instants and the logs' ends add.
        steps.add("share tables", tell_share, after=["group tables"])
    steps.add("group tables: lag", lagged, after=["group tables", *after_lag])
    if with_share:
        steps.add(
            "share tables: joined",
            finish_share_tables,
            after=["share tables", "group tables: lag", *after_lag],
        )
    steps.finally_(close)
    written = []
    for name in TABLES:
        built_by = "group tables: lag" if name in LAGGED else "group tables"
        steps.add(writing_step(f"groups/{name}"), partial(write_one, name), after=[built_by])
        written.append((f"groups/{name}", os.path.join(out, "groups", name)))
    for name in SHARE_TABLES if with_share else ():
        step = writing_step(f"share/{name}")
        steps.add(step, partial(write_share, name), after=["share tables: joined"])
        written.append((f"share/{name}", os.path.join(out, "share", name)))
    return written


def writing_step(table: str) -> str:
    """The name of add_steps()'s step that writes `table` ("groups/members", "share/records")."""
    family, name = table.split("/", 1)
    return f"{'group' if family == 'groups' else family} tables: {name}"


def iter_tables() -> Iterator[str]:
    yield from TABLES
