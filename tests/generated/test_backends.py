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
