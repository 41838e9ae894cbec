"""Delivery's commit lookup: kwire's first_commits() against the pairwise join it replaced.

Run from the repository root::

    python -m benchmarks.delivery            # three sizes, up to an hour of commits (~4 min)
    python -m benchmarks.delivery --quick    # the smallest size only
    python -m benchmarks.delivery --json out.json

OUT/delivery's `committed_at` is, for each record a group fetched, the group's first
successful commit past the record's offset at or after its first fetch. The plain way to say
that in Spark SQL joins each record with every later commit of its partition and keeps the
earliest: the pairs grow with the records times the commits, the square of the capture's
length. kwire.groups.delivery.first_commits finds the same commit by binary searches in the
tasks over the commits shipped to them (a capture's usual few), or with running windows over
every record asking (a capture of more than its LOOKUP_COMMITS): both are timed.

What it does: for each size, records evenly over 20 partitions of one group and a commit every
2 seconds per partition (an hour of a consumer committing every 1.8 s is 2,000 commits a
partition), made by Spark itself and cached; checks both ways give the same count and latest
commit, then times each `--repeats` times, interleaved, on one session at the job's default master. Reports the
median seconds and the ratios windows / first_commits and pairwise / first_commits (>1:
first_commits is faster). Writes JSON
(`--json`, default benchmarks/results/delivery.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kwire.groups.delivery import first_commits

HERE = Path(__file__).resolve().parent
DEFAULT_JSON = HERE / "results" / "delivery.json"
PARTITIONS = 20
START_US = 1_700_000_000_000_000
COMMIT_EVERY_US = 2_000_000
# (records, commits per partition)
SIZES = [(200_000, 100), (200_000, 1_000), (1_000_000, 2_000)]


def data(spark: SparkSession, records: int, commits: int) -> tuple[DataFrame, DataFrame]:
    """Records asked about and the group's commits: every 100th offset committed, records
    fetched evenly over the commits' hour."""
    c = spark.range(PARTITIONS * commits).select(
        (F.col("id") % PARTITIONS).cast("int").alias("partition"),
        (F.col("id") / PARTITIONS).cast("long").alias("i"),
    )
    c = c.select(
        F.timestamp_micros(F.lit(START_US) + F.col("i") * COMMIT_EVERY_US).alias("ts"),
        F.lit("g").alias("group_id"),
        F.lit("t").alias("topic"),
        "partition",
        (F.col("i") * 100 + 100).alias("offset"),
        F.lit(None).cast("string").alias("error"),
    )
    per = records // PARTITIONS
    step = commits * COMMIT_EVERY_US // per
    a = spark.range(records).select(
        F.lit("g").alias("group_id"),
        F.lit("t").alias("topic"),
        (F.col("id") % PARTITIONS).cast("int").alias("partition"),
        (F.col("id") / PARTITIONS).cast("long").alias("offset"),
    )
    a = a.withColumn("fetched_at", F.timestamp_micros(F.lit(START_US) + F.col("offset") * step))
    return a.cache(), c.cache()


def pairwise(asks: DataFrame, commits: DataFrame) -> DataFrame:
    """The definition as one join: every record with every commit past it, the earliest kept."""
    done = commits.where(F.col("error").isNull() & F.col("offset").isNotNull()).select(
        F.col("group_id").alias("_g"),
        F.col("topic").alias("_t"),
        F.col("partition").alias("_p"),
        F.col("offset").alias("_o"),
        F.col("ts").alias("_ts"),
    )
    past = asks.join(
        done,
        (F.col("_g") == F.col("group_id"))
        & (F.col("_t") == F.col("topic"))
        & (F.col("_p") == F.col("partition"))
        & (F.col("_o") > F.col("offset"))
        & (F.col("fetched_at").isNull() | (F.col("_ts") >= F.col("fetched_at"))),
        "left",
    )
    return past.groupBy(*asks.columns).agg(F.min("_ts").alias("committed_at"))


def windows(asks: DataFrame, commits: DataFrame) -> DataFrame:
    """first_commits() as it answers a capture of more than LOOKUP_COMMITS commits: running
    windows over every record asking, instead of the commits shipped to the tasks."""
    return first_commits(asks, commits, lookup_commits=-1)


WAYS = {"first_commits": first_commits, "windows": windows, "pairwise": pairwise}


def measure(spark: SparkSession, records: int, commits: int, repeats: int) -> dict[str, Any]:
    asks, done = data(spark, records, commits)
    asks.count(), done.count()
    seconds: dict[str, list[float]] = {name: [] for name in WAYS}
    answers = {}
    for _ in range(repeats):
        for name, way in WAYS.items():
            t = time.monotonic()
            row = way(asks, done).agg(F.count("committed_at"), F.max("committed_at")).first()
            seconds[name].append(time.monotonic() - t)
            answers[name] = tuple(row) if row is not None else None
    if not answers["first_commits"] == answers["windows"] == answers["pairwise"]:
        raise SystemExit(f"the two ways disagree: {answers}")
    asks.unpersist(), done.unpersist()
    median = {name: statistics.median(s) for name, s in seconds.items()}
    return {
        "records": records,
        "commits_per_partition": commits,
        "partitions": PARTITIONS,
        "seconds": seconds,
        "median_seconds": median,
        "pairwise_over_first_commits": median["pairwise"] / median["first_commits"],
        "windows_over_first_commits": median["windows"] / median["first_commits"],
        "records_committed": answers["first_commits"][0] if answers["first_commits"] else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smallest size only")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    from kwire.spark.session import build_session

    spark = build_session(app_name="kwire-bench-delivery")
    spark.sparkContext.setLogLevel("ERROR")
    # Few shuffle partitions, as the job's derived tables use.
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    # One warm-up, so the first way timed does not pay for the JVM's first queries.
    measure(spark, 20_000, 10, 1)
    results = []
    print(
        f"{'records':>9} {'commits/part':>12} {'first_commits':>14} {'windows':>9} {'ratio':>6}"
        f" {'pairwise':>9} {'ratio':>6}"
    )
    for records, commits in SIZES[:1] if args.quick else SIZES:
        r = measure(spark, records, commits, args.repeats)
        m = r["median_seconds"]
        print(
            f"{records:>9,} {commits:>12,} {m['first_commits']:>12.1f} s {m['windows']:>7.1f} s"
            f" {r['windows_over_first_commits']:>5.1f}x {m['pairwise']:>7.1f} s"
            f" {r['pairwise_over_first_commits']:>5.1f}x",
            flush=True,
        )
        results.append(r)
    spark.stop()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "delivery's commit lookup: first_commits against the pairwise join",
                "command": "python -m benchmarks.delivery" + (" --quick" if args.quick else ""),
                "results": results,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
