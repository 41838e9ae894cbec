"""Servers the tests start (a Spark Connect server, a standalone master and workers) run in
sessions of their own, so that stopping one stops what it started; a fixture stops them when the
tests end. When the test process is killed instead (a timeout, `kill`), no fixture runs: each
server is also asked to get SIGTERM when the process that started it dies (util-linux's
`setpriv --pdeathsig`, kept across the exec of spark-submit and of the JVM), so a killed test
run leaves no JVM behind holding memory and cores. They start from the suite's class archive
when there is one (archive_options)."""

from __future__ import annotations

import shutil


def dies_with_parent(command: list[str]) -> list[str]:
    """`command`, run so that it gets SIGTERM when the thread that starts it (a test worker's
    main thread: pytest runs tests there) ends; `command` itself where setpriv is missing."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return command
    return [setpriv, "--pdeathsig", "TERM", "--", *command]


def archive_options() -> str:
    """The Java options that map the suite's class archive of the driver's JVM (made by
    `make test`, found by tests/conftest.py; kwire/spark/classes.py), "" without one. The
    servers' JVMs map it as the drivers' do when their class path is the same (Spark's own
    configuration directory first, then its jars); the JVM refuses an archive made on another."""
    from kwire.spark import classes

    found = classes.plan({})
    return found.options if found.making is None else ""
