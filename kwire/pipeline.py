"""The pipeline `kwire decode` and `kwire live` both run, as the list of its stages.

    capture    captures -> frames              kwire.job (the driver's reader or the executors'),
                                               kwire.live (the ring's flows, state carried over)
    decode     frames -> requests, responses   decode()
    records    frames, responses -> records    records()
    groups     requests, responses (records)   derived(): groups/ and share/
    delivery   records, groups/                derived(): delivery and delivery_summary

Each stage adds its steps to a kwire.spark.steps.Steps, which runs the steps whose inputs are
written side by side. `kwire decode` runs every stage once over the whole capture into OUT;
`kwire live` runs decode and records over each batch of new files into a staging directory it
then moves into OUT, and groups and delivery over OUT's whole history now and then
(docs/live.md). What the stages share: the frames' batch sizes (size_batches, set once the
frames are known, before decoding), and the names of the steps a later stage waits for
(DECODED, EXPLODED).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
from functools import partial
from typing import Any, Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructField, StructType

from kwire.capture.distributed import SPLIT_BYTES, FileChanged, SplitError, local_path
from kwire.capture.tls import KeyLog
from kwire.spark.api import decode_requests, decode_responses, write_decoded
from kwire.spark.explode import records_table, write_records
from kwire.spark.explode import row_size as records_row_size
from kwire.spark.driver import describe_jobs, runs_locally
from kwire.spark.model import FAMILIES
from kwire.spark.progress import Progress
from kwire.spark.session import hold, hold_per_core, release
from kwire.spark.sink import has_parquet_files, resize_row_groups, write_parquet
from kwire.spark.steps import Steps

Tell = Callable[[str], None]


class JobError(Exception):
    """A problem with the job's inputs or options, reported in one line."""


def _quiet(_: str) -> None:
    pass


def say(message: str) -> None:
    """One line on stderr, as the job tells what it does."""
    # One write, line and newline together: the driver's capture says its lines from a thread
    # of its own while the session starts.
    sys.stderr.write(f"kwire: {message}\n")
    sys.stderr.flush()


# The steps later stages wait for.
DECODED = ("decode requests", "decode responses")
EXPLODED = ("explode records",)


# -- capture: captures -> frames (kwire decode's; kwire live tracks its ring's flows itself) --


def run_capture(
    captures: list[str], out: str, broker_ports: list[int] | None, keylog: KeyLog | None = None
) -> str:
    """Runs the capture step on the driver, in one process; returns the frames table's path."""
    from kwire import capture

    frames = os.path.join(out, "frames.parquet")
    os.makedirs(out, exist_ok=True)
    ports = broker_ports or list(capture.DEFAULT_BROKER_PORTS)
    say(f"capture: {len(captures)} file(s) -> {frames} (broker ports {ports})")
    summary = capture.write_parquet(captures, frames, ports, errors="report", keylog=keylog)
    _report_capture(summary)
    return frames


def run_capture_on_spark(
    spark: SparkSession,
    captures: list[str],
    out: str,
    broker_ports: list[int] | None,
    progress: Progress | None = None,
    split_size: int = SPLIT_BYTES,
    keylog: KeyLog | None = None,
) -> str:
    """Runs the capture step on the executors; returns the frames table's path."""
    from kwire.capture import DEFAULT_BROKER_PORTS

    from kwire.spark.spark_capture import capture_frames

    frames = os.path.join(out, "frames.parquet")
    ports = broker_ports or list(DEFAULT_BROKER_PORTS)
    try:
        run = capture_frames(spark, captures, ports, split_size=split_size, keylog=keylog)
    except FileNotFoundError as e:
        raise JobError(str(e)) from None
    total = sum(size for _, _, size in run.files)
    detail = f"{len(run.files)} file(s), {total / 1e6:,.1f} MB, broker ports {ports}"
    say(f"capture on Spark: {detail} -> {frames}")
    progress_step(spark, progress, "capture", detail)
    started = time.monotonic()
    try:
        if local_path(frames) is not None:
            run.write(frames)  # each tracking task writes its frames' file
        else:
            write_parquet(run.frames, frames)
    except Exception as e:
        changed = executor_error(e, FileChanged)
        if changed is None:
            raise
        # A file changed under the step (a ring rotated over): no table that looks complete.
        if "://" not in frames:
            shutil.rmtree(frames, ignore_errors=True)
        raise JobError(changed) from None
    # Row groups are cut by compressed size; a capture of large compressible frames (records
    # sent uncompressed) is written again with a bound on rows, so a default session reads it.
    resize_row_groups(spark, frames, "frame_length")
    try:
        summary = run.summary()
    except SplitError as e:
        # The frames cannot be trusted: leave no table that looks like a result.
        if "://" not in frames:
            shutil.rmtree(frames, ignore_errors=True)
        raise JobError(str(e)) from None
    if not runs_locally(spark):
        not_on_workers(summary.files)
    _report_capture(summary)
    say(f"captured -> {frames} ({time.monotonic() - started:.1f} s)")
    return frames


