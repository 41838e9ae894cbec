"""OUT/delivery and OUT/delivery_summary: each produced record's trip, from the wire alone.

A record's trip has up to four instants the capture can hold:
- `produced_at`: the first packet of the Produce request that carried it (its first attempt, for
  an idempotent producer's retries);
- `acked_at`: the Produce response that gave it its offset (partition base offset + the
  record's position among the partition's records in that request, as the broker assigns them),
  with the response's error, if any (`ack_error`);
- `first_fetched_at`: per consumer (group, or client without a group), the first Fetch response
  that carried the record at that offset;
- `committed_at`: per group, the first successful OffsetCommit past the record (committed offset
  > record offset: a committed offset is the next one to read) at or after the group's first
  fetch of it (a commit past a record the group had not fetched yet is a reset or a seek, not
  the record's processing).

Rows: one per produced record and consumer that fetched it (a record nobody fetched in the
capture: one row with null consumer columns). Retries and idempotent duplicates are counted once
by (producer id, epoch, partition, sequence) where the producer has an id; without one, each
request's records are rows of their own (a retried non-idempotent batch is in the log twice).
An instant the capture does not hold is null, never guessed: a record fetched but produced
before the capture started is in no row (nothing says when it was produced).

Latencies: `ack_ms` = acked - produced (the broker's write and replication), `fetch_ms` =
first_fetched - produced (producer to consumer), `commit_ms` = committed - first_fetched (the
consumer's processing until its commit).

Trace context: `trace_id` and `span_id` from the record headers, as OUT/records has them
(kwire.records.trace).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StringType, StructField, StructType, TimestampType

from kwire.spark.model import rows_of

# A connection id's broker end ("client->broker[#n]"): host, port.
BROKER_END = r"->\[?(.*?)\]?:(\d+)(#\d+)?$"


def broker_endpoint(connection_id: str) -> Column:
    """A connection's broker end, "host:port", from its id ("client->broker[#n]")."""
    m = BROKER_END
    return F.concat_ws(
        ":", F.regexp_extract(connection_id, m, 1), F.regexp_extract(connection_id, m, 2)
    )


def names_clusters(responses: DataFrame) -> bool:
    """Whether the decoded Metadata answers carry the cluster id and the brokers (every
    version but the first two do; a capture of those alone has no cluster to name)."""
    if "metadata" not in responses.columns:
        return False
    fields = responses.schema["metadata"].dataType.fieldNames()  # type: ignore[attr-defined]
    return "cluster_id" in fields and "brokers" in fields


def clusters(responses: DataFrame) -> DataFrame | None:
    """Broker "host:port" -> cluster id, from the Metadata responses (v2+ carry the cluster
    id). Topic names are per cluster: a host that produces to one cluster and consumes the same
    topic from another (MirrorMaker) must not see one trip there."""
    if not names_clusters(responses):
        return None
    return (
        rows_of(responses, "metadata")
        .where(F.col("metadata.cluster_id").isNotNull())
        .select(
            F.col("metadata.cluster_id").alias("cluster"), F.explode("metadata.brokers").alias("b")
        )
        .select(
            F.concat_ws(":", F.col("b.host"), F.col("b.port").cast("string")).alias("_ep"),
            "cluster",
        )
        .groupBy("_ep")
        .agg(F.min("cluster").alias("cluster"))
    )


def with_cluster(
    rows: DataFrame, endpoint: Column, known: DataFrame | None, name: str = "cluster"
) -> DataFrame:
    """`rows` with the cluster id (clusters()) of their broker `endpoint` ("host:port") as
    column `name`; null where Metadata did not name it, or without `known`."""
    if known is None:
        return rows.withColumn(name, F.lit(None).cast("string"))
    ids = known.select(F.col("_ep").alias("_with_ep"), F.col("cluster").alias(name))
    return rows.join(F.broadcast(ids), endpoint == F.col("_with_ep"), "left").drop("_with_ep")


def connection_cluster(
    rows: DataFrame, conn: str, known: DataFrame | None, name: str = "cluster"
) -> DataFrame:
    """`rows` with the cluster id of the broker end of their connection `conn` as column
    `name` (with_cluster()): the connections' few distinct ids are looked up once, and the
    rows join them by id, instead of parsing every record's connection id (two regular
    expressions per row over millions of records)."""
    if known is None:
        return rows.withColumn(name, F.lit(None).cast("string"))
    conns = rows.select(F.col(conn).alias("_cc_conn")).distinct()
    conns = with_cluster(conns, broker_endpoint("_cc_conn"), known, name)
    return rows.join(F.broadcast(conns), F.col(conn) == F.col("_cc_conn"), "left").drop("_cc_conn")


