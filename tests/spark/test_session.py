"""What kwire says when the Spark JVM it started is gone (kwire.spark.session.jvm_exit), told from
real processes' exit statuses: Spark's exit on OutOfMemoryError (52), SIGKILL, another signal, an
ordinary exit, and a JVM that still runs."""

from __future__ import annotations

import logging
import subprocess
import types
from typing import Callable, Iterator

import pytest
from py4j.protocol import Py4JNetworkError
from pyspark import SparkContext

from kwire.spark import session

Start = Callable[[str], "subprocess.Popen[bytes]"]


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Start]:
    """Starts a process to stand in for the JVM pyspark started (the gateway's process)."""
    procs: list[subprocess.Popen[bytes]] = []
    gateway = types.SimpleNamespace(proc=None)
    monkeypatch.setattr(SparkContext, "_gateway", gateway)

    def run(script: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sh", "-c", script])
        procs.append(proc)
        gateway.proc = proc
        return proc

    yield run
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    "script, said",
    [
        ("exit 52", "(exit code 52): Spark's exit when the JVM runs out of heap"),
        ("kill -9 $$", "(signal 9): killed by SIGKILL: the kernel's out-of-memory killer"),
        ("kill -TERM $$", "(signal 15): killed by SIGTERM"),
        ("exit 3", "(exit code 3): Spark's lines above say why"),
    ],
)
def test_a_jvm_that_died_is_told_by_its_exit_status(start: Start, script: str, said: str) -> None:
    proc = start(script)
    told = session.jvm_exit(Py4JNetworkError("Answer from Java side is empty"), wait_s=30)
    assert told is not None and told.startswith(f"the Spark JVM (pid {proc.pid}) is gone {said}")


def test_the_heap_advice_names_the_setting_that_raises_it(start: Start) -> None:
    start("exit 52")
    told = session.jvm_exit(ConnectionResetError(), wait_s=30)
    assert told is not None and "--conf spark.driver.memory=2g" in told, told


def test_a_running_jvm_is_not_news(start: Start) -> None:
    start("sleep 60")
    # A lost connection waits for the JVM to be seen gone, then gives up; any other error
    # looks once.
    assert session.jvm_exit(EOFError(), wait_s=0.2) is None
    assert session.jvm_exit(ValueError("a Spark failure"), wait_s=30) is None


def test_a_lost_connection_found_in_the_chain(start: Start) -> None:
    """py4j's error is often the cause of the one the job raises."""
    proc = start("exit 52")
    try:
        try:
            raise Py4JNetworkError("Error while sending or receiving")
        except Py4JNetworkError as lost:
            raise RuntimeError("the step failed") from lost
    except RuntimeError as e:
        told = session.jvm_exit(e, wait_s=30)
    assert told is not None and told.startswith(f"the Spark JVM (pid {proc.pid}) is gone"), told


def test_no_jvm_started_by_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under spark-submit the JVM started Python, and pyspark holds no process for it."""
    monkeypatch.setattr(SparkContext, "_gateway", None)
    assert session.jvm_exit(EOFError(), wait_s=0.2) is None


def test_py4js_log_of_a_lost_connection_is_dropped_and_other_errors_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """py4j logs the command in flight when the JVM died ("Exception while sending command.",
    with its traceback, on the root logger); kwire's sessions drop that one, as the job's own
    line says the JVM is gone. The same message for any other error still shows."""
    root = logging.getLogger()
    had = session._LOST_JVM_FILTER in root.filters
    root.addFilter(session._LOST_JVM_FILTER)
    try:
        with caplog.at_level(logging.INFO):
            for error in (Py4JNetworkError("Error while sending or receiving"), ValueError("x")):
                try:
                    raise error
                except Exception:
                    logging.exception("Exception while sending command.")
    finally:
        if not had:
            root.removeFilter(session._LOST_JVM_FILTER)
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ValueError]
