"""OUT/share/: share groups' deliveries, records, sessions and progress, built with Spark.

The share frames (ShareFetch, ShareAcknowledge and DescribeShareGroupOffsets, each with its answer,
paired by kwire.groups.build.pair_all) are narrowed to one small row each: the acknowledgement
batches sent, the acquired ranges and errors answered, as JSON, never the records. Each group's
rows are read in time order by kwire.groups.share on an executor (`groupBy(group_id)
.applyInArrow`), which gives the four tables' rows typed, each table's in a struct of its own;
the produced instants of the records come from the produced records' offsets
(kwire.groups.delivery.offsets) by a join.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from kwire.spark.driver import derived_partitions, parallelism
from kwire.groups.pairs import paired, write_typed
from kwire.groups.schema import SHARE_TABLES
from kwire.spark.collector import few_collections
from kwire.spark.faults import fault_point

if TYPE_CHECKING:
    from kwire.groups.clock import Clock
    from kwire.groups.delivery import Known

SHARE_EVENTS = (
    "group_id string, kind string, ts timestamp, resp_ts timestamp, answered boolean, "
    "connection_id string, client_id string, client_addr string, broker string, "
    "member_id string, epoch int, error int, lock_ms int, detail string"
)
SHARE_APIS = ("share_fetch", "share_acknowledge", "describe_share_group_offsets")


def _broker() -> Column:
    return F.concat_ws(":", F.col("broker_addr"), F.col("broker_port").cast("string"))


def _acks(topics: str) -> Column:
    """The acknowledgement batches of a request's topics: [topic_id, partition, first, last,
    types] each (as JSON objects in that order)."""
    return F.flatten(
        F.transform(
            F.coalesce(F.col(topics), F.array()),
            lambda t: F.flatten(
                F.transform(
                    F.coalesce(t["partitions"], F.array()),
                    lambda p: F.transform(
                        F.coalesce(p["acknowledgement_batches"], F.array()),
                        lambda b: F.struct(
                            t["topic_id"].alias("t"),
                            p["partition_index"].alias("p"),
                            b["first_offset"].alias("f"),
                            b["last_offset"].alias("l"),
                            b["acknowledge_types"].alias("k"),
                        ),
                    ),
                )
            ),
        )
    )


def _fetch_parts() -> Column:
    return F.flatten(
        F.transform(
            F.coalesce(F.col("resp.responses"), F.array()),
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.struct(
                    t["topic_id"].alias("t"),
                    p["partition_index"].alias("p"),
                    p["error_code"].alias("e"),
                    p["acknowledge_error_code"].alias("a"),
                    F.transform(
                        F.coalesce(p["acquired_records"], F.array()),
                        lambda r: F.array(
                            r["first_offset"], r["last_offset"], r["delivery_count"].cast("long")
                        ),
                    ).alias("r"),
                ),
            ),
        )
    )


def _ack_parts() -> Column:
    return F.flatten(
        F.transform(
            F.coalesce(F.col("resp.responses"), F.array()),
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.struct(
                    t["topic_id"].alias("t"),
                    p["partition_index"].alias("p"),
                    p["error_code"].alias("e"),
                ),
            ),
        )
    )


def _event(df: DataFrame, kind: str, **columns: Column) -> DataFrame:
    own: dict[str, Column] = {
        "kind": F.lit(kind),
        "ts": F.col("ts"),
        "resp_ts": F.col("resp_ts"),
        "answered": F.col("resp").isNotNull(),
        "connection_id": F.col("connection_id"),
        "client_id": F.col("client_id"),
        "client_addr": F.col("client_addr"),
        "broker": _broker(),
    }
    own.update(columns)
    names = [f.split(" ") for f in SHARE_EVENTS.split(", ")]
    return df.select(*[own.get(n, F.lit(None)).cast(t).alias(n) for n, t in names])


def share_events(pairs: DataFrame) -> DataFrame | None:
    """The share frames of every group as SHARE_EVENTS rows; None when the capture has none."""
    parts: list[DataFrame] = []
    for family, kind, answered in (
        ("share_fetch", "fetch", _fetch_parts),
        ("share_acknowledge", "ack", _ack_parts),
    ):
        if f"req_{family}" not in pairs.columns:
            continue
        parts.append(
            _event(
                paired(pairs, family),
                kind,
                group_id=F.col("req.group_id"),
                member_id=F.col("req.member_id"),
                epoch=F.col("req.share_session_epoch"),
                error=F.coalesce(F.col("resp.error_code"), F.lit(0)),
                lock_ms=F.col("resp.acquisition_lock_timeout_ms"),
                detail=F.to_json(
                    F.struct(
                        _acks("req.topics").alias("acks"),
                        F.when(F.col("resp").isNotNull(), answered()).alias("parts"),
                        F.col("req.is_renew_ack").alias("renew"),
                    )
                ),
            )
        )
    if "req_describe_share_group_offsets" in pairs.columns:
        d = paired(pairs, "describe_share_group_offsets").where("resp IS NOT NULL")
        d = d.select("*", F.explode("resp.groups").alias("g"))
        answer = F.flatten(
            F.transform(
                F.coalesce(F.col("g.topics"), F.array()),
                lambda t: F.transform(
                    F.coalesce(t["partitions"], F.array()),
                    lambda p: F.struct(
                        t["topic_id"].alias("t"),
                        t["topic_name"].alias("n"),
                        p["partition_index"].alias("p"),
                        p["start_offset"].alias("s"),
                        p["lag"].alias("l"),
                        p["error_code"].alias("e"),
                    ),
                ),
            )
        )
        parts.append(
            _event(
                d,
                "offsets",
                group_id=F.col("g.group_id"),
                error=F.col("g.error_code"),
                detail=F.to_json(F.struct(answer.alias("parts"))),
            )
        )
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    # A partition count of its own: adaptive execution would merge a plain repartition's
    # partitions into one, and every group's pass would then run in one task after another.
    tasks = max(2, parallelism(out.sparkSession))
    return out.where(F.col("group_id").isNotNull()).repartition(tasks, "group_id")


def _as_lists(value: Any) -> Any:
    """JSON objects of the narrowed rows back to lists in their field order."""
    if isinstance(value, dict):
        return [_as_lists(v) for v in value.values()]
    if isinstance(value, list):
        return [_as_lists(v) for v in value]
    return value


# What each group's pass gives back: one row per table row, the table's columns in a struct of
# their own types (the other tables' structs null), so nothing goes through JSON.
TOLD = StructType(
    [StructField("table", StringType())]
    + [StructField(name, schema) for name, schema in SHARE_TABLES.items()]
)


def _naive(ts: Any) -> datetime | None:
    """A timestamp from Arrow as the rules compare them: naive UTC."""
    if ts is None:
        return None
    if ts.tzinfo is not None:
        ts = ts.astimezone(timezone.utc).replace(tzinfo=None)
    naive: datetime = ts
    return naive


# Rows per Arrow batch a group's pass hands back. Spark reads each batch whole into one buffer of
# the JVM's direct memory: a share group of 770k deliveries (the churny scale ring's sg-work) in
# one batch asked for 507 MB of it at once and failed the job (OutOfDirectMemoryError).
BATCH_ROWS = 16_384


def _struct(rows: list[Any], struct: pa.StructType) -> pa.Array:
    """`rows` (dicts, or kwire.groups.share's rows with slots, all of one kind) as one Arrow
    struct array of `struct`; a column the rows do not have is null. The rows with slots go a
    column at a time (attrgetter over the list: no Python loop per value)."""
    if isinstance(rows[0], dict):
        return pa.array(rows, type=struct)
    have = set(type(rows[0]).__slots__)
    n = len(rows)
    columns = [
        (
            pa.array(list(map(attrgetter(f.name), rows)), type=f.type)
            if f.name in have
            else pa.nulls(n, type=f.type)
        )
        for f in struct
    ]
    return pa.StructArray.from_arrays(columns, fields=list(struct))


def _arrow_batches(told: dict[str, list[Any]]) -> Iterator[pa.RecordBatch]:
    """The share tables' rows as Arrow batches of TOLD's shape, of at most BATCH_ROWS rows each,
    made one at a time (_struct) as Spark reads them. Takes the rows out of `told` as it goes,
    so that the Python rows of a batch are freed once it is made: a group's pass holds its rows
    once, in Python, and only one batch's in Arrow."""
    schema = to_arrow_schema(TOLD, timezone="UTC")
    for name in SHARE_TABLES:
        rows = told.pop(name, None) or []
        struct = schema.field(name).type
        for start in range(0, len(rows), BATCH_ROWS):
            chunk = rows[start : start + BATCH_ROWS]
            n = len(chunk)
            rows[start : start + n] = [None] * n
            data = _struct(chunk, struct)
            del chunk
            arrays = [pa.array([name] * n, type=pa.string())]
            arrays += [
                data if other == name else pa.nulls(n, type=schema.field(other).type)
                for other in SHARE_TABLES
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def _run(names: dict[str, str], ends: Clock) -> Any:
    # The iterator form (its type hints say so: Spark 4.1+): each batch goes to Spark as soon as
    # it is made.
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from kwire.groups.share import share_history

        fault_point("share")
        rows: list[dict[str, Any]] = []
        for batch in batches:
            for e in batch.to_pylist():
                e["ts"], e["resp_ts"] = _naive(e["ts"]), _naive(e["resp_ts"])
                d = json.loads(e["detail"]) if e.get("detail") else {}
                e["detail"] = {k: _as_lists(v) if k != "renew" else v for k, v in d.items()}
                e["answered"] = bool(e.get("answered"))
                rows.append(e)
        if not rows:
            return
        group_id = rows[0]["group_id"]
        # Hundreds of thousands of attempts, an object each (kwire.spark.collector).
        with few_collections():
            told = share_history(group_id, rows, ends.of(group_id), names)
            del rows
            yield from _arrow_batches(told)

    return run


def told_share(
    pairs: DataFrame,
    names: dict[str, str],
    ends: Clock,
    held: list[DataFrame],
) -> dict[str, DataFrame] | None:
    """The four OUT/share tables as each group's pass tells them (computed here, and held), or
    None when the capture has no share frames; under "accepted", each record's acceptance
    (group_id, topic, partition, offset, accepted_at: what OUT/delivery needs). Computed at
    once, so that OUT/delivery, which waits for it, is not kept waiting by whatever runs
    beside it; finish_share() then adds what the records and the logs' ends say."""
    from kwire.spark.session import hold

    ev = share_events(pairs)
    if ev is None:
        return None
    told = hold(ev.groupBy("group_id").applyInArrow(_run(names, ends), TOLD))
    held.append(told)
    told.count()
    tables = {name: told.where(F.col("table") == name).select(f"{name}.*") for name in SHARE_TABLES}
    tables["accepted"] = tables["records"].select(
        "group_id", "topic", "partition", "offset", "accepted_at"
    )
    return tables


def finish_share(
    told: dict[str, DataFrame],
    held: list[DataFrame],
    known: Known | None = None,
    log_ends: DataFrame | None = None,
) -> dict[str, DataFrame]:
    """The four OUT/share tables (lazy) from told_share()'s: `known`
    (kwire.groups.delivery.Known) gives the records their produced instants; `log_ends`
    (kwire.groups.build.latest_log_ends) the partitions' log end offsets."""
    from kwire.spark.session import hold

    tables = dict(told)
    if known is not None:
        # The produced instants of the share groups' offsets alone, computed once for both
        # tables: the share records (a few hundred thousand keys at most, often broadcast)
        # pick their rows out of every offset the capture knows before any aggregation.
        keys = ["topic", "partition", "offset"]
        wanted = tables["records"].select(*keys).distinct()
        # Held hash partitioned by the keys into a fixed number of partitions and sorted within
        # them, in Spark's cache (which keeps both, where a local checkpoint forgets them): both
        # tables' joins with it then shuffle and sort their own rows alone.
        produced = hold(
            known.at(wanted, small=False)
            .groupBy(*keys)
            .agg(
                F.min("produced_at").alias("_produced_at"),
                F.min("record_timestamp").alias("_record_timestamp"),
            )
            .repartition(derived_partitions(wanted.sparkSession), *keys)
            .sortWithinPartitions(*keys),
            local=False,
        )
        held.append(produced)
        d = tables["deliveries"].drop("produced_at", "record_timestamp")
        d = d.join(produced, keys, "left").withColumn("produced_at", F.col("_produced_at"))
        d = d.withColumn("record_timestamp", F.col("_record_timestamp"))
        tables["deliveries"] = d.withColumn(
            "acquire_ms",
            F.when(F.col("delivery_count") == 1, _ms_between("acquired_at", "produced_at")),
        ).withColumn("ack_ms", _ms_between("ack_sent_at", "acquired_at"))
        r = tables["records"].drop("produced_at").join(produced, keys, "left")
        r = r.withColumn("produced_at", F.col("_produced_at"))
        tables["records"] = r.withColumn(
            "produce_to_acquire_ms", _ms_between("first_acquired_at", "produced_at")
        ).withColumn("produce_to_accept_ms", _ms_between("accepted_at", "produced_at"))
    else:
        tables["deliveries"] = tables["deliveries"].withColumn(
            "ack_ms", _ms_between("ack_sent_at", "acquired_at")
        )
    if log_ends is not None:
        ends = log_ends.select("topic", "partition", F.col("hw").alias("_log_end"))
        p = tables["progress"].drop("log_end_offset", "lag")
        p = p.join(ends, ["topic", "partition"], "left")
        # Offsets from the start offset to the log end not yet acknowledged or archived; the
        # broker's own answer (DescribeShareGroupOffsets v1) where the capture holds one.
        own = F.greatest(
            F.col("_log_end") - F.col("start_offset") - F.col("settled_past_start"), F.lit(0)
        )
        tables["progress"] = p.withColumn("log_end_offset", F.col("_log_end")).withColumn(
            "lag", F.coalesce(F.col("described_lag"), own)
        )
    else:
        tables["progress"] = tables["progress"].withColumn("lag", F.col("described_lag"))
    return tables


def _ms_between(later: str, earlier: str) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000.0


def write_share_table(name: str, df: DataFrame, out: str) -> str:
    """Writes OUT/share/<name> (Parquet) in the table's schema; returns its path."""
    path = os.path.join(out, "share", name)
    write_typed(df, SHARE_TABLES[name], path)
    return path


def write_empty(spark: Any, name: str, out: str) -> str:
    path = os.path.join(out, "share", name)
    write_typed(spark.createDataFrame([], SHARE_TABLES[name]), SHARE_TABLES[name], path)
    return path
