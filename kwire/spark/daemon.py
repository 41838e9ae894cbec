"""Spark's Python daemon (pyspark.daemon), quiet when the JVM closes a worker's socket, and quick
to start workers.

kwire's sessions name this module in `spark.python.daemon.module`. It runs pyspark's own daemon
unchanged but for four things:
- A worker whose last flush fails because the JVM already closed its socket (BrokenPipeError,
  ConnectionResetError) ends without a traceback. That happens to every task cancelled while its
  Python worker is writing, which is how a failed step stops the steps running beside it
  (kwire.spark.steps). pyspark's daemon then prints the flush's Python traceback on the driver's
  terminal, under the one-line error kwire gives; pyspark's own worker already passes over the
  same closed socket silently (pyspark.util.handle_worker_exception). The JVM knows why it closed
  the socket and logs it.
- pyspark is imported from its installed package rather than from the copy zipped inside it.
  Spark puts `SPARK_HOME/python/lib/pyspark.zip` (and py4j's zip) first on its workers' path;
  with pyspark installed by pip, SPARK_HOME is the installed package itself, so the zip holds
  the same files, but Python keeps no compiled bytecode for a zip and compiles every module it
  imports from one again: 0.8 s for the daemon alone, and more in every worker. A zip from
  anywhere else (a Spark distribution's SPARK_HOME on a cluster) stays where Spark put it.
- The codecs are imported once, here, so every worker forked from the daemon has them.
- A worker gives back to the system what its task freed (release_memory) before it waits for
  the next task: Spark keeps workers for later tasks (spark.python.worker.reuse), and Arrow's
  memory pool (mimalloc) keeps freed pages until asked. On the churny scale ring the two workers
  sat at 450-550 MB between tasks, kept from the decoding and explosion passes, while the share
  groups' pass ran; giving it back took the job's peak from 3.73-3.75 to 3.41-3.47 GB at the
  same speed (benchmarks/results/history.md).

Executors import this module before any task, so it needs kwire where the executors' Python
can import it: the ways docs/cluster.md gives to install kwire on a cluster all do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def installed_over_zips(path: list[str]) -> list[str]:
    """`path` without the zips of pyspark and py4j that duplicate installed packages: the
    pyspark.zip inside an installed pyspark package that `path` also reaches, and the py4j zip
    beside it when the installed py4j is the zip's version."""
    from importlib import metadata

    def reached(directory: Path) -> bool:
        return any(Path(p or ".").resolve() == directory for p in path if not p.endswith(".zip"))

    def py4j_version() -> str | None:
        try:
            return metadata.version("py4j")
        except metadata.PackageNotFoundError:
            return None

    kept = []
    for entry in path:
        p = Path(entry)
        lib = p.parent
        package = lib.parent.parent  # .../site-packages/pyspark for .../pyspark/python/lib/X.zip
        bundled = (
            p.suffix == ".zip"
            and lib.name == "lib"
            and lib.parent.name == "python"
            and package.name == "pyspark"
            and (package / "__init__.py").is_file()
            and reached(package.parent.resolve())
        )
        if bundled and p.name == "pyspark.zip":
            continue
        if bundled and p.name == f"py4j-{py4j_version()}-src.zip":
            continue
        kept.append(entry)
    return kept


def _preload() -> None:
    """Imports the codecs once, in the daemon, so every worker it forks has them: a worker would
    otherwise spend about half a second importing them before its first decoding task.
    `generated` is standard library only and starts no thread (pyspark imports the worker module
    after the fork because pyarrow and numpy start threads on import, unsafe before a fork: they
    stay unimported here). A daemon that cannot import them runs as pyspark's; the workers then
    report what is missing themselves."""
    try:
        import generated  # noqa: F401
    except Exception:
        pass


# A worker whose resident memory is above this after its task gives back what it can (below it,
# the task freed little: a worker with pyarrow and the codecs imported holds 200-280 MB).
RELEASE_ABOVE = 320 * 1024 * 1024


def _resident() -> int | None:
    """This process's resident memory in bytes (None where /proc is not)."""
    import os

    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def release_memory(above: int = RELEASE_ABOVE) -> bool:
    """After a task, when the worker holds more than `above` bytes: garbage collected, Arrow's
    pool asked to return its free pages, and glibc's malloc to trim its heap. Returns whether it
    did; failures are passed over (a worker that keeps its memory still works)."""
    resident = _resident()
    if resident is None or resident <= above:
        return False
    import ctypes
    import gc

    gc.collect()
    pa = sys.modules.get("pyarrow")  # a worker that never imported it has no pool to release
    try:
        if pa is not None:
            pa.default_memory_pool().release_unused()
        trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc's; elsewhere none
        if trim is not None:
            trim(0)
    except Exception:
        pass
    return True


def main() -> None:
    """pyspark's daemon, its forked workers wrapped (unwrapped if this pyspark has no
    `daemon.worker`: its daemon then runs as it is), pyspark from its installed package and the
    codecs imported before any fork."""
    sys.path[:] = installed_over_zips(sys.path)
    _preload()
    from pyspark import daemon

    pyspark_worker = getattr(daemon, "worker", None)
    if callable(pyspark_worker):

        def worker(*args: Any, **kwargs: Any) -> Any:
            try:
                return pyspark_worker(*args, **kwargs)
            except (BrokenPipeError, ConnectionResetError):
                # A non-zero code makes the daemon's child wait for the socket to close, then
                # exit.
                return 1
            finally:
                release_memory()

        daemon.worker = worker  # the name the daemon's manager calls in each forked child
    daemon.manager()


if __name__ == "__main__":
    main()
