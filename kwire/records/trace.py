"""Trace context in record headers -> (trace_id, span_id), as OUT/records and OUT/delivery have
them.

W3C `traceparent` (`00-<trace>-<span>-<flags>`), B3 (the `b3` single header, or
`X-B3-TraceId` / `X-B3-SpanId`) and Jaeger's `uber-trace-id` (`trace:span:parent:flags`), header
keys matched without regard to case, ids as lower-case hex; None where no header carries one.
The first header of a name counts. Computed where the records are read (kwire.spark.explode),
from the headers already in hand: the same cuts made by Spark SQL over the `headers` column,
a dozen higher-order functions per row, had cost more than reading the records.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Leading white space as Java's regular expressions mean \s (ASCII only).
_WS = r"[ \t\n\x0b\f\r]*"
_H = "[0-9a-fA-F]"
_TRACEPARENT = re.compile(rf"{_WS}{_H}{{2}}-({_H}{{32}})-({_H}{{16}})-{_H}{{2}}")
_B3 = re.compile(rf"{_WS}({_H}{{16}}|{_H}{{32}})-({_H}{{16}})")
_UBER = re.compile(rf"{_WS}({_H}{{1,32}}):({_H}{{1,16}}):")
_NAMES = ("traceparent", "b3", "x-b3-traceid", "x-b3-spanid", "uber-trace-id")

Headers = Sequence[tuple[str, "bytes | None"]]


def trace_ids(headers: Headers | None) -> tuple[str | None, str | None]:
    """(trace id, span id) from a record's headers, (None, None) without trace context."""
    if not headers:
        return None, None
    first: dict[str, str | None] = {}
    for key, value in headers:
        name = key.lower()
        if name in _NAMES and name not in first:
            first[name] = None if value is None else value.decode("utf-8", "replace")
    if not first:
        return None, None
    # Each id from the first source that has one, in this order (a source that does not parse
    # gives neither); the X-B3 headers' text is taken as it is, trimmed of spaces.
    trace = span = None
    for name, pattern in (("traceparent", _TRACEPARENT), ("b3", _B3)):
        text = first.get(name)
        if trace is None and text is not None and (m := pattern.match(text)):
            trace, span = m.group(1).lower(), m.group(2).lower()
    if trace is None and (text := first.get("x-b3-traceid")) is not None:
        trace = text.strip(" ").lower()
    if span is None and (text := first.get("x-b3-spanid")) is not None:
        span = text.strip(" ").lower()
    text = first.get("uber-trace-id")
    if (trace is None or span is None) and text is not None and (m := _UBER.match(text)):
        trace = m.group(1).lower() if trace is None else trace
        span = m.group(2).lower() if span is None else span
    return trace, span
