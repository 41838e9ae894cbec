"""Where a decode job's seconds go, step by step: `kwire decode` run with its steps one at a time
(the job runs them side by side, so their own lines overlap), each step's wall seconds printed,
slowest first, and written as JSON.

    .venv/bin/python -m benchmarks.steps [--json FILE] [--side-by-side] -- RING -o OUT -p PORTS

Everything after `--` is `kwire decode`'s arguments. One at a time, a step's seconds are its own
(on a busy host still only as steady as the host); `--side-by-side` keeps the job's own
concurrency, for the total it really takes, and prints when each step began and ended (seconds
from the job's start) in the order they ended: the last ones are the job's critical path.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: python -m benchmarks.steps [--json FILE] [--side-by-side] -- ARGS")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m benchmarks.steps")
    parser.add_argument("--json", type=Path, help="write the seconds here")
    parser.add_argument("--side-by-side", action="store_true", help="the job's own concurrency")
    args = parser.parse_args(argv[:split])
    job = argv[split + 1 :]

    import kwire.spark.steps as steps

    seconds: dict[str, float] = {}
    started: dict[str, float] = {}
    lock = threading.Lock()
    begin, end, init = steps.Steps._begin, steps.Steps._end, steps.Steps.__init__

    def timed_begin(self: Any, name: str) -> None:
        with lock:
            started[name] = time.monotonic()
        begin(self, name)

    def timed_end(self: Any, name: str) -> None:
        end(self, name)
        with lock:
            seconds[name] = round(time.monotonic() - started[name], 2)

    def one_at_a_time(self: Any, spark: Any, progress: Any = None, workers: int = 1) -> None:
        init(self, spark, progress, 1)

    steps.Steps._begin, steps.Steps._end = timed_begin, timed_end  # type: ignore[method-assign]
    if not args.side_by_side:
        steps.Steps.__init__ = one_at_a_time  # type: ignore[method-assign]
    from kwire.cli import main as kwire

    t = time.monotonic()
    rc = kwire(["decode", *job])
    began = {name: round(at - t, 2) for name, at in started.items()}
    total = round(time.monotonic() - t, 2)
    print(
        f"{total:8.2f}  the whole job ({'side by side' if args.side_by_side else 'one step at a time'})"
    )
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{s:8.2f}  {name}")
    if args.side_by_side:
        print("   began    ended  step (in the order they ended)")
        for name in sorted(seconds, key=lambda n: began[n] + seconds[n]):
            print(f"{began[name]:8.2f} {began[name] + seconds[name]:8.2f}  {name}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "job": job,
                    "side_by_side": args.side_by_side,
                    "total": total,
                    "steps": seconds,
                    "began": began,
                },
                indent=2,
            )
            + "\n"
        )
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
