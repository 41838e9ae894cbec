"""Any directory of upstream Kafka schemas compiles unmodified, and every message round-trips.

The proof uses the Kafka 4.x schemas bundled with kafka-python (a test dependency): they are
compiled into a temporary package beside ours, and every message is round-tripped with
model-derived values: its oldest, first flexible and newest versions in `make test`, every version
in `make sweep` (the shipped schemas, whose layouts equal these, are round-tripped in
tests/generated). The 2024 upstream snapshot in ../shared is compiled too when present.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.render import compile_schemas, write_package
from tests.checks import check_head
from tests.sampling import sample_versions
from tests.strategies import Strategies, load_message

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "reference-schemas"
# One worker compiles the upstream package (about 15-20 s) and round-trips it, not each.
pytestmark = pytest.mark.xdist_group("upstream")


def _kafka_python_schemas() -> Path:
    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.origin is not None, "kafka-python is a test dependency"
    return Path(spec.origin).parent / "protocol" / "schemas" / "resources"


UPSTREAM = _kafka_python_schemas()
FILES = sorted(UPSTREAM.glob("*.json"))
MESSAGES = {p.stem: load_message(p) for p in FILES}
CASES = [
    (name, v)
    for name, m in sorted(MESSAGES.items())
    for v in sample_versions(list(m.valid), {v for v in m.valid if m.flexible_at(v)})
]


def _compile_into(tmp: Path, package: str, source: Path) -> ModuleType:
    files = compile_schemas([source], format=False)
    write_package(files, tmp / package)
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(package)
    finally:
        sys.path.remove(str(tmp))


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return _compile_into(tmp_path_factory.mktemp("upstream"), "kp_upstream", UPSTREAM)


def test_all_bundled_upstream_files_compile(upstream: ModuleType) -> None:
    assert len(FILES) >= 104
    assert set(upstream.MESSAGES) == set(MESSAGES)
    # One request and one response class per api key, as upstream defines them.
    assert all(info.request and info.response for info in upstream.REGISTRY.values())


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_upstream_roundtrip(
    upstream: ModuleType, name: str, version: int, data: st.DataObject
) -> None:
    message = MESSAGES[name]
    module = importlib.import_module(f"kp_upstream.{message.module}")
    obj = data.draw(Strategies(message, module).message_at(version))
    encoded = obj.encode(version)
    decoded = type(obj).decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded
    check_head(obj, encoded, version)


def test_reference_snapshot_compiles(tmp_path: Path) -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared/reference-schemas is absent (it is reference material, not shipped)")
    package = _compile_into(tmp_path, "kwire_reference_snapshot", SHARED)
    assert len(package.MESSAGES) == len(list(SHARED.glob("*.json")))
