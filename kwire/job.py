"""The decode job: `kwire decode FRAMES_OR_PCAPS... -o OUT [--master URL]`.

Captures (pcap/pcapng files, directories of them, or remote URLs) go through the capture step
first, on the executors (kwire/spark/spark_capture.py; `--capture-on driver` runs the single-process
`kwire.capture` reader instead), into OUT/frames.parquet; frames tables (Parquet files or
directories) are read as they are. Requests and responses are decoded on Spark
and written to OUT/requests and OUT/responses, partitioned by api_key; the records inside Produce
requests and Fetch / ShareFetch responses are exploded to OUT/records, one row per record; a short
summary follows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructField, StructType

from kwire import __version__
from kwire.capture.distributed import (
    SPLIT_BYTES,
    FileChanged,
    SplitError,
    list_files,
    load_keylog,
    local_path,
    parse_size,
)
from kwire.capture.tls import KeyLog, KeyLogError
from kwire.spark.api import decode_requests, decode_responses, write_decoded
from kwire.spark import manifest
from kwire.spark.explode import records_table, write_records
from kwire.spark.explode import row_size as records_row_size
from kwire.spark.model import FAMILIES
from kwire.spark.progress import Progress, describe_outputs
from kwire.spark.driver import master as master_of
from kwire.spark.driver import describe_jobs, is_loopback, parallelism, runs_locally
from kwire.spark.session import hold, hold_per_core, is_local, release
from kwire.spark.sink import (
    has_parquet_files,
    resize_row_groups,
    write_parquet,
)
from kwire.spark.steps import Steps
from kwire.spark.summary import Summary, summarize
from kwire.options import (
    add_broker_ports,
    add_database,
    add_keylog,
    add_overwrite,
    add_quiet,
    add_spark,
)

PCAP_MAGIC = {
    b"\xa1\xb2\xc3\xd4",
    b"\xd4\xc3\xb2\xa1",
    b"\xa1\xb2\x3c\x4d",
    b"\x4d\x3c\xb2\xa1",
    b"\x0a\x0d\x0d\x0a",
}


class JobError(Exception):
    """A problem with the job's inputs or options, reported in one line."""


def say(message: str) -> None:
    # One write, line and newline together: the driver's capture says its lines from a thread
    # of its own while the session starts.
    sys.stderr.write(f"kwire: {message}\n")
    sys.stderr.flush()


CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")


def _remote_kind(url: str) -> str:
    """A remote input is a capture when its name says so (name.pcap, name.pcapng, name.cap, ring
    files name.pcap0, name.pcap1, ...), else a frames table: the driver does not read remote
    bytes to tell."""
    name = url.rstrip("/").rsplit("/", 1)[-1].lower()
    stem = name.rstrip("0123456789")
    return "capture" if stem.endswith(CAPTURE_SUFFIXES) else "parquet"


def _kind(path: str) -> str:
    """'parquet' or 'capture', by content (directories: by what they hold)."""
    if "://" in path and not path.startswith("file:"):
        return _remote_kind(path)
    p = Path(
        path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")
    )
    if not p.exists():
        raise JobError(f"{path}: no such file or directory")
    if p.is_dir():
        if any(p.rglob("*.parquet")):
            return "parquet"
        return "capture"
    with open(p, "rb") as f:
        head = f.read(4)
    if head == b"PAR1":
        return "parquet"
    if head in PCAP_MAGIC:
        return "capture"
    raise JobError(f"{path}: neither a frames table (Parquet) nor a pcap/pcapng capture")


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
    _step(spark, progress, "capture", detail)
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
    costs about three times the Parquet sink of a few (README, Performance)."""
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

    from kwire.capture.distributed import local_path

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


# -- command line -------------------------------------------------------------------------------

DESCRIPTION = (
    "Decode captured Kafka traffic (pcap/pcapng captures, ring directories, or frames tables) "
    "on Spark into typed Parquet tables under OUT: frames.parquet, requests and responses "
    "(partitioned by api key), records (one row per record) and groups/ (what happened to each "
    "consumer group). Columns and statuses: docs/outputs.md."
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Adds the decode job's options to `parser` (`kwire decode`)."""
    parser.add_argument(
        "inputs",
        nargs="+",
        help="pcap/pcapng files, directories of them, frames Parquet files or dirs",
    )
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    parser.add_argument(
        "--families",
        help="comma-separated message families to decode (default: those present), "
        f"from: {', '.join(FAMILIES)}",
    )
    parser.add_argument(
        "--no-records", action="store_true", help="skip OUT/records (the records inside frames)"
    )
    parser.add_argument("--no-summary", action="store_true", help="skip the summary")
    parser.add_argument(
        "--no-delivery",
        action="store_true",
        help="skip OUT/delivery and OUT/delivery_summary (each produced record's trip)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse (status malformed) frames that Kafka's own Java readers accept, such as "
        "bytes after a complete message or invalid UTF-8; by default they decode with status "
        "ok and say what was unusual in the warnings column (docs/outputs.md, Tolerance)",
    )
    parser.add_argument(
        "--no-groups",
        action="store_true",
        help="skip OUT/groups (the consumer groups' generations, members, commits, ...) and "
        "OUT/share",
    )
    parser.add_argument(
        "--no-share",
        action="store_true",
        help="skip OUT/share (share groups' deliveries, records, sessions and progress)",
    )
    parser.add_argument(
        "--capture-on",
        choices=("auto", "spark", "driver"),
        default="auto",
        help="where captures are read: by the executors in byte ranges (spark), by one "
        "process on the driver (driver: the reference, `kwire capture`), or auto (default): "
        "the driver when the captures are local and fit in one range (--split-size), which "
        "Spark would read in one task anyway, else Spark",
    )
    parser.add_argument(
        "--split-size",
        type=_size,
        default=SPLIT_BYTES,
        metavar="BYTES",
        help="bytes of capture per task on Spark: every file is read in ranges of this size "
        "(default 128m, as Spark's file sources; k, m and g suffixes)",
    )
    add_broker_ports(parser)
    add_keylog(parser)
    add_spark(parser)
    add_database(parser)
    add_overwrite(parser, "the tables in OUT")
    add_quiet(parser)