def not_on_workers(files: list[dict[str, Any]]) -> None:
    """Says why, on a cluster, the executors could not open a local capture the driver sees:
    a local path must name the same file on every worker."""
    for f in files:
        path = local_path(str(f.get("path", "")))
        if str(f.get("error", "")).startswith("cannot open") and path and os.path.isfile(path):
            f["error"] += (
                " (on the executors; the driver has it: local paths must be readable on every"
                " worker, so put the captures on a shared filesystem or in object storage,"
                " s3://, hdfs://, gs://)"
            )


def _report_capture(summary: Any) -> None:
    failed = [f for f in summary.files if f.get("error")]
    for f in failed:
        say(f"capture: {f['path']}: {f['error']}")
    frames = summary.frames["request"] + summary.frames["response"]
    say(
        f"capture: {summary.packets:,} packets, {frames:,} frames "
        f"({summary.frames['request']:,} requests, {summary.frames['response']:,} responses)"
    )
    if not frames and summary.packets:
        # Not an error (the tables are written, empty), but most likely not what was meant.
        skipped = ", ".join(f"{n:,} {why}" for why, n in summary.skipped_packets.most_common(3))
        ignored = ", ".join(f"{n:,} {why}" for why, n in summary.connections_ignored.most_common(3))
        say(
            f"capture: no Kafka frames in {summary.tcp_segments:,} TCP segments"
            + (f"; connections ignored: {ignored}" if ignored else "")
            + (f"; packets passed over: {skipped}" if skipped else "")
        )
    if summary.tls:
        parts = ", ".join(f"{n:,} {what}" for what, n in sorted(summary.tls.items()))
        say(f"capture: TLS connections: {parts}")
    if failed and len(failed) == len([f for f in summary.files if "skipped" not in f]):
        raise JobError("no capture could be read")


def failure_text(e: BaseException) -> str:
    """A failure's whole text: its Python traceback, and for Spark's the Java exception's text,
    which carries the executors' Python tracebacks."""
    import traceback

    text = "".join(traceback.format_exception(e))
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            text += "\n" + str(java.toString())
        except Exception:
            pass
    return text


