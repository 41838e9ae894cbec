"""Servers the tests start (a Spark Connect server, a standalone master and workers) run in
sessions of their own, so that stopping one stops what it started; a fixture stops them when the
tests end. When the test process is killed instead (a timeout, `kill`), no fixture runs: each
server is also asked to get SIGTERM when the process that started it dies (util-linux's
`setpriv --pdeathsig`, kept across the exec of spark-submit and of the JVM), so a killed test
run leaves no JVM behind holding memory and cores."""

from __future__ import annotations

import shutil


def dies_with_parent(command: list[str]) -> list[str]:
    """`command`, run so that it gets SIGTERM when the thread that starts it (a test worker's
    main thread: pytest runs tests there) ends; `command` itself where setpriv is missing."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return command
    return [setpriv, "--pdeathsig", "TERM", "--", *command]
