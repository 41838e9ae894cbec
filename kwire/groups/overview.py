"""The report's overview: the whole capture at a glance, before the per-group sections.

Everything here is read from the job's tables with pyarrow on the driver, a few columns at a
time and in batches (the payload-sized tables are scanned, never loaded whole), and aggregated
into small series that plotly draws:
- every group in one table (protocol, members at the end, generations, evictions, Burrow's
  verdicts, offset lag and time lag at the end);
- requests per second by API over time (OUT/requests);
- broker latency p50/p95/p99 by API and broker (OUT/responses' latency_us);
- error codes over time: every non-zero `error_code` anywhere in a decoded response, by name,
  and the responses the decoder refused (a classic group API's code read from its frame, else
  the status) (OUT/responses);
- records and bytes (key + value) produced and fetched per topic over time (OUT/records);
- the delivery latencies' distributions (OUT/delivery: ack, producer to consumer, commit).
A table the job did not write (--no-records, --no-delivery) leaves its chart out, and says so.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kwire.groups.errors import NAMES as ERROR_NAMES
from kwire.groups import story
from kwire.groups.story import Group

BATCH_ROWS = 65_536
# Buckets of the time series: the smallest of these giving at most MAX_BUCKETS over the window.
STEPS_S = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
MAX_BUCKETS = 240
DELIVERY = (("ack_ms", "acked"), ("fetch_ms", "producer to consumer"), ("commit_ms", "committed"))


def _api_name(key: int) -> str:
    from kwire.spark.summary import api_name

    return api_name(key)


def _dataset(path: Path) -> Any:
    import pyarrow.dataset as ds

    if not path.exists():
        return None
    return ds.dataset(str(path), format="parquet", partitioning="hive")


def _batches(path: Path, columns: list[str]) -> Iterator[Any]:
    """Record batches of `columns` (those the table has) of the table at `path`."""
    data = _dataset(path)
    if data is None:
        return
    have = [c for c in columns if c in data.schema.names]
    yield from data.to_batches(columns=have, batch_size=BATCH_ROWS)


def step_for(start: datetime, end: datetime) -> int:
    window = max((end - start).total_seconds(), 1.0)
    return next((s for s in STEPS_S if window / s <= MAX_BUCKETS), STEPS_S[-1])


@dataclass
class Series:
    """Counts per time bucket and name (an API, an error, a topic)."""

    step_s: int
    start: datetime
    values: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))

    def add(self, ts_us: Any, names: Any, weights: Any = None, label: Any = str) -> None:
        """Adds rows: their times (µs), names (an Arrow array or list) and weights (1 each by
        default), summed per name and bucket with Arrow; `label` turns a name into text."""
        import numpy as np
        import pyarrow as pa

        base = int(self.start.timestamp() * 1_000_000)
        buckets = (np.asarray(ts_us, dtype="int64") - base) // (self.step_s * 1_000_000)
        w = np.ones(len(buckets)) if weights is None else np.asarray(weights, dtype="float64")
        t = pa.table({"n": names, "b": buckets, "w": w})
        for row in t.group_by(["n", "b"]).aggregate([("w", "sum")]).to_pylist():
            self.values[label(row["n"])][int(row["b"])] += row["w_sum"]

    def at(self, bucket: int) -> datetime:
        return self.start + timedelta(seconds=bucket * self.step_s)


def _us(column: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.cast(column, pa.timestamp("us")), pa.int64())


def window(out: Path) -> tuple[datetime, datetime] | None:
    """The capture's first and last request."""
    import pyarrow.compute as pc

    lo = hi = None
    for b in _batches(out / "requests", ["ts_first"]):
        ts = _us(b.column(0)).drop_null() if b.num_rows else None
        if ts is None or len(ts) == 0:
            continue
        mm = pc.min_max(ts).as_py()
        lo = mm["min"] if lo is None else min(lo, mm["min"])
        hi = mm["max"] if hi is None else max(hi, mm["max"])
    if lo is None or hi is None:
        return None
    epoch = datetime(1970, 1, 1)
    return epoch + timedelta(microseconds=lo), epoch + timedelta(microseconds=hi)