def _ms(later: Column | str, earlier: Column | str) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / 1000.0


# The producer's columns a produced record carries into OUT/delivery.
_PRODUCER = ("producer_id", "producer_epoch", "sequence", "record_timestamp", "trace_id", "span_id")


_GOOD_BATCH = ("ok", "crc_mismatch", "partial")


def _topic() -> Column:
    """A record's topic in OUT/delivery and in the time lags' lookup: its name, or its id
    (Kafka's text form) where the frame names it by id (Produce v13+, Fetch v13+) and no
    Metadata response in the capture names that id, as the group tables do. Topics named by id
    alone then stay apart, and a produced record is matched with its fetches by the id."""
    return F.coalesce("topic", "topic_id")


def _data_records(records: DataFrame, direction: str, api_key: int) -> DataFrame:
    """The readable data records of one api key's frames (no control records, an offset); for
    Fetch responses, the records ShareFetch responses delivered (acquired) too: a share
    group's consumption."""
    which = (F.col("direction") == direction) & (F.col("api_key") == api_key)
    if (direction, api_key) == ("response", 1) and "acquired" in records.columns:
        which = which | (
            (F.col("direction") == direction)
            & (F.col("api_key") == 78)
            & F.coalesce(F.col("acquired"), F.lit(False))
        )
    return records.where(which & _readable())


def _readable() -> Column:
    return (
        F.col("batch_status").isin(*_GOOD_BATCH)
        & ~F.coalesce(F.col("is_control"), F.lit(False))
        & F.col("offset").isNotNull()
    )


# All that delivery and the time lags read of OUT/records: never keys or values, which are
# nearly all of its bytes.
_RECORD_COLUMNS = (
    "connection_id",
    "direction",
    "api_key",
    "correlation_id",
    "client_id",
    "frame_ts",
    "topic",
    "topic_id",
    "partition",
    "batch_index",
    "batch_status",
    "is_control",
    "producer_id",
    "producer_epoch",
    "offset",
    "sequence",
    "timestamp",
    "trace_id",
    "span_id",
    "acquired",
)


def data_records(records: DataFrame) -> DataFrame:
    """The produced and fetched data records, with only the columns the functions below read:
    one scan of OUT/records for the caller to cache, where each function would scan it again."""
    produce = (F.col("direction") == "request") & (F.col("api_key") == 0)
    fetch = (F.col("direction") == "response") & (F.col("api_key") == 1)
    if "acquired" in records.columns:
        # A ShareFetch response delivered to its member only the records it acquired; the rest
        # of its batches were fetched, not consumed (OUT/records from before share groups has
        # no `acquired` column and no such rows are counted).
        share = (F.col("direction") == "response") & (F.col("api_key") == 78)
        fetch = fetch | (share & F.coalesce(F.col("acquired"), F.lit(False)))
    return (
        records.where(produce | fetch)
        .select(*[c for c in _RECORD_COLUMNS if c in records.columns])
        .where(_readable())
    )


