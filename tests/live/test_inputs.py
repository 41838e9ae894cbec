"""The live batches' inputs merged for the group rebuild (kwire.live.inputs): which files merge,
which a reader takes, and a merge a crash interrupted. The merge's writer here is pyarrow's
(kwire live's is Spark's, exercised by tests/live/test_live.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kwire.live import inputs
from kwire.live.inputs import FANOUT


def _batch(table: Path, n: int) -> None:
    pq.write_table(pa.table({"batch": [n, n]}), table / f"b{n:09d}-part-00000-x.snappy.parquet")


def _write(files: list[str], into: str) -> None:
    os.makedirs(into)
    pq.write_table(pa.concat_tables(pq.read_table(f) for f in files), f"{into}/part-0.parquet")


def _now(swap: Callable[[], None]) -> None:
    swap()


def _rows(table: Path) -> list[int]:
    read = [pq.read_table(table / p.name) for p in inputs.live_parts(str(table))]
    return sorted(b for t in read for b in t["batch"].to_pylist())


def _merge_all(table: Path, committed: set[str], scratch: Path) -> list[str]:
    made = []
    while (group := inputs.due(str(table), committed)) is not None:
        made.append(inputs.merge(str(table), group, _write, str(scratch), _now))
    return made


def test_committed_batches_merge_by_fanout_and_tier(tmp_path: Path) -> None:
    table = tmp_path / "requests"
    table.mkdir()
    n = FANOUT * FANOUT + 3
    for i in range(n):
        _batch(table, i)
    # The last batch is not committed yet (a batch moves its inputs in before its log).
    committed = {f"{i:09d}" for i in range(n - 1)}
    made = _merge_all(table, committed, tmp_path / "scratch")
    # FANOUT merges of FANOUT batches, then one of those FANOUT merged files.
    assert len(made) == FANOUT + 1
    assert made[-1] == f"m{0:09d}-{FANOUT * FANOUT - 1:09d}.parquet"
    names = sorted(p.name for p in inputs.live_parts(str(table)))
    assert names == sorted(
        [made[-1]] + [f"b{i:09d}-part-00000-x.snappy.parquet" for i in range(64, n)]
    )
    # Every batch's rows once, and nothing left but what a reader takes.
    assert _rows(table) == sorted(b for i in range(n) for b in (i, i))
    assert sorted(os.listdir(table)) == names


def test_a_gap_in_the_committed_batches_stops_the_merge_there(tmp_path: Path) -> None:
    table = tmp_path / "records"
    table.mkdir()
    for i in range(2 * FANOUT):
        _batch(table, i)
    committed = {f"{i:09d}" for i in range(2 * FANOUT) if i != 3}
    assert inputs.due(str(table), committed) is None


def test_a_merge_interrupted_before_its_removals_is_read_once_and_tidied(tmp_path: Path) -> None:
    table = tmp_path / "responses"
    table.mkdir()
    for i in range(FANOUT + 1):
        _batch(table, i)
    committed = {f"{i:09d}" for i in range(FANOUT + 1)}
    group = inputs.due(str(table), committed)
    assert group is not None and [p.first for p in group] == [f"{i:09d}" for i in range(FANOUT)]

    def crash(swap: Callable[[], None]) -> None:
        # The merged file moved in, then the process died before removing what it holds.
        files = sorted(os.listdir(tmp_path / "scratch"))
        os.replace(tmp_path / "scratch" / files[0], table / f"m{0:09d}-{FANOUT - 1:09d}.parquet")

    inputs.merge(str(table), group, _write, str(tmp_path / "scratch"), crash)
    assert len(os.listdir(table)) == FANOUT + 2  # the merged file beside all it holds
    assert _rows(table) == sorted(b for i in range(FANOUT + 1) for b in (i, i))
    assert inputs.tidy(str(table)) == FANOUT
    assert sorted(os.listdir(table)) == sorted(p.name for p in inputs.live_parts(str(table)))
    assert _rows(table) == sorted(b for i in range(FANOUT + 1) for b in (i, i))
