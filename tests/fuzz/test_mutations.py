"""Mutations of valid inputs: decoding either succeeds or raises a KwireError subclass.

Valid inputs are model-derived values encoded as bodies, request/response frames and
version-prefixed payloads (plus the frames of the committed captures, see conftest). Mutations:
every truncation, every length/count/tag field inflated to huge, negative, null and overlong
values, splices of two inputs, and hypothesis-driven stacks of bit flips, byte sets, insertions,
removals and duplications. A DecodeError must name an offset inside the input, a field path and
the message (harness.contract_problems); a sample runs under tracemalloc.
"""

from __future__ import annotations

import importlib
import tracemalloc
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from tests.fuzz import corpus as corpus_mod
from tests.fuzz import mutate
from tests.fuzz.harness import Target, run_one
from tests.sampling import IMPORTED, SWEEP
from tests.strategies import Strategies

MODELS = corpus_mod.messages()
CLASSES = sorted(g.MESSAGES)
FAMILY = [n for n in CLASSES if n not in IMPORTED]
OTHERS = [n for n in CLASSES if n in IMPORTED]
REQUESTS = sorted(n for n, c in g.MESSAGES.items() if getattr(c, "MESSAGE_TYPE", "") == "request")
RESPONSES = sorted(n for n, c in g.MESSAGES.items() if getattr(c, "MESSAGE_TYPE", "") == "response")
GROUPS = ["decode", "head", "request", "response", "inspect", "prefixed"]
ALLOC_LIMIT = 1 << 20  # bytes: far above what decoding a few hundred bytes needs
HYP = settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _group(name: str) -> str:
    head = name.split(":", 1)[0]
    return "inspect" if head.startswith("inspect") else head


def _strategy(name: str, v: int) -> st.SearchStrategy[Any]:
    model = MODELS[name]
    return Strategies(model, importlib.import_module(f"generated.{model.module}")).message_at(v)


# -- systematic: every truncation, every inflated length field, splices --------------------------


def _seeds(group: str, corpus: Any) -> list[tuple[str, bytes]]:
    """The seeds of a group of targets; the inspect_* targets get every third one, since the
    same frames go through decode_request/decode_response in full. make test takes every other
    one of those (as tests/fuzz/test_backends.py does); make sweep takes them all."""
    out = [
        (name, data)
        for name, seeds in sorted(corpus.seeds.items())
        if _group(name) == group
        for data in seeds
    ]
    step = 3 if group in ("inspect", "head") else 1
    return out[:: step if SWEEP else 2 * step]


@pytest.mark.parametrize("group", GROUPS)
def test_every_truncation(group: str, corpus: Any, targets: dict[str, Target]) -> None:
    n = 0
    for name, data in _seeds(group, corpus):
        target = targets[name]
        assert run_one(target, data) == "ok", f"{name}: the seed itself must decode"
        for cut in range(len(data)):
            run_one(target, data[:cut])
            n += 1
    assert n > 0


@pytest.mark.parametrize("group", GROUPS)
def test_every_length_field_inflated(group: str, corpus: Any, targets: dict[str, Target]) -> None:
    """Every length, count, tag and null marker set to extreme values; every 7th decode runs
    under tracemalloc and must stay far below what a claimed 2^31 elements would take."""
    n = 0
    for name, data in _seeds(group, corpus):
        target = targets[name]
        fields = mutate.length_fields(target.call, data)
        for bad in mutate.inflations(data, fields):
            n += 1
            if n % 7:
                run_one(target, bad)
                continue
            tracemalloc.start()
            try:
                run_one(target, bad)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < ALLOC_LIMIT, f"{name}: peak {peak} bytes for {bad.hex()}"
    assert n > 0


def test_length_fields_are_found() -> None:
    """The inflation tests are only as good as the length-field finder: spot-check it."""
    frame = g.encode_request(
        g.RequestHeader(11, 5, 7, "c"),
        g.JoinGroupRequest(
            group_id="g", protocols=[g.join_group_request.JoinGroupRequestProtocol()]
        ),
    )[4:]
    fields = mutate.length_fields(g.decode_request, frame)
    # client id (int16 at 8), GroupId (int16 at 11), MemberId, GroupInstanceId, ProtocolType,
    # Protocols (int32), and the protocol's Name (int16) and Metadata (int32).
    assert (8, "int16") in fields and (11, "int16") in fields
    assert sum(1 for _, k in fields if k == "int32") == 2
    assert len(fields) == 8
    flexible = g.encode_request(g.RequestHeader(11, 6, 7, "c"), g.JoinGroupRequest())[4:]
    kinds = {k for _, k in mutate.length_fields(g.decode_request, flexible)}
    assert kinds == {"int16", "uvarint"}  # the header's client id stays a classic string


@pytest.mark.parametrize("group", GROUPS)
def test_splices(group: str, corpus: Any, targets: dict[str, Target]) -> None:
    """A prefix of one valid input followed by the suffix of another, at every third cut."""
    n = 0
    for name, seeds in sorted(corpus.seeds.items()):
        if _group(name) != group or len(seeds) < 2:
            continue
        target = targets[name]
        for a, b in zip(seeds, seeds[1:] + seeds[:1]):
            for cut in range(0, min(len(a), len(b)), 3):
                run_one(target, a[:cut] + b[cut:])
                run_one(target, a[:cut] + b[cut + 1 :])
                n += 2
    assert n > 0


# -- hypothesis-driven stacked mutations ----------------------------------------------------------