def produced(records: DataFrame, responses: DataFrame, endpoints: DataFrame | None) -> DataFrame:
    """One row per record the capture saw produced, with its ack (see the module);
    `endpoints` is clusters(responses)."""
    rq = connection_cluster(_data_records(records, "request", 0), "connection_id", endpoints)
    # A record's offset in the log: the partition's base offset plus its place among the
    # partition's records in the request (batches in order, records in order).
    # A topic is its name, or its id where the capture did not name it (Produce v13+ with no
    # Metadata naming the id): two such topics are not one.
    topic = _topic()
    place = Window.partitionBy("connection_id", "correlation_id", topic, "partition").orderBy(
        "batch_index", "offset"
    )
    rq = rq.select(
        "connection_id",
        "correlation_id",
        "client_id",
        F.col("frame_ts").alias("produced_at"),
        "topic",
        "topic_id",
        "partition",
        "producer_id",
        "producer_epoch",
        "sequence",
        F.col("timestamp").alias("record_timestamp"),
        "trace_id",
        "span_id",
        "cluster",
        topic.alias("_topic"),
        (F.row_number().over(place) - 1).alias("_place"),
    )
    if "produce" not in responses.columns:
        acks = None
    else:
        ack = ["_conn", "_corr", "acked_at"]
        acks = (
            rows_of(responses, "produce")
            .select(
                F.col("connection_id").alias("_conn"),
                F.col("correlation_id").alias("_corr"),
                F.col("ts_first").alias("acked_at"),
                F.explode("produce.responses").alias("t"),
            )
            .select(
                *ack,
                F.col("t.name").alias("_name"),
                F.col("t.topic_id").alias("_tid"),
                F.explode("t.partition_responses").alias("p"),
            )
            .select(
                *ack,
                "_name",
                "_tid",
                F.col("p.index").alias("_part"),
                F.col("p.error_code").alias("_error"),
                F.col("p.base_offset").alias("_base"),
            )
        )
    if acks is None:
        out = rq.select(
            "*",
            F.lit(None).cast("timestamp").alias("acked_at"),
            F.lit(None).cast("short").alias("_error"),
            F.lit(None).cast("long").alias("_base"),
        )
    else:
        same_topic = (F.col("_name") == F.col("topic")) | (
            F.col("_tid").isNotNull() & (F.col("_tid") == F.col("topic_id"))
        )
        out = rq.join(
            acks,
            (F.col("_conn") == F.col("connection_id"))
            & (F.col("_corr") == F.col("correlation_id"))
            & (F.col("_part") == F.col("partition"))
            & same_topic,
            "left",
        )
    ok = (F.col("_error") == 0) & (F.col("_base") >= 0)
    out = out.select(
        F.col("_topic").alias("topic"),
        "partition",
        F.when(ok, F.col("_base") + F.col("_place")).alias("offset"),
        F.col("client_id").alias("producer_client_id"),
        F.col("connection_id").alias("producer_connection"),
        "produced_at",
        "acked_at",
        F.when(F.col("_error") != 0, F.col("_error").cast("int")).alias("ack_error"),
        *_PRODUCER,
        "cluster",
    )
    # An idempotent producer's retries: one record, first attempt's time, the attempt acked
    # (one with an offset, the earliest acked, then the earliest sent). Without a producer id
    # each request's records are rows of their own, as sent (one attempt each).
    idem = F.coalesce((F.col("producer_id") >= 0) & (F.col("sequence") >= 0), F.lit(False))
    key = ["cluster", "producer_id", "producer_epoch", "topic", "partition", "sequence"]
    rest = [c for c in out.columns if c not in key]
    # Grouped, not windowed: one hash aggregate, where a window sorted every produced record;
    # a record without a producer id is a group of its own (`_alone`).
    best = F.struct(
        F.col("offset").isNull().alias("_no_offset"),
        F.col("acked_at").isNull().alias("_no_ack"),
        "acked_at",
        "produced_at",
    )
    alone = F.when(~idem, F.monotonically_increasing_id())
    return (
        out.withColumn("_alone", alone)
        .groupBy(*key, "_alone")
        .agg(
            F.min("produced_at").alias("_first"),
            F.count(F.lit(1)).alias("attempts"),
            F.min_by(F.struct(*rest), best).alias("_best"),
        )
        .select(*key, "_best.*", "attempts", "_first")
        .withColumn("produced_at", F.col("_first"))
        .select(*out.columns, "attempts")
    )


