"""One small local Spark session for the suites that need one (per xdist worker), and the decode
job over the group captures that the group, story and report tests share."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


def _jvm_classes() -> str:
    """The Java options that map the driver's class archive (kwire/spark/classes.py) that
    `make test` made in KWIRE_TEST_JVM_CLASSES (scripts/jvm_classes.py), for the tests' session;
    kwire's own sessions in the suite's processes find it there too (KWIRE_CACHE_DIR). Without
    that archive, "" and the archive is off: the suite's jobs would otherwise run differently
    the first time on a machine (one exit 15 s longer, making it) and write 200 MB under
    ~/.cache. A JVM that maps it starts without loading and verifying Spark's classes again
    (about 5 of a fresh job's 30 CPU-seconds). tests/spark/test_classes.py tests the archive
    with a cache of its own."""
    from kwire.spark import classes
    from tests.lifetime import archive_options

    where = os.environ.get("KWIRE_TEST_JVM_CLASSES")
    if where:
        os.environ[classes.ENV_CACHE] = os.path.abspath(where)
        os.environ.pop(classes.ENV_SWITCH, None)
        found = archive_options()
        if found:
            return found
    os.environ[classes.ENV_SWITCH] = "off"
    return ""


JVM_CLASSES = _jvm_classes()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first: `make test` distributes with --dist loadgroup, which hands out
    the xdist groups (largest first) and then the other tests one by one in the order collected.
    A test of a minute collected near the end (test_cluster.py, test_sink.py) would run alone
    on one worker while the other sat idle; started early, the many short tests fill in around
    it. `pytest.mark.long(seconds)`: about what the test takes under `make test` on 2 busy
    cores (the order is all it is used for)."""

    def seconds(item: pytest.Item) -> float:
        mark = item.get_closest_marker("long")
        return float(mark.args[0]) if mark else 0.0

    items.sort(key=seconds, reverse=True)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def spark() -> Iterator["SparkSession"]:  # type: ignore[name-defined]  # noqa: F821
    from pyspark.sql import SparkSession

    from kwire.spark.session import C1_JVM, LOCAL_GC, SHORT_JOB_SQL, jvm_environment

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The S3 tests read from a local S3-compatible server (moto's), which takes any key. The
    # Python workers inherit the environment the JVM starts with, so the keys are set here; the
    # AWS SDK is told never to ask a cloud metadata address for credentials.
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(key, "kwire-test")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    # glibc's arenas capped, as in the JVMs kwire starts on a local master (session.ARENAS).
    os.environ.update(jvm_environment("local[2]"))
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kwire-udfs-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.memory", "1g")
        # Held frames' serialized blocks compressed, as kwire's sessions have them.
        .config("spark.rdd.compress", "true")
        # The tests' jobs are small, as the jobs kwire starts this way are: C1 alone took the
        # group, job and fault tests from 145-149 s to 115-120 s on 2 cores (2 runs each).
        # and the parallel collector, as kwire's local sessions have it: under G1 this session
        # ran out of heap twice on a busy host, most likely in pieces (session.LOCAL_GC says).
        .config("spark.driver.extraJavaOptions", f"{LOCAL_GC} {C1_JVM} {JVM_CLASSES}".strip())
        # and their queries interpreted, as kwire's short jobs run them: on a warm session the
        # 313 kB capture's job took 12.9-14.0 s instead of 16.9-17.3 s, and its JVM half the CPU
        # (11-12 s, not 20-22), which two workers running jobs side by side compete for. The
        # compiled path is tested side by side with this one in tests/spark/test_job.py.
        .config(map=SHORT_JOB_SQL)
        # kwire's Python daemon, as kwire's sessions have it (kwire/spark/daemon.py): its
        # workers import pyspark from the installed package, not from Spark's zip.
        .config("spark.python.daemon.module", "kwire.spark.daemon")
        # and without PySpark's DataFrame debugging, as kwire's sessions have it
        # (kwire.spark.session.session_settings): each column function's call site sent to the
        # JVM cost a warm job on two bundled captures 1.33-1.50 s of the driver's Python CPU
        # instead of 0.85-0.97 s (4 runs each).
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# The captures whose consumer groups the group tests read (their group ids differ; broker ports
# are inferred). Ground-truth scenario captures join this list as they are made.
GROUP_CAPTURES = [
    "mock_group_classic.pcap",
    "mock_static_members.pcapng",
    "mock_cooperative_sticky_sll2.pcap",
    "mock_consumer_protocol_sll.pcap",
    "mock_gt_eager_kill.pcap",
    "mock_gt_poll_static.pcap",
    "mock_gt_coop_848.pcap",
    "mock_gt_progress.pcap",
]


def real_captures() -> "list[Path]":  # type: ignore[name-defined]  # noqa: F821
    """Every committed capture (tests/data, the TLS ones read without their keys)."""
    from pathlib import Path

    data = Path(__file__).resolve().parent / "data"
    return sorted(p for p in data.rglob("*") if p.suffix in (".pcap", ".pcapng"))


@pytest.fixture(scope="session")
def capture_job(spark: "SparkSession", tmp_path_factory: pytest.TempPathFactory) -> "tuple[Path, Any]":  # type: ignore[name-defined]  # noqa: F821
    """One decode job over every committed capture: (OUT, its job.Summary). The job, group,
    share, streams, story and report tests read it; they carry
    `pytest.mark.xdist_group("groups_job")` and the test command distributes with
    --dist loadgroup, so the job runs once, on one worker. Each capture's groups, clients and
    topics are its own, and each group's lags are measured at the end of its own cluster's
    capture (kwire.groups.build.Clock), so the captures do not disturb each other's tables."""
    from kwire import job

    target = tmp_path_factory.mktemp("captures") / "out"
    inputs = [str(p) for p in real_captures()]
    summary = job.run(job.parse_args([*inputs, "-o", str(target), "--quiet"]), spark=spark)
    return target, summary


@pytest.fixture(scope="session")
def groups_out(capture_job: "tuple[Path, Any]") -> "Path":  # type: ignore[name-defined]  # noqa: F821
    """The OUT of capture_job, which holds every group capture (GROUP_CAPTURES)."""
    return capture_job[0]


def share_captures() -> list[str]:
    """The captures with share-group ground truth (NAME.json's "share_truth"): librdkafka's
    share consumer against its mock, and Java's KafkaShareConsumer against a real broker."""
    import json
    from pathlib import Path

    data = Path(__file__).resolve().parent / "data" / "capture"
    found = []
    for meta in sorted(data.glob("*.json")):
        if "share_truth" in json.loads(meta.read_text()):
            found.extend(p.name for p in data.glob(meta.stem + ".pcap*"))
    return sorted(found)


@pytest.fixture(scope="session")
def share_out(capture_job: "tuple[Path, Any]") -> "dict[str, Path]":  # type: ignore[name-defined]  # noqa: F821
    """Share capture (and the streams one) name -> OUT: capture_job's, the same OUT for all;
    the tests keep each capture's groups."""
    from pathlib import Path

    data = Path(__file__).resolve().parent / "data" / "capture"
    captures = share_captures() + [p.name for p in data.glob("kafka_streams_group.pcap")]
    return {capture: capture_job[0] for capture in captures}