def _mutated_body(name: str, data: st.DataObject) -> None:
    cls: Any = g.MESSAGES[name]
    v = data.draw(st.sampled_from(list(cls.VALID_VERSIONS)), label="version")
    body = data.draw(_strategy(name, v), label="value").encode(v)
    other = data.draw(_strategy(name, v), label="other").encode(v)
    target = Target(f"decode:{name}:v{v}", lambda d: cls.decode(d, v))
    r = data.draw(st.randoms(use_true_random=False), label="mutation choices")
    mutated, how = mutate.mutate(body, r, mutate.length_fields(target.call, body), other)
    data.draw(st.just(how), label="mutations")
    run_one(target, mutated)


@pytest.mark.parametrize("name", FAMILY)
@HYP
@given(data=st.data())
def test_mutated_bodies(name: str, data: st.DataObject) -> None:
    _mutated_body(name, data)


# The rest of the protocol: fewer examples per message in `make test`, as many under KWIRE_SWEEP=1.
@pytest.mark.parametrize("name", OTHERS)
@settings(HYP, max_examples=HYP.max_examples if SWEEP else 5)
@given(data=st.data())
def test_mutated_bodies_of_the_rest(name: str, data: st.DataObject) -> None:
    _mutated_body(name, data)


@st.composite
def _request_frame(draw: st.DrawFn) -> bytes:
    name = draw(st.sampled_from(REQUESTS))
    cls: Any = g.MESSAGES[name]
    v = draw(st.sampled_from(list(cls.VALID_VERSIONS)))
    body = draw(_strategy(name, v))
    client_id = draw(st.one_of(st.none(), st.text(max_size=8)))
    corr = draw(st.integers(-(2**31), 2**31 - 1))
    return g.encode_request(g.RequestHeader(cls.API_KEY, v, corr, client_id), body)[4:]


@settings(HYP, max_examples=150)
@given(frame=_request_frame(), other=_request_frame(), r=st.randoms(use_true_random=False))
def test_mutated_request_frames(frame: bytes, other: bytes, r: Any) -> None:
    mutated, _ = mutate.mutate(frame, r, mutate.length_fields(g.decode_request, frame), other)
    run_one(Target("request", g.decode_request), mutated)
    if hasattr(g, "inspect_request"):
        run_one(Target("inspect_request", g.inspect_request, tolerant=True), mutated)


@st.composite
def _response_frame(draw: st.DrawFn) -> tuple[int, int, bytes]:
    name = draw(st.sampled_from(RESPONSES))
    cls: Any = g.MESSAGES[name]
    v = draw(st.sampled_from(list(cls.VALID_VERSIONS)))
    body = draw(_strategy(name, v))
    corr = draw(st.integers(-(2**31), 2**31 - 1))
    return cls.API_KEY, v, g.encode_response(g.ResponseHeader(corr), body, v)[4:]


@settings(HYP, max_examples=150)
@given(resp=_response_frame(), r=st.randoms(use_true_random=False))
def test_mutated_response_frames(resp: tuple[int, int, bytes], r: Any) -> None:
    key, v, frame = resp
    target = Target(f"response:{key}:v{v}", lambda d: g.decode_response(d, key, v))
    mutated, _ = mutate.mutate(frame, r, mutate.length_fields(target.call, frame))
    run_one(target, mutated)
    if hasattr(g, "inspect_response"):
        inspect = Target(f"inspect_response:{key}:v{v}", lambda d: g.inspect_response(d, key, v))
        run_one(Target(inspect.name, inspect.call, tolerant=True), mutated)


@pytest.mark.parametrize("name", ["ConsumerProtocolAssignment", "ConsumerProtocolSubscription"])
@settings(HYP, max_examples=60)
@given(data=st.data())
def test_mutated_version_prefixed(name: str, data: st.DataObject) -> None:
    cls: Any = g.MESSAGES[name]
    v = data.draw(st.sampled_from(list(cls.VALID_VERSIONS)))
    payload = g.encode_version_prefixed(data.draw(_strategy(name, v)), v)
    target = Target(f"prefixed:{name}", lambda d: g.decode_version_prefixed(cls, d))
    r = data.draw(st.randoms(use_true_random=False))
    run_one(target, mutate.mutate(payload, r, mutate.length_fields(target.call, payload))[0])


# -- the kitchen sink: uuid, float64, records, nullable structs, version-dependent tags -----------


@settings(HYP, max_examples=120)
@given(data=st.data())
def test_mutated_kitchen_sink(kitchen_sink: ModuleType, data: st.DataObject) -> None:
    model = corpus_mod.load_message(corpus_mod.KITCHEN_SINK)
    module = importlib.import_module(f"{kitchen_sink.__name__}.{model.module}")
    cls = module.KitchenSinkRequest
    v = data.draw(st.sampled_from(list(cls.VALID_VERSIONS)), label="version")
    read_as = data.draw(st.sampled_from(list(cls.VALID_VERSIONS) + [v] * 3), label="read as")
    body = data.draw(Strategies(model, module).message_at(v), label="value").encode(v)
    target = Target(
        f"ks:KitchenSinkRequest:v{read_as}",
        lambda d: cls.decode(d, read_as),
        kwire_error=kitchen_sink.KwireError,
        decode_error=kitchen_sink.DecodeError,
    )
    r = data.draw(st.randoms(use_true_random=False), label="mutation choices")
    fields = mutate.length_fields(lambda d: cls.decode(d, v), body)
    run_one(target, mutate.mutate(body, r, fields)[0] if data.draw(st.booleans()) else body)