def consumers(
    records: DataFrame, members: DataFrame | None, known: DataFrame | None = None
) -> DataFrame:
    """The consumers of the fetched records: one row per connection and client id that fetched
    (`_f_conn`, `_f_client`), with its cluster, group (from the group tables' members, by client
    id and address, where it has one) and client id, and `_who`: a number per distinct (cluster,
    group_id, consumer_client_id), by which the records are grouped and joined instead of by
    their strings (on the churny scale ring, grouping 2 M fetched records by their strings took
    5.2 s, by numbers 2.1 s). Made on the driver: a row per connection (a few hundred)."""
    rs = _data_records(records, "response", 1)
    conns = rs.select(
        F.col("connection_id").alias("_f_conn"), F.col("client_id").alias("_f_client")
    ).distinct()
    conns = connection_cluster(conns, "_f_conn", known)
    if members is not None:
        member = (
            members.where(F.col("client_id").isNotNull())
            .groupBy("client_id", "client_addr")
            .agg(F.min("group_id").alias("group_id"))
        )
        addr = F.regexp_extract("_f_conn", r"^\[?([^\]]*?)\]?:\d+->", 1)
        conns = conns.join(
            F.broadcast(member),
            (member["client_id"] == conns["_f_client"]) & (member["client_addr"] == addr),
            "left",
        ).drop("client_id", "client_addr")
    else:
        conns = conns.withColumn("group_id", F.lit(None).cast("string"))
    import pyarrow as pa

    rows = conns.select(
        "_f_conn",
        "_f_client",
        "cluster",
        "group_id",
        F.col("_f_client").alias("consumer_client_id"),
    ).toArrow()
    names = ("cluster", "group_id", "consumer_client_id")
    keys = list(zip(*(rows.column(c).to_pylist() for c in names)))
    ids: dict[Any, int] = {}
    who = pa.array([ids.setdefault(k, len(ids)) for k in keys], type=pa.int32())
    # A number per group too, for the commits and acceptances looked up by group.
    groups: dict[Any, int] = {}
    group = pa.array([groups.setdefault(g, len(groups)) for _, g, _ in keys], type=pa.int32())
    schema = StructType(
        [
            StructField("_f_conn", StringType()),
            StructField("_f_client", StringType()),
            StructField("cluster", StringType()),
            StructField("group_id", StringType()),
            StructField("consumer_client_id", StringType()),
            StructField("_who", IntegerType(), False),
            StructField("_group", IntegerType(), False),
        ]
    )
    rows = rows.append_column("_who", who).append_column("_group", group)
    return records.sparkSession.createDataFrame(rows, schema)


def fetched(records: DataFrame, consumers: DataFrame) -> DataFrame:
    """(topic, partition, offset, consumer) -> first_fetched_at, the consumer as consumers()'s
    `_who`."""
    rs = _data_records(records, "response", 1).select(
        _topic().alias("topic"),
        "partition",
        "offset",
        F.col("client_id").alias("_client"),
        "frame_ts",
        F.col("connection_id").alias("_conn"),
    )
    ids = consumers.select("_f_conn", "_f_client", "_who")
    rs = rs.join(
        F.broadcast(ids),
        F.col("_conn").eqNullSafe(F.col("_f_conn"))
        & F.col("_client").eqNullSafe(F.col("_f_client")),
    )
    return rs.groupBy("_who", "topic", "partition", "offset").agg(
        F.min("frame_ts").alias("first_fetched_at")
    )


def delivery(
    records: DataFrame,
    prod: DataFrame,
    endpoints: DataFrame | None,
    commits: DataFrame | None = None,
    members: DataFrame | None = None,
    accepted: DataFrame | None = None,
) -> DataFrame:
    """OUT/delivery (see the module), from produced()'s rows `prod` and clusters()'s
    `endpoints`. `accepted` (OUT/share/records) gives a share group's records their
    `committed_at`: a share group commits nothing, its acceptance settles a record."""
    # Both sides come from the same held records: their key columns are renamed apart, so the
    # condition names one side each (Spark would otherwise see `topic == topic` and warn).
    keys = ("topic", "partition", "offset", "cluster")
    who = consumers(records, members, endpoints)
    # The consumers' strings ride along as numbers (consumers()) until the rows are made.
    names = F.broadcast(
        who.select("_who", "_group", "cluster", "group_id", "consumer_client_id").distinct()
    )
    groups = F.broadcast(who.select("group_id", "_group").distinct())
    got = fetched(records, who).join(names.select("_who", "_group", "cluster"), "_who")
    if commits is not None:
        got = first_commits(
            got.withColumnRenamed("first_fetched_at", "fetched_at"), commits, groups=groups
        )
        got = got.withColumnRenamed("fetched_at", "first_fetched_at")
    else:
        got = got.withColumn("committed_at", F.lit(None).cast("timestamp"))
    if accepted is not None:
        settled = (
            accepted.where(F.col("accepted_at").isNotNull())
            .join(groups, "group_id")
            .select(
                F.col("_group").alias("_a_group"),
                F.col("topic").alias("_a_topic"),
                F.col("partition").alias("_a_partition"),
                F.col("offset").alias("_a_offset"),
                F.col("accepted_at").alias("_accepted_at"),
            )
        )
        on = (
            (got["_group"] == settled["_a_group"])
            & (got["topic"] == settled["_a_topic"])
            & (got["partition"] == settled["_a_partition"])
            & (got["offset"] == settled["_a_offset"])
        )
        got = got.join(settled, on, "left")
        got = got.withColumn("committed_at", F.coalesce("committed_at", "_accepted_at"))
    got = got.select(
        *[F.col(c).alias(f"_got_{c}") for c in keys],
        "_who",
        "first_fetched_at",
        "committed_at",
    )
    same = (
        (prod["topic"] == got["_got_topic"])
        & (prod["partition"] == got["_got_partition"])
        & (prod["offset"] == got["_got_offset"])
        & prod["cluster"].eqNullSafe(got["_got_cluster"])
    )
    rows = prod.join(got, same, "left").select(
        prod["*"], *[got[c] for c in ("_who", "first_fetched_at", "committed_at")]
    )
    rows = rows.join(names.select("_who", "group_id", "consumer_client_id"), "_who", "left")
    return rows.select(
        "cluster",
        "topic",
        "partition",
        "offset",
        "producer_client_id",
        "producer_connection",
        "produced_at",
        "acked_at",
        "ack_error",
        "attempts",
        "group_id",
        "consumer_client_id",
        "first_fetched_at",
        "committed_at",
        _ms("acked_at", "produced_at").alias("ack_ms"),
        _ms("first_fetched_at", "produced_at").alias("fetch_ms"),
        _ms("committed_at", "first_fetched_at").alias("commit_ms"),
        *_PRODUCER,
    )


