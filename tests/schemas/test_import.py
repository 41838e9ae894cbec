"""The imported schemas are what scripts/schemas/import_upstream.py makes from its sources now.

Running the script again on the same sources (the 2024-10 reference snapshot in ../shared, the
Kafka 4.x files bundled with kafka-python, kio's generated modules and Kafka 4.4's kafka-clients
jar) must reproduce every file it wrote, byte for byte, and leave the hand-written ones alone:
nobody edited an imported file by hand, and the script is deterministic. Without the jar (or
java) on this machine, the files whose newest versions only the jar knows (KAFKA_44) are left out
of the comparison.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sampling import IMPORTED_MARK
from tests.schemas.test_schema_facts import KAFKA_44, kafka_jar

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference-schemas"


def test_importing_again_reproduces_the_shipped_schemas(tmp_path: Path) -> None:
    if not REFERENCE.is_dir():
        pytest.skip(f"the reference snapshot {REFERENCE} is not on this machine")
    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.submodule_search_locations
    newer = Path(list(spec.submodule_search_locations)[0]) / "protocol" / "schemas" / "resources"
    out = tmp_path / "schemas"
    out.mkdir()
    jar = kafka_jar()
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "schemas" / "import_upstream.py"),
            "--reference", str(REFERENCE), "--newer", str(newer), "--kio", "--out", str(out),
            *(["--jar", str(jar)] if jar else []),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    shipped = {
        p.name: p.read_text(encoding="utf-8")
        for p in (ROOT / "schemas").glob("*.json")
        if IMPORTED_MARK in p.read_text(encoding="utf-8")
    }
    made = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.json")}
    hand_written = {p.name for p in (ROOT / "schemas").glob("*.json")} - set(shipped)
    unchecked = set() if jar else {f"{name}.json" for name in KAFKA_44}
    # Into an empty directory the script writes the hand-written ones too; compare the rest.
    assert sorted(set(made) - hand_written - unchecked) == sorted(set(shipped) - unchecked)
    stale = [name for name in shipped if name not in unchecked and made[name] != shipped[name]]
    assert not stale, f"re-run scripts/schemas/import_upstream.py: {stale}"
