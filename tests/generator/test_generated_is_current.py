"""The committed generated/ package is exactly what the generator makes now, and stays clean.

`make generate` on a clean tree must change nothing: regenerating into a temporary directory has
to reproduce generated/ byte for byte (so it is deterministic and nobody edited it by hand).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.render import compile_schemas
from tests.sampling import IMPORTED, SWEEP

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long(28)
def test_regenerating_reproduces_the_committed_package() -> None:
    """Every module is what the generator makes now: under KWIRE_SWEEP=1 (make sweep) every
    schema's module and compiled-target sources; in make test the hand-written schemas and a
    sample of the imported ones, formatted, byte for byte.

    A full compile is about 45 s of one core (black nine tenths of it), and CI's own
    `make generate` step already regenerates every file and fails on any difference, so
    `make test` compiles the sample alone (about 14 s).
    """
    stems = {p.stem: p for p in (ROOT / "schemas").glob("*.json")}
    imported = sorted(IMPORTED)
    picked = [p for s, p in stems.items() if SWEEP or s not in IMPORTED or s in imported[::12]]
    fresh = compile_schemas(sorted(picked), native_target=True)
    assert len(fresh) >= 80
    init = fresh.pop("__init__.py")
    if SWEEP:
        committed = {
            p.relative_to(ROOT / "generated").as_posix()
            for pattern in ("*.py", "_native/*.py", "_native/*.pyx", "_native/*.pxd")
            for p in (ROOT / "generated").glob(pattern)
        }
        assert sorted([*fresh, "__init__.py"]) == sorted(committed), "missing or stale modules"
        assert init == (ROOT / "generated" / "__init__.py").read_text(encoding="utf-8")
    stale = [
        name
        for name, text in fresh.items()
        if not (ROOT / "generated" / name).exists()
        or (ROOT / "generated" / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, f"generated/ differs from the generator's output: {stale}; run make generate"


# A sample with common structs, tagged fields, nested arrays and the headers: compiled in another
# process with another hash seed, it must give the committed text (which `make generate` made in
# a third process, and which test_regenerating_reproduces_the_committed_package compares with
# this process's output).
SAMPLE = [
    "RequestHeader", "ResponseHeader", "FetchResponse", "OffsetCommitRequest",
    "DescribeClusterResponse", "ConsumerGroupHeartbeatResponse", "ApiVersionsResponse",
    "ShareFetchResponse", "BrokerRegistrationRequest",
]  # fmt: skip


def test_generation_is_deterministic() -> None:
    paths = [str(ROOT / "schemas" / f"{name}.json") for name in SAMPLE]
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from generator.render import compile_schemas\n"
        "print(json.dumps(compile_schemas([Path(p) for p in sys.argv[1:]])))\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert other.returncode == 0, other.stderr
    made = json.loads(other.stdout)
    made.pop("__init__.py")  # the sample's own registry, not the package's
    assert len(made) == len(SAMPLE) + 1  # and the runtime
    for name, text in made.items():
        assert text == (ROOT / "generated" / name).read_text(encoding="utf-8"), name


def test_generated_package_is_mypy_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "generated"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_package_needs_only_the_standard_library() -> None:
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in {'jinja2','jsonschema','black','generator','hypothesis'}:\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import generated, generated.join_group_request\n"
        "print(len(generated.MESSAGES))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(len(list((ROOT / "schemas").glob("*.json"))))
