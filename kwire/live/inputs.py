"""What each `kwire live` batch keeps for the group rebuild (OUT/_live/inputs/<table>/: its
requests, responses and records narrowed, kwire.pipeline.derived_inputs), and their compaction.

Each batch moves in one file per table, `b<tag>-part-...parquet`. A rebuild reads every committed
batch's: Spark pays per file read (on the 40 files of a 0.61 GB ring, the responses' read took
1.27 s, the same rows in one file 0.22 s), so the rebuild's reads grew with the run's batches.
Committed batches' files are therefore merged, `FANOUT` at a time, into one file named by the
first and last batch it holds, `m<first>-<last>.parquet`; merged files are merged again once
`FANOUT` of the same tier (batches held, in powers of FANOUT) are there. A table then has at most
about FANOUT - 1 files per tier: 5 after 40 batches, at most 22 after a thousand.

Crash-safe without a log: the merged file is moved in (atomically) before the files it holds are
removed, so after a crash in between, both are there, and a file covered by a merged file is
never read (live_files()) and is removed by tidy(). Only committed batches' files are merged, and
a committed batch is never run again, so no batch's re-run (which replaces its own `b<tag>-`
files) meets a merged file.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass

FANOUT = 8
_BATCH = re.compile(r"^b(\d{9}e?)-.*\.parquet$")
_MERGED = re.compile(r"^m(\d{9}e?)-(\d{9}e?)\.parquet$")


@dataclass(frozen=True)
class Part:
    """One file of a table's inputs and the batches (tags) it holds, first to last."""

    name: str
    first: str
    last: str
    batches: int

    @property
    def tier(self) -> int:
        return int(math.log(self.batches, FANOUT) + 1e-9) if self.batches > 1 else 0

    def covers(self, other: Part) -> bool:
        return self is not other and self.first <= other.first and other.last <= self.last


def _number(tag: str) -> int:
    return int(tag.rstrip("e"))


def parts(table_dir: str) -> list[Part]:
    """Every input file of one table with the batches it holds, oldest first."""
    try:
        names = os.listdir(table_dir)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if m := _BATCH.match(name):
            out.append(Part(name, m.group(1), m.group(1), 1))
        elif m := _MERGED.match(name):
            first, last = m.group(1), m.group(2)
            out.append(Part(name, first, last, _number(last) - _number(first) + 1))
    return sorted(out, key=lambda p: (p.first, -p.batches, p.name))


def live_parts(table_dir: str) -> list[Part]:
    """The files a reader takes: those no merged file covers."""
    every = parts(table_dir)
    merged = [p for p in every if p.name.startswith("m")]
    return [p for p in every if not any(m.covers(p) for m in merged)]


def tidy(table_dir: str) -> int:
    """Removes the files that a merged file covers (left by a crash between a merge's move and
    its removals); returns how many."""
    keep = {p.name for p in live_parts(table_dir)}
    gone = 0
    for p in parts(table_dir):
        if p.name not in keep:
            os.remove(os.path.join(table_dir, p.name))
            gone += 1
    return gone


def due(table_dir: str, committed: Iterable[str]) -> list[Part] | None:
    """The oldest FANOUT consecutive files of one tier, all of committed batches, that a merge
    would make one; None when there are none."""
    done = set(committed)
    run: list[Part] = []
    for p in live_parts(table_dir):
        ok = (p.first in done and p.last in done) if p.batches == 1 else p.last in done
        if not ok:
            break
        if run and run[-1].tier != p.tier:
            run = []
        run.append(p)
        if len(run) == FANOUT:
            return run
    return None


def merge(
    table_dir: str,
    group: list[Part],
    write: Callable[[list[str], str], None],
    scratch: str,
    move: Callable[[Callable[[], None]], None],
) -> str:
    """Writes `group`'s rows as one file (`write(paths, directory)`: Spark's read of the paths,
    written as one Parquet file under the directory) in `scratch`, then, inside `move` (the
    caller's lock), moves it in and removes the files it holds. Returns its name."""
    shutil.rmtree(scratch, ignore_errors=True)
    write([os.path.join(table_dir, p.name) for p in group], scratch)
    made = [n for n in os.listdir(scratch) if n.endswith(".parquet") and not n.startswith(".")]
    if len(made) != 1:
        raise RuntimeError(f"merging {table_dir}'s inputs wrote {len(made)} files, not one")
    name = f"m{group[0].first}-{group[-1].last}.parquet"

    def swap() -> None:
        os.replace(os.path.join(scratch, made[0]), os.path.join(table_dir, name))
        for p in group:
            os.remove(os.path.join(table_dir, p.name))

    move(swap)
    shutil.rmtree(scratch, ignore_errors=True)
    return name
