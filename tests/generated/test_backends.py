"""The compiled readers (generated/_native, built by `make setup`) held to the pure-Python
reference: for every message and version, values drawn by the property strategies decode to the
same objects (tags in wire order included) through the compiled reader itself, not through its
Python fallback, and every cut of their bytes fails with the same error, at the same offset and
field. tests/fuzz/test_backends.py does the same on the fuzz corpus and the real captures.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated
from generated import _runtime
from tests.sampling import IMPORTED, SWEEP
from tests.strategies import Strategies, load_message

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = {p.stem: load_message(p) for p in sorted((ROOT / "schemas").glob("*.json"))}
BUILT = bool(_runtime._INSTALLED)
needs_build = pytest.mark.skipif(
    not BUILT,
    reason="the compiled readers are not built here (make setup builds them) or "
    "KWIRE_PURE_PYTHON is set: only the Python build is tested",
)
# `make test`: the hand-written family every version, the imported schemas their newest; the
# sweep (KWIRE_SWEEP=1) every version of everything, with more examples.
CASES = [
    (name, v)
    for name, m in sorted(MESSAGES.items())
    for v in m.valid
    if SWEEP or name not in IMPORTED or v == m.valid.high
]
EXAMPLES = 40 if SWEEP else 8


def test_the_compiled_build_is_in_use_where_it_was_built() -> None:
    """CI builds the extension (make setup) and says so with KWIRE_EXPECT_COMPILED=1: then a
    missing or broken build fails here instead of silently testing Python twice."""
    if os.environ.get("KWIRE_EXPECT_COMPILED") == "1":
        assert generated.BACKEND == "compiled", (
            "KWIRE_EXPECT_COMPILED=1 but generated.BACKEND is 'python': the compiled readers "
            "did not build or do not import (python scripts/build_native.py says why)"
        )
        # Every message, not some: a stale module (its KEY differs) keeps Python readers.
        served = {entry.cls.__name__ for entry in _runtime._INSTALLED}
        wanted = {n for n, c in generated.MESSAGES.items() if len(c.VALID_VERSIONS)}
        assert sorted(wanted - served) == [], "run make setup: these are not compiled"
    assert generated.BACKEND in ("compiled", "python")


def _module(name: str) -> Any:
    return importlib.import_module(f"generated.{MESSAGES[name].module}")


def _native(name: str) -> Any:
    return _runtime._load_native(MESSAGES[name].module)


def _outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    try:
        value = fn(*args)
    except generated.KwireError as e:
        return "error", (type(e).__name__, str(e), getattr(e, "offset", None))
    return "value", value


def _tagged(cls: Any, version: int) -> bool:
    """Whether the message or a struct in it has known tagged fields at this version."""
    for f in cls.FIELDS:
        if version in f.tagged_versions:
            return True
        if f.struct is not None and version in f.versions and _tagged(f.struct, version):
            return True
    return False


@pytest.fixture
def python_then_compiled() -> Any:
    def both(fn: Any, *args: Any) -> tuple[Any, Any]:
        generated.set_backend("python")
        try:
            py = _outcome(fn, *args)
        finally:
            generated.set_backend("compiled")
        return py, _outcome(fn, *args)

    return both


@needs_build
def test_set_backend_switches_every_message() -> None:
    cls = generated.HeartbeatRequest
    body = cls("g", 1, "m").encode(4)
    assert type(cls.__dict__["decode"].__func__).__name__ == "cython_function_or_method"
    generated.set_backend("python")
    try:
        assert generated.BACKEND == "python"
        assert type(cls.__dict__["decode"].__func__).__name__ == "function"
        assert cls.decode(body, 4) == cls("g", 1, "m")
    finally:
        generated.set_backend("compiled")
    assert generated.BACKEND == "compiled"
    assert cls.decode(body, 4) == cls("g", 1, "m")


@needs_build
@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_compiled_reader_equals_python(
    name: str, version: int, data: st.DataObject, python_then_compiled: Any
) -> None:
    module = _module(name)
    cls = getattr(module, name)
    obj = data.draw(Strategies(MESSAGES[name], module).message_at(version))
    body = obj.encode(version)
    py_value, end = module._DECODERS[version](body, 0)  # the checked reference
    # A body without tagged sections is read by the compiled reader alone.
    plain = cls().encode(version)
    value, at = _native(name).direct(plain, 0, version)
    assert at == len(plain) and value == module._DECODERS[version](plain, 0)[0]
    try:
        value, at = _native(name).direct(body, 0, version)
    except Exception as e:  # noqa: BLE001 - only a tagged section may send the read to Python
        assert type(e).__name__ == "_Fallback", f"compiled reader failed: {e!r}"
    else:
        assert at == end == len(body)
        assert value == py_value and repr(value) == repr(py_value)
        assert value.wire_tags == py_value.wire_tags
    decoded = cls.decode(body, version)
    assert decoded == obj and decoded.wire_tags == py_value.wire_tags
    # Writing: the compiled encode gives the Python encoder's bytes; a body with no tagged
    # fields to write is written by the compiled writer alone.
    py_encode = next(e.python["encode"] for e in _runtime._INSTALLED if e.cls is cls)
    assert obj.encode(version) == py_encode(obj, version) == body
    if not _tagged(cls, version):  # known tagged fields are written by Python (the plan's
        # tag checks stay there); without them the compiled writer writes the whole body
        assert _native(name).encode_direct(cls(), version) == py_encode(cls(), version)
    try:
        direct = _native(name).encode_direct(obj, version)
    except Exception as e:  # noqa: BLE001 - tagged fields or unknown tags go to Python
        assert type(e).__name__ == "_Fallback", f"compiled writer failed: {e!r}"
    else:
        assert direct == body
    # Every cut of the body: the same error (type, text, offset) from both builds.
    for cut in sorted({0, 1, len(body) // 2, len(body) - 1} - {len(body)}):
        py, compiled = python_then_compiled(cls.decode, body[:cut], version)
        assert py == compiled, (cut, py, compiled)
    py, compiled = python_then_compiled(cls.decode, body + b"\x00", version)
    assert py == compiled


@needs_build
@pytest.mark.parametrize("length", [32767, 32768, 40000])
def test_compact_strings_past_kafkas_limit_fail_alike(
    length: int, python_then_compiled: Any
) -> None:
    """Kafka caps a string at 32767 UTF-8 bytes; a compact length can say more. The compiled
    reader once took such a string whole where the Python one refused it."""
    cls = generated.ConsumerGroupHeartbeatRequest
    tail = cls(group_id="g", member_id="m", member_epoch=0).encode(0)[2:]  # after group_id
    n, head = length + 1, bytearray()
    while n >= 0x80:
        head.append((n & 0x7F) | 0x80)
        n >>= 7
    head.append(n)
    body = bytes(head) + b"a" * length + tail
    py, compiled = python_then_compiled(cls.decode, body, 0)
    assert py == compiled
    if length <= 32767:
        assert py[0] == "value" and len(py[1].group_id) == length
    else:
        assert py[0] == "error" and "exceeds Kafka's limit of 32767 bytes" in py[1][1], py


@needs_build
def test_frames_are_read_in_one_compiled_call_and_anything_else_by_python() -> None:
    """decode_request/decode_response go through the compiled frame decoder (header and body
    in one C call); whatever it cannot read (a cut, an unknown key, a tagged header) it leaves
    to the Python frame decoder, which gives the reference's value or error."""
    requests, responses = generated._ROUTES
    header = generated.RequestHeader(12, 4, 7, "client")
    frame = generated.encode_request(header, generated.HeartbeatRequest("g", 3, "m"))[4:]
    assert requests.request(frame) == (header, generated.HeartbeatRequest("g", 3, "m"))
    assert requests.request(bytearray(frame)) == requests.request(frame)
    assert requests.request(frame[:-1]) is None and requests.request(frame + b"\x00") is None
    assert requests.request(b"\x7f\x00\x00\x04" + frame[4:]) is None  # no such api key
    tagged = generated.RequestHeader(12, 4, 7, "client", unknown_tags={9: b"x"})
    tagged_frame = generated.encode_request(tagged, generated.HeartbeatRequest("g", 3, "m"))[4:]
    # A tagged header: its module hands the read to its Python fast reader, inside the call.
    assert requests.request(tagged_frame)[0] == tagged == generated.decode_request(tagged_frame)[0]
    assert requests.request(frame[:3]) is None
    resp = generated.ResponseHeader(7)
    body = generated.HeartbeatResponse(error_code=27)
    rframe = generated.encode_response(resp, body, 4)[4:]
    assert responses.response(rframe, 12, 4) == (resp, body)
    assert responses.response(rframe, 12, 99) is None
    assert responses.response(rframe, 70000, 4) is None
    generated.set_backend("python")
    try:
        assert generated._ROUTES == [None, None]
    finally:
        generated.set_backend("compiled")
    assert len(generated._ROUTES[0]) > 300


