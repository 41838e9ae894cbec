"""Fault injection, for the fault tests: a Python worker that kills itself, or its whole Spark
worker, at a named place in the job, the way the OOM killer or a lost machine would.

Off unless KWIRE_FAULTS is set (one environment lookup per batch otherwise). KWIRE_FAULTS is a
comma-separated list of PLACE or PLACE:worker; PLACE is one of PLACES. The first batch of a
place that gets there SIGKILLs its own Python process (PLACE), the executor JVM and the
standalone Worker that launched it (PLACE:worker), or the JVM that runs its task (PLACE:jvm: on a
local master the driver's own, as the OOM killer or an OutOfMemoryError exit would end it); every
later batch, retries included, goes on.
"First" is decided by a marker file created exclusively in KWIRE_FAULTS_DIR, so it holds across
the processes of one machine (local mode, or a test cluster on 127.0.0.1); the markers also tell
a test that the fault really happened. On a cluster, give the executors the variables with
--conf spark.executorEnv.KWIRE_FAULTS=... (and ..._DIR).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

# "share": the share groups' pass (kwire.groups.share_build), the group tables' one step still
# in Python workers (each group's history runs on the driver: kwire.groups.protocol).
PLACES = ("capture", "decode-requests", "decode-responses", "records", "share")
# kwire live's driver, between two tables' commits of a micro-batch (PLACE only: the driver).
LIVE_PLACES = ("live-commit",)


def fault_point(place: str) -> None:
    """Dies here if KWIRE_FAULTS asks for it and nobody died here before (see the module)."""
    spec = os.environ.get("KWIRE_FAULTS")
    if not spec:
        return
    wanted = dict(item.partition(":")[::2] for item in spec.split(",") if item)
    if place not in wanted:
        return
    marker = Path(os.environ.get("KWIRE_FAULTS_DIR", ".")) / f"fault-{place}"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    if wanted[place] == "worker":
        executor = _ancestor("CoarseGrainedExecutorBackend")
        worker = _ancestor("org.apache.spark.deploy.worker.Worker", start=executor)
        if executor is None or worker is None:
            marker.write_text("no standalone worker above this process: nothing killed\n")
            return
        marker.write_text(f"killed worker {worker} and executor {executor}\n")
        os.kill(worker, signal.SIGKILL)
        os.kill(executor, signal.SIGKILL)
        return
    if wanted[place] == "jvm":
        jvm = _ancestor("CoarseGrainedExecutorBackend") or _ancestor(
            "org.apache.spark.deploy.SparkSubmit"
        )
        if jvm is None:
            marker.write_text("no Spark JVM above this process: nothing killed\n")
            return
        marker.write_text(f"killed the JVM {jvm}\n")
        os.kill(jvm, signal.SIGKILL)
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _ancestor(needle: str, start: int | None = None) -> int | None:
    """The nearest ancestor process (of `start`, else of this one) whose command line holds
    `needle`; Linux /proc only."""
    pid = os.getppid() if start is None else _parent(start)
    while pid and pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if needle.encode() in cmdline:
            return pid
        pid = _parent(pid)
    return None


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
    return int(stat.rpartition(")")[2].split()[1])
