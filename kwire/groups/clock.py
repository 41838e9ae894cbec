"""Each group's end of the capture: what its members still in at the end, its time lags and
its share records open at the end are measured against (docs/outputs.md, "The end of the
capture")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kwire.groups.delivery import broker_endpoint, clusters, with_cluster


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
    """Each group's end of the capture (Clock), from the held requests and events: one pass
    over the requests gives the last of all and the last per cluster, one over the group
    events says which clusters each group met."""
    endpoints = clusters(responses)
    # Per connection first: a ring's requests are millions, its connections thousands.
    frames = (
        requests.groupBy("connection_id")
        .agg(F.max("ts_last").alias("ts_last"))
        .select(broker_endpoint("connection_id").alias("_ep"), "ts_last")
    )
    ends = (
        with_cluster(frames, F.col("_ep"), endpoints, "_cluster")
        .rollup("_cluster")
        .agg(F.unix_micros(F.max("ts_last")).alias("end"), F.grouping("_cluster").alias("all"))
        .collect()
    )
    end = next((_naive_utc(r["end"]) for r in ends if r["all"]), None)
    of_cluster = {
        r["_cluster"]: _naive_utc(r["end"])
        for r in ends
        if not r["all"] and r["_cluster"] is not None and r["end"] is not None
    }
    if end is None or not of_cluster:
        return Clock(end, {})
    met = (
        ev.select("group_id", "connection_id")
        .distinct()
        .select("group_id", broker_endpoint("connection_id").alias("_ep"))
    )
    groups: dict[str, datetime] = {}
    for r in (
        with_cluster(met, F.col("_ep"), endpoints, "_cluster")
        .select("group_id", "_cluster")
        .distinct()
        .collect()
    ):
        at = of_cluster.get(r["_cluster"])
        if at is not None and (r["group_id"] not in groups or at > groups[r["group_id"]]):
            groups[r["group_id"]] = at
    return Clock(end, groups)
