"""How big the test matrices are: the hand-written schemas in full, the imported ones sampled.

`make test` samples the matrices over the ~165 schemas carried over by
scripts/schemas/import_upstream.py (each file carries its MARK); `make sweep` sets KWIRE_SWEEP=1
and runs them whole.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = os.environ.get("KWIRE_SWEEP") == "1"
IMPORTED_MARK = "Facts carried over from upstream by scripts/schemas/import_upstream.py"
IMPORTED = frozenset(
    p.stem
    for p in (ROOT / "schemas").glob("*.json")
    if IMPORTED_MARK in p.read_text(encoding="utf-8")
)


def sample_versions(
    versions: list[int], flexible: frozenset[int] | set[int] = frozenset()
) -> list[int]:
    """The versions `make test` covers of a message whose matrix is sampled: the oldest, the
    first flexible and the newest (every version under KWIRE_SWEEP=1)."""
    if SWEEP or len(versions) <= 3:
        return list(versions)
    first_flexible = [v for v in versions if v in flexible][:1]
    return sorted({versions[0], versions[-1], *first_flexible})
