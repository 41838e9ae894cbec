"""A SparkSession for kwire's jobs: quiet logs, UTC timestamps, and executors that can import kwire.

Executors import `kwire` and `generated` as the driver does. Local masters run them with the
driver's own Python, so nothing needs shipping. On a cluster, the workers need kwire installed
the ways Spark documents for Python dependencies (docs/cluster.md): the wheel installed on every
worker (PYSPARK_PYTHON naming that interpreter), or a packed environment sent with the job
(`--conf spark.archives=kwire-env.tar.gz#env` with PYSPARK_PYTHON=./env/bin/python). A wheel
carries the compiled readers built for its platform; a pure-Python one (KWIRE_PURE_PYTHON=1 at
build time) runs anywhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from kwire.spark import driver

LOG4J = Path(__file__).resolve().with_name("log4j2.properties")
DRIVER_MEMORY = "1g"
# Executors of at most this many cores get C1 alone in a batch job (see build_session).
SMALL_EXECUTOR_CORES = 2
DRIVER_JAVA = "spark.driver.extraJavaOptions"
EXECUTOR_JAVA = "spark.executor.extraJavaOptions"


is_local = driver.is_local


# How a local checkpoint (hold()) keeps its blocks: serialized, compressed (spark.rdd.compress,
# set by session_settings), spilled to disk when storage memory is short. Spark's default for a
# local checkpoint keeps every row as a Java object in the heap: on the 5 GB file the data
# records held for the group tables and delivery (1.1 M rows) were 1.1 M UnsafeRows and their
# 1.3 M byte arrays, 375 MB of a 1 GB heap, and storage memory is protected from eviction up to
# half of Spark's pool. Beside them the aggregations of the steps running at the same time ran
# short of execution memory: at 800m of heap, tasks failed three times ("Unable to acquire
# 262144 bytes of memory, got 0", AGGREGATE_OUT_OF_MEMORY) and the run lived on retries; at the
# default 1g the heap's high mark after collections was 895-1022 MB (ten runs). Serialized and
# compressed, the same run at 800m had no failed task, and at 1g the mark was 848-926 MB
# (benchmarks/results/history.md).
HELD_LEVEL = StorageLevel.MEMORY_AND_DISK  # pyspark's: serialized (Scala's MEMORY_AND_DISK_SER)


def hold(df: DataFrame, local: bool | None = None) -> DataFrame:
    """`df`, computed once for the queries that follow (release() it after them).

    In local mode, a local checkpoint: the queries that follow plan, optimise and generate code
    against one leaf instead of `df`'s whole lineage, which on a small capture was most of the
    group stage's time (19.0 -> 12.8 s). Its blocks live in the one JVM, whose loss ends the job
    anyway. Its blocks are kept serialized (HELD_LEVEL), not as row objects. On a cluster a lost
    executor would take local checkpoint blocks with it and fail the job, so there `df` is
    cached instead (Spark's compressed columnar cache), and recomputed from its lineage if lost.
    `local`: which of the two, when not the session's master's kind (the tests)."""
    if local is None:
        local = driver.runs_locally(df.sparkSession)
    if local:
        held = df.localCheckpoint(eager=False, storageLevel=HELD_LEVEL)
        # The first query that reads `held` computes it with `df`'s plan, whose metrics the
        # driver registers only weakly: `df` must live as long as `held`, or once the JVM's
        # collector has run, every task of that computation logs an error for each metric it
        # reports (DAGScheduler: "Failed to update accumulator"; seen with queries interpreted,
        # where no generated code keeps the metrics referenced).
        held._kwire_source = df  # type: ignore[attr-defined]
        return held
    return df.persist(StorageLevel.MEMORY_AND_DISK)


@contextlib.contextmanager
def with_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """The session's SQL settings changed for the queries run inside, then put back as they
    were (unset when they were not set)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def hold_per_core(df: DataFrame) -> DataFrame:
    """hold(`df`) in as many partitions as the executors have cores (at least 2): for a table
    read from many small files (a task each) that several queries then scan. The group tables'
    frames of the decoded tables (133 files on the coalesced ring: derived steps 68.0, 69.2 ->
    63.6, 64.4 s) and delivery's data records (13 files: delivery 8.7-10.0 -> 6.6-7.7
    task-seconds) paid that many small tasks on every scan."""
    cores = max(2, driver.parallelism(df.sparkSession))
    return hold(df.coalesce(cores))


release = driver.release


# A batch job on a local master (`kwire decode`, the demo) starts its JVM with the C1 compiler
# alone. The job's heavy loops run in Python (the capture, decoding, records, and the Parquet
# writes of their tables); what the JVM runs is many queries' worth of code a few times each,
# which C2's compiler threads spend the cores on and finish after the job stops running it. On 2
# cores the whole job on a 1.2 GB ring took 49.1, 53.0 s with C1 alone against 63.6, 67.3 s
# (coalesced) and 48.8, 48.1 against 60.6, 56.8 s (MTU), and the 5 GB file 154 against 166 s
# (benchmarks/results/history.md). (When the JVM still wrote every table and converted every row, C2 had been the
# faster: 243 against 269 s.)
# On a cluster the driver plans and schedules but runs no task: C1 alone too. The executors get
# it when they are small (spark.executor.cores given, at most SMALL_EXECUTOR_CORES; YARN's
# default is 1): each executor JVM compiles the same code again, and on 2 workers x 1 core
# their C2 compiler threads took the capture step from 4.8-5.0 s to 5.5-6.5 s (3 runs each, the
# 1.2 GB MTU ring; local[2] 4.6 s). Executors of more cores, or of unknown size, keep the JVM's
# default: C2's better code may pay for itself there, which has not been measured.
# C1 alone also shrinks the JVM's code cache to 48 MB (from 240), which a session running
# hundreds of queries fills ("Out of space in CodeCache for adapters" ended the tests' JVM):
# the cache keeps its usual size.
C1_JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# A short job (small inputs) also runs its queries interpreted rather than compiled: Spark
# generates Java source for every projection, filter, sort and aggregate of every query and
# compiles it with Janino, a fixed cost per query shape that pays back over millions of rows.
# On a 313 kB capture it was a fifth of the JVM's samples (Java Flight Recorder), and turning it
# off took the job from 28.6-29.2 s to 21.1-22.1 s (2 runs each). The setting is Spark's own
# (internal, the one its tests run every expression both ways with); whole-stage code
# generation stays off with it.
SHORT_JOB_SQL = {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}
# `kwire live` on a local master: the same queries planned and run again at every rebuild, for
# hours, on cores the batches need too. C2 compiles only code that stays hot (tier-4 thresholds
# ten times Java's): a rebuild spent 4.8-8.2 CPU-s in C2 (2026-12-04). On the live benchmark (a
# 0.67 GB ring cut into 40 files, one closed every 10 s; benchmarks/results/history.md,
# 2026-12-05), with the parallel collector (LOCAL_GC), interleaved with runs without either, three
# each: the group tables included a file 19.9-21.6 s after its close at the median and
# 31.3-39.8 s at p95, against 23.2-31.0 and 40.5-56.0 s; rows at p95 10.9-12.8 against 12.7-15.6
# s; 23-27 rebuilds against 18-22; peak 3.55-3.59 against 3.52-3.60 GB. A batch job keeps C1
# alone (C1_JVM).
# Every session kwire starts on a local master runs its tasks in the driver's JVM, a 1 GB heap
# shared by the driver's plans, the block manager and the tasks' rows: the parallel collector.
# G1 never moves an object of half a region (1 MB here) or more, and Spark makes many: each
# broadcast join's hash relation holds a page of spark.buffer.pageSize (8 MB on this heap),
# kept in the block manager until the driver's collector frees its handle, and a large frame
# (a Fetch response of 24 MB) is copied into arrays twice its size. The tests' session, after a
# few jobs, ran out of heap twice on a busy host, most likely with its free memory in pieces
# between such arrays (not confirmed by a map of the heap); the parallel collector compacts
# everything. It also costs less CPU than G1's concurrent threads (a live rebuild spent about 4
# CPU-s in G1): the churny ring's batch job (1.3 GB, benchmarks/results/history.md, 2026-12-05
# third session) took 150.2, 139.7 s and peaked at 3.28, 3.41 GB with it, against 161.5, 152.2 s
# and 3.54, 3.51 GB with G1 (interleaved). A collector chosen elsewhere stays (the JVM refuses
# two): _collector_chosen().
LOCAL_GC = "-XX:+UseParallelGC"
# glibc's malloc gives threads that allocate at once arenas of their own, up to eight per core,
# and each keeps the pages freed in it: the driver's JVM runs some 400 threads (Spark's pools,
# Netty, Parquet's and the codecs' native buffers), and on the churny ring (1.3 GB of small
# records) its RSS held about 220 MB in arenas (the largest 43-59 MB) beside its 1 GB heap. On a
# local master (the JVM runs every task; the Python workers it starts inherit it) kwire caps
# them at one per core, at least two: on 2 cores the batch job's JVM peaked at 1.59, 1.62 GB
# against 1.74, 1.74 GB in the same time (136.7, 138.9 s against 141.7, 138.6 s, interleaved),
# and `kwire live` following that ring peaked at 3.86-3.95 GB for the whole process tree against
# 3.99-4.05 GB with glibc's default (three runs each, interleaved; its latencies within the runs'
# swing; benchmarks/results/history.md, 2026-12-05, fourth session). A value in the environment
# stays.
ARENAS = "MALLOC_ARENA_MAX"
LIVE_JVM = (
    "-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000"
)

# Compiled query classes a session keeps (Spark's default: 100). `kwire live` plans the derived
# tables' queries anew at every rebuild, and one rebuild compiles about 530 classes: with 100,
# each rebuild compiled them all again. The rebuilds on a 0.68 GB history, four in a row in one
# session: 25.5, 27.1, 23.4 s after the first with Spark's 100, against 19.8, 17.5, 16.2 s with
# 2,000; the 532 entries of three rebuilds held 18 MB more of the heap (379 against 361 MB after
# a collection).
CODEGEN_CACHE = 2000


def build_session(
    master: str = "local[*,4]",
    app_name: str = "kwire",
    conf: Iterable[tuple[str, str]] = (),
    log_level: str = "WARN",
    short: bool = False,
    tell: Callable[[str], None] | None = None,
    batch: bool = False,
    remote: str | None = None,
    live: bool = False,
) -> SparkSession:
    """Starts (or joins) a session on `master` with WARN logs (see the module's docstring for how
    executors get kwire). `batch`: the session runs one job and ends (`kwire decode`), so the
    driver's JVM compiles with C1 alone (C1_JVM), and so do small executors on a cluster (at
    most SMALL_EXECUTOR_CORES in spark.executor.cores). `short`: a batch job expected to take
    seconds of JVM work (a small input), whose queries also run interpreted (SHORT_JOB_SQL).
    Sessions that live on (notebooks, the tests') keep the JVM's default tiers unless `short`;
    `live` (`kwire live`) on a local master adds LIVE_JVM. On a local master the parallel
    collector (LOCAL_GC) unless one is chosen elsewhere (_collector_chosen). `tell` hears when this
    run keeps the JVM's classes for later ones (kwire/spark/classes.py). `remote`: a Spark
    Connect server's URL (connect_session), and `master` is the server's business."""
    if remote:
        return connect_session(remote, conf, short)
    # Executors run the Python that runs the driver (it has pyarrow and the same pyspark) unless
    # PYSPARK_PYTHON names another: on a real cluster, set it to the workers' interpreter.
    # pyspark takes the executors' Python from this variable, not from spark.pyspark.python.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkContext

    from kwire.spark import classes
    from kwire.spark.jvmnames import keep_jvm_names

    settings = session_settings(master, conf, short, batch, live=live)
    # The driver JVM's classes from an archive of an earlier run, or written for the next
    # (kwire/spark/classes.py); only for a JVM this session starts.
    fresh = SparkContext._active_spark_context is None
    if fresh:
        # The JVM started below (and its Python workers) inherits this process's environment.
        os.environ.update(jvm_environment(master))
    archive = classes.plan(settings) if fresh else classes.Plan()
    if archive.options:
        given = settings.get("spark.driver.extraJavaOptions", "")
        settings["spark.driver.extraJavaOptions"] = f"{given} {archive.options}".strip()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    _quiet_lost_jvm(spark)
    keep_jvm_names(spark)
    classes.finish_at_exit(archive, spark, tell)
    return spark


# What a Connect client sets on its session: the SQL settings of session_settings() (the
# rest, the JVM's options, memory and Python daemon, are the server's, fixed when it started).
CONNECT_SQL = (
    "spark.sql.session.timeZone",
    "spark.sql.parquet.outputTimestampType",
    "spark.sql.debug.maxToStringFields",
)


class ConnectError(Exception):
    """A Spark Connect session could not be had as asked (the message says why, in one line)."""


def connect_session(
    url: str, conf: Iterable[tuple[str, str]] = (), short: bool = False
) -> SparkSession:
    """A session of the Spark Connect server at `url` (sc://host:port/;params, as pyspark
    takes it), with kwire's SQL settings and the `conf` given (settings a session may change:
    Spark refuses the server's static and core ones, which belong on the server's command line).
    `short`: queries interpreted (SHORT_JOB_SQL), for small inputs on a server of a local
    master."""
    settings = session_settings("", defaults={})
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
    except Exception as e:  # pyspark's import errors (no grpcio) and bad URLs
        raise ConnectError(
            f"cannot open a Spark Connect session at {url}: {first_line(e)}"
        ) from None
    wanted = {key: settings[key] for key in CONNECT_SQL}
    if short and driver.runs_locally(spark):
        wanted.update(SHORT_JOB_SQL)
    wanted.update(dict(conf))
    for key, value in wanted.items():
        try:
            spark.conf.set(key, value)
        except Exception as e:
            raise ConnectError(
                f"the Spark Connect server refused --conf {key}={value}: {first_line(e)} "
                "(the server's static settings are given when it starts)"
            ) from None
    return spark


def first_line(e: BaseException) -> str:
    """An error's text up to its first line break (pyspark's errors add JVM stacks below)."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def _lost_connection(error: BaseException | None) -> bool:
    """Whether `error` is how a JVM that died shows in this process: a closed or reset socket,
    or py4j's network error."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(error, (EOFError, ConnectionError, Py4JNetworkError))


PY4J_SEND_FAILED = "Exception while sending command"


class _LostJvmFilter(logging.Filter):
    """Drops py4j's "Exception while sending command." (logged with its traceback on the root
    logger) when the command failed because the connection to the JVM was lost."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage().startswith(PY4J_SEND_FAILED) and _lost_connection(error))


_LOST_JVM_FILTER = _LostJvmFilter()


def _quiet_lost_jvm(spark: SparkSession) -> None:
    """A JVM that dies shows in this process as tracebacks from two threads the job does not
    own: pyspark's accumulator server (a socketserver thread the JVM sends task updates to),
    whose connection ends mid-read, and py4j, which logs the command in flight when the
    connection was reset, depending on timing. The job's own error then says the JVM is gone
    and why (jvm_exit), so both are only noise; any other error there still prints."""
    root = logging.getLogger()
    if _LOST_JVM_FILTER not in root.filters:
        root.addFilter(_LOST_JVM_FILTER)
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None:
        return
    loud = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if _lost_connection(sys.exc_info()[1]):
            return
        loud(request, client_address)

    server.handle_error = handle_error


def spark_defaults() -> dict[str, str]:
    """The properties spark-submit reads before any --conf: spark-defaults.conf in
    SPARK_CONF_DIR, else in SPARK_HOME/conf (SPARK_HOME: pyspark's own directory when unset).
    kwire merges its java options into the ones found there rather than replace them."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    where = os.environ.get("SPARK_CONF_DIR") or os.path.join(home, "conf")
    found: dict[str, str] = {}
    try:
        with open(os.path.join(where, "spark-defaults.conf"), encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        # Java properties: the key ends at the first blank, '=' or ':'.
        cut = next((i for i, c in enumerate(text) if c in " \t=:"), len(text))
        value = text[cut:].lstrip(" \t")
        if value[:1] in ("=", ":"):
            value = value[1:].lstrip(" \t")
        found[text[:cut]] = value
    return found


def session_settings(
    master: str,
    conf: Iterable[tuple[str, str]] = (),
    short: bool = False,
    batch: bool = False,
    defaults: dict[str, str] | None = None,
    live: bool = False,
) -> dict[str, str]:
    """The settings build_session() starts a session with: kwire's, then `conf` over them.
    Java options kwire adds go before those of `defaults` (spark_defaults(), read when None),
    whose later flags win; a java option given in `conf` replaces the driver's and goes after
    kwire's C1 for the executors."""
    given = dict(conf)
    found = spark_defaults() if defaults is None else defaults
    settings: dict[str, str] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # hold()'s serialized blocks compressed (lz4): rows of a few set columns in many.
        "spark.rdd.compress": "true",
        # Timestamps as the frames table has them (microseconds, UTC), not legacy INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Message structs are wide; keep plan strings whole instead of warning about them.
        "spark.sql.debug.maxToStringFields": "1000",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
        # Parquet 1.17's vectored reads of local files once stalled a task of the group stage
        # for the 300 s of their timeout (the benchmark ring, out/ring_big): the read's future
        # never completed. Plain reads are as fast here and fail loudly if they fail.
        "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
        # PySpark's DataFrame debugging sends each column function's Python call site to the JVM
        # (and reads the session and a setting from it) around every call: a third of the py4j
        # commands of a job on a 313 kB capture (19,792 -> 13,481), and 19.2-20.4 s instead of
        # 20.1-20.8 s for the whole job (3 runs each, interleaved). kwire reports its own errors;
        # what this loses is the Python line in the context of a Spark analysis error. PySpark
        # reads it once per process, from the first session active when a column function runs.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # pyspark's daemon, without the Python traceback it prints for each task cancelled
        # while writing (when a failed step stops the others; kwire/spark/daemon.py).
        "spark.python.daemon.module": "kwire.spark.daemon",
        # The classes Spark compiles for its queries, kept for the same queries run again
        # (`kwire live`'s rebuilds; CODEGEN_CACHE says why so many).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE),
    }
    if is_local(master) or "127.0.0.1" in master or "localhost" in master:
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if is_local(master):
        # Local mode runs every task inside the driver's JVM. Spark's 1g heap is enough once
        # batches are sized in bytes (kwire.pipeline.size_batches): the 1.2 GB benchmark ring peaks at
        # about 3.4 GB for the whole process tree (JVM heap and off-heap Arrow and Parquet
        # buffers, Python workers, this process); 1.5g would add about 0.5 GB of RSS for nothing.
        settings["spark.driver.memory"] = DRIVER_MEMORY
        if short:
            settings.update(SHORT_JOB_SQL)
    if is_local(master) and not _collector_chosen(found):
        settings[DRIVER_JAVA] += " " + LOCAL_GC
    if short or batch:
        # On a local master the tasks' JVM too; on a cluster the driver's, which plans and
        # schedules but runs no task.
        settings[DRIVER_JAVA] += " " + C1_JVM
        cores = given.get("spark.executor.cores") or found.get("spark.executor.cores") or ""
        if not is_local(master) and cores.strip().isdigit():
            if int(cores) <= SMALL_EXECUTOR_CORES:
                theirs = given.get(EXECUTOR_JAVA, found.get(EXECUTOR_JAVA, ""))
                given[EXECUTOR_JAVA] = f"{C1_JVM} {theirs}".strip()
    elif live and is_local(master):
        settings[DRIVER_JAVA] += " " + LIVE_JVM
    if found.get(DRIVER_JAVA):
        settings[DRIVER_JAVA] += " " + found[DRIVER_JAVA]
    settings.update(given)
    return settings


def jvm_environment(master: str) -> dict[str, str]:
    """What a JVM kwire starts on `master` needs in its environment that this process's lacks:
    on a local master glibc's arenas capped at one per core, at least two (ARENAS), unless the
    environment sets them."""
    if not is_local(master) or ARENAS in os.environ:
        return {}
    return {ARENAS: str(max(2, os.cpu_count() or 2))}


def _collector_chosen(defaults: dict[str, str]) -> bool:
    """Whether the driver's JVM gets a collector from elsewhere: spark-defaults.conf's java
    options, or the environment's JAVA_TOOL_OPTIONS or JDK_JAVA_OPTIONS (the JVM refuses to
    start with two)."""
    places = [defaults.get(DRIVER_JAVA, ""), defaults.get("spark.driver.defaultJavaOptions", "")]
    places += [os.environ.get(name, "") for name in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")]
    return any(re.search(r"-XX:\+Use\w+GC\b", place) for place in places)


def executors_c1(settings: dict[str, str]) -> bool:
    """Whether these settings (session_settings') start the executors with C1 alone."""
    return C1_JVM in settings.get(EXECUTOR_JAVA, "")


class ExecutorSetupError(Exception):
    """The executors cannot import kwire (named in the message, with the way to fix it)."""

    def __init__(self, message: str, module: str = "kwire") -> None:
        super().__init__(message)
        self.module = module


def _backend_here() -> tuple[str, str]:
    import generated
    from kwire import records
    from kwire.spark import model

    parts = {
        "codecs": generated.BACKEND,
        "records loop": records.backend(),
        "column builder": "python" if model.COMPILED[0] is None else "compiled",
    }
    where = str(Path(records.__file__).resolve().parents[1])  # the kwire package
    if len(set(parts.values())) == 1:
        return generated.BACKEND, where
    return ", ".join(f"{what} {backend}" for what, backend in parts.items()), where


_PROBE_SCHEMA = "readers string, kwire string"


def _backend_batches(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    for _ in batches:
        readers, where = _backend_here()
        yield pa.RecordBatch.from_pydict({"readers": [readers], "kwire": [where]})


# What a Spark Connect server's executors lack that kwire can send them itself (its own
# pure-Python packages); the other modules are dependencies the server's Python must have.
SHIPPABLE = ("kwire", "generated")


def kwire_zip(into: str) -> str:
    """This process's kwire and generated packages, pure Python (no compiled modules, which
    Python cannot import from a zip: the executors then decode with the Python readers), as
    a zip under the directory `into`, named by its content; returns its path.

    Each module's source comes with its bytecode for this interpreter beside it (`name.pyc`,
    where zipimport looks first; PEP 552's unchecked hash form, valid whatever the entries'
    times): Python writes no bytecode cache for a zip, so every Python worker of the server
    would otherwise compile every module it imports again, the codecs' 200 among them (2.4 CPU
    seconds a worker, against 0.7 with the bytecode: benchmarks/results/history.md). A server
    whose Python is another version finds another magic number in the bytecode and compiles
    the source, as without it."""
    import hashlib
    import io
    import py_compile
    import tempfile
    import zipfile

    import generated

    buffer = io.BytesIO()
    # kwire's package: two levels up from this module (kwire/spark/session.py).
    packages = (Path(__file__).resolve().parents[1], Path(str(generated.__file__)).resolve().parent)
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z,
        tempfile.TemporaryDirectory(prefix="kwire-pyc-") as scratch,
    ):
        for root in packages:
            for path in sorted(root.rglob("*")):
                rel = path.relative_to(root.parent)
                if (
                    path.is_dir()
                    or "__pycache__" in rel.parts
                    or path.suffix in (".so", ".pyd", ".pyx", ".pxd", ".c", ".pyc")
                ):
                    continue
                info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                z.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
                if path.suffix == ".py":
                    # Unoptimized, as the source would run without -O (zipimport has no
                    # .opt-1.pyc).
                    pyc = os.path.join(scratch, "module.pyc")
                    py_compile.compile(
                        str(path),
                        cfile=pyc,
                        dfile=info.filename,
                        doraise=True,
                        optimize=0,
                        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                    )
                    info = zipfile.ZipInfo(rel.with_suffix(".pyc").as_posix(), info.date_time)
                    z.writestr(info, Path(pyc).read_bytes(), zipfile.ZIP_DEFLATED)
    data = buffer.getvalue()
    target = os.path.join(into, f"kwire-{hashlib.sha256(data).hexdigest()[:16]}.zip")
    with open(target, "wb") as f:
        f.write(data)
    return target


def ship_kwire(spark: SparkSession) -> str:
    """Sends this process's pure-Python kwire to a Spark Connect session's executors (a
    Python artifact, spark.addArtifacts(pyfile=True)); returns the artifact's file name."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kwire-ship-") as tmp:
        path = kwire_zip(tmp)
        spark.addArtifacts(path, pyfile=True)
        return os.path.basename(path)


def executor_setup(
    spark: SparkSession, tell: Callable[[str], None] | None = None
) -> tuple[str, str]:
    """(which readers the executors decode with, where their kwire package is): "compiled" or
    "python", or the codecs', the records loop's and the column builder's where they differ.
    One tiny task asks; an executor that cannot import kwire raises ExecutorSetupError. On a
    Spark Connect session whose server's Python lacks kwire, kwire is sent to it first
    (ship_kwire) and `tell` hears so."""
    try:
        return _probe(spark)
    except ExecutorSetupError as e:
        if not driver.is_connect(spark) or e.module not in SHIPPABLE:
            raise
    sent = ship_kwire(spark)
    if tell is not None:
        tell(
            f"the Spark Connect server's Python has no kwire: sent this one's pure-Python "
            f"package ({sent}); install the kwire wheel where the server's Python workers run "
            "for the compiled readers (docs/cluster.md)"
        )
    return _probe(spark)


def _probe(spark: SparkSession) -> tuple[str, str]:
    level = driver.log_level(spark)
    # A probe that fails logs each lost attempt with the executor's Python traceback at WARN:
    # the one line below says what went wrong instead.
    driver.set_log_level(spark, "ERROR" if level is not None else None)
    try:
        # A SQL query through an Arrow batch function, as the decoders are: the Python worker
        # it starts (with the codecs imported) is the kind the first decoding task is given
        # again, where an RDD probe's worker is not reused by SQL and the decoders pay the
        # import a second time.
        found = (
            spark.range(1, numPartitions=1).mapInArrow(_backend_batches, _PROBE_SCHEMA).collect()
        )
    except Exception as e:  # a Py4JJavaError carrying the executor's Python traceback
        text = str(e)
        for module in ("kwire", "generated", "pyarrow", "pandas"):
            if f"No module named '{module}'" in text:
                raise ExecutorSetupError(
                    f"the executors' Python cannot import {module}: install the kwire wheel on "
                    "the workers (PYSPARK_PYTHON naming that interpreter) or send a packed "
                    "environment with --conf spark.archives=ENV.tar.gz#env and "
                    "PYSPARK_PYTHON=./env/bin/python (docs/cluster.md)",
                    module,
                ) from None
        raise
    finally:
        driver.set_log_level(spark, level)
    return str(found[0]["readers"]), str(found[0]["kwire"])


def executor_backend(spark: SparkSession) -> str:
    """Which readers the executors decode with (see executor_setup)."""
    return executor_setup(spark)[0]


# Why a driver JVM that pyspark started is gone, by its exit status (Popen's: a signal's is
# negative). 52 is Spark's own exit when a task thread of a local master hits
# java.lang.OutOfMemoryError (SparkExitCode.OOM, through SparkUncaughtExceptionHandler): no
# crash report is written, so without this a user sees only py4j's lost connection.
_CRASHED = "the JVM crashed (SIGABRT): its hs_err_pid*.log crash report is in the working directory"
JVM_EXITS = {
    52: "Spark's exit when the JVM runs out of heap (java.lang.OutOfMemoryError); "
    "give it more with --conf spark.driver.memory=2g (kwire's default is " + DRIVER_MEMORY + ")",
    -9: "killed by SIGKILL: the kernel's out-of-memory killer (see `dmesg`) or a `kill -9`",
    -6: _CRASHED,
    134: _CRASHED,
}
# How long a failure that lost the connection to the JVM waits for the JVM to be seen gone.
JVM_GONE_WAIT_S = 10.0


def jvm_exit(e: BaseException, wait_s: float = JVM_GONE_WAIT_S) -> str | None:
    """When the driver JVM that this process's pyspark started has exited, what to tell of it
    (its pid, exit status and what that means); None while it runs, or when pyspark did not
    start it (spark-submit started it, or no session was started). A failure that lost the
    connection to the JVM (py4j's network errors, a closed socket) waits up to `wait_s` for the
    JVM to finish exiting; any other checks once."""
    import signal
    import subprocess

    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if not isinstance(proc, subprocess.Popen):
        return None
    lost = False
    seen: BaseException | None = e
    while seen is not None and not lost:
        # py4j's plain Py4JError (not its Java errors, a subclass) is a connection it gave up on.
        lost = _lost_connection(seen) or type(seen) is Py4JError
        seen = seen.__cause__ or seen.__context__
    try:
        code = proc.wait(timeout=wait_s) if lost else proc.poll()
    except subprocess.TimeoutExpired:
        code = None
    if code is None:
        return None
    if code in JVM_EXITS:
        meaning = JVM_EXITS[code]
    elif code < 0:
        try:
            meaning = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            meaning = f"killed by signal {-code}"
    else:
        meaning = "Spark's lines above say why"
    status = f"signal {-code}" if code < 0 else f"exit code {code}"
    return f"the Spark JVM (pid {proc.pid}) is gone ({status}): {meaning}"
