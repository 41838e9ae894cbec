"""The decode job: `kwire decode FRAMES_OR_PCAPS... -o OUT [--master URL]`, its options and
its session.

Captures (pcap/pcapng files, directories of them, or remote URLs) go through the capture step
first, on the executors (kwire/spark/spark_capture.py; `--capture-on driver` runs the single-process
`kwire.capture` reader instead), into OUT/frames.parquet; frames tables (Parquet files or
directories) are read as they are. Then the pipeline's stages (kwire.pipeline, which `kwire live`
runs too) write OUT/requests and OUT/responses, partitioned by api_key, OUT/records (one row per
record inside Produce requests and Fetch / ShareFetch responses), groups/, share/, delivery and
delivery_summary; a short summary follows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from pyspark.sql import DataFrame, SparkSession

from kwire import __version__
from kwire.capture.distributed import (
    SPLIT_BYTES,
    list_files,
    load_keylog,
    local_path,
    parse_size,
)
from kwire.capture.tls import KeyLog, KeyLogError
from kwire import pipeline
from kwire.pipeline import (
    READER_ROWS,
    JobError,
    failure_text,
    present_families,
    progress_step,
    run_capture,
    run_capture_on_spark,
    say,
    size_batches,
)
from kwire.spark import manifest
from kwire.spark.model import FAMILIES
from kwire.spark.progress import Progress, describe_outputs
from kwire.spark.driver import master as master_of
from kwire.spark.driver import is_loopback, parallelism
from kwire.spark.session import is_local
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
    (no shuffle of the payloads) and needs no Spark job (docs/scale.md)."""
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
    pipeline.USER_CONF.clear()
    pipeline.USER_CONF.update(key for key, _ in args.conf)
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
    progress_step(spark, progress, "inspect frames")
    reader_rows, arrow_rows, largest, keys = size_batches(spark, frames, tables)
    if reader_rows < READER_ROWS:
        say(f"large frames: batches of {reader_rows} rows to the reader, {arrow_rows} to Python")
    if families is None:
        families = present_families(keys) if keys is not None else None
        if families is not None:
            occur = ", ".join(families) if families else "none (the tables are written empty)"
            say(f"{len(families)} of the {len(FAMILIES)} APIs occur: {occur}")
    from kwire.groups.build import settings as group_settings

    # The stages (kwire.pipeline): steps whose inputs are written run side by side.
    steps = Steps(spark, progress)
    outputs += pipeline.decode(
        steps, frames, out, families, not args.strict, largest=largest, tell=say
    )
    if not args.no_records:
        outputs.append(pipeline.records(steps, frames, out, tell=say))
    derived = pipeline.derived(
        steps,
        spark,
        out,
        out,
        groups=not args.no_groups,
        share=not args.no_share,
        delivery=not args.no_delivery,
        with_records=not args.no_records,
        tell=say,
        decoded=pipeline.DECODED,
        exploded=[] if args.no_records else pipeline.EXPLODED,
    )
    if not args.no_summary and steps.has("group tables"):
        # The counts from the group tables' held frames of both tables, once they are made.
        def summary() -> Summary:
            basis = steps.result("group tables")[1]
            return _summary(spark, out, (basis.requests, basis.responses))

        steps.add("summary", summary, after=[*pipeline.DECODED, "group tables"])
    elif not args.no_summary:
        steps.add("summary", partial(_summary, spark, out), after=pipeline.DECODED)
    # The group tables' settings (few shuffle partitions) for every step, with or without group
    # tables: the tables after decoding are all small next to the frames, and decoding itself
    # does not shuffle.
    steps.configure(group_settings(spark))
    executors_ready()
    results = steps.run()
    outputs.extend(derived)
    return outputs, results.get("summary")
