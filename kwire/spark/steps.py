"""A job's independent steps, run side by side on one Spark session.

The decode job is dozens of Spark queries. Between two queries of one thread the driver plans
(tens to hundreds of milliseconds each, longer for the first use of a code path) while the
executors idle, and at the end of each stage its last tasks leave cores idle. Steps whose inputs
are written are therefore submitted from threads of their own, so one step's planning and tail
overlap another's tasks; Spark's scheduler (FIFO by default) gives free cores to the older job's
tasks first, so running side by side adds no tasks at once beyond the executors' cores.

    steps = Steps(spark, progress)
    steps.add("decode requests", lambda: write(requests, ...))
    steps.add("explode records", lambda: write(records, ...), after=["decode responses"])
    results = steps.run()   # every step's return value, by name

Each step names its Spark jobs (Spark's UI, event log and history server show "kwire: <step>"),
and all of a run's jobs share one job group (over Spark Connect, one operation tag): when a
step fails, the others' jobs are cancelled,
the steps not begun are not begun, and run() raises the failed step's own error (never the
cancellations it caused). Steps must not change session settings the others' queries read:
settings a step needs are given to configure(), and hold while the steps run.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.util import inheritable_thread_target

from kwire.spark.driver import describe_jobs, is_connect
from kwire.spark.progress import Progress
from kwire.spark.session import with_conf

# How long a failed run waits for its cancelled tasks to end before raising.
SETTLE_S = 30.0
SETTLE_GRACE_S = 0.5

# Steps running at once. The executors' cores bound the tasks, not this: the rest is planning,
# which threads keep ahead of. With 4, a 313 kB capture's commits waited for a slot behind the
# seven group tables that need no records, on the job's longest chain; with 8, the share groups'
# pass (which OUT/delivery waits for) waited behind the nine group tables and the summary.
WORKERS = 12


@dataclass
class _Step:
    name: str
    run: Callable[[], Any]
    after: tuple[str, ...]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    ok: bool = False


class Steps:
    """Named steps with the steps they wait for; see the module's docstring."""

    def __init__(
        self,
        spark: SparkSession,
        progress: Progress | None = None,
        workers: int = WORKERS,
    ) -> None:
        self.spark = spark
        self.progress = progress
        self.workers = workers
        self._steps: dict[str, _Step] = {}
        self._closers: list[Callable[[], None]] = []
        self._settings: dict[str, str] = {}
        # Held briefly by the steps' own bookkeeping; steps may use it for theirs.
        self.lock = threading.Lock()
        self._running: list[str] = []
        self._error: BaseException | None = None
        self._group = f"kwire-{uuid.uuid4().hex[:12]}"
        # Each finished step's seconds, from its start (its inputs written) to its end.
        self.seconds: dict[str, float] = {}

    def add(self, name: str, run: Callable[[], Any], after: Iterable[str] = ()) -> None:
        """A step: `run` is called once every step named in `after` has finished."""
        if name in self._steps:
            raise ValueError(f"two steps named {name!r}")
        waits = tuple(after)
        unknown = [a for a in waits if a not in self._steps]
        if unknown:  # added in order, so there can be no cycle
            raise ValueError(f"step {name!r} waits for steps not added before it: {unknown}")
        self._steps[name] = _Step(name, run, waits)

    def configure(self, settings: dict[str, str]) -> None:
        """Session settings that hold while the steps run, then are put back: settings are the
        session's, not a thread's, so a step that needs some cannot set them itself while
        others run."""
        self._settings.update(settings)

    def finally_(self, close: Callable[[], None]) -> None:
        """Called after run(), whether the steps succeeded or not (in the reverse order given):
        releasing what several steps read."""
        self._closers.append(close)

    def has(self, name: str) -> bool:
        """Whether a step of that name was added."""
        return name in self._steps

    def result(self, name: str) -> Any:
        """What a finished step returned (for the steps that wait for it)."""
        step = self._steps[name]
        if not step.ok:
            raise RuntimeError(f"step {name!r} has not finished")
        return step.result

    def run(self) -> dict[str, Any]:
        """Runs every step; returns their results by name, or raises the first failure."""
        gate = threading.Semaphore(max(1, self.workers))
        # Each wrap copies the session's local properties for its own thread (setJobGroup and
        # describe() then change that thread's alone).
        threads = [
            threading.Thread(
                target=inheritable_thread_target(self.spark)(self._thread(step, gate)),
                name=f"kwire-step-{step.name}",
                daemon=True,
            )
            for step in self._steps.values()
        ]
        try:
            with with_conf(self.spark, self._settings):
                try:
                    for t in threads:
                        t.start()
                    for t in threads:
                        while t.is_alive():  # in slices, so Ctrl-C reaches this thread
                            t.join(0.2)
                            if self._error is not None:
                                # Again: Spark cancels only the jobs running when asked, and a
                                # step may submit one after (still planning its query when
                                # another failed), which would then run to its end.
                                self._cancel(only_running=True)
                except BaseException as e:
                    self._fail(e)
                    for t in threads:
                        t.join()
                    raise
        finally:
            for close in reversed(self._closers):
                close()
        if self._error is not None:
            self._settle()
            raise self._error
        return {name: step.result for name, step in self._steps.items()}

    def _thread(self, step: _Step, gate: threading.Semaphore) -> Callable[[], None]:
        def body() -> None:
            try:
                for name in step.after:
                    self._steps[name].done.wait()
                if self._error is not None or not all(self._steps[a].ok for a in step.after):
                    return
                with gate:
                    if self._error is not None:
                        return
                    self._begin(step.name)
                    started = time.monotonic()
                    try:
                        step.result = step.run()
                    finally:
                        self._end(step.name)
                    self.seconds[step.name] = time.monotonic() - started
                step.ok = True
            except BaseException as e:  # noqa: BLE001 - handed to run(), which raises it
                self._fail(e)
            finally:
                step.done.set()

        return body

    def _begin(self, name: str) -> None:
        if is_connect(self.spark):
            # The step thread's operations carry the run's tag (tags are per thread), which
            # interruptTag cancels.
            self.spark.addTag(self._group)
        else:
            sc = self.spark.sparkContext
            # Interrupted on cancel: a cancelled task stops its Python worker instead of
            # running on.
            sc.setJobGroup(self._group, f"kwire: {name}", interruptOnCancel=True)
            describe_jobs(self.spark, name)
        with self.lock:
            self._running.append(name)
            self._show()

    def _end(self, name: str) -> None:
        with self.lock:
            self._running.remove(name)
            self._show()

    def _show(self) -> None:
        if self.progress is not None and self._running:
            self.progress.start(", ".join(self._running))

    def _fail(self, error: BaseException) -> None:
        with self.lock:
            first = self._error is None
            if first:
                self._error = error
        if first:
            self._cancel()

    def _cancel(self, only_running: bool = False) -> None:
        """Cancels the run's jobs (`only_running`: if any of them runs; Spark warns of a
        cancellation that finds none)."""
        if is_connect(self.spark):
            try:
                self.spark.interruptTag(self._group)
            except Exception:  # noqa: BLE001 - the server is going away: nothing left to stop
                pass
            return
        sc = self.spark.sparkContext
        try:
            if only_running:
                tracker = sc.statusTracker()
                ours = set(tracker.getJobIdsForGroup(self._group))
                if not ours.intersection(tracker.getActiveJobsIds()):
                    return
            sc.cancelJobGroup(self._group)
        except Exception:  # noqa: BLE001 - the session is going away: nothing left to stop
            pass

    def _settle(self, timeout: float = SETTLE_S) -> None:
        """Waits (up to `timeout`) until no task runs on the executors. A cancelled job ends at
        once, its running tasks when they next look: until then they may still write under the
        job's output, and Spark logs each of them as it ends, after the error run() raises."""
        if is_connect(self.spark):
            # The server ends an interrupted operation once its jobs are cancelled, and the
            # steps' threads have seen theirs end: nothing of the client's runs on.
            return
        deadline = time.monotonic() + timeout
        try:
            jsc = self.spark.sparkContext._jsc
            assert jsc is not None
            sc = jsc.sc()
            while time.monotonic() < deadline:
                # The running tasks as Spark's listeners know them, every event so far heard:
                # a task's end reaches them after the scheduler has logged it.
                sc.listenerBus().waitUntilEmpty(int(max(0.0, deadline - time.monotonic()) * 1e3))
                if not any(e.numRunningTasks() for e in sc.statusTracker().getExecutorInfos()):
                    # The scheduler tells the listeners of a lost task as it logs it, not
                    # always after.
                    time.sleep(SETTLE_GRACE_S)
                    return
                time.sleep(0.1)
        except Exception:  # noqa: BLE001 - the session is going away, or the wait timed out
            pass
