"""kwire's Python daemon (kwire/spark/daemon.py) imports pyspark from its installed package, not
from the zip Spark puts first on its workers' path: Python compiles every module imported from
a zip again, in the daemon and in each worker (0.8 s for the daemon alone)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kwire.spark import daemon


def _layout(root: Path) -> tuple[Path, Path, Path]:
    site = root / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    pyspark_zip, py4j_zip = lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip"
    pyspark_zip.write_bytes(b"")
    py4j_zip.write_bytes(b"")
    return site, pyspark_zip, py4j_zip


def test_the_zips_inside_the_installed_pyspark_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.10.9.9")
    site, pyspark_zip, py4j_zip = _layout(tmp_path)
    path = [str(tmp_path), str(pyspark_zip), str(py4j_zip), "/usr/lib/python311.zip", str(site)]
    assert daemon.installed_over_zips(path) == [str(tmp_path), "/usr/lib/python311.zip", str(site)]


def test_zips_that_are_not_the_installed_packages_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, pyspark_zip, py4j_zip = _layout(tmp_path)
    # The installed py4j is another version than the zip's: that zip stays.
    monkeypatch.setattr("importlib.metadata.version", lambda name: "0.10.9.7")
    path = [str(pyspark_zip), str(py4j_zip), str(site)]
    assert daemon.installed_over_zips(path) == [str(py4j_zip), str(site)]
    # The installed package is not on the path: nothing would replace the zips.
    assert daemon.installed_over_zips(path[:2]) == path[:2]
    # A Spark distribution's SPARK_HOME (python/lib under a directory not named pyspark).
    home = tmp_path / "spark-4.1.0-bin" / "python" / "lib"
    home.mkdir(parents=True)
    (home / "pyspark.zip").write_bytes(b"")
    path = [str(home / "pyspark.zip"), str(site)]
    assert daemon.installed_over_zips(path) == path


def _where(batches: Iterator[Any]) -> Iterator[Any]:
    import os
    import sys

    import pyspark

    for _ in batches:
        yield pa.RecordBatch.from_pydict(
            {
                "pyspark": [pyspark.__file__],
                "pythonpath": [os.environ.get("PYTHONPATH", "")],
                "zips_on_path": [sum(p.endswith("pyspark.zip") for p in sys.path)],
            }
        )


def test_the_workers_import_the_installed_pyspark(spark: Any) -> None:
    """The suite's session names kwire's daemon, as kwire's own sessions do."""
    assert spark.conf.get("spark.python.daemon.module") == "kwire.spark.daemon"
    row = (
        spark.range(1, numPartitions=1)
        .mapInArrow(_where, "pyspark string, pythonpath string, zips_on_path long")
        .first()
    )
    # Spark did put its zip first on the workers' path: the daemon took it away.
    assert "pyspark.zip" in row["pythonpath"]
    assert row["zips_on_path"] == 0
    assert ".zip" not in row["pyspark"]
    assert Path(row["pyspark"]).parent == Path(pa.__file__).parent.parent / "pyspark"


def _alloc_and_free(batches: Iterator[Any]) -> Iterator[Any]:
    """A task that takes about 400 MB from Arrow's pool and frees it, as the decoding passes do:
    the pool keeps the pages (its resident memory, measured before the task ends, stays up)."""
    import os

    for _ in batches:
        held = [pa.array([b"x" * 100] * 20_000, pa.binary()) for _ in range(200)]
        del held
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "resident": [daemon._resident()]})


def _who(batches: Iterator[Any]) -> Iterator[Any]:
    import os

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "resident": [daemon._resident()]})


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc (Linux)")
def test_a_worker_gives_back_what_its_task_freed(spark: Any) -> None:
    """A worker kept for the next task (Spark reuses them) does not keep the memory its last
    task freed: the next task on the same worker finds it given back."""
    schema = "pid long, resident long"
    freed = spark.range(1, numPartitions=1).mapInArrow(_alloc_and_free, schema).collect()[0]
    assert freed["resident"] > daemon.RELEASE_ABOVE + 200 * 2**20, freed
    # Spark hands out idle workers in turn (a queue): ask until the same one runs a task.
    for _ in range(30):
        again = spark.range(1, numPartitions=1).mapInArrow(_who, schema).collect()[0]
        if again["pid"] == freed["pid"]:
            break
    else:
        pytest.fail(f"worker {freed['pid']} never ran a task again")
    assert again["resident"] < freed["resident"] - 300 * 2**20, (freed, again)


def test_release_memory_leaves_a_small_worker_alone() -> None:
    assert daemon.release_memory(above=1 << 60) is False
    assert daemon.release_memory(above=0) is True