@needs_build
def test_tagged_struct_defaults_and_writes_match_python(python_then_compiled: Any) -> None:
    """Tagged structs at their defaults are made and tested in C; one off its default, a kept
    tag order or a value of another type sends the write to the Python writer: same bytes."""
    from generated import fetch_response as fr

    part = fr.PartitionData(partition_index=1, records=b"r")
    moved = fr.PartitionData(
        partition_index=2, current_leader=fr.LeaderIdAndEpoch(leader_id=3, leader_epoch=4)
    )
    msg = fr.FetchResponse(
        responses=[fr.FetchableTopicResponse(topic="t", partitions=[part, moved])]
    )
    py_encode = next(e.python["encode"] for e in _runtime._INSTALLED if e.cls is fr.FetchResponse)
    for v in (12, 16):
        body = msg.encode(v)
        assert body == py_encode(msg, v)
        py, compiled = python_then_compiled(fr.FetchResponse.decode, body, v)
        assert py == compiled and py[0] == "value"
        assert compiled[1].responses[0].partitions == msg.responses[0].partitions
        assert compiled[1].responses[0].partitions[0].diverging_epoch == fr.EpochEndOffset()
    plain = fr.FetchResponse(responses=[fr.FetchableTopicResponse(topic="t", partitions=[part])])
    assert _native("FetchResponse").encode_direct(plain, 12) == py_encode(plain, 12)
    with pytest.raises(Exception) as raised:
        _native("FetchResponse").encode_direct(msg, 12)  # a tagged field to write: Python's
    assert type(raised.value).__name__ == "_Fallback"


