"""Random bytes into every decode entry point: only KwireError subclasses may come out.

Small example counts keep this part of `make test` short; scripts/fuzz/run.py is the long run.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from tests.fuzz.harness import Target, run_one
from tests.sampling import IMPORTED, SWEEP

FAST = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
CLASSES = sorted(g.MESSAGES)
FAMILY = [n for n in CLASSES if n not in IMPORTED]
OTHERS = [n for n in CLASSES if n in IMPORTED]
# Versions a caller might pass: every valid one, plus neighbours outside the range.
EDGE_VERSIONS = st.sampled_from([-1, 32767, -32768])


def _version(cls: Any) -> st.SearchStrategy[int]:
    valid = cls.VALID_VERSIONS
    return st.one_of(st.sampled_from(list(valid)), EDGE_VERSIONS, st.just(valid.stop))


def _bytes() -> st.SearchStrategy[bytes]:
    """Mostly short inputs (where every field boundary is), biased to 0x00/0xff/0x80 bytes."""
    special = st.lists(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]), max_size=24).map(bytes)
    return st.one_of(st.binary(max_size=48), special, st.binary(min_size=48, max_size=300))


def _message_decode(name: str, data: st.DataObject) -> None:
    cls: Any = g.MESSAGES[name]
    v = data.draw(_version(cls), label="version")
    raw = data.draw(_bytes(), label="input")
    run_one(Target(f"decode:{name}:v{v}", lambda d: cls.decode(d, v)), raw)
    run_one(Target(f"decode:{name}:v{v}", lambda d: cls.decode(memoryview(d), v)), raw)


@pytest.mark.parametrize("name", FAMILY)
@FAST
@given(data=st.data())
def test_message_decode(name: str, data: st.DataObject) -> None:
    _message_decode(name, data)


# The rest of the protocol: fewer examples per message in `make test`, as many under KWIRE_SWEEP=1.
@pytest.mark.parametrize("name", OTHERS)
@settings(FAST, max_examples=FAST.max_examples if SWEEP else 10)
@given(data=st.data())
def test_message_decode_of_the_rest(name: str, data: st.DataObject) -> None:
    _message_decode(name, data)


def _request_frame() -> st.SearchStrategy[bytes]:
    """A plausible header (known or unknown api key, any version) followed by random bytes."""
    keys = st.one_of(st.sampled_from(sorted(g.REGISTRY)), st.integers(-(2**15), 2**15 - 1))
    head = st.tuples(keys, st.integers(-2, 20), st.integers(-(2**31), 2**31 - 1)).map(
        lambda t: t[0].to_bytes(2, "big", signed=True)
        + t[1].to_bytes(2, "big", signed=True)
        + t[2].to_bytes(4, "big", signed=True)
    )
    client_id = st.sampled_from([b"", b"\x00\x00", b"\xff\xff", b"\x00\x03abc", b"\x7f\xff"])
    return st.one_of(
        _bytes(), st.tuples(head, client_id, _bytes()).map(lambda t: t[0] + t[1] + t[2])
    )


@settings(max_examples=300, deadline=None, database=None)
@given(frame=_request_frame())
def test_decode_request(frame: bytes) -> None:
    run_one(Target("request", g.decode_request), frame)
    if hasattr(g, "inspect_request"):
        run_one(Target("inspect_request", g.inspect_request, tolerant=True), frame)


@st.composite
def _key_version(draw: st.DrawFn) -> tuple[int, int]:
    key = draw(st.one_of(st.sampled_from(sorted(g.REGISTRY)), st.integers(-5, 40000)))
    info = g.REGISTRY.get(key)
    if info is None:
        return key, draw(st.integers(-1, 20))
    return key, draw(_version(info.response))


@settings(max_examples=300, deadline=None, database=None)
@given(kv=_key_version(), frame=_bytes())
def test_decode_response(kv: tuple[int, int], frame: bytes) -> None:
    key, v = kv
    run_one(Target(f"response:{key}:v{v}", lambda d: g.decode_response(d, key, v)), frame)
    if hasattr(g, "inspect_response"):
        run_one(
            Target(f"inspect_response:{key}:v{v}", lambda d: g.inspect_response(d, key, v), True),
            frame,
        )


@pytest.mark.parametrize("name", ["ConsumerProtocolAssignment", "ConsumerProtocolSubscription"])
@settings(max_examples=100, deadline=None, database=None)
@given(version=st.integers(-2, 40), tail=_bytes())
def test_decode_version_prefixed(name: str, version: int, tail: bytes) -> None:
    cls: Any = g.MESSAGES[name]
    target = Target(f"prefixed:{name}", lambda d: g.decode_version_prefixed(cls, d))
    run_one(target, version.to_bytes(2, "big", signed=True) + tail)
    run_one(target, tail)
