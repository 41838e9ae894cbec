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
NATIVE = ROOT / "generated" / "_native"  # the compiled readers, when built


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
    if ship_code and any(NATIVE.glob("kwire_native_*.so")):
        # For "dir" shipping (ship_native): executors on this machine find the build here.
        os.environ["KWIRE_NATIVE_DIR"] = str(NATIVE)
        settings["spark.executorEnv.KWIRE_NATIVE_DIR"] = str(NATIVE)
    settings.update(dict(conf))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if ship_code:
        spark.sparkContext.addPyFile(code_zip())
        ship_native(spark, master)
    return spark


def ship_native(spark: SparkSession, master: str, how: str | None = None) -> str:
    """Gets the compiled readers to the executors, which import `generated` from the shipped zip
    (a zip cannot carry extension modules). `how` (default $KWIRE_SHIP_NATIVE, else "auto"):
    "dir" points the executors at this checkout's build (KWIRE_NATIVE_DIR: local mode and
    workers on this machine), "files" sends the built modules with addFile into Spark's files
    directory, which is on the executors' sys.path (any cluster), "none" leaves the executors
    on the Python readers; "auto" is "dir" for local and loopback masters, else "files".
    Returns what was done ("none" when nothing is built)."""
    how = how or os.environ.get("KWIRE_SHIP_NATIVE", "auto")
    built = sorted(NATIVE.glob("kwire_native_*.so"))
    if not built or how == "none" or os.environ.get("KWIRE_PURE_PYTHON"):
        return "none"
    if how == "auto":
        loopback = "127.0.0.1" in master or "localhost" in master
        how = "dir" if _is_local(master) or loopback else "files"
    if how == "files":
        for module in built:
            spark.sparkContext.addFile(str(module))
    # "dir" needs nothing here: build_session set KWIRE_NATIVE_DIR before the session started
    # (local mode's Python workers inherit the environment; executors get spark.executorEnv).
    return how


def _backend_here(_: object) -> str:
    import generated
    import records
    from udfs import model

    parts = {
        "codecs": generated.BACKEND,
        "records loop": records.backend(),
        "column builder": "python" if model.COMPILED[0] is None else "compiled",
    }
    if len(set(parts.values())) == 1:
        return generated.BACKEND
    return ", ".join(f"{what} {backend}" for what, backend in parts.items())


def executor_backend(spark: SparkSession) -> str:
    """Which readers the executors decode with ("compiled" or "python", or the codecs', the
    records loop's and the column builder's where they differ): one tiny task asks."""
    found = spark.sparkContext.parallelize([0], 1).map(_backend_here).collect()
    return str(found[0])