def test_the_builds_found_are_those_glob_finds(tmp_path: Path) -> None:
    """The compiled modules are found from one listing of the directory (globbing it for each
    of ~200 modules took half of `import generated`); the names it accepts are glob's."""
    names = [
        "kwire_native_fetch_request.cpython-311-x86_64-linux-gnu.so",
        "kwire_native_fetch_request.abi3.so",
        "kwire_native_fetch_request.cp311-win_amd64.pyd",
        "kwire_native_fetch_request..so",
        "kwire_native_fetch_request.so",  # no tag: not a build glob's pattern takes
        "kwire_native_fetch_request_v2.cpython-311-x86_64-linux-gnu.so",
        "kwire_native_fetch_request.pyx",
        "kwire_native_fetch_request.c",
        "kwire_native_fetch.cpython-311-x86_64-linux-gnu.so",
    ]
    other = tmp_path / "other"
    other.mkdir()
    for n in names:
        (tmp_path / n).write_bytes(b"")
    (other / names[1]).write_bytes(b"")
    full = "kwire_native_fetch_request"
    dirs = [tmp_path, other]
    expected = [p for d in dirs for ext in ("so", "pyd") for p in sorted(d.glob(f"{full}.*.{ext}"))]
    assert _runtime._builds(full, dirs) == expected
    assert len(expected) == 5
