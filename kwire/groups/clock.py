"""Each group's end of the capture: what its members still in at the end, its time lags and
its share records open at the end are measured against (docs/outputs.md, "The end of the
capture")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kwire.groups.delivery import BROKER_END


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


_ENDPOINT = re.compile(BROKER_END)


def endpoint(connection_id: str | None) -> str:
    """A connection's broker end, "host:port", from its id ("client->broker[#n]"), as
    kwire.groups.delivery.broker_endpoint reads it in Spark (":" when the id is not one)."""
    m = _ENDPOINT.search(connection_id or "")
    return f"{m.group(1)}:{m.group(2)}" if m else ":"


def connections(requests: DataFrame) -> list[dict[str, Any]]:
    """Each connection's requests in one row (a ring's requests are millions, its connections
    thousands): connection_id, client_addr, client_port, client_id (its first non-null),
    first_seen and last_seen (naive UTC), collected."""
    rows = (
        requests.groupBy("connection_id", "client_addr", "client_port")
        .agg(
            F.first("client_id", ignorenulls=True).alias("client_id"),
            F.unix_micros(F.min("ts_first")).alias("first_seen"),
            F.unix_micros(F.max("ts_last")).alias("last_seen"),
        )
        .collect()
    )
    out = []
    for r in rows:
        row = r.asDict()
        row["first_seen"] = _naive_utc(row["first_seen"])
        row["last_seen"] = _naive_utc(row["last_seen"])
        out.append(row)
    return out


def clock(
    conns: list[dict[str, Any]], endpoints: dict[str, str], ev: Iterable[dict[str, Any]]
) -> Clock:
    """Each group's end of the capture (Clock), from each connection's last request
    (connections()), the brokers' clusters (kwire.groups.protocol.metadata()) and the group
    events (which connections each group's frames went over)."""
    end: datetime | None = None
    of_cluster: dict[str, datetime] = {}
    for c in conns:
        at = c["last_seen"]
        if at is None:
            continue
        end = at if end is None or at > end else end
        cluster = endpoints.get(endpoint(c["connection_id"]))
        if cluster is not None and (cluster not in of_cluster or at > of_cluster[cluster]):
            of_cluster[cluster] = at
    if end is None or not of_cluster:
        return Clock(end, {})
    groups: dict[str, datetime] = {}
    for e in ev:
        cluster = endpoints.get(endpoint(e["connection_id"]))
        at = of_cluster.get(cluster) if cluster is not None else None
        g = e["group_id"]
        if at is not None and (g not in groups or at > groups[g]):
            groups[g] = at
    return Clock(end, groups)
