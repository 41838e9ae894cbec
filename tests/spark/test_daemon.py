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
