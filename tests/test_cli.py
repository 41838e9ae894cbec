"""The `kwire` command as a user meets it: subcommands that name themselves, one meaning per
option name, exit codes (0 done, 1 the job failed, 2 bad usage or input) and one-line errors.

Everything here stops before Spark starts (bad inputs are found first) or needs no Spark; the
decode job itself is run by tests/spark, `kwire groups` and `kwire report` on its output by
tests/groups/test_story.py, and the installed wheel by `make wheel-check`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kwire import cli

ROOT = Path(__file__).resolve().parents[1]
CLASSIC = ROOT / "tests" / "data" / "capture" / "mock_group_classic.pcap"


def kwire(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -m kwire ARGS` in a process of its own (the entry point as a user runs it)."""
    return subprocess.run(
        [sys.executable, "-m", "kwire", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=120,
    )


class Said:
    def __init__(self, code: int, out: str, err: str):
        self.returncode, self.stdout, self.stderr = code, out, err


def main(capsys: pytest.CaptureFixture[str], *args: str) -> Said:
    """cli.main(ARGS) in this process (argparse's exits caught), what it printed."""
    capsys.readouterr()
    try:
        code = cli.main(list(args))
    except SystemExit as e:
        code = int(e.code or 0)
    said = capsys.readouterr()
    return Said(code, said.out, said.err)


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_help_shows_every_subcommand_and_exit_codes() -> None:
    done = kwire("--help")
    assert done.returncode == 0
    for command in ("decode", "groups", "report", "capture", "generate"):
        assert f"    {command} " in done.stdout, done.stdout
    assert "exit codes: 0 done, 1 the job failed, 2 bad usage" in done.stdout
    assert kwire("--version").stdout.startswith("kwire ")


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_each_subcommand_help_names_itself(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    done = main(capsys, command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: kwire {command} "), done.stdout[:200]


def test_shared_options_mean_the_same_everywhere() -> None:
    """Where two subcommands take an option, they take it under the same names, with the same
    parser (so `-p 9092,19092` means the same to decode and capture)."""
    seen: dict[str, tuple[tuple[str, ...], object]] = {}
    for name, parser in subparsers().items():
        for action in parser._actions:
            long = [o for o in action.option_strings if o.startswith("--")]
            if not long or long[0] == "--help":
                continue
            shape = (tuple(sorted(action.option_strings)), action.type)
            first = seen.setdefault(long[0], shape)
            assert first == shape, f"{name}: {long[0]} is {shape}, elsewhere {first}"
    wanted = {
        "decode": ["-o", "-p", "--master", "--conf", "--quiet", "--overwrite"],
        "capture": ["-o", "-p", "--quiet", "--overwrite"],
        "live": ["-o", "-p", "--master", "--conf", "--quiet"],
        "report": ["-o", "--overwrite"],
        "groups": ["-o", "--overwrite"],
        "generate": ["-o", "--quiet"],
    }
    for name, options in wanted.items():
        have = {o for a in subparsers()[name]._actions for o in a.option_strings}
        assert set(options) <= have, f"{name} lacks {set(options) - have}"


def test_inputs_without_a_subcommand_are_decode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = main(capsys, str(tmp_path / "missing.pcap"), "-o", str(tmp_path / "out"))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"kwire decode: error: {tmp_path / 'missing.pcap'}: no such file or directory"
    )


def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("not a capture")
    done = kwire("decode", str(junk), "-o", str(tmp_path / "out"))  # the entry point, whole
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"kwire decode: error: {junk}: neither a frames table (Parquet) nor a pcap/pcapng capture"
    ]
    done = main(capsys, "groups", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "is not the output of kwire decode" in done.stderr and "Traceback" not in done.stderr
    done = main(capsys, "report", str(tmp_path / "nowhere"), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_groups_report_and_capture_start_without_spark_or_the_codecs(tmp_path: Path) -> None:
    """`kwire groups`, `report` and `capture` (and `kwire --help`) read their arguments without
    importing Spark, the decode job or the 196 codec modules: a second or more of start-up
    each, for commands that need none of them."""
    heavy = ("pyspark", "generated", "kwire.job", "kwire.live.job")
    runs = (
        ["groups", str(tmp_path)],
        ["report", str(tmp_path / "nowhere")],
        ["capture", str(CLASSIC), "-o", str(tmp_path / "f.parquet"), "-q", "-p", "9092"],
        ["--help"],
    )
    for args in runs:
        code = (
            "import sys\nfrom kwire import cli\ntry:\n    cli.main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print([m for m in {heavy!r} if m in sys.modules])"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.stdout.strip().splitlines()[-1] == "[]", (args, done.stdout, done.stderr)
    assert (tmp_path / "f.parquet").read_bytes()[:4] == b"PAR1"  # the capture did run
    # The decode job's own arguments still come with it.
    done = subprocess.run(
        [sys.executable, "-c", code, "decode", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert "'kwire.job'" in done.stdout.strip().splitlines()[-1], done.stdout[-300:]


def test_bad_usage_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["decode", "x.pcap"], ["capture", "x.pcap", "-p", "99999"], ["nosuch", "--frob"]):
        done = main(capsys, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert "usage: kwire" in done.stderr and "Traceback" not in done.stderr


def test_existing_output_needs_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frames.parquet"
    out.write_bytes(b"something the user made")
    done = main(capsys, "capture", str(CLASSIC), "-o", str(out), "-q")
    assert done.returncode == 2 and "give --overwrite" in done.stderr
    assert out.read_bytes() == b"something the user made"
    done = main(capsys, "capture", str(CLASSIC), "-o", str(out), "-q", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:4] == b"PAR1"


def test_unexpected_failure_is_one_line_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(args: argparse.Namespace) -> int:
        raise RuntimeError("the executor died\n\tat org.apache.spark.SomeClass(SomeClass.java:1)")

    monkeypatch.setitem(cli.RUNNERS, "groups", boom)
    monkeypatch.delenv("KWIRE_TRACEBACK", raising=False)
    assert cli.main(["groups", "OUT"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "kwire groups: failed: RuntimeError: the executor died "
        "(KWIRE_TRACEBACK=1 shows the traceback)"
    ]
    monkeypatch.setenv("KWIRE_TRACEBACK", "1")
    assert cli.main(["groups", "OUT"]) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_generate_compiles_schemas_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    shutil.copy(ROOT / "schemas" / "HeartbeatRequest.json", schemas)
    out = tmp_path / "pkg"
    done = kwire(
        "generate", str(schemas), "-o", str(out), "--no-native", "--no-format", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (out / "heartbeat_request.py").exists() and (out / "__init__.py").exists()
    done = main(capsys, "generate", str(schemas))
    assert done.returncode == 2 and "-o/--output" in done.stderr
    broken = ROOT / "tests" / "generator" / "broken" / "tag_negative.json"
    done = main(capsys, "generate", str(broken), "-o", str(tmp_path / "no"))
    assert done.returncode == 1 and "tags cannot be negative" in done.stderr
    assert not (tmp_path / "no").exists()


def test_a_spark_failure_is_told_by_its_java_exception(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """py4j's errors say "An error occurred while calling o61.parquet."; the Java exception under
    it says what went wrong, and its first line is what the user gets."""

    class Java:
        def toString(self) -> str:
            return "org.apache.spark.SparkException: Job aborted: disk full\n\tat org.apache.X(X.java:1)"

    class Py4JJavaError(Exception):
        java_exception = Java()

    def boom(args: argparse.Namespace) -> int:
        raise Py4JJavaError("An error occurred while calling o61.parquet.\n: trace")

    monkeypatch.setitem(cli.RUNNERS, "report", boom)
    monkeypatch.delenv("KWIRE_TRACEBACK", raising=False)
    assert cli.main(["report", "OUT"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "kwire report: failed: Py4JJavaError: org.apache.spark.SparkException: Job aborted: "
        "disk full (KWIRE_TRACEBACK=1 shows the traceback)"
    ]