def requests_per_second(out: Path, start: datetime, step: int) -> Series:
    series = Series(step, start)
    for b in _batches(out / "requests", ["ts_first", "api_key"]):
        keep = b.filter(b.column("ts_first").is_valid()) if b.num_rows else b
        if keep.num_rows:
            series.add(
                _us(keep.column("ts_first")),
                keep.column("api_key"),
                [1.0 / step] * keep.num_rows,
                label=_api_name,
            )
    return series


def latency_percentiles(out: Path) -> list[dict[str, Any]]:
    """Per API and broker: responses and their latency's p50/p95/p99/max in ms."""
    import numpy as np

    seen: dict[tuple[int, str], list[Any]] = defaultdict(list)
    cols = ["api_key", "broker_addr", "broker_port", "latency_us"]
    for b in _batches(out / "responses", cols):
        t = b.filter(b.column("latency_us").is_valid()) if b.num_rows else b
        if not t.num_rows:
            continue
        keys = t.column("api_key").to_pylist()
        brokers = [
            f"{a}:{p}"
            for a, p in zip(
                t.column("broker_addr").to_pylist(), t.column("broker_port").to_pylist()
            )
        ]
        lat = t.column("latency_us").to_numpy(zero_copy_only=False) / 1000.0
        for (key, broker), idx in _groups(list(zip(keys, brokers))).items():
            seen[(key, broker)].append(lat[idx])
    rows = []
    for (key, broker), parts in sorted(seen.items()):
        ms = np.concatenate(parts)
        p50, p95, p99 = np.percentile(ms, [50, 95, 99]).tolist()
        rows.append(
            {
                "api": _api_name(key),
                "broker": broker,
                "responses": int(len(ms)),
                "p50_ms": p50,
                "p95_ms": p95,
                "p99_ms": p99,
                "max_ms": float(ms.max()),
            }
        )
    return rows


def _groups(keys: list[Any]) -> dict[Any, list[int]]:
    idx: dict[Any, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        idx[k].append(i)
    return idx


def error_paths(schema: Any) -> list[tuple[str, list[str]]]:
    """(family column, path of struct fields to an `error_code`) for every error code the
    decoded responses can hold, at any depth (lists are walked through)."""
    import pyarrow as pa

    found: list[tuple[str, list[str]]] = []

    def walk(t: Any, path: list[str], top: str) -> None:
        if pa.types.is_struct(t):
            for f in t:
                if f.name == "error_code" and pa.types.is_integer(f.type):
                    found.append((top, path + [f.name]))
                else:
                    walk(f.type, path + [f.name], top)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_type, path + ["[]"], top)

    for f in schema:
        if pa.types.is_struct(f.type):
            walk(f.type, [], f.name)
    return found


