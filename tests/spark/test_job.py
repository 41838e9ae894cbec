"""The decode job on the shared local session: frames tables and, when present, real captures."""

from __future__ import annotations

import os
import re
import struct
from typing import Any
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import generated as g
from benchmarks import synth
from kwire.capture import E_CLOSED
from tests.conftest import real_captures
from tests.quirks import MOCK_CONTROL_BATCH_CRC, MOCK_QUIRKS, kafka_reads, tolerant_warning
from kwire import job, pipeline
from kwire.spark.session import release

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = real_captures()


def run_job(spark: SparkSession, inputs: list[str], out: Path, *extra: str) -> job.Summary:
    args = job.parse_args([*inputs, "-o", str(out), *extra])
    summary = job.run(args, spark=spark)
    assert summary is not None
    return summary


def test_job_on_a_frames_table(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = synth.frames_table()
    frames = tmp_path / "frames.parquet"
    pq.write_table(table, frames)
    summary = run_job(spark, [str(frames)], tmp_path / "out", "--no-delivery")
    requests = sum(1 for d in table.column("direction").to_pylist() if d == "request")
    assert summary.requests == requests
    assert summary.response_count == table.num_rows - requests
    # The damaged rows (synth.damaged_rows): one truncated, one of no known api, one of no
    # known version, one incomplete; the one with bytes after its message is read, as Kafka does.
    assert summary.request_errors == 4 and summary.response_errors == 0
    assert summary.no_schema == {1000: 1}
    assert summary.statuses == {
        ("request", "ok"): requests - 4,
        ("request", "malformed"): 1,
        ("request", "unsupported"): 2,
        ("request", "incomplete"): 1,
        ("response", "ok"): table.num_rows - requests,
    }
    assert summary.warned == {"request": 1}
    assert summary.top_warnings == [
        ("request", 12, 4, "2 bytes after the message ignored, as Kafka's reader does", 1)
    ]
    # The damaged rows' Heartbeat that Kafka reads names its group, "damaged".
    assert [g["group_id"] for g in summary.groups] == ["damaged", "group-0", "group-1", "group-2"]
    assert summary.groups[0]["requests"] == 1
    assert summary.groups[3]["topics"] == ["topic-a", "topic-b", "topic-c"]
    assert all(g["members"] == 3 for g in summary.groups[1:])
    # Partitioned by api key; the partition column comes back on read.
    assert (tmp_path / "out" / "requests" / "api_key=11").is_dir()
    back = spark.read.parquet(str(tmp_path / "out" / "requests"))
    assert back.where("api_key = 11").select("join_group.group_id").distinct().count() == 3
    printed = capsys.readouterr().out
    assert "consumer groups seen: 4" in printed
    assert "HeartbeatRequest: version 77 is not supported (valid: 0-4)" in printed
    # A second run into the same place needs --overwrite.
    with pytest.raises(job.JobError, match="exists; give --overwrite"):
        job.run(job.parse_args([str(frames), "-o", str(tmp_path / "out")]), spark=spark)


def test_job_rejects_what_it_cannot_read(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world")
    with pytest.raises(job.JobError, match="neither a frames table"):
        job.run(job.parse_args([str(junk), "-o", str(tmp_path / "o")]))
    with pytest.raises(job.JobError, match="no such file"):
        job.run(job.parse_args([str(tmp_path / "nope"), "-o", str(tmp_path / "o")]))


def test_a_capture_the_workers_cannot_open_is_said_to_be_missing_on_them(tmp_path: Path) -> None:
    """On a cluster, a local capture the driver sees but the executors could not open: the
    error says the path must be readable on every worker. Other errors are left as they are."""
    here = tmp_path / "here.pcap"
    here.write_bytes(b"x")
    files = [
        {"path": str(here), "error": "cannot open: No such file or directory"},
        {"path": str(tmp_path / "nowhere.pcap"), "error": "cannot open: No such file or directory"},
        {"path": str(here), "error": "not a pcap or pcapng file"},
        {"path": "s3://bucket/a.pcap", "error": "cannot open: Access Denied"},
    ]
    pipeline.not_on_workers(files)
    assert "readable on every worker" in files[0]["error"]
    assert [f["error"] for f in files[1:]] == [
        "cannot open: No such file or directory",
        "not a pcap or pcapng file",
        "cannot open: Access Denied",
    ]


@pytest.mark.skipif(not CAPTURES, reason="no captures under tests/data")
@pytest.mark.xdist_group("groups_job")
def test_job_on_real_captures(spark: SparkSession, capture_job: tuple[Path, job.Summary]) -> None:
    """The job over every committed capture (tests/conftest.py's capture_job, which the group,
    share and story tests read too)."""
    out, summary = capture_job
    frames = pq.read_table(out / "frames.parquet")
    requests = sum(1 for d in frames.column("direction").to_pylist() if d == "request")
    assert summary.requests == requests
    assert summary.response_count == frames.num_rows - requests
    # Everything decodes (every api key has a schema now), except the answers librdkafka's
    # mock really sends out of spec that Kafka's own readers refuse too (tests/quirks.py;
    # test_capture_decode.py explains them); those Kafka reads are ok, with a warning.
    decode_errors = (
        summary.request_errors + summary.response_errors - sum(summary.no_schema.values())
    )
    refused = {("response", m) for _, _, cls, m in MOCK_QUIRKS if not kafka_reads(cls)}
    # Responses a SIGKILL cut (a Kafka Streams instance killed while two Fetch answers were on
    # their way to it; tests/capture/test_capture_real.py) are frames that say so.
    cut = {("response", e) for d, e, _ in summary.top_errors if e.startswith(E_CLOSED)}
    assert {(d, e) for d, e, _ in summary.top_errors} == refused | cut
    assert summary.no_schema == {}
    assert decode_errors == sum(n for _, _, n in summary.top_errors) > 0
    read = {
        ("response", k, v, re.sub(r" \(from byte \d+\)", "", tolerant_warning(m)))
        for k, v, cls, m in MOCK_QUIRKS
        if kafka_reads(cls)
    }
    assert {w[:4] for w in summary.top_warnings} == read
    assert summary.warned == {"response": sum(w[4] for w in summary.top_warnings)}
    # Every request of an api key we have a schema for decodes.
    assert all(errors == 0 for key, _, _, errors in summary.by_version if key in g.REGISTRY)
    assert len(summary.groups) >= 3
    # OUT/records: the records of every Produce request and Fetch response, with the design's
    # columns; topics named by id only are resolved from Metadata responses by the join
    # (tests/spark/test_explode.py holds the values against what the scenarios produced).
    records = spark.read.parquet(str(out / "records"))
    design = """connection_id direction api_key api_version correlation_id client_id frame_ts topic
        topic_id partition batch_index batch_offset magic compression timestamp_type
        is_transactional is_control producer_id producer_epoch base_sequence
        partition_leader_epoch batch_status batch_error offset sequence timestamp key value
        headers control_type trace_id span_id acquired delivery_count""".split()
    assert records.columns == design
    by_api = {r["api_key"]: r["count"] for r in records.groupBy("api_key").count().collect()}
    # Produce, Fetch and the share captures' ShareFetch.
    assert set(by_api) == {0, 1, 78} and all(by_api.values())
    # A ShareFetch row says whether its member acquired it; the others do not.
    share = records.where("api_key = 78")
    assert share.where("acquired IS NULL").count() == 0
    assert records.where("api_key != 78 AND acquired IS NOT NULL").count() == 0
    assert share.where("acquired AND delivery_count >= 1").count() > 0
    # Only the mock's transaction markers, whose CRC is zero (tests/quirks.py), do not read ok.
    assert (
        records.where("batch_status != 'ok'")
        .where(~(F.col("is_control") & F.col("batch_error").startswith(MOCK_CONTROL_BATCH_CRC)))
        .count()
        == 0
    )
    _delivery_agrees_with_the_scenarios(spark, out)
    _derived_steps_skip_the_payloads(spark, out)
    _summary_from_the_group_frames_is_the_same(spark, out, summary)


def _summary_from_the_group_frames_is_the_same(
    spark: SparkSession, out: Path, summary: job.Summary
) -> None:
    """The job counts its summary from the group tables' held frames of both tables; counted
    from the tables themselves (as with --no-groups) it is the same."""
    from kwire.groups.build import build_base
    from kwire.spark.summary import summarize

    requests = spark.read.parquet(str(out / "requests"))
    responses = spark.read.parquet(str(out / "responses"))
    held: list[Any] = []
    _, basis = build_base(
        requests, pipeline._read_without(spark, str(out / "responses"), pipeline._NOT_DERIVED), held
    )
    try:
        alone = summarize(requests, responses)
        shared = summarize(requests, responses, held=(basis.requests, basis.responses))
    finally:
        for df in held:
            release(df)
    assert alone == shared == summary
    assert alone.statuses and alone.by_version and alone.groups


def _derived_steps_skip_the_payloads(spark: SparkSession, out: Path) -> None:
    """The group tables and delivery never read the fetched records inside Fetch responses nor
    the frames of other APIs than the classic group ones (whose refused answers' error codes
    are read from the frame): those are most of a capture's bytes, and nested column pruning
    does not reach through the `transform` the group tables narrow responses with."""
    from kwire.groups.build import _narrow_responses

    responses = pipeline._read_without(spark, str(out / "responses"), pipeline._NOT_DERIVED)
    partition = responses.schema["fetch"].dataType["responses"].dataType.elementType
    fields = partition["partitions"].dataType.elementType.fieldNames()
    assert "records" not in fields and "high_watermark" in fields
    full = spark.read.parquet(str(out / "responses"))
    assert full.count() == responses.count() > 0
    key = "spark.sql.maxMetadataStringLength"  # plan strings whole, with every column read
    before = spark.conf.get(key)
    spark.conf.set(key, "1000000")
    try:
        plan = _narrow_responses(responses)._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set(key, before)
    scans = [line for line in plan.splitlines() if "FileScan" in line]
    assert len(scans) == 2 and not any("records:binary" in scan for scan in scans), scans
    with_frames = [scan for scan in scans if "frame:binary" in scan]
    assert len(with_frames) == 1, scans
    assert re.search(
        r"PartitionFilters: \[coalesce\(api_key#\d+ IN \(11,12,13,14\)", with_frames[0]
    )


def _delivery_agrees_with_the_scenarios(spark: SparkSession, out: Path) -> None:
    """OUT/delivery against what the scenarios' clients reported: every record a producer saw
    delivered has its row at the offset the client was told, from that producer; every record a
    consumer received has a row with that consumer's first fetch; and the instants are in the
    order the trip makes them (produced, then acked; produced, then fetched, then committed)."""
    import json

    delivery = spark.read.parquet(str(out / "delivery"))
    rows = delivery.collect()
    by_record: dict[tuple[str, int, int], list[Any]] = {}
    for r in rows:
        if r["offset"] is not None:
            by_record.setdefault((r["topic"], r["partition"], r["offset"]), []).append(r)
    produced = consumed = 0
    for sidecar in sorted((ROOT / "tests" / "data" / "capture").glob("*.json")):
        scenario = json.loads(sidecar.read_text())
        for p in scenario.get("produced", []):
            if not p.get("delivered"):
                continue
            found = by_record.get((p["topic"], p["partition"], p["offset"]), [])
            assert (
                found
            ), f"{sidecar.name}: no delivery row for {p['topic']}-{p['partition']}@{p['offset']}"
            assert {r["producer_client_id"] for r in found} == {p["client_id"]}
            assert all(r["ack_error"] is None and r["acked_at"] >= r["produced_at"] for r in found)
            produced += 1
        for c in scenario.get("consumed", []):
            # This job reads every test capture at once, and two runs of librdkafka's mock
            # (one cluster id) hold a topic of the same name and a consumer of the same
            # client id: their trips cross; in one capture there is one.
            found = [
                r
                for r in by_record.get((c["topic"], c["partition"], c["offset"]), [])
                if r["consumer_client_id"] == c["client_id"]
                and r["first_fetched_at"] >= r["produced_at"]
            ]
            assert found, f"{sidecar.name}: {c}"
            consumed += 1
    assert produced > 50 and consumed > 50, (produced, consumed)
    trips = [
        (r["cluster"], r["topic"], r["partition"], r["offset"], r["producer_connection"])
        + (r["consumer_client_id"], r["group_id"])
        for r in rows
        if r["offset"] is not None
    ]
    assert len(trips) == len(set(trips)), "a record and consumer twice"
    # A refused Produce (kafka-python's v0/v1 zstd attempts: UNSUPPORTED_VERSION) gives its
    # records no offset, and says why.
    refused = [r for r in rows if r["offset"] is None]
    assert refused and all(r["ack_error"] == 35 and r["acked_at"] for r in refused)
    for r in rows:
        if r["committed_at"] is not None:
            assert r["first_fetched_at"] is not None and r["committed_at"] >= r["first_fetched_at"]
            assert r["commit_ms"] >= 0
    assert any(r["committed_at"] is not None for r in rows)
    # committed_at is the group's first successful commit past the record, at or after its first
    # fetch, of those OUT/groups/commits lists (found here by a plain scan of every commit).
    later: dict[tuple[str, str, int], list[tuple[int, Any]]] = {}
    for c in spark.read.parquet(str(out / "groups" / "commits")).collect():
        if c["error"] is None and c["offset"] is not None:
            later.setdefault((c["group_id"], c["topic"], c["partition"]), []).append(
                (c["offset"], c["ts"])
            )
    # A share group commits nothing: its record is settled when a member's ACCEPT of it was
    # answered (OUT/share/records' accepted_at, found here by a plain scan).
    accepted = {
        (a["group_id"], a["topic"], a["partition"], a["offset"]): a["accepted_at"]
        for a in spark.read.parquet(str(out / "share" / "records")).collect()
    }
    share_groups = {k[0] for k in accepted}
    checked = 0
    for r in rows:
        if r["group_id"] is None or r["offset"] is None:
            assert r["committed_at"] is None
            continue
        if r["group_id"] in share_groups:
            key = (r["group_id"], r["topic"], r["partition"], r["offset"])
            assert r["committed_at"] == accepted.get(key), r
            checked += 1
            continue
        times = [
            ts
            for offset, ts in later.get((r["group_id"], r["topic"], r["partition"]), [])
            if offset > r["offset"]
            and (r["first_fetched_at"] is None or ts >= r["first_fetched_at"])
        ]
        assert r["committed_at"] == (min(times) if times else None), r
        checked += 1
    assert checked > 50, checked
    summary = spark.read.parquet(str(out / "delivery_summary"))
    assert summary.count() > 0
    assert summary.where("fetch_p50_ms > fetch_p99_ms").count() == 0


def test_frame_sizes_are_read_on_the_driver_from_directories_and_files(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The job sizes its batches from the frames' lengths and api keys, read with pyarrow when
    the frames tables are local: a frames table written by Spark is a directory, and a list of
    paths mixing it with a file must be read too (not sent to a Spark job). The figures agree
    with Spark's own reading of the same rows."""
    import pyarrow as pa

    lengths = [100 + (i * 7919) % 5000 for i in range(3000)] + [250_000, 400_000]
    keys = [i % 5 for i in range(len(lengths))]
    table = pa.table({"frame_length": lengths, "api_key": keys})
    folder = tmp_path / "frames.parquet"
    folder.mkdir()
    pq.write_table(table.slice(0, 1000), folder / "part-0.parquet")
    pq.write_table(table.slice(1000, 1500), folder / "part-1.parquet")
    (folder / "_SUCCESS").write_bytes(b"")
    single = tmp_path / "more.parquet"
    pq.write_table(table.slice(2500), single)

    for paths in ([str(folder)], [str(folder), str(single)]):
        here = pipeline._sizes_here(paths, ["frame_length", "api_key"])
        assert here is not None, paths
        rows = lengths[: 2500 if len(paths) == 1 else None]
        assert here["m"] == max(rows)
        assert set(here["keys"]) == {k for k in keys[: len(rows)]}
        spark_row = (
            spark.read.parquet(*paths)
            .agg(F.percentile_approx("frame_length", 0.999).alias("p"))
            .first()
        )
        ordered = sorted(rows)
        # numpy interpolates and Spark picks a row: both lie between the same two neighbours.
        low, high = ordered[int(0.999 * (len(rows) - 1))], ordered[-1]
        assert low <= here["p"] <= high and low <= spark_row["p"] <= high


def test_hold_cuts_the_plan_and_release_frees_it(spark: SparkSession) -> None:
    from kwire.spark.session import hold, release

    context = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
    before = context.getPersistentRDDs().size()
    held = hold(spark.range(100).selectExpr("id * 2 AS x").where("x % 3 = 0"))
    # The tests' session is local: a local checkpoint, so later queries plan against one leaf.
    assert held._jdf.queryExecution().logical().nodeName() == "LogicalRDD"
    assert sorted(r.x for r in held.collect()) == [x for x in range(0, 200, 2) if x % 3 == 0]
    assert context.getPersistentRDDs().size() == before + 1
    # Serialized (and compressed, the session says), spilling to disk: not rows in the heap.
    level = held._jdf.queryExecution().logical().rdd().getStorageLevel()
    assert level.useDisk() and level.useMemory() and not level.deserialized()
    release(held)
    assert context.getPersistentRDDs().size() == before


def _metric_ids(jvm: Any, node: Any) -> list[int]:
    """The accumulator ids of every metric of a physical plan's operators."""
    scala = jvm.scala.jdk.javaapi.CollectionConverters
    if node.nodeName() == "AdaptiveSparkPlan":
        node = node.executedPlan()
    ids = [m.id() for m in scala.asJava(node.metrics().values()).toArray()]
    for child in scala.asJava(node.children()).toArray():
        ids += _metric_ids(jvm, child)
    return ids


def test_held_frames_keep_their_plans_metrics_alive(spark: SparkSession) -> None:
    """A local checkpoint is computed by the first query that reads it, with the source's plan:
    that plan's metrics (held by the driver only weakly) must outlive the source frame, or the
    tasks' reports of them log an error each once the JVM has collected them."""
    import gc
    import time

    from kwire.spark.session import SHORT_JOB_SQL, hold, release, with_conf

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with with_conf(spark, SHORT_JOB_SQL):
        # As the group tables' histories: a Python function over each group (an exchange, a
        # sort and the Python runner, all with metrics).
        source = (
            spark.range(1000)
            .selectExpr("id % 7 AS g", "id AS x")
            .groupBy("g")
            .applyInPandas(lambda pdf: pdf.head(1), "g long, x long")
        )
        ids = _metric_ids(jvm, source._jdf.queryExecution().executedPlan())
        assert ids
        held = hold(source)
        del source
        # The source frame is gone from Python's side: py4j lets the JVM forget it, and the
        # JVM collects what nothing else holds.
        for _ in range(3):
            gc.collect()
            time.sleep(0.2)
            jvm.System.gc()
        context = jvm.org.apache.spark.util.AccumulatorContext
        assert all(context.get(i).isDefined() for i in ids)
        assert held.count() == 7
    release(held)


def test_hold_caches_on_a_cluster(spark: SparkSession) -> None:
    """Where an executor can be lost, held frames stay recomputable: cached, not cut."""
    from kwire.spark.session import hold, release

    df = spark.range(50).selectExpr("id + 1 AS x")
    held = hold(df, local=False)
    assert held.is_cached and held.storageLevel.useDisk
    assert held._jdf.queryExecution().logical().nodeName() != "LogicalRDD"
    assert sum(r.x for r in held.collect()) == sum(range(1, 51))
    release(held)
    assert not held.is_cached


def test_local_sessions_take_the_parallel_collector_and_live_c2_for_hot_code_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every session kwire starts on a local master gets the parallel collector, and `kwire
    live` C2 for code that stays hot: flags the JVM starts with. Not a cluster's driver; a
    collector chosen in the site's spark-defaults.conf or in JAVA_TOOL_OPTIONS stays (two make
    the JVM refuse to start)."""
    import shlex
    import subprocess

    from kwire.spark.classes import _java
    from kwire.spark.session import C1_JVM, LIVE_JVM, LOCAL_GC, session_settings

    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.delenv("JDK_JAVA_OPTIONS", raising=False)
    java = "spark.driver.extraJavaOptions"
    live = session_settings("local[2]", live=True, defaults={})[java]
    assert LOCAL_GC in live and LIVE_JVM in live and C1_JVM not in live
    for batch, short in ((True, False), (False, True), (False, False)):
        local = session_settings("local[2]", batch=batch, short=short, defaults={})[java]
        assert LOCAL_GC in local and LIVE_JVM not in local, (batch, short)
    cluster = "spark://127.0.0.1:7077"
    assert LOCAL_GC not in session_settings(cluster, live=True, batch=True, defaults={})[java]
    assert LIVE_JVM not in session_settings(cluster, live=True, defaults={})[java]
    site = session_settings("local[2]", live=True, defaults={java: "-XX:+UseG1GC"})[java]
    assert LOCAL_GC not in site and LIVE_JVM in site and site.endswith("-XX:+UseG1GC")
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss4m -XX:+UseSerialGC")
    assert LOCAL_GC not in session_settings("local[2]", batch=True, defaults={})[java]
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    binary = _java()  # the java spark-submit runs
    if binary is None:
        pytest.skip("no java binary found to start")
    batch = session_settings("local[2]", batch=True, defaults={})[java]
    runs = ((live, True), (batch, True), (site, True), (f"{live} -XX:+UseG1GC", False))
    for flags, starts in runs:
        done = subprocess.run(
            [binary, *shlex.split(flags), "-version"], capture_output=True, text=True
        )
        assert (done.returncode == 0) == starts, (flags, done.stderr)


def test_local_jvms_and_their_python_workers_start_with_glibcs_arenas_capped(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JVM kwire starts on a local master, and the Python workers it starts, get
    MALLOC_ARENA_MAX (kwire.spark.session.ARENAS: one per core, at least two) unless the
    environment sets it already; a cluster's are not touched. The tests' session starts its JVM
    the way build_session does."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from kwire.spark.session import jvm_environment

    with monkeypatch.context() as env:
        env.delenv("MALLOC_ARENA_MAX", raising=False)
        cores = max(2, os.cpu_count() or 2)
        assert jvm_environment("local[*,4]") == {"MALLOC_ARENA_MAX": str(cores)}
        assert jvm_environment("spark://127.0.0.1:7077") == {}
        env.setenv("MALLOC_ARENA_MAX", "8")
        assert jvm_environment("local[2]") == {}  # the user's stays
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{pid}/environ", "rb") as f:
        jvm = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    # One per core unless whoever ran the tests set their own (conftest applies
    # jvm_environment too).
    want = os.environ["MALLOC_ARENA_MAX"]
    assert jvm.get(b"MALLOC_ARENA_MAX") == want.encode(), "the tests' JVM started without it"
    arenas = F.udf(lambda _: os.environ.get("MALLOC_ARENA_MAX"), StringType())
    assert spark.range(1).select(arenas("id")).first()[0] == want


def test_a_small_local_job_starts_its_jvm_for_a_short_run(tmp_path: Path) -> None:
    """A batch job gets C1 alone (on a cluster, the driver and small executors), and on a local
    master inputs up to SHORT_INPUT interpreted queries too; sessions that live on keep the
    JVM's default tiers and compiled queries, and the user's own java options win over kwire's."""
    from kwire.spark.session import C1_JVM, session_settings

    small = tmp_path / "small.pcap"
    small.write_bytes(b"\0" * 1000)
    table = tmp_path / "frames.parquet"
    (table / "part").mkdir(parents=True)
    (table / "part" / "a.parquet").write_bytes(b"\0" * 3000)
    assert job._input_bytes([str(table)], [str(small)]) == 4000
    assert job._input_bytes([], [str(tmp_path)]) == 1000  # a directory of captures
    assert job._input_bytes([], ["s3://bucket/ring/"]) == float("inf")
    big = tmp_path / "big.pcap"
    with open(big, "wb") as f:  # sparse: its size, not its blocks, is what counts
        f.truncate(job.SHORT_INPUT + 1)
    assert job._input_bytes([], [str(big)]) > job.SHORT_INPUT

    java = "spark.driver.extraJavaOptions"
    mode = "spark.sql.codegen.factoryMode"
    assert session_settings("local[*,4]", short=True)[mode] == "NO_CODEGEN"
    assert mode not in session_settings("local[*,4]", short=False)
    assert mode not in session_settings("spark://127.0.0.1:7077", short=True)
    assert session_settings("local[2]", [(mode, "FALLBACK")], short=True)[mode] == "FALLBACK"
    assert mode not in session_settings("local[*,4]", batch=True)
    assert C1_JVM in session_settings("local[*,4]", short=True)[java]
    assert C1_JVM in session_settings("local[*,4]", batch=True)[java]
    assert C1_JVM not in session_settings("local[*,4]")[java]
    # Compiled query classes kept for queries planned again (a live run's rebuilds), in every
    # session kwire starts; the user's setting wins.
    cache = "spark.sql.codegen.cache.maxEntries"
    assert int(session_settings("local[*,4]")[cache]) >= 1000
    assert int(session_settings("spark://127.0.0.1:7077", defaults={})[cache]) >= 1000
    assert session_settings("local[2]", [(cache, "100")])[cache] == "100"
    cluster = "spark://127.0.0.1:7077"
    # A cluster's driver plans and schedules: C1 for a batch job, the default otherwise.
    assert C1_JVM in session_settings(cluster, batch=True, defaults={})[java]
    assert C1_JVM not in session_settings(cluster, defaults={})[java]
    mine = session_settings("local[2]", [(java, "-Xss4m")], short=True)
    assert mine[java] == "-Xss4m"
    # Executors: C1 when they are known to be small, first, so that later flags (the
    # cluster's, the user's) win; not when their size is unknown or large, nor outside a batch.
    exe = "spark.executor.extraJavaOptions"
    one = [("spark.executor.cores", "1")]
    assert session_settings(cluster, one, batch=True, defaults={})[exe] == C1_JVM
    assert exe not in session_settings(cluster, batch=True, defaults={})
    assert exe not in session_settings(cluster, [("spark.executor.cores", "8")], True, True, {})
    assert exe not in session_settings(cluster, one, defaults={})
    assert exe not in session_settings("local[2]", one, batch=True, defaults={})
    theirs = {exe: "-XX:+UseParallelGC", "spark.executor.cores": "2", java: "-Dsite=1"}
    merged = session_settings(cluster, batch=True, defaults=theirs)
    assert merged[exe] == f"{C1_JVM} -XX:+UseParallelGC"
    assert merged[java].endswith(f"{C1_JVM} -Dsite=1")  # the cluster's driver options kept
    users = session_settings(cluster, one + [(exe, "-XX:TieredStopAtLevel=4")], batch=True)
    assert users[exe] == f"{C1_JVM} -XX:TieredStopAtLevel=4"
    # PySpark's per-call DataFrame debugging is off in kwire's sessions, on again if asked.
    debugging = "spark.python.sql.dataFrameDebugging.enabled"
    assert session_settings("local[*,4]")[debugging] == "false"
    assert session_settings("spark://127.0.0.1:7077")[debugging] == "false"
    assert session_settings("local[2]", [(debugging, "true")])[debugging] == "true"


def test_spark_defaults_are_read_as_spark_submit_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kwire.spark.session import spark_defaults

    (tmp_path / "spark-defaults.conf").write_text(
        "# a comment\n! another\n\nspark.executor.cores   1\n"
        "spark.executor.extraJavaOptions=-XX:+UseG1GC -Dx=1\nspark.master: yarn\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert spark_defaults() == {
        "spark.executor.cores": "1",
        "spark.executor.extraJavaOptions": "-XX:+UseG1GC -Dx=1",
        "spark.master": "yarn",
    }
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "none"))
    assert spark_defaults() == {}


