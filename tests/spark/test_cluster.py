"""The decode job on a real Spark standalone cluster (one master, two workers on 127.0.0.1).

kwire gets to the workers the way Spark documents for Python dependencies: its wheel, built from
this checkout, is installed in the workers' Python (a fresh venv that cannot see the checkout;
PYSPARK_PYTHON names it). The job is submitted by that venv's own `kwire decode`, from a
directory outside the checkout, with --master spark://...; the executors say which kwire they
imported (it must be the venv's) and with which readers (compiled when the wheel has them). The
output must equal the local run's, row for row.

How Spark spreads tasks over executors is its own business (a small Parquet file is one input
split, so a stage can have a single task), so the test does not count executors: it gives the job
several input files and checks that tasks ran on the cluster's executors. Two real captures go in
too, so the capture step (files read by the executors in byte ranges of 64 kB, segments
regrouped by flow) runs on the cluster and its frames table must equal the one the single process
reads locally; they are named by a path relative to where the job starts, which is not where the
executors run. Last, the same cluster's workers run a
Python without kwire, and the job must stop with one line that says how to fix it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pyspark
import pytest
from pyspark.sql import SparkSession

from benchmarks import synth
from generated import _runtime
from kwire import job
from tests import wheelhouse
from tests.lifetime import archive_options, dies_with_parent

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
# A guard against a hung cluster, not a speed check: the test takes 30-90 s on 2 cores.
DEADLINE_S = 300


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _free_ports(n: int) -> list[int]:
    """n free loopback ports, all different (each socket held until all are bound)."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in held]
    finally:
        for s in held:
            s.close()


def _executors(base: Path) -> list[Path]:
    """The executor directories the workers made (worker-N/app-ID/EXECUTOR-ID)."""
    return sorted(p for p in base.glob("worker-*/app-*/*") if p.is_dir())


def _ran_tasks(executor: Path) -> bool:
    err = executor / "stderr"
    return err.exists() and "Running task" in err.read_text(errors="replace")


