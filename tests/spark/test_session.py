"""What kwire says when the Spark JVM it started is gone (kwire.spark.session.jvm_exit), told from
real processes' exit statuses: Spark's exit on OutOfMemoryError (52), SIGKILL, another signal, an
ordinary exit, and a JVM that still runs."""

from __future__ import annotations

import logging
import subprocess
import types
from pathlib import Path
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


def test_the_shipped_package_imports_from_its_bytecode(tmp_path: Path) -> None:
    """kwire_zip() (what a Spark Connect server lacking kwire is sent) carries each module's
    bytecode beside its source: a Python worker importing from it compiles nothing, and
    decodes as this process does. Bytecode of another Python version (another magic number)
    is passed over for the source."""
    import sys
    import zipfile
    from importlib.util import MAGIC_NUMBER

    path = session.kwire_zip(str(tmp_path))
    names = set(zipfile.ZipFile(path).namelist())
    sources = {n for n in names if n.endswith(".py")}
    assert "kwire/spark/decode.py" in sources and "generated/__init__.py" in sources
    assert {n[:-1] for n in names if n.endswith(".pyc")} == sources
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); sys.dont_write_bytecode = True\n"
        "import generated, kwire.spark.decode\n"
        "from generated import heartbeat_request as h\n"
        "print(kwire.spark.decode.__file__)\n"
        "print(h.HeartbeatRequest.decode(bytes.fromhex('0001610000000100016d'), 0))\n"
    )

    def run(zip_path: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe, zip_path], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    where, decoded = run(path)
    assert where.split()[0].endswith(".zip/kwire/spark/decode.pyc"), where
    assert "group_id='a'" in decoded and "member_id='m'" in decoded, decoded
    # The same zip with the bytecode's magic number of no Python: the sources are compiled.
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(other, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".pyc"):
                assert data[:4] == MAGIC_NUMBER
                data = b"\x00\x00\r\n" + data[4:]
            dst.writestr(info, data)
    where, again = run(str(other))
    assert where.split()[0].endswith(".zip/kwire/spark/decode.py"), where
    assert again == decoded
