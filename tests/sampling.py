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
