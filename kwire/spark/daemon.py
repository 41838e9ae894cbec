"""Spark's Python daemon (pyspark.daemon), quiet when the JVM closes a worker's socket, and quick
to start workers.

kwire's sessions name this module in `spark.python.daemon.module`. It runs pyspark's own daemon
unchanged but for three things:
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

        daemon.worker = worker  # the name the daemon's manager calls in each forked child
    daemon.manager()


if __name__ == "__main__":
    main()
