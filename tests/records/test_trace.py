"""Trace context from record headers: the id formats W3C Trace Context, B3 and Jaeger define."""

from __future__ import annotations

import pytest

from kwire.records.trace import trace_ids

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
CASES = [
    # (headers, trace_id, span_id)
    ([("traceparent", f"00-{TRACE}-{SPAN}-01")], TRACE, SPAN),
    ([("TraceParent", f"00-{TRACE.upper()}-{SPAN}-00")], TRACE, SPAN),  # any case
    ([("traceparent", f"  00-{TRACE}-{SPAN}-01-extra")], TRACE, SPAN),  # leading blanks, more
    ([("b3", f"{TRACE}-{SPAN}-1-0020000000000001")], TRACE, SPAN),
    ([("b3", f"{TRACE[16:]}-{SPAN}")], TRACE[16:], SPAN),  # 64-bit B3 trace id
    ([("b3", "0")], None, None),  # B3's "do not sample" alone: no ids
    ([("X-B3-TraceId", TRACE), ("X-B3-SpanId", SPAN)], TRACE, SPAN),
    ([("x-b3-traceid", f" {TRACE.upper()} ")], TRACE, None),  # taken as it is, trimmed
    ([("uber-trace-id", f"{TRACE}:{SPAN}:0:1")], TRACE, SPAN),
    ([("uber-trace-id", "abc:12:0:1")], "abc", "12"),  # Jaeger drops leading zeros
    ([("other", "x"), ("traceparent", "not a traceparent")], None, None),
    ([("traceparent", None)], None, None),  # a null header value
    ([("traceparent", "00-zz")], None, None),
    ([], None, None),
    # The first header of a name counts, and each id comes from the first source that has it.
    ([("traceparent", f"00-{TRACE}-{SPAN}-01"), ("traceparent", "junk")], TRACE, SPAN),
    ([("traceparent", "junk"), ("traceparent", f"00-{TRACE}-{SPAN}-01")], None, None),
    ([("traceparent", "junk"), ("b3", f"{TRACE}-{SPAN}")], TRACE, SPAN),
    ([("uber-trace-id", f"{TRACE}:{SPAN}:0:1"), ("x-b3-spanid", "1234")], TRACE, "1234"),
    ([("b3", f"{TRACE}-{SPAN}"), ("traceparent", f"00-{'1' * 32}-{'2' * 16}-01")], "1" * 32, "2" * 16),
]  # fmt: skip


@pytest.mark.parametrize(("headers", "trace", "span"), CASES)
def test_trace_and_span_ids_from_headers(
    headers: list[tuple[str, str | None]], trace: str | None, span: str | None
) -> None:
    wire = [(k, None if v is None else v.encode()) for k, v in headers]
    assert trace_ids(wire) == (trace, span)


def test_a_value_that_is_not_utf8_is_read_as_far_as_it_goes() -> None:
    value = f"00-{TRACE}-{SPAN}-01".encode() + b"\xff\xfe"
    assert trace_ids([("traceparent", value)]) == (TRACE, SPAN)
    assert trace_ids([("traceparent", b"\xff" + value)]) == (None, None)
