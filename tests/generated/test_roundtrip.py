"""Property tests: every shipped message, every version, both directions.

The consumer-group family and the headers (the hand-written schemas) get 20 examples per version
in `make test`. The rest of the protocol (imported schemas, 565 message-versions) gets a few
examples of every version per message, so the suite stays within its time; `make sweep`
(KWIRE_SWEEP=1) gives every message 40 per version.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.checks import check_head
from tests.sampling import IMPORTED, SWEEP
from tests.strategies import Strategies, load_message

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "schemas").glob("*.json"))
MESSAGES = {p.stem: load_message(p) for p in SCHEMAS}
CASES = [
    (name, v)
    for name, m in sorted(MESSAGES.items())
    for v in m.valid
    if SWEEP or name not in IMPORTED
]
SAMPLED = [] if SWEEP else sorted(IMPORTED)


def _cls(name: str):  # type: ignore[no-untyped-def]
    module = importlib.import_module(f"generated.{MESSAGES[name].module}")
    return module, getattr(module, name)


def test_every_shipped_schema_is_covered() -> None:
    assert len(SCHEMAS) >= 196
    assert {name for name, _ in CASES} | set(SAMPLED) == set(MESSAGES)
    assert len(IMPORTED) >= 160  # the hand-written family is the rest


def _roundtrip(cls, obj, version: int) -> None:  # type: ignore[no-untyped-def]
    encoded = obj.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded
    # The same body decoded from a memoryview and at an offset inside a larger buffer.
    assert cls.decode(memoryview(encoded), version) == obj
    again, end = cls.read(b"\x99" * 3 + encoded + b"\x77", 3, version)
    assert again == obj and end == 3 + len(encoded)
    check_head(obj, encoded, version)
    _lossless(cls, obj, version)


def _lossless(cls, obj, version: int) -> None:  # type: ignore[no-untyped-def]
    """A peer may write every known tag, defaults included, in any order: such bytes decode to
    the same value and encode back to themselves."""
    if version not in cls.FLEXIBLE_VERSIONS:
        return
    tags = [f.tag for f in cls.FIELDS if f.tag is not None and version in f.tagged_versions]
    tags += list(obj.unknown_tags)
    if not tags:
        return
    obj.wire_tags = tuple(reversed(tags))  # every tag, in descending order
    unusual = obj.encode(version)
    decoded = cls.decode(unusual, version)
    assert decoded == obj
    assert decoded.wire_tags == obj.wire_tags
    assert decoded.encode(version) == unusual
    obj.wire_tags = None


# Examples per message and version: 40 in make sweep, 20 in make test.
EXAMPLES = 40 if SWEEP else 20


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(name: str, version: int, data: st.DataObject) -> None:
    module, cls = _cls(name)
    obj = data.draw(Strategies(MESSAGES[name], module).message_at(version))
    _roundtrip(cls, obj, version)


@pytest.mark.parametrize("name", SAMPLED)
@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_roundtrip_every_version_sampled(name: str, data: st.DataObject) -> None:
    module, cls = _cls(name)
    strategies = Strategies(MESSAGES[name], module)
    for version in MESSAGES[name].valid:
        _roundtrip(cls, data.draw(strategies.message_at(version), label=f"v{version}"), version)
