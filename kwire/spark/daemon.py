"""Spark's Python daemon (pyspark.daemon), quiet when the JVM closes a worker's socket.

kwire's sessions name this module in `spark.python.daemon.module`. It runs pyspark's own daemon
unchanged but for one case: a worker whose last flush fails because the JVM already closed its
socket (BrokenPipeError, ConnectionResetError). That happens to every task cancelled while its
Python worker is writing, which is how a failed step stops the steps running beside it
(kwire.spark.steps). pyspark's daemon then prints the flush's Python traceback on the driver's
terminal, under the one-line error kwire gives; pyspark's own worker already passes over the
same closed socket silently (pyspark.util.handle_worker_exception). The JVM knows why it closed
the socket and logs it; the worker ends as it would have, without the traceback.

Executors import this module before any task, so it needs kwire where the executors' Python
can import it: the ways docs/cluster.md gives to install kwire on a cluster all do.
"""

from __future__ import annotations

from typing import Any

from pyspark import daemon


def main() -> None:
    """pyspark's daemon, its forked workers wrapped (unwrapped if this pyspark has no
    `daemon.worker`: its daemon then runs as it is)."""
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