class Cluster:
    """A standalone master and workers, each spark-class process in its own process group so
    that stopping it also stops the executors and Python workers it started."""

    def __init__(self, base: Path, python: Path, workers: int = 2):
        self.base = base
        self.python = python
        self.port, self.ui_port, *self.worker_ui_ports = _free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []
        self.env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": str(self.python),
            # The master and workers start from the suite's class archive (tests/conftest.py)
            # when there is one: their class path is the drivers'.
            "SPARK_DAEMON_JAVA_OPTS": archive_options(),
        }
        self.workers = workers

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.base / f"{name}.log"
        self.logs.append(log)
        with open(log, "wb") as out:
            self.procs.append(
                subprocess.Popen(
                    dies_with_parent([str(SPARK_HOME / "bin" / "spark-class"), *args]),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.base,
                    start_new_session=True,
                )
            )

    def start(self, timeout: float) -> None:
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.ui_port),
            ],
        )  # fmt: skip
        for i in range(self.workers):
            work = self.base / f"worker-{i}"
            work.mkdir()
            self._spawn(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1",
                    "--cores", "1",
                    "--memory", "1g",
                    "--webui-port", str(self.worker_ui_ports[i]),
                    "--work-dir", str(work),
                    self.url,
                ],
            )  # fmt: skip
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited early:\n{self.tail()}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.ui_port}/json/", timeout=2
                ) as r:
                    state = json.load(r)
                if state.get("aliveworkers", 0) >= self.workers:
                    return
            except OSError:
                pass
            except ValueError:
                # The master's UI answered /json/ with its HTML page once, a second after it
                # bound, while both workers had registered (2026-12-03): not ready yet.
                pass
            time.sleep(0.5)
        raise RuntimeError(f"workers did not register within {timeout:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        end = time.monotonic() + 15
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        # Executors and Python workers live in the daemons' process groups: make sure they went.
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def tail(self, n: int = 3000) -> str:
        return "\n".join(
            f"--- {log.name}\n{log.read_text(errors='replace')[-n:]}"
            for log in self.logs
            if log.exists()
        )


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster whose workers' Python is a venv with kwire's wheel."""
    if _java() is None:
        pytest.skip("Java is not installed: a standalone Spark cluster needs a JVM")
    base = tmp_path_factory.mktemp("cluster")
    wheel = wheelhouse.build_wheel(base / "dist")
    assert wheelhouse.top_level(wheel) == {"kwire", "generator", "generated"}
    python = wheelhouse.install(wheel, base / "worker-venv")
    c = Cluster(base, python)
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.stop()


def _rows(spark: SparkSession, path: Path, prefix: tuple[str, str] = ("", "")) -> list[Any]:
    """A table's rows in an order of their own (Spark's row order is its business), with
    `source_file` values starting with prefix[0] starting with prefix[1] instead."""
    rows = [r.asDict(recursive=True) for r in spark.read.parquet(str(path)).collect()]
    old, new = prefix
    for r in rows:
        name = r.get("source_file")
        if old and isinstance(name, str) and name.startswith(old):
            r["source_file"] = new + name[len(old) :]
    return sorted(rows, key=repr)


@pytest.mark.long(73)
def test_cluster_output_equals_local(cluster: Cluster, spark: SparkSession, tmp_path: Path) -> None:
    start = time.monotonic()
    frames = tmp_path / "frames.parquet"
    # Several files, so the stage has several tasks (one small file is one split, one task).
    table = synth.frames_table()
    frames.mkdir()
    parts = 6
    step = -(-table.num_rows // parts)
    for i in range(parts):
        pq.write_table(table.slice(i * step, step), frames / f"part-{i}.parquet")
    # And captures: the capture step runs on the cluster's executors too.
    captures = tmp_path / "captures"
    captures.mkdir()
    for name in ("mock_group_classic.pcap", "tansu_admin_groups.pcapng"):
        shutil.copyfile(ROOT / "tests" / "data" / "capture" / name, captures / name)
    local = tmp_path / "local"
    inputs = [str(frames), str(captures)]
    # The reference reads the captures in one process; the cluster reads them in ranges of
    # 64 kB, so both captures are cut into several ranges read by both workers.
    reference = [*inputs, "-o", str(local), "--no-summary", "--no-groups", "--no-delivery"]
    reference += ["--capture-on", "driver"]
    job.run(job.parse_args(reference), spark=spark)

    remote = tmp_path / "cluster"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # The captures named by a path relative to where the job is started: the executors' own
    # working directories are elsewhere (a worker's work directory), yet they must read them.
    relative = os.path.join("..", "captures")
    # Faults on the way (kwire.spark.faults): the first Python worker to decode responses is
    # SIGKILLed, as the OOM killer would; the first to explode records kills its whole worker
    # (executor JVM and Worker daemon), as a lost machine would. The output must not change.
    faults = tmp_path / "faults"
    faults.mkdir()
    cmd = [
        str(cluster.python), "-m", "kwire", "decode", str(frames), relative, "-o", str(remote),
        "--master", cluster.url,
        "--conf", "spark.executor.memory=512m",
        "--conf", "spark.executor.cores=1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.executorEnv.KWIRE_FAULTS=decode-responses,records:worker",
        "--conf", f"spark.executorEnv.KWIRE_FAULTS_DIR={faults}",
        "--no-summary", "--no-groups", "--no-delivery", "--capture-on", "spark", "--split-size", "64k",
    ]  # fmt: skip
    left = DEADLINE_S - (time.monotonic() - start)
    env = {k: v for k, v in cluster.env.items() if k not in ("PYTHONPATH", "KWIRE_NATIVE_DIR")}
    result = subprocess.run(cmd, cwd=outside, capture_output=True, text=True, timeout=left, env=env)
    assert result.returncode == 0, result.stderr[-4000:] + cluster.tail()
    said = result.stdout + result.stderr
    venv = (cluster.base / "worker-venv").resolve()
    readers = "compiled" if _runtime._INSTALLED else "python"
    assert f"readers on the executors: {readers} (kwire from {venv}/" in said, said[-3000:]

    # The tasks ran on the cluster's executors, whose Python had kwire only from the wheel.
    executors = _executors(cluster.base)
    working = [e for e in executors if _ran_tasks(e)]
    assert working, f"no executor ran a task: {executors}\n{cluster.tail()}"
    # Executors of one core compile with C1 alone (kwire.spark.session), as the job said.
    assert "C1 JIT on the driver and the executors" in said, said[:2000]
    launched = (working[0] / "stderr").read_text(errors="replace")
    assert "-XX:TieredStopAtLevel=1" in launched, launched[:3000]
    # Both faults happened, and one worker is gone for good.
    assert (faults / "fault-decode-responses").exists()
    killed = (faults / "fault-records").read_text()
    assert killed.startswith("killed worker"), killed
    assert sum(p.poll() is None for p in cluster.procs) == 2  # the master and one worker
    renamed = (relative + os.sep, str(captures) + os.sep)
    for part in ("frames.parquet", "requests", "responses", "records"):
        assert _rows(spark, remote / part, renamed) == _rows(spark, local / part), part
    captured = spark.read.parquet(str(remote / "frames.parquet"))
    assert captured.count() > 300 and captured.where("error IS NOT NULL").count() < 10
    # The frames name their files as the command line did.
    named = {r.source_file for r in captured.select("source_file").distinct().collect()}
    assert os.path.join(relative, "mock_group_classic.pcap") in named, named

    # The same cluster with workers whose Python lacks kwire (one cluster for both: starting
    # another costs most of a minute).
    _executors_without_kwire_get_one_line(cluster, tmp_path)


def _executors_without_kwire_get_one_line(cluster: Cluster, tmp_path: Path) -> None:
    """Workers whose Python lacks kwire: the job stops at once with a line that says how to fix
    it, not a Java stack trace."""
    tmp_path = tmp_path / "without-kwire"
    tmp_path.mkdir()
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    frames = tmp_path / "frames.parquet"
    pq.write_table(synth.frames_table().slice(0, 50), frames)
    cmd = [
        str(cluster.python), "-m", "kwire", "decode", str(frames), "-o", str(tmp_path / "out"),
        "--master", cluster.url, "--conf", "spark.executor.memory=512m", "--quiet",
        "--conf", "spark.task.maxFailures=1",
    ]  # fmt: skip
    env = {**cluster.env, "PYSPARK_PYTHON": str(bare / "bin" / "python")}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S, env=env
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "the executors' Python cannot import" in result.stderr, result.stderr[-3000:]
    assert "docs/cluster.md" in result.stderr and "Traceback" not in result.stderr
