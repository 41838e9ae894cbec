"""Faults survived, nothing lost: the decode job against killed workers, a killed job, a full disk.

- A job killed midway leaves no manifest: `kwire groups` and `kwire report` refuse that OUT in
  one line; run again over its remains with --overwrite, it is the module's reference.
- Python workers SIGKILLed (as the OOM killer does) mid-decode, mid-records and in the share groups' pass cost
  a task retry on the default local master (local[*,4]), and the output on a fresh OUT equals
  the reference table for table: a fault that lost or doubled rows, or a re-run over remains
  that kept stale files, fails there. The kills are real: kwire.spark.faults has each place's
  first batch kill its own process, and leaves a marker that says it did.
- An output that cannot be written, or whose disk is full, is one line naming the place.

The standalone cluster's faults (a Python worker, a whole worker) are in test_cluster.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from kwire import job
from kwire.groups import story
from kwire.groups.story import StoryError
from kwire.spark.faults import PLACES
from tests.checks import out_tables as _tables

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
# A classic group with its rebalances, records from kafka-python and share consumers: every stage
# has work, the share groups' pass (a place of its own) included.
CAPTURES = [
    DATA / "mock_group_classic.pcap",
    DATA / "mock_records_kafka_python.pcap",
    DATA / "mock_share_locks.pcap",
]
# The jobs here are about faults, not OUT/delivery (tests/spark/test_job.py checks that).
QUIET = ("--no-summary", "--no-delivery", "-q")
DEADLINE_S = 400  # a guard against a hung job, not a speed check
# One worker runs them all, so the undisturbed reference run is made once.
pytestmark = pytest.mark.xdist_group("faults")


def _kwire(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kwire", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        **kw,
    )


@pytest.fixture(scope="module")
def killed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A job killed (the driver, its JVM and Python workers) once its first decoded table is in;
    what `kwire groups` and `kwire report` said of its OUT and what a run without --overwrite
    said; then the job run again over the remains with --overwrite, on the tests' shared session.
    That re-run is the module's reference: test_killed_python_workers_cost_a_retry_not_the_job
    runs the job on a fresh OUT and compares every table with it, so a re-run over remains that
    differs from a fresh run fails there (one job fewer than a separate undisturbed run)."""
    out = tmp_path_factory.mktemp("faults") / "reference"
    proc = _kwire(
        *map(str, CAPTURES), "-o", str(out), "-q", "--no-delivery", start_new_session=True
    )
    try:
        end = time.monotonic() + DEADLINE_S
        while not (out / "requests" / "_SUCCESS").exists():
            assert proc.poll() is None, proc.communicate()[1][-4000:]
            assert time.monotonic() < end, "the job wrote no table in time"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    seen: dict[str, Any] = {
        "remains": (out / "requests" / "_SUCCESS").exists(),
        "manifest": (out / "manifest.json").exists(),
        "told": {},
    }
    for command in ("groups", "report"):
        told = _kwire(command, str(out))
        said, err = told.communicate(timeout=120)
        seen["told"][command] = (told.returncode, said, err)
    args = [*map(str, CAPTURES), "-o", str(out), *QUIET]
    with pytest.raises(job.JobError) as refused:
        job.run(job.parse_args(args), spark)
    seen["refused"] = str(refused.value)
    job.run(job.parse_args([*args, "--overwrite"]), spark)
    seen["out"] = out
    return seen


@pytest.fixture(scope="module")
def reference(killed: dict[str, Any]) -> Path:
    out: Path = killed["out"]
    return out


