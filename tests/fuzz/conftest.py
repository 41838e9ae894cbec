"""Fixtures shared by the fuzz tests: one small valid corpus per test process."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.fuzz import corpus as corpus_mod
from tests.fuzz import harness


@pytest.fixture(scope="session")
def corpus() -> corpus_mod.Corpus:
    """Two model-derived values (plus the default) per message and version, as bodies, frames,
    version-prefixed payloads and captures; plus up to two frames per api key, version and
    direction from the committed captures."""
    return corpus_mod.build(n=2, at_seed=0, real_per_version=2)


@pytest.fixture(scope="session")
def targets() -> dict[str, harness.Target]:
    return {t.name: t for t in harness.all_targets()}


@pytest.fixture(scope="session")
def kitchen_sink(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return corpus_mod.kitchen_sink(Path(tmp_path_factory.mktemp("ks")))
