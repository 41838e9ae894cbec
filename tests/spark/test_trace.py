"""Trace ids cut from record headers in Python (kwire.records.trace, what the job runs) agree
with the same rules written in Spark SQL over the `headers` column, with Java's regular
expressions: the job's former formulation, kept here as a second reading of the rules.

That formulation failed the whole job on a trace header whose value was not UTF-8: Spark 4's
`decode` raises MALFORMED_CHARACTER_CODING. The Python reading replaces such bytes, as Spark's
legacy coding-error action (set for the comparison) does."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from kwire.records.trace import trace_ids
from kwire.spark.session import with_conf

pytestmark = pytest.mark.xdist_group("spark")

_HEX = "[0-9a-fA-F]"


def _header(name: str) -> Column:
    match = F.filter("headers", lambda h: F.lower(h["key"]) == name)
    return F.when(F.size(match) > 0, F.decode(match[0]["value"], "UTF-8"))


def _sql_trace_columns() -> tuple[Column, Column]:
    tp, b3, uber = _header("traceparent"), _header("b3"), _header("uber-trace-id")
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


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(n))


def _value(rng: random.Random) -> bytes | None:
    blank = rng.choice(["", "", " ", "\t", "  \n", "\u00a0"])
    pieces = [
        lambda: f"{_hex(rng, 2)}-{_hex(rng, 32)}-{_hex(rng, 16)}-{_hex(rng, 2)}",
        lambda: f"{_hex(rng, rng.choice([16, 32, 31, 33]))}-{_hex(rng, rng.choice([16, 15]))}",
        lambda: f"{_hex(rng, rng.randint(0, 34))}:{_hex(rng, rng.randint(0, 17))}:0:1",
        lambda: _hex(rng, rng.randint(0, 33)),
        lambda: rng.choice(["", "0", "junk", "00-zz", "d"]),
    ]
    text = blank + rng.choice(pieces)() + rng.choice(["", "", "-01", " x"])
    if rng.random() < 0.05:
        return None
    raw = text.encode()
    if rng.random() < 0.05:
        at = rng.randint(0, len(raw))
        raw = raw[:at] + b"\xff" + raw[at:]
    return raw


def _headers(rng: random.Random) -> list[tuple[str, bytes | None]]:
    names = ["traceparent", "b3", "x-b3-traceid", "x-b3-spanid", "uber-trace-id", "other"]
    out = []
    for _ in range(rng.randint(0, 4)):
        name = rng.choice(names)
        name = "".join(c.upper() if rng.random() < 0.3 else c for c in name)
        out.append((name, _value(rng)))
    return out


def test_python_ids_agree_with_the_sql_formulation(spark: SparkSession) -> None:
    rng = random.Random(25)
    cases = [_headers(rng) for _ in range(3000)]
    rows = [([{"key": k, "value": v} for k, v in h],) for h in cases]
    df = spark.createDataFrame(rows, "headers array<struct<key: string, value: binary>>")
    trace, span = _sql_trace_columns()
    with with_conf(spark, {"spark.sql.legacy.codingErrorAction": "true"}):
        got = [(r[0], r[1]) for r in df.select(trace, span).collect()]
    want = [trace_ids(h) for h in cases]
    assert sum(1 for t, _ in want if t) > 300  # the cases reach ids, not only misses
    mismatches = [(h, g, w) for h, g, w in zip(cases, got, want) if g != w]
    assert not mismatches, mismatches[:5]
