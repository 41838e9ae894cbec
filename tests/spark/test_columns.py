"""The compiled column builder (kwire/spark/_columns.pyx) against the Python way of building the same
columns: the decoded tables of drawn messages (every family, both directions, strings, bytes,
nulls, absent versions) and of damaged frames are equal array for array, and what it does not
expect it leaves to Python."""

from __future__ import annotations

import os
from typing import Any, Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from kwire.spark import model
from kwire.spark.decode import Plan, decode_request_array, decode_response_array

from .test_model import _strategies

BUILT = model.COMPILED[0] is not None
needs_build = pytest.mark.skipif(
    not BUILT,
    reason="the compiled column builder is not built here (make setup builds it) or "
    "KWIRE_PURE_PYTHON is set: only the Python way is tested",
)
REQUESTS, RESPONSES = Plan("request"), Plan("response")
# A family from each corner: strings and bools, nested lists, uuids, records, int arrays.
KEYS = [0, 1, 3, 8, 11, 12, 14, 68]


def test_the_column_builder_is_in_use_where_it_was_built() -> None:
    if os.environ.get("KWIRE_EXPECT_COMPILED") == "1":
        assert BUILT, "KWIRE_EXPECT_COMPILED=1 but kwire.spark._columns did not build or import"


@pytest.fixture
def python_way() -> Iterator[Any]:
    compiled = model.COMPILED[0]

    def both(fn: Any, *args: Any) -> tuple[pa.Array, pa.Array]:
        model.COMPILED[0] = None
        try:
            python = fn(*args)
        finally:
            model.COMPILED[0] = compiled
        return python, fn(*args)

    yield both
    model.COMPILED[0] = compiled


@needs_build
@pytest.mark.parametrize("key", KEYS)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_tables_equal_the_python_way(key: int, data: st.DataObject, python_way: Any) -> None:
    info = g.REGISTRY[key]
    for direction, cls in (("request", info.request), ("response", info.response)):
        versions = list(cls.VALID_VERSIONS)
        frames, vers = [], []
        for i in range(data.draw(st.integers(1, 4))):
            v = data.draw(st.sampled_from(versions))
            msg = data.draw(_strategies(cls).message_at(v))
            if direction == "request":
                header = g.RequestHeader(key, v, i, data.draw(st.none() | st.text(max_size=5)))
                frame = g.encode_request(header, msg)[4:]
            else:
                frame = g.encode_response(g.ResponseHeader(i), msg, v)[4:]
            if data.draw(st.integers(0, 5)) == 0:
                frame = frame[: len(frame) // 2]  # a damaged row among them
            frames.append(frame)
            vers.append(v)
        column = pa.array(frames + [None], pa.binary())
        if direction == "request":
            python, compiled = python_way(decode_request_array, column, REQUESTS)
        else:
            keys = pa.array([key] * len(column), pa.int16())
            versions_col = pa.array(vers + [None], pa.int16())
            python, compiled = python_way(
                decode_response_array, column, keys, versions_col, RESPONSES
            )
        assert compiled.equals(python), (key, direction)
        assert compiled.to_pylist() == python.to_pylist()


@needs_build
def test_scalar_builds_what_it_knows_and_leaves_the_rest() -> None:
    columns = model.COMPILED[0]
    hb = [g.HeartbeatRequest("g", 7, "m", None), None, g.HeartbeatRequest("h", -1, "n", "i")]
    built = columns.scalar(hb, "generation_id", columns.kind_of("int32"), pa.int32())
    assert built.equals(pa.array([7, None, -1], pa.int32()))
    built = columns.scalar(hb, "group_instance_id", columns.kind_of("string"), pa.string())
    assert built.equals(pa.array([None, None, "i"], pa.string()))
    assert columns.kind_of("uuid") is None  # uuids become Kafka's base64 text in Python
    odd = [g.HeartbeatRequest("g", 7, "m"), g.HeartbeatRequest("g", True, "m")]
    assert columns.scalar(odd, "generation_id", columns.kind_of("int32"), pa.int32()) is None
    mixed = [g.HeartbeatRequest("g", 7, "m"), g.SyncGroupRequest("g", 7, "m")]
    assert columns.scalar(mixed, "generation_id", columns.kind_of("int32"), pa.int32()) is None
    wide = [g.HeartbeatRequest("g", 2**40, "m")]
    assert columns.scalar(wide, "generation_id", columns.kind_of("int32"), pa.int32()) is None
    assert not columns.any_tags(hb)
    assert columns.any_tags([g.HeartbeatRequest("g", 1, "m", unknown_tags={3: b"x"})])