@pytest.mark.parametrize("size, short", [(1000, True), (job.SHORT_INPUT + 1, False)])
def test_the_job_starts_a_batch_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, short: bool
) -> None:
    """`kwire decode` asks for a batch session (C1 alone on a local master, whatever the
    input's size), and a short one only for small inputs."""
    import kwire.spark.session as session

    asked: dict[str, Any] = {}

    class Started(Exception):
        pass

    def fake(*args: Any, **kwargs: Any) -> None:
        asked.update(kwargs)
        raise Started

    monkeypatch.setattr(session, "build_session", fake)
    capture = tmp_path / "in.pcap"
    with open(capture, "wb") as f:  # sparse: only its size matters before the session starts
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # a pcap header
        f.truncate(size)
    args = job.parse_args([str(capture), "-o", str(tmp_path / "out"), "--capture-on", "spark"])
    with pytest.raises(Started):
        job.run(args)
    assert asked["batch"] is True
    assert asked["short"] is short


def _rows(path: Path) -> list[str]:
    table = pq.read_table(path)
    return sorted(repr(sorted(row.items())) for row in table.to_pylist())


@pytest.mark.long(36)
def test_interpreted_queries_write_what_compiled_ones_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A short job runs its queries interpreted (kwire.spark.session.SHORT_JOB_SQL), a long one
    compiled: every table of a capture with every table comes out the same, row for row. (The
    tests' session interprets, as short jobs do; the compiled run sets Spark's default back.)"""
    from kwire.spark import manifest
    from kwire.spark.session import SHORT_JOB_SQL, with_conf

    capture = str(ROOT / "tests" / "data" / "capture" / "mock_gt_progress.pcap")
    compiled = tmp_path / "compiled"

    def plan() -> str:
        return str(spark.range(3).filter("id > 1")._jdf.queryExecution().executedPlan())

    with with_conf(spark, {"spark.sql.codegen.factoryMode": "FALLBACK"}):
        assert "*(1) Filter" in plan()  # whole-stage code generation, as a long job has it
        run_job(spark, [capture], compiled)
    interpreted = tmp_path / "interpreted"
    with with_conf(spark, SHORT_JOB_SQL):
        assert "*(" not in plan()
        run_job(spark, [capture], interpreted)
    tables = manifest.read(str(compiled))["tables"]
    assert tables == manifest.read(str(interpreted))["tables"]
    assert {"records", "groups/progress", "groups/assignments", "delivery"} <= set(tables)
    filled = 0
    for name, relative in tables.items():
        a, b = _rows(compiled / relative), _rows(interpreted / relative)
        assert a == b, name
        filled += bool(a)
    # This capture has no assignment changes, no describe call (groups/described) and no share
    # group (its four OUT/share tables).
    assert filled >= len(tables) - 3 - 4
