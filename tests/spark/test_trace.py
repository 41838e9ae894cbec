"""Trace context from record headers: the id formats W3C, B3 and Jaeger define."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from kwire.spark.trace import trace_columns

pytestmark = pytest.mark.xdist_group("spark")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
CASES = [
    # (headers, trace_id, span_id)
    ([("traceparent", f"00-{TRACE}-{SPAN}-01")], TRACE, SPAN),
    ([("TraceParent", f"00-{TRACE.upper()}-{SPAN}-00")], TRACE, SPAN),  # any case
    ([("b3", f"{TRACE}-{SPAN}-1-0020000000000001")], TRACE, SPAN),
    ([("b3", f"{TRACE[16:]}-{SPAN}")], TRACE[16:], SPAN),  # 64-bit B3 trace id
    ([("X-B3-TraceId", TRACE), ("X-B3-SpanId", SPAN)], TRACE, SPAN),
    ([("uber-trace-id", f"{TRACE}:{SPAN}:0:1")], TRACE, SPAN),
    ([("other", "x"), ("traceparent", "not a traceparent")], None, None),
    ([("traceparent", None)], None, None),  # a null header value
    ([], None, None),
]


def test_trace_and_span_ids_from_headers(spark: SparkSession) -> None:
    rows = [
        ([{"key": k, "value": None if v is None else v.encode()} for k, v in h],)
        for h, _, _ in CASES
    ]
    df = spark.createDataFrame(rows, "headers array<struct<key: string, value: binary>>")
    trace, span = trace_columns()
    got = [(r[0], r[1]) for r in df.select(trace, span).collect()]
    assert got == [(t, s) for _, t, s in CASES]
