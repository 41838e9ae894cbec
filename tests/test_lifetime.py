"""tests/lifetime.py: a server the tests start dies with the test process, even when that
process is killed and no fixture stops the server."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

# The parent: starts a long sleep as the tests start their servers (a session of its own, so a
# kill of the parent's group would not reach it), says its pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
from tests.lifetime import dies_with_parent
child = subprocess.Popen(dies_with_parent(["sleep", "600"]), start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def test_a_server_dies_when_the_process_that_started_it_is_killed() -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("util-linux's setpriv is not installed: servers outlive a killed test run")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, cwd=root
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        # Killed once setpriv has set the signal and become the sleep: a parent killed before
        # that (within milliseconds of starting a server) is a race no wrapper closes.
        deadline = time.monotonic() + 30
        while _comm(child) != "sleep" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _alive(child) and _comm(child) == "sleep"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived the process that started it"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)
