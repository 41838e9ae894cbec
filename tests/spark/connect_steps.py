"""A Spark Connect client for tests/spark/test_connect.py, run in a process of its own: kwire's
Steps on a Connect session, where a step fails while another's query runs (argv[2] "running")
or is still being planned (argv[2] "late"). Prints JSON: the error run() raised, the seconds
it took, and whether the session still answers."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

from kwire.spark.steps import Steps


def _slow(batches: Iterator[Any]) -> Iterator[Any]:  # defined here: sent by value
    import time

    for b in batches:
        time.sleep(120)  # two minutes of a task unless cancelled
        yield b


def main() -> None:
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    late = sys.argv[2] == "late"
    steps = Steps(spark)
    started, failed = threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        if late:
            failed.wait(60)
            time.sleep(1)  # the failure has been handled and its operations interrupted
        return spark.range(1, numPartitions=1).mapInArrow(_slow, "id long").count()

    def broken() -> None:
        started.wait(60)
        if not late:
            time.sleep(3)  # the slow step's query is running
        failed.set()
        raise ValueError("the decoded requests are not there")

    steps.add("slow", slow)
    steps.add("broken", broken)
    t = time.monotonic()
    try:
        steps.run()
        error = None
    except Exception as e:  # noqa: BLE001 - what run() raised is the answer
        error = f"{type(e).__name__}: {e}"
    took = time.monotonic() - t
    print(json.dumps({"error": error, "seconds": took, "after": spark.range(5).count()}))


if __name__ == "__main__":
    main()
