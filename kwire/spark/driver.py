"""The driver side of a session, classic or Spark Connect, in one place.

A classic session (`local[*]`, `spark-submit`, a notebook's) has a driver JVM in this process's
reach: its SparkContext, status tracker, job groups and log levels. A Spark Connect session
(`--remote sc://...`, SPARK_REMOTE, Databricks' serverless and shared clusters) has none of
them: the driver is the server's, and the client speaks to it over gRPC. What kwire runs on
executors (the pcap source, the decoders, the tasks that write Parquet) is the same on both;
what it asks of the driver goes through the helpers here, which take the Connect way where the
classic one does not exist and skip what has no Connect counterpart:

- the master and the default parallelism: `spark.conf` and one tiny query, not SparkContext;
- job descriptions, the driver's log level, the dead-JVM diagnosis and the JVM class archive:
  classic only (a Connect server's logs and JVM are its operator's);
- progress: the status tracker (classic) or the progress handler Spark Connect pushes to
  (kwire.spark.progress);
- cancelling a failed run's other steps: job groups (classic) or tags (kwire.spark.steps).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (without importing pyspark's Connect
    client, which needs grpcio, unless the session is one)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master(spark: SparkSession) -> str:
    """The session's master URL ("local[2]", "spark://host:7077", "yarn"); "" when a Connect
    server does not say."""
    if is_connect(spark):
        return str(spark.conf.get("spark.master", "") or "")
    return str(spark.sparkContext.master or "")


def is_local(master_url: str) -> bool:
    return master_url.startswith("local")


def runs_locally(spark: SparkSession) -> bool:
    """Whether the session's tasks run in its driver's JVM (a local master)."""
    return is_local(master(spark) or "local")


def parallelism(spark: SparkSession) -> int:
    """The session's default parallelism (its executors' cores, on a local master the threads
    it was given): SparkContext's on a classic session; over Connect the setting when given,
    else the partitions Spark gives a range of rows by default (one tiny query, once per
    session)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    known = getattr(spark, "_kwire_parallelism", None)
    if known is None:
        given = spark.conf.get("spark.default.parallelism", None)
        if given and str(given).strip().isdigit():
            known = int(given)
        else:
            from pyspark.sql import functions as F

            part = spark.range(1 << 16).select(F.spark_partition_id().alias("p"))
            row = part.agg(F.max("p")).first()
            known = int(row[0]) + 1 if row is not None and row[0] is not None else 1
        spark._kwire_parallelism = known  # type: ignore[attr-defined]
    return int(known)


def derived_partitions(spark: SparkSession) -> int:
    """Shuffle partitions for the tables derived from the decoded ones (group tables, delivery):
    two per core, at least two; they are small next to the frames, and Spark's 200 would be
    hundreds of near-empty tasks per join."""
    return max(2, 2 * parallelism(spark))


def describe_jobs(spark: SparkSession, what: str) -> None:
    """Names the Spark jobs this thread starts from now on ("kwire: <what>"), as Spark's UI,
    its event log and history server show them. Connect has no job descriptions: there the
    steps' tags (kwire.spark.steps) name the operations."""
    if not is_connect(spark):
        spark.sparkContext.setJobDescription(f"kwire: {what}")


def log_level(spark: SparkSession) -> str | None:
    """The driver's log level now (log4j's root logger), WARN when it cannot be read; None over
    Connect, whose server logs as its operator set it."""
    if is_connect(spark):
        return None
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())
    except Exception:
        return "WARN"


def set_log_level(spark: SparkSession, level: str | None) -> None:
    """Sets the driver's log level (classic sessions; a Connect server's is not the client's)."""
    if level is not None and not is_connect(spark):
        spark.sparkContext.setLogLevel(level)


def release(df: DataFrame) -> None:
    """Frees what kwire.spark.session.hold() kept: the cache, or the local checkpoint's blocks
    (which a classic driver would otherwise keep until its garbage collector finds the RDD
    unreferenced). Over Connect the server frees a checkpoint when the client's last reference
    to it goes (pyspark's CachedRemoteRelation), which the caller's dropping it does."""
    df.unpersist()
    if is_connect(df.sparkSession):
        return
    plan = df._jdf.queryExecution().logical()
    if plan.nodeName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def remote_host(url: str) -> str:
    """The host of a Spark Connect URL (sc://host:port/;params)."""
    from urllib.parse import urlparse

    return urlparse(url.split(";", 1)[0]).hostname or ""


def is_loopback(url: str) -> bool:
    """Whether a Spark Connect URL names this machine (then the server sees its files)."""
    import ipaddress

    host = remote_host(url)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