# Where a timestamp's instant orders when there is none: before every commit.
_EARLIEST = -(1 << 63)


# Successful commits up to which first_commits() ships them with its function and each task
# looks its records' commits up (numpy binary searches over each run), instead of the windows
# that sort every record asking (on the churny scale ring, 1.8 M records asking 638 commits).
# A capture of more commits than this gets the windows, which spill instead of holding them.
LOOKUP_COMMITS = 100_000


def first_commits(
    asks: DataFrame,
    commits: DataFrame,
    lookup_commits: int = LOOKUP_COMMITS,
    groups: DataFrame | None = None,
) -> DataFrame:
    """`asks`, distinct rows of records that groups fetched (at least group_id, topic,
    partition, offset and fetched_at: the group's first fetch of the record, null when unknown),
    each with `committed_at`: the time of the group's first successful commit
    (OUT/groups/commits) past the record (committed offset > offset) at or after `fetched_at`
    (any time when null); null when there is none.

    Without pairing each record with every later commit of its partition (a number of pairs
    that grows with the square of the capture's length). A group's commits of a partition, in
    time order, fall into runs in which the committed offset never goes down (a new run where
    it does: a reset or a seek back; usually there is one run). Within a run, the commits at or
    after `fetched_at` are a tail of the run, and so are those past `offset`: the first commit
    in both is the later of the two tails' first commits, and a record's commit is the earliest
    over its partition's runs.

    Up to `lookup_commits` successful commits (nearly every capture), the runs are made on the
    driver and shipped with the tasks' function, which finds each tail's first commit by a
    binary search (_look_up_commits): no shuffle, no sort of the records. Past it, each tail's
    first commit is found by one running window over the run's commits and the records asking:
    the last commit seen in descending time (commits before records at the same instant: at or
    after) and in descending offset (records before commits at the same offset: past, not at),
    a record asking only the runs that reach past it in both time and offset.

    `groups` (group_id, _group): the groups by number, `asks` naming theirs as `_group` instead
    of `group_id` (delivery(): fewer bytes per record than the name)."""
    columns = asks.columns
    group = "group_id" if groups is None else "_group"
    part = [group, "topic", "partition"]
    done = commits.where(
        F.col("error").isNull()
        & F.col("offset").isNotNull()
        & F.col("group_id").isNotNull()
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
    )
    if groups is not None:
        done = done.join(groups, "group_id")
    done = done.select(*part, F.col("offset").alias("_o"), F.unix_micros("ts").alias("_t"))
    few = done.limit(lookup_commits + 1).toArrow() if lookup_commits >= 0 else None
    if few is not None and few.num_rows <= lookup_commits:
        schema = StructType([*asks.schema.fields, StructField("committed_at", TimestampType())])
        return asks.mapInArrow(_look_up_commits(_commit_runs(few, part), part), schema)
    order = Window.partitionBy(*part).orderBy("_t", "_o")
    down = F.coalesce((F.col("_o") < F.lag("_o").over(order)).cast("int"), F.lit(0))
    done = done.withColumn("_down", down).withColumn(
        "_run",
        F.sum("_down").over(order.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
    )
    runs = done.groupBy(*part, "_run").agg(
        F.max("_t").alias("_last_t"), F.max("_o").alias("_top_o")
    )
    at = F.coalesce(F.unix_micros(asks["fetched_at"]), F.lit(_EARLIEST))
    reach = (
        (asks[group] == runs[group])
        & (asks["topic"] == runs["topic"])
        & (asks["partition"] == runs["partition"])
        & (runs["_top_o"] > asks["offset"])
        & (runs["_last_t"] >= at)
    )
    # The runs are few (one per group and partition, and one more per reset), so Spark
    # broadcasts them; not forced, for a capture of constant resets.
    joined = asks.join(runs, reach, "left")
    # A record no run reaches (a share group's, a group that never committed it) has no
    # commit: it skips the windows below, which sort every record asking.
    unreached = joined.where(runs["_run"].isNull()).select(
        *[asks[c] for c in columns], F.lit(None).cast("timestamp").alias("committed_at")
    )
    asking = joined.where(runs["_run"].isNotNull()).select(
        *[asks[c] for c in columns],
        "_run",
        at.alias("_t"),
        asks["offset"].alias("_o"),
        F.lit(1).alias("_kind"),
        F.lit(None).cast("long").alias("_c"),
    )
    events = asking.unionByName(
        done.select(*part, "_run", "_t", "_o", F.lit(0).alias("_kind"), F.col("_t").alias("_c")),
        allowMissingColumns=True,
    )
    run = Window.partitionBy(*part, "_run")
    seen = (Window.unboundedPreceding, Window.currentRow)
    by_time = run.orderBy(F.col("_t").desc(), F.col("_kind").asc()).rowsBetween(*seen)
    by_offset = run.orderBy(
        F.col("_o").desc(), F.col("_kind").desc(), F.col("_t").desc()
    ).rowsBetween(*seen)
    first_at = F.last("_c", ignorenulls=True).over(by_time)
    first_past = F.last("_c", ignorenulls=True).over(by_offset)
    return (
        events.select(
            *columns,
            "_kind",
            F.when(
                first_at.isNotNull() & first_past.isNotNull(), F.greatest(first_at, first_past)
            ).alias("_c"),
        )
        .where(F.col("_kind") == 1)
        .groupBy(*columns)
        .agg(F.timestamp_micros(F.min("_c")).alias("committed_at"))
        .unionByName(unreached)
    )


Runs = dict[tuple[Any, Any, Any], list[tuple[Any, Any]]]


def _commit_runs(done: Any, part: list[str]) -> Runs:
    """first_commits()'s successful commits (an Arrow table of the columns `part`, the group and
    its topic and partition, then _o, _t) as runs: (group, topic, partition) -> [(times,
    offsets)] per run, each two numpy arrays in the run's order (time, then offset), neither
    going down within a run."""
    rows = done.sort_by([(c, "ascending") for c in (*part, "_t", "_o")])
    runs: Runs = {}
    # Each run's commits as (time, offset), its partition's key and offset so far.
    run: list[tuple[int, int]] = []
    key: tuple[Any, Any, Any] | None = None
    top = 0
    for g, t, p, o, ts in zip(*(rows.column(c).to_pylist() for c in (*part, "_o", "_t"))):
        if (g, t, p) != key or o < top:
            if key is not None:
                runs.setdefault(key, []).append(_arrays(run))
            run, key = [], (g, t, p)
        run.append((ts, o))
        top = o
    if key is not None:
        runs.setdefault(key, []).append(_arrays(run))
    return runs


def _arrays(run: list[tuple[int, int]]) -> tuple[Any, Any]:
    import numpy as np

    times, offsets = zip(*run)
    return np.array(times, dtype=np.int64), np.array(offsets, dtype=np.int64)


def _look_up_commits(runs: Runs, part: list[str]) -> Any:
    """mapInArrow's function for first_commits(): each record's committed_at from `runs`
    (_commit_runs()). Within a run the commits past a record's offset are a tail, and so are the
    commits at or after its fetch; the first commit in both is the later tail's first. A record
    takes the earliest such commit over its partition's runs, null when no run reaches it."""

    def look_up(batches: Any) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        never = np.iinfo(np.int64).max
        for batch in batches:
            n = batch.num_rows
            fetched = batch.column("fetched_at")
            at = pc.fill_null(fetched.cast(pa.int64()), _EARLIEST).to_numpy()
            offset = batch.column("offset")
            offsets = pc.fill_null(offset.cast(pa.int64()), 0).to_numpy()
            keys = zip(*(batch.column(c).to_pylist() for c in part))
            asking: dict[tuple[Any, Any, Any], list[int]] = {}
            for i, (key, valid) in enumerate(zip(keys, pc.is_valid(offset).to_pylist())):
                if valid and key in runs:
                    asking.setdefault(key, []).append(i)
            first = np.full(n, never, dtype=np.int64)
            for key, rows in asking.items():
                where = np.array(rows, dtype=np.int64)
                o, t = offsets[where], at[where]
                best = np.full(len(where), never, dtype=np.int64)
                for times, offs in runs[key]:
                    past = np.searchsorted(offs, o, side="right")  # first commit past the record
                    after = np.searchsorted(times, t, side="left")  # first at or after its fetch
                    both = np.maximum(past, after)
                    reached = both < len(times)
                    found = times[np.minimum(both, len(times) - 1)]
                    best = np.minimum(best, np.where(reached, found, never))
                first[where] = best
            committed = pa.array(first, mask=first == never).cast(fetched.type)
            yield pa.RecordBatch.from_arrays(
                [*batch.columns, committed], names=[*batch.schema.names, "committed_at"]
            )

    return look_up


def offsets(
    records: DataFrame,
    prod: DataFrame,
    endpoints: DataFrame | None,
    wanted: DataFrame | None = None,
) -> DataFrame:
    """What the capture knows of the record at each log offset: (cluster, topic, partition,
    offset) -> `produced_at` and `acked_at` (from the Produce traffic, as in OUT/delivery) and
    `record_timestamp` (the log's, from a Fetch response that carried it, else the one the
    producer wrote). `prod` is produced()'s rows, `endpoints` clusters()'s. With `wanted`
    (distinct topic, partition, offset), only those offsets: each side keeps its rows at them
    before any shuffle (Known)."""
    keys = ["cluster", "topic", "partition", "offset"]
    at = ["topic", "partition", "offset"]
    if wanted is not None:
        prod = prod.join(wanted, at, "leftsemi")
    none = F.lit(None).cast("timestamp")
    wrote = prod.where(F.col("offset").isNotNull()).select(
        *keys,
        "produced_at",
        "acked_at",
        F.col("record_timestamp").alias("_produce_ts"),
        none.alias("_log_ts"),
    )
    read = connection_cluster(
        _data_records(records, "response", 1).select(
            "connection_id", _topic().alias("topic"), "partition", "offset", "timestamp"
        ),
        "connection_id",
        endpoints,
    )
    if wanted is not None:
        read = read.join(wanted, at, "leftsemi")
    read = read.select(
        *keys,
        none.alias("produced_at"),
        none.alias("acked_at"),
        none.alias("_produce_ts"),
        F.col("timestamp").alias("_log_ts"),
    )
    # One aggregation of both sides' rows, where aggregating each and joining them sorted both
    # (null clusters, no Metadata v2+ for the broker, are keys of their own either way).
    both = (
        wrote.unionByName(read)
        .repartition(*at)
        .groupBy(*keys)
        .agg(*[F.min(c).alias(c) for c in ("produced_at", "acked_at", "_produce_ts", "_log_ts")])
    )
    return both.select(
        *keys,
        "produced_at",
        "acked_at",
        F.coalesce("_log_ts", "_produce_ts").alias("record_timestamp"),
    )


class Known:
    """What the capture knows of records at the log offsets asked for (offsets()), from the
    held data records and produced records. The commits' time lags ask for a few thousand
    offsets: they get those alone, instead of every offset of the capture being aggregated,
    joined and held (on the churny ring of 1.04 M small records, "produced records and their
    offsets" 24.0 -> 9.3 s, steps run one at a time)."""

    def __init__(self, records: DataFrame, prod: DataFrame, endpoints: DataFrame | None) -> None:
        self.records, self.prod, self.endpoints = records, prod, endpoints

    def at(self, wanted: DataFrame, small: bool = True) -> DataFrame:
        """offsets() at least at the (topic, partition, offset) of `wanted`'s rows, for a join
        with them. `small` (commits: a row per partition a group commits, each time it commits,
        so thousands an hour against the records' millions; still growing with the capture's
        length): only there, both sides picking their rows by a broadcast of the distinct
        offsets before any shuffle. Not small (a share group's every record): every offset,
        since picking a million keys out of as many records by a shuffled semi-join cost more
        than it saved (6.1 against 4.6 s on the churny ring)."""
        if not small:
            return offsets(self.records, self.prod, self.endpoints)
        asked = (
            wanted.select("topic", "partition", "offset")
            .where(
                F.col("topic").isNotNull()
                & F.col("partition").isNotNull()
                & F.col("offset").isNotNull()
            )
            .distinct()
        )
        return offsets(self.records, self.prod, self.endpoints, F.broadcast(asked))


def time_lag(
    rows: DataFrame,
    known: DataFrame,
    at: Column,
    offset: Column,
    cluster: Column,
) -> tuple[DataFrame, Column, Column]:
    """`rows` with what `known` (offsets()) says of the record at `offset` (a committed offset:
    the next record the group would read), and the two time lags at instant `at`:
    - by the wire: `at` - the record's produced_at; 0 when it was acked after `at` (at `at` the
      group had read all there was); null when the capture did not see it produced;
    - by record timestamp: `at` - its timestamp, at least 0; 0 when acked after `at`; null when
      the capture holds neither its production nor a fetch of it.
    A partition's topic is matched within its cluster where both are known."""
    k = known.select(
        F.col("cluster").alias("_k_cluster"),
        F.col("topic").alias("_k_topic"),
        F.col("partition").alias("_k_partition"),
        F.col("offset").alias("_k_offset"),
        F.col("produced_at").alias("_k_produced"),
        F.col("acked_at").alias("_k_acked"),
        F.col("record_timestamp").alias("_k_ts"),
    )
    same = (
        (F.col("_k_topic") == F.col("topic"))
        & (F.col("_k_partition") == F.col("partition"))
        & (F.col("_k_offset") == offset)
    )
    same = same & (
        cluster.isNull() | F.col("_k_cluster").isNull() | (F.col("_k_cluster") == cluster)
    )
    rid = Window.partitionBy("_k_rid").orderBy(
        F.when(F.col("_k_cluster").isNull(), 1).otherwise(0), F.col("_k_cluster")
    )
    joined = (
        rows.withColumn("_k_rid", F.monotonically_increasing_id())
        .join(k, same, "left")
        .withColumn("_k_n", F.row_number().over(rid))
        .where("_k_n = 1")
    )
    later = F.col("_k_acked").isNotNull() & (F.col("_k_acked") > at)
    by_wire = (
        F.when(F.col("_k_produced").isNull(), F.lit(None))
        .when(later, F.lit(0.0))
        .otherwise(F.greatest(_ms(at, "_k_produced"), F.lit(0.0)))
    )
    by_ts = (
        F.when(F.col("_k_ts").isNull(), F.lit(None))
        .when(later, F.lit(0.0))
        .otherwise(F.greatest(_ms(at, "_k_ts"), F.lit(0.0)))
    )
    return joined, by_wire.cast("double"), by_ts.cast("double")


def lag_columns_dropped(df: DataFrame) -> DataFrame:
    """time_lag()'s result without the columns it joined in."""
    return df.drop(*[c for c in df.columns if c.startswith("_k_")])


def summary(rows: DataFrame) -> DataFrame:
    """OUT/delivery_summary: per topic, partition and consumer, the latencies' p50/p95/p99/max."""
    aggs: list[Any] = [
        F.count(F.lit(1)).alias("records"),
        F.count("acked_at").alias("acked"),
        F.count("first_fetched_at").alias("fetched"),
        F.count("committed_at").alias("committed"),
    ]
    for name in ("ack_ms", "fetch_ms", "commit_ms"):
        q = F.percentile_approx(name, [0.5, 0.95, 0.99], 10000)
        base = name.removesuffix("_ms")
        aggs += [
            q[0].cast("double").alias(f"{base}_p50_ms"),
            q[1].cast("double").alias(f"{base}_p95_ms"),
            q[2].cast("double").alias(f"{base}_p99_ms"),
            F.max(name).alias(f"{base}_max_ms"),
        ]
    return rows.groupBy("cluster", "topic", "partition", "group_id", "consumer_client_id").agg(
        *aggs
    )