def executor_error(e: BaseException, kind: type[BaseException]) -> str | None:
    """The message of a `kind` error raised in an executor's Python worker, found in the text of
    the Spark failure that carries it (its traceback's last line), else None."""
    text = failure_text(e)
    found = re.search(rf"^(?:[\w.]+\.)?{kind.__name__}: (.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else None


def progress_step(
    spark: SparkSession, progress: Progress | None, step: str, detail: str = ""
) -> None:
    """A new step: on the progress line, and as the name of its jobs in Spark's UI."""
    describe_jobs(spark, step)
    if progress is not None:
        progress.start(step, detail)


# -- decode: frames -> requests, responses ------------------------------------------------------


def decode_frames(
    frames: DataFrame, families: Sequence[str] | None = None, tolerant: bool = True
) -> tuple[DataFrame, DataFrame]:
    """The frames table -> (decoded requests, decoded responses)."""
    if "direction" not in frames.columns or "frame" not in frames.columns:
        raise JobError("a frames table needs `frame` and `direction` columns")
    requests = decode_requests(
        frames.where(F.col("direction") == "request"), families=families, tolerant=tolerant
    )
    responses = decode_responses(
        frames.where(F.col("direction") == "response"), families=families, tolerant=tolerant
    )
    return requests, responses


def present_families(keys: set[int]) -> list[str]:
    """The families whose api keys occur in the frames table, so the decoded tables carry a
    struct column per API present rather than all 93: writing 93 mostly-null structs per row
    costs about three times the Parquet sink of a few (docs/scale.md)."""
    return [name for name, key in FAMILIES.items() if key in keys]


# Bytes of frames a task holds in one batch: Parquet's vectorized reader and the Arrow batches
# to the Python workers are sized in rows, so the job picks the rows from the frames' sizes.
BATCH_BYTES = 32 * 1024 * 1024
READER_ROWS = 4096  # Spark's defaults, kept when frames are small
ARROW_ROWS = 10000


def _sizes_here(paths: list[str], columns: list[str]) -> dict[str, Any] | None:
    """size_batches' figures read with pyarrow on the driver, when every frames table is local:
    two small columns, and no Spark job (about 2 s of a small capture's run, most of it the
    first job's warm-up). None when a path is remote or pyarrow cannot read it."""
    import numpy as np
    import pyarrow.dataset as ds

    local = [local_path(p) for p in paths]
    if any(p is None for p in local):
        return None
    wanted = [c for c in ("frame_length", "api_key") if c in columns]
    try:
        # One dataset per table: a list of paths must name files, and the frames table the
        # capture on Spark writes is a directory (which sent every such job to Spark).
        parts = [ds.dataset(str(p), format="parquet", partitioning="hive") for p in local]
        table = ds.dataset(parts).to_table(columns=wanted)
    except Exception:  # Spark reads what pyarrow cannot: let it
        return None
    row: dict[str, Any] = {}
    if "frame_length" in wanted:
        lengths = table.column("frame_length").drop_null().to_numpy()
        row["p"] = float(np.percentile(lengths, 99.9)) if len(lengths) else None
        row["m"] = int(lengths.max()) if len(lengths) else None
    if "api_key" in wanted:
        row["keys"] = [k for k in table.column("api_key").unique().to_pylist() if k is not None]
    return row


def size_batches(
    spark: SparkSession, frames: DataFrame, paths: list[str] | None = None
) -> tuple[int, int, int, set[int] | None]:
    """Sets the reader and Arrow batch rows so a batch of frames is about BATCH_BYTES: rows =
    BATCH_BYTES / the 99.9th percentile frame length. A batch of 4096 frames of 300 kB (a
    Produce/Fetch-heavy ring) would be 1.2 GB in one column vector: that, not the data's size,
    is what ran the JVM out of heap. The same pass over the small frame_length and api_key
    columns (one Spark job, or pyarrow when `paths`, the frames tables, are local) also gives the
    api keys present. Returns (reader rows, Arrow rows,
    the largest frame's length, the api keys or None without an api_key column); leaves
    settings the user gave with --conf alone."""
    aggs = []
    if "frame_length" in frames.columns:
        aggs += [
            F.percentile_approx("frame_length", 0.999).alias("p"),
            F.max("frame_length").alias("m"),
        ]
    if "api_key" in frames.columns:
        aggs.append(F.collect_set("api_key").alias("keys"))
    if not aggs:
        return READER_ROWS, ARROW_ROWS, 0, None
    row: Any = _sizes_here(paths, frames.columns) if paths else None
    if row is None:
        row = frames.agg(*aggs).first()
    keys = set(row["keys"]) if row is not None and "api_key" in frames.columns else None
    if "frame_length" not in frames.columns:
        return READER_ROWS, ARROW_ROWS, 0, keys
    typical = max(int(row["p"] or 0), 1) if row is not None else 1
    largest = int(row["m"] or 0) if row is not None else 0
    rows = max(1, BATCH_BYTES // typical)
    chosen = []
    for key, default in (
        ("spark.sql.parquet.columnarReaderBatchSize", READER_ROWS),
        ("spark.sql.execution.arrow.maxRecordsPerBatch", ARROW_ROWS),
    ):
        if key in USER_CONF:
            chosen.append(int(spark.conf.get(key) or default))
            continue
        value = min(default, rows)
        spark.conf.set(key, str(value))
        chosen.append(value)
    return chosen[0], chosen[1], largest, keys


USER_CONF: set[str] = set()


def write(df: DataFrame, path: str, mode: str, row_bytes: int | None = None) -> None:
    """A decoded table, partitioned by api key, in row groups a default session reads (a row
    holds its frame and the decoded message, which may carry the records again: twice the
    frame)."""
    write_parquet(df, path, mode=mode, partition_by="api_key", row_bytes=row_bytes)


def decode(
    steps: Steps,
    frames: DataFrame,
    dst: str,
    families: Sequence[str] | None,
    tolerant: bool = True,
    *,
    largest: int = 0,
    tell: Tell = _quiet,
) -> list[tuple[str, str]]:
    """Stage decode: adds the steps DECODED, which write `frames` decoded to `dst`/requests and
    `dst`/responses, partitioned by api key; returns their (name, path). A local table is
    decoded and written by the same tasks (kwire.spark.api.write_decoded); elsewhere Spark's
    writer writes the decoded rows, in row groups bounded by twice the `largest` frame."""
    requests, responses = decode_frames(frames, families, tolerant=tolerant)
    written = []
    for name, df in (("requests", requests), ("responses", responses)):
        target = os.path.join(dst, name)
        if local_path(target) is not None:
            run = partial(write_decoded, frames, target, name[:-1], families, tolerant)
        else:
            run = partial(write, df, target, "overwrite", row_bytes=2 * largest or None)
        steps.add(f"decode {name}", partial(_timed, run, f"decoded {name}", target, tell))
        written.append((name, target))
    return written


def _timed(run: Callable[[], Any], what: str, target: str, tell: Tell) -> None:
    t = time.monotonic()
    run()
    tell(f"{what} -> {target} ({time.monotonic() - t:.1f} s)")


# -- records: frames, responses -> records ------------------------------------------------------


def records(steps: Steps, frames: DataFrame, dst: str, *, tell: Tell = _quiet) -> tuple[str, str]:
    """Stage records: adds the step EXPLODED, which writes the records inside the Produce
    requests and Fetch / ShareFetch responses of `frames` to `dst`/records, one row per record,
    once `dst`/responses is written (Metadata responses name the topics fetched by id);
    returns its (name, path)."""
    target = os.path.join(dst, "records")
    spark = frames.sparkSession

    def explode() -> None:
        responses_path = os.path.join(dst, "responses")
        # Requests and no response (the end of a capture, a live batch) write no files.
        responses = None
        if local_path(responses_path) is None or has_parquet_files(responses_path):
            responses = spark.read.parquet(responses_path)
        # Row groups cut by compressed size alone, then bounded by the largest record if they
        # came out too large once uncompressed: bounding them by the largest frame, as the
        # decoded tables are, made row groups of ~100 records (4,360 on the 1.2 GB ring).
        if local_path(target) is not None:
            write_records(frames, target, responses)  # the exploding tasks write it
        else:
            write_parquet(records_table(frames, responses), target)
        if local_path(target) is None or has_parquet_files(target):
            resize_row_groups(spark, target, records_row_size())

    steps.add(
        EXPLODED[0], partial(_timed, explode, "exploded records", target, tell), after=DECODED[1:]
    )
    return "records", target


# -- groups and delivery: the tables derived from the decoded ones ------------------------------


# What no derived table reads, and what would be most of a scan's bytes: the fetched records
# inside each Fetch response (OUT/records holds them one a row). Spark's nested column pruning
# stops at higher-order functions (the group tables keep a few numbers of each fetched partition
# with `transform`), so they are left out of the schema the table is read with.
_NOT_DERIVED = ("fetch.responses.partitions.records", "share_fetch.responses.partitions.records")


def _without(schema: StructType, path: list[str]) -> StructType:
    """`schema` without the nested field at `path` (through structs and arrays)."""

    def inner(t: DataType, rest: list[str]) -> DataType:
        if isinstance(t, ArrayType):
            return ArrayType(inner(t.elementType, rest), t.containsNull)
        return _without(t, rest) if isinstance(t, StructType) else t

    fields = []
    for f in schema.fields:
        if f.name != path[0]:
            fields.append(f)
        elif len(path) > 1:
            fields.append(StructField(f.name, inner(f.dataType, path[1:]), f.nullable, f.metadata))
    return StructType(fields)


def _read_without(spark: SparkSession, path: str, drop: Sequence[str]) -> DataFrame:
    """The Parquet table at `path`, read without the nested fields `drop` (dotted paths): the
    reader then never touches their bytes."""
    schema = spark.read.parquet(path).schema
    for dotted in drop:
        schema = _without(schema, dotted.split("."))
    return spark.read.schema(schema).parquet(path)


def _readable(table: str) -> bool:
    """Whether the table at `table` can be read back: an empty OUT/records has no files (Spark
    writes none). A remote path is taken to be there."""
    return local_path(table) is None or has_parquet_files(table)


def only(df: DataFrame, families: Sequence[str] | None) -> DataFrame:
    """A decoded table without the columns of the families not in `families` (all of them
    when None)."""
    if families is None:
        return df
    keep = set(families)
    return df.select(*[c for c in df.columns if c not in FAMILIES or c in keep])


def derived_inputs(spark: SparkSession, src: str, records: bool = True) -> dict[str, DataFrame]:
    """What derived() reads of the decoded tables under `src` (requests, responses and, with
    `records`, records), rows and columns (kwire.groups.build.narrow_inputs, and
    kwire.groups.delivery.data_records of the records), by name: written under a directory,
    derived(inputs_at=that directory) gives what derived() gives from `src`."""
    from kwire.groups.build import narrow_inputs
    from kwire.groups.delivery import data_records

    requests = spark.read.parquet(os.path.join(src, "requests"))
    responses = _read_without(spark, os.path.join(src, "responses"), _NOT_DERIVED)
    req, resp = narrow_inputs(requests, responses)
    out = {"requests": req, "responses": resp}
    records_path = os.path.join(src, "records")
    if records and _readable(records_path):
        out["records"] = data_records(spark.read.parquet(records_path))
    return out


def derived(
    steps: Steps,
    spark: SparkSession,
    src: str,
    dst: str,
    *,
    groups: bool = True,
    share: bool = True,
    delivery: bool = True,
    with_records: bool = True,
    tell: Tell | None = None,
    decoded: Sequence[str] = (),
    exploded: Sequence[str] = (),
    inputs_at: str | None = None,
    families: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """Adds to `steps` the tables derived from the decoded ones under `src` (once the steps in
    `decoded` have written requests and responses, and those in `exploded` records: none when
    they are there already), written under `dst`: groups/ (its commits and progress with
    time lag when `src` has records: `with_records`), then delivery and delivery_summary (when
    it has records and `delivery`). The produced records' offsets are computed once for both
    and dropped from Spark's cache when the steps end. Returns the list of (name, path) the
    steps write, delivery's two added once written (there are none without records). Run the
    steps (Steps.run) to write them. OUT/share comes with groups/ unless `share` is false.
    `inputs_at`: where derived_inputs()'s requests, responses and records were written, read
    instead of `src`'s decoded tables (kwire live). `families`: the only ones whose columns
    the decoded tables' readers keep (kwire live's tables have every family's, mostly
    null), else all they have."""

    tell = tell or _quiet
    read_from = inputs_at or src
    records_path = os.path.join(read_from, "records")
    delivery = delivery and with_records
    if not groups and not delivery:
        return []
    held: list[DataFrame] = []

    def release_held() -> None:
        for df in held:
            release(df)

    steps.finally_(release_held)
    inputs: dict[str, Any] = {}

    def read_inputs() -> None:
        responses = os.path.join(read_from, "responses")
        inputs["responses"] = only(_read_without(spark, responses, _NOT_DERIVED), families)
        inputs["records"] = inputs["prod"] = inputs["known"] = inputs["endpoints"] = None

    def read_records() -> None:
        if _readable(records_path):
            inputs.update(_produced(spark, spark.read.parquet(records_path), inputs["responses"]))
            held.extend(df for key in ("endpoints", "records", "prod") if (df := inputs[key]))

    # The decoded responses, read without what no derived table reads; then, with records, the
    # produced ones and their offsets.
    steps.add("derived inputs", read_inputs, after=decoded)
    first = "derived inputs"
    if with_records:
        first = "produced records and their offsets"
        steps.add(first, read_records, after=["derived inputs", *exploded])
    # The group tables in their order, then delivery's two once written (not without records).
    written: list[tuple[str, str]] = []
    if groups:
        after_lag = [first] if with_records else []
        written += group_tables(
            steps, spark, read_from, dst, inputs, after_lag, share, tell, families
        )
    if delivery:
        delivery_tables(steps, spark, dst, inputs, first, groups, share, tell, written)
    return written


def group_tables(
    steps: Steps,
    spark: SparkSession,
    src: str,
    dst: str,
    inputs: dict[str, Any],
    after_lag: Sequence[str],
    share: bool,
    tell: Tell,
    families: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """Stage groups: the steps that write groups/ (and share/ with `share`) under `dst` from
    `src`'s requests (their `families`' columns, see derived()) and derived()'s `inputs`, the
    lags once the steps `after_lag` have found the records' offsets
    (kwire.groups.build.add_steps); returns their (name, path)."""
    from kwire.groups.build import add_steps

    def decoded() -> tuple[DataFrame, DataFrame]:
        requests = spark.read.parquet(os.path.join(src, "requests"))
        return only(requests, families), inputs["responses"]

    return add_steps(
        steps,
        spark,
        decoded,
        lambda: (inputs["known"], inputs["endpoints"]),
        dst,
        after=["derived inputs"],
        after_lag=after_lag,
        tell=tell,
        share=share,
    )


def delivery_tables(
    steps: Steps,
    spark: SparkSession,
    dst: str,
    inputs: dict[str, Any],
    first: str,
    groups: bool,
    share: bool,
    tell: Tell,
    written: list[tuple[str, str]],
) -> None:
    """Stage delivery: the steps that write `dst`/delivery and `dst`/delivery_summary from
    derived()'s `inputs`, after the step `first` and, with `groups`, the group tables' commits
    and members (and the share tables' accepted records with `share`); each appends its
    (name, path) to `written` once written (nothing without records)."""
    started: dict[str, float] = {}

    def write_delivery_table() -> None:
        if inputs["records"] is None:
            return
        started["t"] = time.monotonic()
        records, prod, endpoints = inputs["records"], inputs["prod"], inputs["endpoints"]
        # A share group's records settle when accepted: held by the share step, so delivery
        # need not wait for OUT/share/records to be written.
        share_tables = steps.result("share tables") if groups and share else None
        accepted = share_tables["accepted"] if share_tables else None
        target = write_delivery(spark, records, prod, endpoints, dst, groups, accepted)
        written.append(("delivery", target))

    def write_summary() -> None:
        if inputs["records"] is None:
            return
        written.append(("delivery_summary", write_delivery_summary(spark, dst)))
        took = time.monotonic() - started["t"]
        tell(f"delivery -> {os.path.join(dst, 'delivery')} ({took:.1f} s)")

    needs = ["group tables: commits", "group tables: members"] if groups else [first]
    if groups and share:
        needs.append("share tables")
    steps.add("delivery", write_delivery_table, after=needs)
    steps.add("delivery summary", write_summary, after=["delivery"])


def _produced(spark: SparkSession, records: DataFrame, responses: DataFrame) -> dict[str, Any]:
    """The data records, the produced ones with their offsets, and the broker endpoints'
    clusters (kwire.groups.delivery), held for the steps that read them."""
    from kwire.groups.delivery import Known, clusters, data_records, produced

    # Broker endpoint -> cluster id, for the produced records, the fetched ones and the
    # commits' coordinators alike.
    endpoints = clusters(responses)
    if endpoints is not None:
        endpoints = hold(endpoints)
    records = hold_per_core(data_records(records))
    prod = hold(produced(records, responses, endpoints))
    # What the time lags ask of the records' offsets, asked by each for its own (Known).
    known = Known(records, prod, endpoints)
    return {"endpoints": endpoints, "records": records, "prod": prod, "known": known}


def write_delivery(
    spark: SparkSession,
    records: DataFrame,
    prod: DataFrame,
    endpoints: DataFrame | None,
    out: str,
    groups: bool,
    accepted: DataFrame | None = None,
) -> str:
    """OUT/delivery from add_derived()'s data records, produced records and cluster ids, with
    the group tables' commits and members written under `out` and the share records' acceptance
    (kwire.groups.share_build.told_share's "accepted"); returns its path."""
    from kwire.groups.delivery import delivery

    commits = members = None
    if groups:
        commits = spark.read.parquet(os.path.join(out, "groups", "commits"))
        members = spark.read.parquet(os.path.join(out, "groups", "members"))
    target = os.path.join(out, "delivery")
    write_parquet(delivery(records, prod, endpoints, commits, members, accepted), target)
    return target


def write_delivery_summary(spark: SparkSession, out: str) -> str:
    """OUT/delivery_summary from OUT/delivery; returns its path."""
    from kwire.groups.delivery import summary

    brief = os.path.join(out, "delivery_summary")
    write_parquet(summary(spark.read.parquet(os.path.join(out, "delivery"))), brief)
    return brief