def _capture_place(captures: list[str], split_size: int) -> str:
    """'driver' when every capture is local and together they fit in one range, else 'spark'.
    One range is one task on Spark: the single process reads it about twice as fast per core
    (no shuffle of the payloads) and needs no Spark job (README, Performance)."""
    return "driver" if _input_bytes([], captures) <= split_size else "spark"


# Inputs up to this size make a short job (kwire.spark.session.SHORT_JOB_SQL).
SHORT_INPUT = 64 << 20


def short_job(master: str, tables: list[str], captures: list[str]) -> bool:
    """Whether a job on these inputs is a short one (kwire.spark.session.build_session's
    `short`): a local master and inputs up to SHORT_INPUT."""
    return is_local(master) and _input_bytes(tables, captures) <= SHORT_INPUT


def _input_bytes(tables: list[str], captures: list[str]) -> float:
    """The inputs' bytes on disk: the capture files (list_files) and every file under the
    tables; infinite when one is not local (its size is not looked up)."""
    if any(local_path(p) is None for p in tables + captures):
        return float("inf")
    total = sum(size for _, _, size in list_files(captures)) if captures else 0
    for path in tables:
        local = str(local_path(path))
        if os.path.isdir(local):
            for folder, _, names in os.walk(local):
                total += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
        else:
            total += os.path.getsize(local)
    return total


def _relative(path: str, out: str) -> str:
    return os.path.relpath(path, out) if "://" not in out else path[len(out) :].lstrip("/")


def _writable(out: str) -> None:
    """OUT can be made and written to (local OUT; a remote one shows at its first write): one
    line naming the place otherwise, before Spark starts."""
    path = local_path(out)
    if path is None:
        return
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".kwire-write-test-{os.getpid()}")
        with open(probe, "wb") as f:
            f.write(b"\0" * 4096)
            f.flush()
            os.fsync(f.fileno())
        os.remove(probe)
    except OSError as e:
        raise JobError(f"cannot write the output {path}: {e.strerror or e}") from None


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kwire decode", description=DESCRIPTION)
    configure(parser)
    return parser.parse_args(argv)


