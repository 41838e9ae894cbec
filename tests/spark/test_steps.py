"""kwire.spark.steps: a job's independent steps side by side on one session."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

pyspark = pytest.importorskip("pyspark")

from kwire.spark.steps import Steps  # noqa: E402


def test_steps_wait_for_their_inputs_and_give_their_results(spark):
    steps = Steps(spark)
    order: list[str] = []
    lock = threading.Lock()

    def step(name: str, value: int):
        def run() -> int:
            with lock:
                order.append(name)
            return value

        return run

    steps.add("a", step("a", 1))
    steps.add("b", lambda: steps.result("a") + 10, after=["a"])
    steps.add("c", step("c", 3), after=["a"])
    steps.add("d", lambda: steps.result("b") + steps.result("c"), after=["b", "c"])
    assert steps.run() == {"a": 1, "b": 11, "c": 3, "d": 14}
    assert order[0] == "a"


def test_independent_steps_run_at_the_same_time(spark):
    # Each step waits for the other: run one after the other, the barrier would time out.
    barrier = threading.Barrier(2, timeout=60)
    steps = Steps(spark)
    for name in ("left", "right"):
        steps.add(name, lambda: spark.range(10).count() + barrier.wait())
    results = steps.run()
    assert sorted(results.values()) == [10, 11]


def test_each_step_names_its_spark_jobs(spark):
    steps = Steps(spark)
    seen: dict[str, str | None] = {}

    def run(name: str) -> None:
        seen[name] = spark.sparkContext.getLocalProperty("spark.job.description")

    for name in ("decode requests", "decode responses"):
        steps.add(name, lambda name=name: run(name))
    steps.run()
    assert seen == {
        "decode requests": "kwire: decode requests",
        "decode responses": "kwire: decode responses",
    }


def _slow(batches):
    for batch in batches:
        time.sleep(120)
        yield batch


def test_a_failed_step_cancels_the_others_and_raises_its_own_error(spark):
    steps = Steps(spark)
    ran: list[str] = []
    closed: list[str] = []
    started = threading.Event()

    def slow() -> int:
        started.set()
        # Two minutes of a task unless cancelled.
        return spark.range(1, numPartitions=1).mapInArrow(_slow, "id long").count()

    def broken() -> None:
        started.wait(60)
        time.sleep(1)  # the slow step's job is running
        raise ValueError("the decoded requests are not there")

    steps.add("slow", slow)
    steps.add("broken", broken)
    steps.add("after broken", lambda: ran.append("after broken"), after=["broken"])
    steps.finally_(lambda: closed.append("released"))
    t = time.monotonic()
    with pytest.raises(ValueError, match="the decoded requests are not there"):
        steps.run()
    assert time.monotonic() - t < 100, "the slow step's job was not cancelled"
    assert ran == []
    assert closed == ["released"]
    # The session goes on: the cancellation was of that run's jobs only.
    assert spark.range(5).count() == 5


def test_a_job_submitted_after_another_step_failed_is_cancelled_too(spark):
    # A step still planning its query when another fails submits its job after the
    # cancellation (seen on a loaded machine: the slow job above then ran its two minutes).
    steps = Steps(spark)
    failed = threading.Event()

    def late() -> int:
        failed.wait(60)
        time.sleep(1)  # the failure has been handled and its jobs cancelled
        return spark.range(1, numPartitions=1).mapInArrow(_slow, "id long").count()

    def broken() -> None:
        failed.set()
        raise ValueError("the decoded responses are not there")

    steps.add("late", late)
    steps.add("broken", broken)
    t = time.monotonic()
    with pytest.raises(ValueError, match="the decoded responses are not there"):
        steps.run()
    assert time.monotonic() - t < 100, "the late step's job was not cancelled"
    assert spark.range(5).count() == 5


def test_steps_are_added_after_what_they_wait_for():
    steps = Steps(None)  # type: ignore[arg-type]
    steps.add("a", lambda: 1)
    with pytest.raises(ValueError, match="not added before it"):
        steps.add("b", lambda: 2, after=["c"])
    with pytest.raises(ValueError, match="two steps named"):
        steps.add("a", lambda: 3)


# A step whose Python worker writes without end, and a step that fails while it does. In a
# session of kwire's (build_session), so with kwire's Python daemon: pyspark's own prints the
# cancelled worker's BrokenPipeError traceback on the terminal, under kwire's one-line error
# (3 runs of 3 with spark.python.daemon.module=pyspark.daemon when this test was written).
_CANCELLED_WHILE_WRITING = """
import sys, time
from kwire.spark.session import build_session
from kwire.spark.steps import Steps

spark = build_session("local[2]", short=True)

def endless(batches):
    import pyarrow as pa
    batch = pa.RecordBatch.from_pydict({"x": [b"x" * 1000] * 1000})
    for _ in batches:
        while True:
            yield batch

def writing():
    df = spark.range(1, numPartitions=1).mapInArrow(endless, "x binary")
    df.write.format("noop").mode("overwrite").save()

def failing():
    time.sleep(4)  # the other step's worker is writing
    raise RuntimeError("the failing step")

steps = Steps(spark)
steps.add("writing", writing)
steps.add("failing", failing)
try:
    steps.run()
except RuntimeError as e:
    print("raised:", e, file=sys.stderr)
"""


@pytest.mark.long(11)
def test_a_worker_cancelled_while_writing_prints_no_python_traceback():
    result = subprocess.run(
        [sys.executable, "-c", _CANCELLED_WHILE_WRITING],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "raised: the failing step" in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
