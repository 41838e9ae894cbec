"""The documentation cannot drift from the code.

- docs/reference/command.md is what scripts/docs/gen_reference.py writes from kwire/cli.py's
  parsers now, and names every option of every subcommand;
- docs/outputs.md is what it writes from the tables the decode job writes (the suite's own job
  over every bundled capture) and docs/tables.toml; every written column has a meaning there and
  every meaning a written column;
- the notebook examples (docs/examples/*.py, which the pages include) run on a bundled capture
  and the suite's OUT, and the README's code is theirs;
- the commands the README and the pages show use options the parsers have, and the README keeps
  to its size;
- `kwire --version` is the changelog's newest release.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import kwire
from kwire import cli
from scripts.docs import gen_reference as reference

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
CAPTURE = ROOT / "tests" / "data" / "capture" / "mock_gt_progress.pcap"
REGENERATE = "run python scripts/docs/gen_reference.py --out OUT (docs/layout.md says how)"


# -- the command ----------------------------------------------------------------------------------


def test_command_page_is_what_the_parsers_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REMOTE", "sc://somewhere:15002")  # the page must not depend on it
    page = (DOCS / "reference" / "command.md").read_text()
    assert page == reference.command_page(), REGENERATE


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in cli.build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_command_page_names_every_option_of_every_subcommand() -> None:
    page = (DOCS / "reference" / "command.md").read_text()
    sections = dict(re.findall(r"^## kwire (\w+)\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    subs = _subparsers()
    assert set(sections) == set(subs) == set(cli.COMMANDS)
    for name, parser in subs.items():
        for action in parser._actions:
            for option in action.option_strings:
                assert f"`{option}" in sections[name], f"kwire {name} {option} is not on the page"


def _shown_commands(text: str) -> list[tuple[str, list[str]]]:
    """(subcommand, its words) of each `kwire SUB ...` line in the shell blocks of a page."""
    found = []
    for block in re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = line.split("#")[0].split()
            while words and words[0] != "kwire" and not words[0].endswith("/kwire"):
                words = words[1:]
            if len(words) >= 2 and words[1] in cli.COMMANDS:
                found.append((words[1], words[2:]))
    return found


def test_commands_shown_in_the_docs_use_options_the_parsers_have() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    subs = _subparsers()
    shown = 0
    for page in pages:
        for name, words in _shown_commands(page.read_text()):
            known = {o for a in subs[name]._actions for o in a.option_strings}
            for word in words:
                option = word.split("=")[0]
                if re.fullmatch(r"--?[a-z][a-z0-9-]*", option):
                    assert option in known, f"{page.name}: kwire {name} has no {option}"
            shown += 1
    assert shown >= 20  # the check reads the pages' commands, not nothing


def test_version_is_the_changelogs_release() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kwire", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"kwire {kwire.__version__}\n" == "kwire 0.1.0\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", changelog, re.M)
    assert releases[:2] == ["Unreleased", kwire.__version__], releases


# -- the README -----------------------------------------------------------------------------------


def test_readme_is_short_and_keeps_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "```sh\nmake test\n```" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme) + re.findall(r'src="([^"]+)"', readme)
    assert "docs/images/report-overview.png" in links
    for target in links:
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"the README links to {target}, which is not there"


def _code_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _is_within(block: list[str], lines: list[str]) -> bool:
    """Every line of block appears in lines, in order."""
    it = iter(lines)
    return all(any(line == other for other in it) for line in block)


def test_readme_code_is_the_examples_code() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    examples = {p.name: _code_lines(p.read_text()) for p in EXAMPLES.glob("*.py")}
    for block in blocks:
        lines = _code_lines(block)
        homes = [name for name, ex in examples.items() if _is_within(lines, ex)]
        assert homes, f"this README code is in no docs/examples file:\n{block}"


def test_every_example_is_on_a_page_and_run_here() -> None:
    included = {
        m
        for page in DOCS.rglob("*.md")
        for m in re.findall(r'--8<-- "docs/examples/([^"]+)"', page.read_text())
    }
    examples = {p.name for p in EXAMPLES.glob("*.py")}
    assert examples and examples <= included, examples - included
    this = Path(__file__).read_text()
    for name in examples:
        assert f'"{name}"' in this, f"docs/examples/{name} has no test"


# -- the tables -----------------------------------------------------------------------------------


def test_the_check_finds_a_column_without_meaning_and_a_meaning_without_column(
    tmp_path: Path,
) -> None:
    """problems() itself, on docs/tables.toml with one meaning taken out and one made up."""
    text = (DOCS / "tables.toml").read_text()
    schemas = {
        "frames": [("source_file", "string"), ("connection_id", "string")],
    }
    parts = reference.load_meanings()[1]
    frames = [p for p in parts if p.tables == ["frames"]]
    assert frames and "source_file" in frames[0].columns
    only_frames = [frames[0]]
    found = reference.problems(schemas, only_frames)
    assert "frames.source_file" not in " ".join(found)
    assert any("frames.client_addr" in f and "no such column" in f for f in found)

    cut = text.replace('source_file = "the capture file', 'source_filename = "the capture file')
    (tmp_path / "tables.toml").write_text(cut)
    _, cut_parts = reference.load_meanings(tmp_path / "tables.toml")
    found = reference.problems(schemas, [p for p in cut_parts if p.tables == ["frames"]])
    assert "frames.source_file: written, but docs/tables.toml gives no meaning" in found
    assert any(f.startswith("frames.source_filename: has a meaning") for f in found)
    found = reference.problems({**schemas, "extra": [("x", "int")]}, only_frames)
    assert "extra: written, but docs/tables.toml does not document it" in found


@pytest.mark.xdist_group("groups_job")
def test_every_written_column_has_a_meaning_and_every_meaning_a_column(
    capture_job: "tuple[Path, Any]",
) -> None:
    out = capture_job[0]
    schemas = reference.out_schemas(out)
    assert {"frames", "requests", "responses", "records", "delivery", "groups/members"} <= set(
        schemas
    )
    assert reference.problems(schemas, reference.load_meanings()[1]) == []


@pytest.mark.xdist_group("groups_job")
def test_tables_page_is_what_the_job_writes(capture_job: "tuple[Path, Any]") -> None:
    out = capture_job[0]
    page = reference.tables_page(out)
    assert (DOCS / "outputs.md").read_text() == page, REGENERATE
    # every written column is on the page with its type (the per-API structs of the decoded
    # tables as one row)
    families = reference._family_names()
    for table, columns in reference.out_schemas(out).items():
        for name, typ in columns:
            if not (table in ("requests", "responses") and name in families):
                assert f"`{name}`" in page and f"`{typ}`" in page, (table, name)


# -- the examples ---------------------------------------------------------------------------------


def run_example(name: str, spark: Any, **inputs: object) -> dict[str, Any]:
    """Runs docs/examples/NAME as a notebook cell with `spark`, its input paths (top-level string
    assignments to the names given) set to the test's; returns the cell's names."""
    path = EXAMPLES / name
    tree = ast.parse(path.read_text(), str(path))
    bound = set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in inputs:
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            value = ast.Constant(str(inputs[target.id]))
            node.value = ast.copy_location(value, node.value)
            bound.add(target.id)
    assert bound == set(inputs), f"{name} does not set {set(inputs) - bound}"
    names: dict[str, Any] = {"spark": spark, "__name__": "__example__"}
    exec(compile(tree, str(path), "exec"), names)
    return names


def test_codecs_example(capsys: pytest.CaptureFixture[str]) -> None:
    run_example("codecs.py", None)
    said = capsys.readouterr().out
    assert "'protocol_name': 'range'" in said and "'member_id': 'm-1'" in said
    assert said.rstrip().splitlines()[-1].startswith("JoinGroupRequest v5: Protocols[0].Metadata")


def _packets(path: Path) -> int:
    import dpkt

    with open(path, "rb") as f:
        return sum(1 for _ in dpkt.pcap.Reader(f))


@pytest.mark.xdist_group("groups_job")
def test_pcap_source_example(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # the path the page shows is a bundled capture, so the cell runs as shown in a checkout
    source = (EXAMPLES / "pcap_source.py").read_text()
    shown = re.search(r'^capture = "([^"]+)"', source, re.M)
    assert shown is not None and (ROOT / shown.group(1)) == CAPTURE
    names = run_example("pcap_source.py", spark, capture=CAPTURE)
    counts = {row["dport"]: row["count"] for row in names["ports"].collect()}
    assert sum(counts.values()) == _packets(CAPTURE)
    brokers = json.loads(CAPTURE.with_suffix(".json").read_text())["broker_ports"]
    assert brokers and all(counts[port] > 0 for port in brokers)
    assert "|dport|count|" in capsys.readouterr().out.replace(" ", "")


@pytest.mark.xdist_group("groups_job")
def test_sql_example(spark: Any, capture_job: "tuple[Path, Any]") -> None:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    out = capture_job[0]
    names = run_example("sql_tables.py", spark, out=out)
    records = ds.dataset(str(out / "records")).to_table(
        columns=["topic", "client_id", "direction", "is_control", "offset"]
    )
    produced = records.filter(
        (pc.field("direction") == "request")
        & ~pc.field("is_control")
        & pc.field("offset").is_valid()
    )
    expected = Counter(zip(produced["topic"].to_pylist(), produced["client_id"].to_pylist()))
    sent = {(r["topic"], r["client_id"]): r["records"] for r in names["sent"].collect()}
    assert sent == dict(expected)
    late = names["late"].collect()
    assert late and all(r["p50_ms"] <= r["p99_ms"] for r in late)
    behind = names["behind"].collect()
    assert behind and all(r["behind_s"] >= 0 for r in behind)


@pytest.mark.xdist_group("groups_job")
def test_udfs_example(spark: Any, capture_job: "tuple[Path, Any]") -> None:
    import pyarrow.dataset as ds

    out = capture_job[0]
    names = run_example("udfs.py", spark, out=out)
    requests = ds.dataset(str(out / "requests"), partitioning="hive").to_table(
        columns=["api_key", "api_version", "status"]
    )
    ok = Counter(
        (k, v)
        for k, v, s in zip(*(requests[c].to_pylist() for c in ("api_key", "api_version", "status")))
        if s == "ok"
    )
    import generated

    decoded = {
        (r["api"], r["version"]): r["frames"] - r["errors"] for r in names["per_api"].collect()
    }
    assert decoded == {(generated.REGISTRY[k].name, v): n for (k, v), n in ok.items()}
    groups = {
        r["group_id"] for r in names["joins"].groupBy("join_group.group_id").count().collect()
    }
    assert "g-gt-kill" in groups
    assigned = names["assigned"].collect()
    assert assigned and all(r["topic"] and r["partitions"] for r in assigned)
