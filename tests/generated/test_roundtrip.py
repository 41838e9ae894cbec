"""Property tests: every shipped message, every version, both directions."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.checks import check_head
from tests.strategies import Strategies, load_message

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "schemas").glob("*.json"))
MESSAGES = {p.stem: load_message(p) for p in SCHEMAS}
CASES = [(name, v) for name, m in sorted(MESSAGES.items()) for v in m.valid]


def _cls(name: str):  # type: ignore[no-untyped-def]
    module = importlib.import_module(f"generated.{MESSAGES[name].module}")
    return module, getattr(module, name)


def test_every_shipped_schema_is_covered() -> None:
    assert len(SCHEMAS) == 32
    assert len(CASES) > 150


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(name: str, version: int, data: st.DataObject) -> None:
    module, cls = _cls(name)
    obj = data.draw(Strategies(MESSAGES[name], module).message_at(version))
    encoded = obj.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded
    # The same body decoded from a memoryview and at an offset inside a larger buffer.
    assert cls.decode(memoryview(encoded), version) == obj
    again, end = cls.read(b"\x99" * 3 + encoded + b"\x77", 3, version)
    assert again == obj and end == 3 + len(encoded)
    check_head(obj, encoded, version)
