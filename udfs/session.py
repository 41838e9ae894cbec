"""A SparkSession for kwire's jobs: quiet logs, the right Python, and the code shipped along.

Executors import `udfs` and `generated` from a zip added with `addPyFile`, so a job works on any
master (standalone, YARN, Kubernetes) whose workers have pyspark and pyarrow installed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable

from pyspark.sql import SparkSession

PACKAGES = ("capture", "generated", "groups", "records", "udfs")
ROOT = Path(__file__).resolve().parent.parent
LOG4J = Path(__file__).resolve().with_name("log4j2.properties")
DRIVER_MEMORY = "1g"


def code_zip(directory: str | os.PathLike[str] | None = None) -> str:
    """Zips the generated package, the records package and the UDF pack (Python sources only)
    for executors; their libraries (pyarrow, cramjam, crc32c) must be installed on the workers."""
    out_dir = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="kwire-"))
    path = out_dir / "kwire_code.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in PACKAGES:
            base = ROOT / package
            for file in sorted(base.rglob("*")):
                if file.suffix in (".py", ".properties") and "__pycache__" not in file.parts:
                    z.write(file, file.relative_to(ROOT).as_posix())
    return str(path)


def _is_local(master: str) -> bool:
    return master.startswith("local")


def build_session(
    master: str = "local[*]",
    app_name: str = "kwire",
    conf: Iterable[tuple[str, str]] = (),
    ship_code: bool = True,
    log_level: str = "WARN",
) -> SparkSession:
    """Starts (or joins) a session on `master` with WARN logs and the code shipped to executors."""
    settings: dict[str, str] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Timestamps as the frames table has them (microseconds, UTC), not legacy INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Message structs are wide; keep plan strings whole instead of warning about them.
        "spark.sql.debug.maxToStringFields": "1000",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }
    # Executors run the Python that runs the driver (it has pyarrow and the same pyspark) unless
    # PYSPARK_PYTHON names another: on a real cluster, set it to the workers' interpreter.
    # pyspark takes the executors' Python from this variable, not from spark.pyspark.python.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if _is_local(master) or "127.0.0.1" in master or "localhost" in master:
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if _is_local(master):
        # Local mode runs every task inside the driver's JVM. Spark's 1g heap is enough once
        # batches are sized in bytes (udfs.job.size_batches): the 1.2 GB benchmark ring peaks at
        # about 3.4 GB for the whole process tree (JVM heap and off-heap Arrow and Parquet
        # buffers, Python workers, this process); 1.5g would add about 0.5 GB of RSS for nothing.
        settings["spark.driver.memory"] = DRIVER_MEMORY
    settings.update(dict(conf))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if ship_code:
        spark.sparkContext.addPyFile(code_zip())
    return spark