def _values_at(column: Any, path: list[str]) -> tuple[Any, Any]:
    """The values at `path` in a struct column, with the row each came from."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = column
    rows = pa.array(range(len(column)), pa.int64())
    for step in path:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if step == "[]":
            parents = pc.list_parent_indices(values)
            rows = pc.take(rows, parents)
            values = pc.list_flatten(values)
        else:
            values = pc.struct_field(values, step)
    return values, rows


def errors_over_time(out: Path, start: datetime, step: int) -> Series:
    """Non-zero error codes in decoded responses, by name, per time bucket."""
    import pyarrow.compute as pc

    series = Series(step, start)
    data = _dataset(out / "responses")
    if data is None:
        return series
    paths = error_paths(data.schema)
    families = sorted({top for top, _ in paths})
    for b in _batches(out / "responses", ["ts_first", *families]):
        if not b.num_rows:
            continue
        ts = _us(b.column("ts_first"))
        for top, path in paths:
            values, rows = _values_at(b.column(top), path)
            bad = pc.and_(pc.is_valid(values), pc.not_equal(values, 0))
            bad = pc.fill_null(bad, False)
            codes = pc.filter(values, bad)
            if len(codes):
                at = pc.take(ts, pc.filter(rows, bad))
                series.add(at, codes, label=lambda c: ERROR_NAMES.get(c, f"ERROR_{c}"))
    _refused(out, series)
    return series


def _refused(out: Path, series: Series) -> None:
    """Responses the decoder refused: a classic group API's error code read from the frame
    (librdkafka's mock answers a failed SyncGroup with a null assignment the schema does not
    allow), else the status itself ("response malformed", ...)."""
    import pyarrow.dataset as ds

    from kwire.groups.errors import raw_error

    data = _dataset(out / "responses")
    if data is None or "status" not in data.schema.names:
        return
    cols = [
        c
        for c in ("ts_first", "api_key", "api_version", "status", "frame")
        if c in data.schema.names
    ]
    scan = data.to_batches(
        columns=cols,
        filter=(ds.field("status") != "ok") & ds.field("ts_first").is_valid(),
        batch_size=BATCH_ROWS,
    )
    for b in scan:
        if not b.num_rows:
            continue
        rows = b.to_pylist()
        names = []
        for r in rows:
            code = None
            if "frame" in r and r["frame"] is not None and r["status"] == "malformed":
                code = raw_error(r["api_key"], r["api_version"] or 0, r["frame"])
            if code:
                names.append(ERROR_NAMES.get(code, f"ERROR_{code}"))
            else:
                names.append(f"response {r['status']}")
        series.add(_us(b.column("ts_first")), names)


def traffic(out: Path, start: datetime, step: int) -> tuple[Series, Series]:
    """Records and bytes (key + value) per topic and bucket: produced (Produce requests) and
    fetched (Fetch responses), as names "topic (produced)" / "topic (fetched)"."""
    import pyarrow.compute as pc

    records, size = Series(step, start), Series(step, start)
    cols = ["frame_ts", "direction", "api_key", "topic", "key", "value", "is_control"]
    for b in _batches(out / "records", cols):
        if not b.num_rows:
            continue
        produced = pc.and_(
            pc.equal(b.column("direction"), "request"), pc.equal(b.column("api_key"), 0)
        )
        fetched = pc.and_(
            pc.equal(b.column("direction"), "response"), pc.equal(b.column("api_key"), 1)
        )
        data = pc.invert(pc.fill_null(b.column("is_control"), False))
        for word, which in (("produced", produced), ("fetched", fetched)):
            keep = pc.fill_null(pc.and_(which, data), False)
            t = b.filter(keep)
            if not t.num_rows:
                continue
            names = pc.binary_join_element_wise(
                pc.fill_null(t.column("topic"), "?"), f" ({word})", ""
            )
            ts = _us(t.column("frame_ts"))
            nbytes = pc.add(
                pc.fill_null(pc.binary_length(t.column("key")), 0),
                pc.fill_null(pc.binary_length(t.column("value")), 0),
            )
            records.add(ts, names)
            size.add(ts, names, nbytes.to_numpy(zero_copy_only=False))
    return records, size


def delivery_histograms(out: Path) -> dict[str, tuple[list[float], list[int]]]:
    """Per latency of OUT/delivery: log-spaced bin edges (ms) and counts."""
    import numpy as np

    values: dict[str, list[Any]] = defaultdict(list)
    for b in _batches(out / "delivery", [c for c, _ in DELIVERY]):
        for c, _ in DELIVERY:
            if c in b.schema.names:
                v = b.column(c).drop_null().to_numpy(zero_copy_only=False)
                values[c].append(v[v >= 0])
    hist = {}
    for c, _ in DELIVERY:
        if not values.get(c):
            continue
        v = np.concatenate(values[c])
        if not len(v):
            continue
        lo = max(float(v[v > 0].min()) if (v > 0).any() else 0.01, 0.01)
        hi = max(float(v.max()), lo * 10)
        edges = np.logspace(math.log10(lo), math.log10(hi), 41)
        # 0 ms (a commit in the same instant) counts in the first bin.
        counts, _ = np.histogram(np.clip(v, lo, hi), bins=edges)
        hist[c] = (edges.tolist(), counts.tolist())
    return hist


def group_rows(groups: dict[str, Group]) -> list[dict[str, Any]]:
    """One row per group for the overview table."""
    rows = []
    for gid, g in groups.items():
        members = g.rows("members")
        gens = g.rows("generations")
        progress = g.rows("progress")
        share = g.share_tables()
        deliveries = [d for d in share.get("deliveries", []) if d["acquired_at"] is not None]
        if share.get("progress"):
            # A share group has no commits: its partitions' share progress instead.
            progress = share["progress"]
        verdicts = Counter(p["status"] for p in progress)
        lags = [p["lag"] for p in progress if p["lag"] is not None]
        known = [t for t in (story.time_lag(p) for p in progress) if t is not None]
        rows.append(
            {
                "group": gid,
                "protocol": g.protocol,
                "members at end": sum(1 for m in members if m["ending"] == "active_at_end"),
                "members seen": len(members),
                "generations": len(gens),
                "evictions": sum(1 for m in members if m["ending"] in ("evicted", "fenced")),
                "verdicts": " ".join(f"{s}×{n}" for s, n in sorted(verdicts.items())),
                "offset lag": sum(lags) if lags else None,
                "time lag at end": max(known) if known else None,
                "redeliveries": (
                    sum((d["delivery_count"] or 1) > 1 for d in deliveries) if share else None
                ),
                "archived": (
                    sum(r["final_state"] == "archived" for r in share.get("records", []))
                    if share
                    else None
                ),
            }
        )
    return rows


def figures(out: Path) -> list[tuple[str, str, Any]]:
    """(id, title, plotly figure or None with why) for each overview chart."""
    import plotly.graph_objects as go

    span = window(out)
    charts: list[tuple[str, str, Any]] = []
    if span is None:
        return charts
    start, end = span
    step = step_for(start, end)
    layout = {
        "height": 320,
        "margin": {"l": 50, "r": 10, "t": 30, "b": 40},
        "plot_bgcolor": "white",
        "legend": {"font": {"size": 10}},
        "showlegend": True,
    }

    def over_time(series: Series, unit: str, stack: bool = True) -> Any:
        fig = go.Figure()
        buckets = range((int((end - start).total_seconds()) // step) + 1)
        for name in sorted(series.values, key=lambda n: -sum(series.values[n].values())):
            got = series.values[name]
            fig.add_trace(
                go.Scatter(
                    x=[series.at(i) for i in buckets],
                    y=[got.get(i, 0) for i in buckets],
                    mode="lines",
                    name=name,
                    stackgroup="one" if stack else None,
                )
            )
        fig.update_layout(
            **layout, yaxis={"title": unit}, xaxis={"title": f"time (UTC), {step} s buckets"}
        )
        return fig

    charts.append(
        (
            "rate",
            "Requests per second by API",
            over_time(requests_per_second(out, start, step), "requests/s"),
        )
    )
    lat = latency_percentiles(out)
    fig = go.Figure()
    labels = [f"{r['api']} @ {r['broker']}" for r in lat]
    for q in ("p50_ms", "p95_ms", "p99_ms"):
        fig.add_trace(go.Bar(x=labels, y=[r[q] for r in lat], name=q.removesuffix("_ms")))
    fig.update_layout(**layout, barmode="group", yaxis={"title": "ms", "type": "log"})
    charts.append(("latency", "Broker latency by API and broker (p50, p95, p99)", fig))
    errs = errors_over_time(out, start, step)
    charts.append(
        (
            "errors",
            "Error codes in responses over time",
            (
                over_time(errs, "responses' error codes")
                if errs.values
                else "no non-zero error code in any decoded response"
            ),
        )
    )
    if (out / "records").exists():
        recs, size = traffic(out, start, step)
        charts.append(
            (
                "records",
                "Records produced and fetched per topic",
                over_time(recs, "records", stack=False),
            )
        )
        charts.append(
            (
                "bytes",
                "Bytes (key + value) produced and fetched per topic",
                over_time(size, "bytes", stack=False),
            )
        )
    else:
        charts.append(("records", "Records per topic", "the job ran with --no-records"))
    hist = delivery_histograms(out)
    if hist:
        fig = go.Figure()
        for c, label in DELIVERY:
            if c in hist:
                edges, counts = hist[c]
                fig.add_trace(
                    go.Scatter(
                        x=[math.sqrt(a * b) for a, b in zip(edges, edges[1:])],
                        y=counts,
                        name=label,
                        mode="lines",
                        line_shape="hvh",
                        fill="tozeroy",
                    )
                )
        fig.update_layout(
            **layout,
            xaxis={"title": "ms (log scale)", "type": "log"},
            yaxis={"title": "records"},
        )
        charts.append(("delivery", "Delivery latencies (OUT/delivery)", fig))
    else:
        charts.append(
            (
                "delivery",
                "Delivery latencies",
                "no OUT/delivery rows (the job ran with --no-delivery or --no-records, or nothing was produced)",
            )
        )
    return charts
