"""Every dialect rule has a broken schema that fails with its own message.

Each file in broken/ starts with `// expect: <json-path>: <problem>`; the generator must report
that problem for that file (as a prefix of its message), exit non-zero and write nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.errors import SchemaError
from generator.render import compile_schemas

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
BROKEN = sorted((HERE / "broken").glob("*.json"))


def expectation(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("// expect: "), path
    return first.removeprefix("// expect: ")


@pytest.mark.parametrize("path", BROKEN, ids=[p.stem for p in BROKEN])
def test_broken_schema_is_rejected_with_its_message(path: Path) -> None:
    with pytest.raises(SchemaError) as info:
        compile_schemas([path], format=False)
    lines = [f"{p.path or '$'}: {p.problem}" for p in info.value.problems]
    expected = expectation(path)
    assert any(line.startswith(expected) for line in lines), lines
    assert all(str(p).startswith(f"{p.file}: ") for p in info.value.problems)


def test_corpus_covers_the_rules() -> None:
    assert len(BROKEN) >= 45


def test_cli_reports_all_problems_and_writes_nothing(tmp_path: Path) -> None:
    good = ROOT / "schemas" / "HeartbeatRequest.json"
    inputs = [good, HERE / "broken" / "tag_negative.json", HERE / "broken" / "default_octal.json"]
    out = tmp_path / "pkg"
    result = subprocess.run(
        [sys.executable, "-m", "generator", *map(str, inputs), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 1
    assert "tag_negative.json: fields[3].tag: tags cannot be negative" in result.stderr
    assert "default_octal.json: fields[1].default: invalid default for int32" in result.stderr
    assert "2 problem(s); nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_compiles_a_single_good_file(tmp_path: Path) -> None:
    out = tmp_path / "one"
    shutil.copy(ROOT / "schemas" / "HeartbeatRequest.json", tmp_path / "HeartbeatRequest.json")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "generator",
            str(tmp_path / "HeartbeatRequest.json"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.glob("*.py")) == [
        "__init__.py",
        "_runtime.py",
        "heartbeat_request.py",
    ]
