"""Each group's end of the capture: what its members still in at the end, its time lags and
its share records open at the end are measured against (docs/outputs.md, "The end of the
capture")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Clock:
    """The end of the capture as each group saw it: the last request on any connection to a
    broker of the group's cluster (the cluster ids Metadata responses give its brokers), so
    that captures of several clusters or days decoded together do not age each other's groups;
    the last request of all inputs (`end`) where the group's cluster is not named."""

    end: datetime | None
    groups: dict[str, datetime]

    def of(self, group_id: str) -> datetime | None:
        return self.groups.get(group_id, self.end)


def _naive_utc(micros: int | None) -> datetime | None:
    # Naive UTC, as the session (and the executors' pandas) see timestamps.
    return None if micros is None else datetime(1970, 1, 1) + timedelta(microseconds=micros)


def clock(requests: DataFrame, responses: DataFrame, ev: DataFrame) -> Clock:
    """Each group's end of the capture (Clock), from the held requests and events."""
    from kwire.groups.delivery import broker_endpoint, clusters, with_cluster

    end_row = requests.agg(F.unix_micros(F.max("ts_last")).alias("end")).first()
    end = _naive_utc(end_row["end"] if end_row is not None else None)
    endpoints = clusters(responses)
    if end is None or endpoints is None:
        return Clock(end, {})
    # Per connection first: a ring's requests are millions, its connections thousands.
    frames = (
        requests.groupBy("connection_id")
        .agg(F.max("ts_last").alias("ts_last"))
        .select(broker_endpoint("connection_id").alias("_ep"), "ts_last")
    )
    ends = (
        with_cluster(frames, F.col("_ep"), endpoints, "_cluster")
        .where(F.col("_cluster").isNotNull())
        .groupBy("_cluster")
        .agg(F.max("ts_last").alias("_end"))
    )
    met = (
        ev.select("group_id", "connection_id")
        .distinct()
        .select("group_id", broker_endpoint("connection_id").alias("_ep"))
    )
    rows = (
        with_cluster(met, F.col("_ep"), endpoints, "_cluster")
        .join(ends, "_cluster")
        .groupBy("group_id")
        .agg(F.unix_micros(F.max("_end")).alias("end"))
        .collect()
    )
    groups = {}
    for r in rows:
        at = _naive_utc(r["end"])
        if at is not None:
            groups[r["group_id"]] = at
    return Clock(end, groups)