def test_killed_python_workers_cost_a_retry_not_the_job(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    places = [p for p in PLACES if p != "capture"]  # small captures are read on the driver
    env = {"KWIRE_FAULTS": ",".join(places), "KWIRE_FAULTS_DIR": str(tmp_path)}
    proc = _kwire(*map(str, CAPTURES), "-o", str(out), *QUIET, env=env)
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err[-4000:]
    # Each place's first batch really was killed (the marker is made just before the kill).
    assert sorted(p.name for p in tmp_path.glob("fault-*")) == sorted(f"fault-{p}" for p in places)
    assert _tables(out) == _tables(reference)


def test_a_killed_job_leaves_an_incomplete_out_that_readers_refuse(
    killed: dict[str, Any],
) -> None:
    assert killed["remains"] and not killed["manifest"]
    for command, (code, said, err) in killed["told"].items():
        assert code == 2 and said == "", (command, said, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "is incomplete: it has no manifest.json" in err and "--overwrite" in err, err
    assert "exists; give --overwrite" in killed["refused"]
    # Written again over the remains with --overwrite: the module's reference, which the run
    # with killed workers on a fresh OUT equals table for table (the test above).
    assert story.load(killed["out"])


def test_stories_refuse_an_out_whose_run_had_no_group_tables(
    reference: Path, tmp_path: Path
) -> None:
    """An --overwrite run with --no-groups over a full OUT leaves the old group tables in place,
    but its manifest does not list them: the stories refuse rather than tell an old run's."""
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    body = json.loads((out / "manifest.json").read_text())
    body["tables"] = {k: v for k, v in body["tables"].items() if not k.startswith("groups/")}
    (out / "manifest.json").write_text(json.dumps(body))
    with pytest.raises(StoryError, match="has no groups/generations: the job that wrote it ran "):
        story.load(out)
    assert story.load(reference)  # the reference's own manifest lists them


def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    proc = _kwire(str(CAPTURES[0]), "-o", str(blocker / "out"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        f"kwire decode: error: cannot write the output {blocker / 'out'}: Not a directory"
    ]


def test_a_full_disk_is_one_line(tmp_path: Path) -> None:
    """The output on a 256 kB tmpfs (a mount namespace of its own: needs root and unshare)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to mount a small tmpfs in a namespace of its own")
    small = tmp_path / "small"
    small.mkdir()
    script = (
        f"mount -t tmpfs -o size=256k kwire-full {small} && exec {sys.executable} -m kwire "
        f"{CAPTURES[1]} -o {small / 'out'} --no-groups -q"
    )
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=256k kwire-probe {small}"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()}")
    result = subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        cwd=ROOT,
    )
    assert result.returncode == 2, result.stderr[-4000:]
    # Spark's own log keeps the failed tasks' Java traces; kwire says what happened in one line,
    # its last, with no Python traceback.
    lines = [line for line in result.stderr.splitlines() if line.startswith("kwire decode:")]
    expected = f"kwire decode: error: no space left on the device of {small / 'out'}"
    assert lines == [expected], result.stderr[-4000:]
    assert result.stderr.rstrip().endswith(expected) and "Traceback" not in result.stderr


def test_a_dead_jvm_is_one_line_that_says_how_it_died(tmp_path: Path) -> None:
    """The driver's JVM SIGKILLed mid-decode (as the OOM killer would; a heap exhausted ends it
    with Spark's exit code 52): kwire says the JVM is gone and how, in one line with no Python
    traceback (not py4j's lost connection, nor pyspark's accumulator thread's EOFError), and
    OUT has no manifest."""
    out = tmp_path / "out"
    env = {"KWIRE_FAULTS": "decode-requests:jvm", "KWIRE_FAULTS_DIR": str(tmp_path)}
    proc = _kwire(str(CAPTURES[0]), "-o", str(out), *QUIET, env=env)
    _, err = proc.communicate(timeout=DEADLINE_S)
    marker = (tmp_path / "fault-decode-requests").read_text()
    assert marker.startswith("killed the JVM "), marker
    pid = marker.split()[-1]
    assert proc.returncode == 1, err[-4000:]
    lines = [line for line in err.splitlines() if line.startswith("kwire decode:")]
    assert lines == [
        f"kwire decode: failed: the Spark JVM (pid {pid}) is gone (signal 9): killed by SIGKILL: "
        "the kernel's out-of-memory killer (see `dmesg`) or a `kill -9` "
        "(KWIRE_TRACEBACK=1 shows the traceback)"
    ], err[-4000:]
    assert "Traceback" not in err and "EOFError" not in err, err[-4000:]
    assert not (out / "manifest.json").exists()
