"""Progress of a long Spark job on stderr: which step it is in and how far its stages got.

A background thread reads Spark's status tracker (over Spark Connect, what the server pushed to
a progress handler) every `poll` seconds and prints one line when
something changed and `every` seconds have passed since the last line (or the step changed), so
a run of an hour prints a few hundred lines, not a flood. Spark's own console bar stays off.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, TextIO


def _mb(n: float) -> str:
    if n < 1e6:
        return f"{n / 1e3:.0f} kB"
    return f"{n / 1e6:,.0f} MB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


class _Pushed:
    """The stages of the running operations as Spark Connect pushes them to a progress handler
    (SparkSession.registerProgressHandler), read as the status tracker is read: a Connect
    session has no tracker to poll."""

    def __init__(self, spark: Any) -> None:
        self._lock = threading.Lock()
        self._ops: dict[str, dict[int, Any]] = {}
        self._spark = spark
        spark.registerProgressHandler(self)

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        with self._lock:
            key = str(operation_id)
            if done:
                self._ops.pop(key, None)
            else:
                self._ops[key] = {s.stage_id: s for s in stages or ()}

    def stages(self) -> list[tuple[int, int, int, int]]:
        """(stage id, completed tasks, tasks, running tasks) of each stage not done."""
        with self._lock:
            found = [s for ops in self._ops.values() for s in ops.values() if not s.done]
        # Connect tells tasks in flight per operation, not per stage: none are shown running.
        return [(s.stage_id, s.num_completed_tasks, s.num_tasks, 0) for s in found]

    def close(self) -> None:
        try:
            self._spark.removeProgressHandler(self)
        except Exception:  # noqa: BLE001 - the session is gone: so is the handler
            pass


class _Tracked:
    """The active stages as a classic session's status tracker has them."""

    def __init__(self, spark: Any) -> None:
        self._tracker = spark.sparkContext.statusTracker()

    def stages(self) -> list[tuple[int, int, int, int]]:
        found = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                found.append((stage_id, info.numCompletedTasks, info.numTasks, info.numActiveTasks))
        return found

    def close(self) -> None:
        pass


class Progress:
    def __init__(
        self,
        spark: Any,
        out: TextIO | None = None,
        every: float = 10.0,
        poll: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from kwire.spark.driver import is_connect

        self.tracker = _Pushed(spark) if is_connect(spark) else _Tracked(spark)
        self.out = out if out is not None else sys.stderr
        self.every = every
        self.poll = poll
        self.clock = clock
        self.step = ""
        self.detail = ""
        self.step_started = clock()
        self._printed: tuple[str, str] = ("", "")
        self._last_time = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kwire-progress", daemon=True)

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.tracker.close()

    def start(self, step: str, detail: str = "") -> None:
        """A new step of the job (e.g. "capture", "decode requests")."""
        self.step, self.detail = step, detail
        self.step_started = self.clock()

    def line(self) -> str:
        """What the job is doing now, in one line."""
        return self._state()[0]

    def _state(self) -> tuple[str, tuple[str, str]]:
        parts = [
            f"stage {stage_id}: {completed}/{tasks} tasks"
            + (f" ({running} running)" if running else "")
            for stage_id, completed, tasks, running in sorted(self.tracker.stages())
        ]
        elapsed = self.clock() - self.step_started
        text = f"kwire: {self.step}"
        if self.detail:
            text += f" ({self.detail})"
        text += f", {elapsed:.0f} s"
        if parts:
            text += ": " + "; ".join(parts)
        return text, (self.step, "; ".join(parts))

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            if not self.step:
                continue
            try:
                text, state = self._state()
            except Exception:  # noqa: BLE001 - the JVM is going away: progress is not worth a trace
                return
            now = self.clock()
            new_step = state[0] != self._printed[0]
            if new_step or (state != self._printed and now - self._last_time >= self.every):
                self._printed = state
                self._last_time = now
                print(text, file=self.out, flush=True)


def size_of(path: str) -> int:
    """Bytes under a local output path (0 for remote storage: Spark knows, we do not ask)."""
    import os

    if "://" in path:
        return 0
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def describe_outputs(paths: list[tuple[str, str]]) -> str:
    """The summary's closing lines: every output with its size."""
    lines = ["outputs:"]
    for name, path in paths:
        size = size_of(path)
        lines.append(f"  {name:<26} {path}" + (f"  ({_mb(size)})" if size else ""))
    return "\n".join(lines)