def executor_error(e: BaseException, kind: type[BaseException]) -> str | None:
    """The message of a `kind` error raised in an executor's Python worker, found in the text of
    the Spark failure that carries it (its traceback's last line), else None."""
    text = failure_text(e)
    found = re.search(rf"^(?:[\w.]+\.)?{kind.__name__}: (.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else None


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> Summary | None:
    """Runs the job; uses `spark` if given (tests), else starts a session on args.master."""
    start = time.monotonic()
    out = args.output
    families = [f.strip() for f in args.families.split(",")] if args.families else None
    if families:
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            raise JobError(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    for sub in ("requests", "responses", "records", "groups", "delivery", manifest.NAME):
        target = os.path.join(out, sub)
        if "://" not in out and os.path.exists(target) and not args.overwrite:
            raise JobError(f"{target} exists; give --overwrite to replace it")
    _writable(out)
    try:
        keylog = load_keylog(getattr(args, "keylog", None) or [])
    except KeyLogError as e:
        raise JobError(str(e)) from None
    if getattr(args, "database", None):
        from kwire.spark.catalog import CatalogError, quoted

        try:
            quoted(args.database)
        except CatalogError as e:
            raise JobError(str(e)) from None
    # Written last (manifest.write below): until then OUT says it is incomplete.
    manifest.remove(out)
    try:
        return _run(args, spark, families, start, keylog)
    except JobError:
        raise
    except Exception as e:
        if _no_space(e):
            raise JobError(f"no space left on the device of {out}") from None
        raise


def publish_tables(spark: SparkSession, database: str, out: str) -> list[str]:
    """OUT's tables (as its manifest lists them) in the session's catalog (kwire.spark.catalog)."""
    from kwire.spark import catalog

    try:
        return catalog.publish(spark, database, out, manifest.read(out)["tables"])
    except catalog.CatalogError as e:
        raise JobError(str(e)) from None


def _no_space(e: BaseException) -> bool:
    """Whether a failure (a Python OSError, or Spark's, whose Java cause is in its text) was a
    full disk."""
    import errno

    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno == errno.ENOSPC:
            return True
        seen = seen.__cause__ or seen.__context__
    return "No space left on device" in failure_text(e)


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


def _run(
    args: argparse.Namespace,
    spark: SparkSession | None,
    families: list[str] | None,
    start: float,
    keylog: KeyLog | None = None,
) -> Summary | None:
    from kwire.spark.driver import is_connect
    from kwire.spark.jvmnames import keep_jvm_names
    from kwire.spark.session import (
        ConnectError,
        ExecutorSetupError,
        build_session,
        executor_setup,
        executors_c1,
        session_settings,
    )

    out = args.output
    kinds = [(p, _kind(p)) for p in args.inputs]
    tables = [p for p, k in kinds if k == "parquet"]
    captures = [p for p, k in kinds if k == "capture"]
    # Sized before the driver's capture adds its frames table to the inputs.
    short = short_job(args.master, tables, captures)
    if captures and args.capture_on == "auto":
        args.capture_on = _capture_place(captures, args.split_size)
    # The driver's capture runs while the JVM starts (a separate process, mostly waited for
    # here): side by side, not one after the other. The session starts in this thread, where
    # pyspark installs its Ctrl-C handler.
    capturing = None
    if captures and args.capture_on == "driver":
        capturing = _Background(run_capture, captures, out, args.broker_ports, keylog)
    USER_CONF.clear()
    USER_CONF.update(key for key, _ in args.conf)
    if spark is None and args.remote:
        say(f"connecting to Spark Connect at {args.remote}")
        if not is_loopback(args.remote) and local_path(out) is not None:
            say(
                f"OUT ({out}) is a local path and the server is another machine: its executors "
                "write there too, so it must be a filesystem both see (else give a URL, "
                "docs/cluster.md)"
            )
        try:
            spark = build_session(remote=args.remote, conf=args.conf, short=short)
        except ConnectError as e:
            raise JobError(str(e)) from None
    elif spark is None:
        if short:
            jit = " (a short job: C1 JIT, queries interpreted)"
        elif is_local(args.master):
            jit = " (C1 JIT)"
        elif executors_c1(session_settings(args.master, args.conf, batch=True)):
            jit = " (C1 JIT on the driver and the executors, which are small)"
        else:
            jit = " (C1 JIT on the driver)"
        say(f"starting Spark on {args.master}{jit}")
        spark = build_session(
            args.master, "kwire-decode", args.conf, short=short, tell=say, batch=True
        )
    # A session given by the caller too (build_session's do this already).
    if not is_connect(spark):
        keep_jvm_names(spark)
    if capturing is not None:
        tables.append(capturing.result())
    # The frames table written on Spark keeps the capture's timestamp type (us, UTC).
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    # The executors' probe (their first Python worker, importing the codecs) runs while the
    # driver inspects the frames and plans the decoding; its answer is awaited before the first
    # step that needs the executors.
    probing = _Background(executor_setup, spark, say)

    def executors_ready() -> None:
        if probing.done:
            return
        try:
            readers, where = probing.result()
        except ExecutorSetupError as e:
            raise JobError(str(e)) from None
        over = f" (Spark Connect at {args.remote})" if is_connect(spark) else ""
        say(
            f"Spark {spark.version} on {master_of(spark) or 'a master it does not name'}{over}, "
            f"default parallelism {parallelism(spark)}, readers on the executors: {readers} "
            f"(kwire from {where})"
        )

    progress = None if args.quiet else Progress(spark)
    with progress if progress is not None else contextlib.nullcontext():
        outputs, summary = _decode(
            spark, args, tables, captures, families, progress, keylog, executors_ready
        )
    elapsed = time.monotonic() - start
    manifest.write(
        out,
        {name: _relative(path, out) for name, path in outputs},
        kwire=__version__,
        inputs=list(args.inputs),
        strict=bool(args.strict),
        families=families,
        seconds=round(elapsed, 1),
    )
    if getattr(args, "database", None):
        made = publish_tables(spark, args.database, out)
        say(f"catalog: {len(made)} tables in {args.database} ({', '.join(made[:4])}, ...)")
    if summary is None:
        return None
    print(
        f"\nkwire decode: {summary.requests} requests, {summary.response_count} responses "
        f"in {elapsed:.1f} s -> {out}\n"
    )
    print(summary.format(), flush=True)
    print(describe_outputs(outputs), flush=True)
    return summary


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


class _Background:
    """`fn(*args)` run in a thread of its own; result() waits for it and returns its value or
    raises its exception."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self.done = False
        self._thread = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # noqa: BLE001 - raised again by result()
            self._error = e

    def result(self) -> Any:
        while self._thread.is_alive():  # in slices, so Ctrl-C reaches the waiting thread
            self._thread.join(0.2)
        self.done = True
        if self._error is not None:
            raise self._error
        return self._value


def _step(spark: SparkSession, progress: Progress | None, step: str, detail: str = "") -> None:
    """A new step: on the progress line, and as the name of its jobs in Spark's UI."""
    describe_jobs(spark, step)
    if progress is not None:
        progress.start(step, detail)


def add_derived(
    steps: Steps,
    spark: SparkSession,
    src: str,
    dst: str,
    *,
    groups: bool = True,
    share: bool = True,
    delivery: bool = True,
    with_records: bool = True,
    tell: Callable[[str], None] | None = None,
    decoded: Sequence[str] = (),
    exploded: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """Adds to `steps` the tables derived from the decoded ones under `src` (once the steps in
    `decoded` have written requests and responses, and those in `exploded` records: none when
    they are there already), written under `dst`: groups/ (its commits and progress with
    time lag when `src` has records: `with_records`), then delivery and delivery_summary (when
    it has records and `delivery`). The produced records' offsets are computed once for both
    and dropped from Spark's cache when the steps end. Returns the list of (name, path) the
    steps write, delivery's two added once written (there are none without records). Run the
    steps (Steps.run) to write them. OUT/share comes with groups/ unless `share` is false."""

    from kwire.groups.build import add_steps

    tell = tell or (lambda _: None)
    records_path = os.path.join(src, "records")
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
        inputs["responses"] = _read_without(spark, os.path.join(src, "responses"), _NOT_DERIVED)
        inputs["records"] = inputs["prod"] = inputs["known"] = inputs["endpoints"] = None

    def read_records() -> None:
        # An empty OUT/records has no files (Spark writes none), and cannot be read back.
        if local_path(records_path) is None or has_parquet_files(records_path):
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
        records_step = ["produced records and their offsets"] if with_records else []
        written += add_steps(
            steps,
            spark,
            lambda: (spark.read.parquet(os.path.join(src, "requests")), inputs["responses"]),
            lambda: (inputs["known"], inputs["endpoints"]),
            dst,
            after=["derived inputs"],
            after_lag=records_step,
            tell=tell,
            share=share,
        )
    if delivery:
        started: dict[str, float] = {}

        def write_delivery_table() -> None:
            if inputs["records"] is None:
                return
            started["t"] = time.monotonic()
            records, prod, endpoints = inputs["records"], inputs["prod"], inputs["endpoints"]
            # A share group's records settle when accepted: held by the share step, so
            # delivery need not wait for OUT/share/records to be written.
            share_tables = steps.result("share tables") if groups and share else None
            accepted = share_tables["accepted"] if share_tables else None
            written.append(
                (
                    "delivery",
                    write_delivery(spark, records, prod, endpoints, dst, groups, accepted),
                )
            )

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
    return written


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


def _summary(
    spark: SparkSession, out: str, held: tuple[DataFrame, DataFrame] | None = None
) -> Summary:
    return summarize(
        spark.read.parquet(os.path.join(out, "requests")),
        spark.read.parquet(os.path.join(out, "responses")),
        held=held,
    )


def _decode(
    spark: SparkSession,
    args: argparse.Namespace,
    tables: list[str],
    captures: list[str],
    families: list[str] | None,
    progress: Progress | None,
    keylog: KeyLog | None = None,
    executors_ready: Callable[[], None] = lambda: None,
) -> tuple[list[tuple[str, str]], Summary | None]:
    """The job's Spark steps; returns (name, path) of what it wrote, and the decoded tables'
    summary (None with --no-summary). `executors_ready` is called before the first Spark work
    that runs on the executors (and raises if they cannot run it)."""
    out = args.output
    outputs: list[tuple[str, str]] = []
    if captures and args.capture_on == "spark":
        executors_ready()
        tables.append(
            run_capture_on_spark(
                spark, captures, out, args.broker_ports, progress, args.split_size, keylog
            )
        )
    if captures:
        outputs.append(("frames", os.path.join(out, "frames.parquet")))
    frames = spark.read.parquet(*tables)
    _step(spark, progress, "inspect frames")
    reader_rows, arrow_rows, largest, keys = size_batches(spark, frames, tables)
    if reader_rows < READER_ROWS:
        say(f"large frames: batches of {reader_rows} rows to the reader, {arrow_rows} to Python")
    if families is None:
        families = present_families(keys) if keys is not None else None
        if families is not None:
            occur = ", ".join(families) if families else "none (the tables are written empty)"
            say(f"{len(families)} of the {len(FAMILIES)} APIs occur: {occur}")
    from kwire.groups.build import settings as group_settings

    requests, responses = decode_frames(frames, families, tolerant=not args.strict)
    # From here on, steps whose inputs are written run side by side (kwire.spark.steps).
    steps = Steps(spark, progress)
    decoded = []
    for name, df in (("requests", requests), ("responses", responses)):
        target = os.path.join(out, name)
        if local_path(target) is not None:
            # Decoded and written by the same tasks (kwire.spark.api.write_decoded).
            write = partial(write_decoded, frames, target, name[:-1], families, not args.strict)
            steps.add(f"decode {name}", partial(_timed, write, name, target))
        else:
            steps.add(f"decode {name}", partial(_write_decoded, df, target, name, largest))
        outputs.append((name, target))
        decoded.append(f"decode {name}")
    if not args.no_records:
        target = os.path.join(out, "records")

        def explode() -> None:
            t = time.monotonic()
            responses = spark.read.parquet(os.path.join(out, "responses"))
            # Row groups cut by compressed size alone, then bounded by the largest record if
            # they came out too large once uncompressed: bounding them by the largest frame, as
            # the decoded tables are, made row groups of ~100 records (4,360 on the 1.2 GB ring).
            if local_path(target) is not None:
                write_records(frames, target, responses)  # the exploding tasks write it
            else:
                write_parquet(records_table(frames, responses), target)
            resize_row_groups(spark, target, records_row_size())
            say(f"exploded records -> {target} ({time.monotonic() - t:.1f} s)")

        # After the responses: Metadata responses name the topics fetched by id.
        steps.add("explode records", explode, after=["decode responses"])
        outputs.append(("records", target))
    derived = add_derived(
        steps,
        spark,
        out,
        out,
        groups=not args.no_groups,
        share=not args.no_share,
        delivery=not args.no_delivery,
        with_records=not args.no_records,
        tell=say,
        decoded=decoded,
        exploded=[] if args.no_records else ["explode records"],
    )
    if not args.no_summary and steps.has("group tables"):
        # The counts from the group tables' held frames of both tables, once they are made.
        def summary() -> Summary:
            basis = steps.result("group tables")[1]
            return _summary(spark, out, (basis.requests, basis.responses))

        steps.add("summary", summary, after=[*decoded, "group tables"])
    elif not args.no_summary:
        steps.add("summary", partial(_summary, spark, out), after=decoded)
    # The group tables' settings (few shuffle partitions) for every step, with or without group
    # tables: the tables after decoding are all small next to the frames, and decoding itself
    # does not shuffle.
    steps.configure(group_settings(spark))
    executors_ready()
    results = steps.run()
    outputs.extend(derived)
    return outputs, results.get("summary")


def _timed(write: Callable[[], Any], name: str, target: str) -> None:
    t = time.monotonic()
    write()
    say(f"decoded {name} -> {target} ({time.monotonic() - t:.1f} s)")


def _write_decoded(df: DataFrame, target: str, name: str, largest: int) -> None:
    _timed(partial(write, df, target, "overwrite", row_bytes=2 * largest or None), name, target)
