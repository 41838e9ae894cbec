"""Trace context in record headers -> `trace_id` and `span_id` (OUT/records, OUT/delivery).

W3C `traceparent` (`00-<trace>-<span>-<flags>`), B3 (the `b3` single header, or
`X-B3-TraceId` / `X-B3-SpanId`) and Jaeger's `uber-trace-id` (`trace:span:parent:flags`), header
keys matched without regard to case, ids as lower-case hex; null where no header carries one.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# Header keys (lower-cased) -> how trace and span ids are cut from the value.
_HEX = "[0-9a-fA-F]"


def _header(name: str) -> Column:
    """The first value of header `name` (case-insensitive), as text."""
    match = F.filter("headers", lambda h: F.lower(h["key"]) == name)
    return F.when(F.size(match) > 0, F.decode(match[0]["value"], "UTF-8"))


def trace_columns() -> tuple[Column, Column]:
    """(trace_id, span_id) from a records row's `headers` column (see the module)."""
    tp = _header("traceparent")
    b3 = _header("b3")
    uber = _header("uber-trace-id")
    tp_re = rf"^\s*{_HEX}{{2}}-({_HEX}{{32}})-({_HEX}{{16}})-{_HEX}{{2}}"
    b3_re = rf"^\s*({_HEX}{{16}}|{_HEX}{{32}})-({_HEX}{{16}})"
    uber_re = rf"^\s*({_HEX}{{1,32}}):({_HEX}{{1,16}}):"

    def cut(col: Column, pattern: str, group: int) -> Column:
        got = F.regexp_extract(col, pattern, group)
        return F.when(col.isNotNull() & (got != ""), F.lower(got))

    trace = F.coalesce(
        cut(tp, tp_re, 1),
        cut(b3, b3_re, 1),
        F.lower(F.trim(_header("x-b3-traceid"))),
        cut(uber, uber_re, 1),
    )
    span = F.coalesce(
        cut(tp, tp_re, 2),
        cut(b3, b3_re, 2),
        F.lower(F.trim(_header("x-b3-spanid"))),
        cut(uber, uber_re, 2),
    )
    return trace, span
