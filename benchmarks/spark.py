"""Spark throughput: the kwire decode job against Spark SQL, Arrow pass-through and kio.

Run from the repository root::

    python -m benchmarks.spark               # 1M frames, 3 timed repeats per variant
    python -m benchmarks.spark --quick       # smoke run: 50k frames, 1 repeat
    python -m benchmarks.spark --only kwire_full --data /tmp/frames   # reuse a frames table

What it does, in order:

1. Writes the frames table once (or reuses ``--data DIR``): ``--rows`` request frames (default
   1,000,000) from ``udfs.synth.mixed_requests`` -- 60% Heartbeat, 20% OffsetCommit (5 topics x
   10 partitions), 10% JoinGroup, 10% SyncGroup, every version of each api represented, half of
   each api's frames at flexible and half at non-flexible versions -- as ``--files`` Parquet
   files with a single ``frame`` (binary) column.  The frames carry no header columns, so every
   variant has to read the header from the bytes.
2. Checks, outside Spark, that the kio variant's decoder gives kwire's values on a sample (the
   only fields it may leave null are the consumer-protocol payload columns kwire adds); and,
   inside the sql_header run, that the built-in-functions header equals kwire's header on a
   sample.  A failed check is reported and fails the run (exit 1), the timings still run.
3. Runs each variant in its own process (own Spark JVM and Python workers, so memory peaks are
   per variant and one failing variant does not stop the others): a warm-up on the first file,
   then ``--repeats`` timed runs over the whole table; each run is ``df.write.parquet(tmp)``
   (snappy, overwrite, no partitioning: the same sink for every variant), timed wall clock.
   Never ``count()``: Spark would prune the UDF away.  The statistic is the median.
4. Prints a table (seconds, rows/s, ratio to sql_header, target, PASS/MISS, peak memory) and
   writes JSON (``--json``, default ``benchmarks/results/spark.json``) with every sample and the
   machine it ran on.

The variants (each writes the input rows' ``frame`` plus what it derives):

* ``sql_header``: Spark SQL built-in functions only (``substring``/``hex``/``conv`` with sign
  handling, ``cast(binary as string)`` for the client id): api_key, api_version,
  correlation_id, client_id.  The limit reference: no Python at all.
* ``passthrough``: ``df.mapInArrow(lambda it: it)`` returning its input: the cost of moving the
  rows to Python and back, the ceiling for anything decoded in Python.
* ``sink_floor``: kwire_full's output, decoded once beforehand (untimed), read back from
  Parquet and written again: the Spark side of a full decode (nested columns built from Arrow,
  written as Parquet) with no Python at all.  No full-decode variant can beat it; it shows how
  much of the budget the decoded table itself takes.
* ``kio``: ``mapInArrow`` decoding every frame with kio (native reader): the request header with
  kio's header reader, the body with ``entity_reader`` of the (api key, version) entity class,
  both chosen from a dict prepared per process.  kio's natural output is frozen dataclasses; to
  get a table a user converts them to Arrow, so each entity becomes a plain dict (kwire's field
  names: kio's timedeltas back to ``*_ms`` integers, error codes to int, tuples to lists;
  a per-class converter compiled once) and ``pa.array(dicts, type)`` builds the family column.
  The output schema is exactly kwire_full's (header, error, one struct per family), so both
  write the same columns; kio leaves the consumer-protocol payload columns kwire decodes from
  the ``metadata``/``assignment`` bytes null (kio has no reader for them): less work for kio.
* ``kwire_mix_families``: ``udfs.decode_requests(df, families=[the mix's four APIs])``: the
  same decode with only those four API structs in the output instead of all 93; kwire_full over
  this is what the one-struct-per-API layout costs.
* ``kwire_full``: ``udfs.decode_requests(df)``: every family's typed columns (an ``arrow_udf``:
  only the frame column travels to Python).
* ``kwire_pruned``: ``udfs.decode_requests(df, fields=[<family>.group_id ...])`` for the four
  families of the mix: header + group id only.

Spark: ``kwire.spark.session.build_session`` on ``local[*]`` (the 2 cores), WARN logs,
``spark.sql.execution.arrow.maxRecordsPerBatch`` = ``--arrow-batch`` (default 10000, Spark's
default) for every variant, ``spark.sql.files.maxPartitionBytes`` = the largest input file so
each file is one task.  Peak memory is sampled (every 0.2 s, from /proc) as the sum of the
resident sets of the Spark JVM and its Python daemon and workers during the timed runs; the JSON
also has the JVM's and the workers' own peaks and the JVM's VmHWM.  Targets are reported, not
asserted: the exit status only reflects failures and checks.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

DEFAULT_JSON = HERE / "results" / "spark.json"
VARIANTS = (
    "sql_header",
    "passthrough",
    "sink_floor",
    "kio",
    "kwire_full",
    "kwire_mix_families",
    "kwire_pruned",
)
REFERENCE = "sql_header"
# variant -> (minimum ratio to sql_header, or None), and what the issue expects as a reference.
TARGETS: dict[str, float] = {"kwire_full": 0.40, "kwire_pruned": 0.50}
KIO_TARGET = 1.3  # kwire_full rows/s over kio rows/s
EXPECTED = {"passthrough": "~0.55-0.6", "kio": "~0.33", "sink_floor": "full's cap"}
MIX_FAMILIES = ("heartbeat", "offset_commit", "join_group", "sync_group")
PRUNED_FIELDS = tuple(f"{f}.group_id" for f in MIX_FAMILIES)
SAMPLE = 4000  # rows checked against kwire


# -- data -------------------------------------------------------------------------------------------


def write_frames(directory: Path, rows: int, files: int, seed: int) -> dict[str, Any]:
    """The frames table: `files` Parquet files of request frames in the benchmark's mix."""
    from benchmarks.synth import mixed_requests

    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    schema = pa.schema([pa.field("frame", pa.binary())])
    written, index, writer, in_file = 0, 0, None, 0
    counts: dict[str, int] = {}
    for batch in mixed_requests(rows, seed=seed):
        for k, v in zip(
            batch.column("api_key").to_pylist(), batch.column("api_version").to_pylist()
        ):
            counts[f"{k}/{v}"] = counts.get(f"{k}/{v}", 0) + 1
        frames = batch.column("frame")
        start = 0
        while start < len(frames):
            if writer is None:
                writer = pq.ParquetWriter(directory / f"frames-{index:03d}.parquet", schema)
                in_file = 0
            take = min(per_file - in_file, len(frames) - start)
            writer.write_table(pa.table([frames.slice(start, take)], schema=schema))
            in_file += take
            start += take
            written += take
            if in_file == per_file:
                writer.close()
                writer, index = None, index + 1
    if writer is not None:
        writer.close()
    info = {"rows": written, "seed": seed, "files": len(data_files(directory)), "mix": counts}
    (directory / "_mix.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def data_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.parquet"))


def table_rows(directory: Path) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in data_files(directory))


# -- the kio decoder (runs in Spark's Python workers; pure pyarrow + kio) ----------------------------


_HH = struct.Struct(">hh")
_MS_TYPES = ("timedelta_i32", "timedelta_i64", "datetime_i64")


class KioDecoder:
    """Frames -> the columns kwire_full produces, decoded by kio. One per worker process."""

    def __init__(self) -> None:
        import generated
        from kio.index import load_entity_schema
        from kio.serial import entity_reader
        from kio.serial._introspect import (
            EntityField,
            EntityTupleField,
            PrimitiveTupleField,
            classify_field,
        )
        from kio.static.constants import EntityType

        from kwire.spark.api import plan

        self.plan = plan("request")
        self.arrow_fields = list(self.plan.arrow_type)
        self._classify = classify_field
        self._kinds = (EntityField, EntityTupleField, PrimitiveTupleField)
        self._converters: dict[type, Callable[[Any], dict[str, Any]]] = {}
        # (api key, version) -> (header reader, body reader, family index, converter)
        self.table: dict[tuple[int, int], tuple[Any, Any, int, Any]] = {}
        family_index = {name: i for i, name in enumerate(self.plan.family_names)}
        for key, _name, _cols in self.plan.families:
            info = generated.REGISTRY[key]
            base = _snake(info.name)
            for v in info.request.VALID_VERSIONS:
                try:
                    body = load_entity_schema(base, v, EntityType.request)
                except Exception:  # kio ships only the versions Kafka 4 keeps
                    continue
                hv = generated.request_header_version(key, v)
                header = load_entity_schema("request_header", hv, EntityType.header)
                self.table[(key, v)] = (
                    entity_reader(header),
                    entity_reader(body),
                    family_index[_name],
                    self.converter(body),
                )

    def converter(self, cls: type) -> Callable[[Any], dict[str, Any]]:
        """A compiled kio entity -> dict (kwire's names) converter for one entity class."""
        done = self._converters.get(cls)
        if done is not None:
            return done
        EntityField, EntityTupleField, PrimitiveTupleField = self._kinds
        specs: list[tuple[str, str, int, Any]] = []  # (out name, attribute, kind, sub)
        for f in dataclasses.fields(cls):
            kt = f.metadata.get("kafka_type")
            name = f.name + "_ms" if kt in _MS_TYPES else f.name
            fc = self._classify(f)
            if isinstance(fc, EntityTupleField):
                specs.append((name, f.name, 1, self.converter(fc.type_)))
            elif isinstance(fc, EntityField):
                specs.append((name, f.name, 2, self.converter(fc.type_)))
            elif isinstance(fc, PrimitiveTupleField):
                specs.append((name, f.name, 3, _primitive(kt)))
            elif kt == "uuid":  # kio reads the zero uuid as None; kwire prints it
                specs.append((name, f.name, 5, _primitive(kt)))
            else:
                prim = _primitive(kt)
                specs.append((name, f.name, 0 if prim is None else 4, prim))

        def convert(entity: Any) -> dict[str, Any]:
            out = {}
            for name, attr, kind, sub in specs:
                v = getattr(entity, attr)
                if kind == 5:
                    out[name] = sub(v)
                elif kind == 0 or v is None:
                    out[name] = v
                elif kind == 1:
                    out[name] = [sub(x) for x in v]
                elif kind == 2 or kind == 4:
                    out[name] = sub(v)
                else:
                    out[name] = list(v) if sub is None else [sub(x) for x in v]
            return out

        self._converters[cls] = convert
        return convert

    def decode(self, frames: pa.Array) -> list[pa.Array]:
        """The header, error and family columns for a batch of frames."""
        n = len(frames)
        keys: list[Any] = [None] * n
        vers: list[Any] = [None] * n
        corr: list[Any] = [None] * n
        client: list[Any] = [None] * n
        errors: list[Any] = [None] * n
        families: list[list[Any] | None] = [None] * len(self.plan.families)
        table = self.table
        for i, frame in enumerate(frames.to_pylist()):
            if frame is None:
                continue
            try:
                k, v = _HH.unpack_from(frame, 0)
                keys[i], vers[i] = k, v
                entry = table.get((k, v))
                if entry is None:
                    errors[i] = f"kio: no request schema for api key {k} version {v}"
                    continue
                hreader, reader, fam, convert = entry
                header, used = hreader(frame, 0)
                corr[i] = header.correlation_id
                client[i] = header.client_id
                body, size = reader(frame, used)
                if used + size != len(frame):
                    errors[i] = f"kio: {len(frame) - used - size} bytes after the message"
                    continue
                column = families[fam]
                if column is None:
                    column = families[fam] = [None] * n
                column[i] = convert(body)
            except Exception as e:
                errors[i] = f"kio: {type(e).__name__}: {e}"
        fields = self.arrow_fields
        out = [
            pa.array(keys, pa.int16()),
            pa.array(vers, pa.int16()),
            pa.array(corr, pa.int32()),
            pa.array(client, pa.string()),
            pa.array(errors, pa.string()),
            pa.array(["ok" if e is None else "malformed" for e in errors], pa.string()),
        ]
        for j, values in enumerate(families):
            t = fields[6 + j].type
            out.append(pa.nulls(n, t) if values is None else pa.array(values, t))
        return out

    def batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        frames = batch.column(0)
        columns = [frames, *self.decode(frames)]
        names = ["frame", *[f.name for f in self.arrow_fields]]
        return pa.RecordBatch.from_arrays(columns, names=names)


def _snake(name: str) -> str:
    from kwire.spark.model import snake

    return snake(name)


def _primitive(kafka_type: str | None) -> Callable[[Any], Any] | None:
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        ms = datetime.timedelta(milliseconds=1)
        return lambda v: v // ms
    if kafka_type == "datetime_i64":
        ms = datetime.timedelta(milliseconds=1)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return lambda v: (v - epoch) // ms
    if kafka_type == "error_code":
        return int
    if kafka_type == "uuid":
        import uuid

        import generated

        zero = uuid.UUID(int=0)
        return lambda v: generated.kafka_uuid(zero if v is None else v)
    return None


_KIO: KioDecoder | None = None


def kio_map(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The kio variant's mapInArrow function."""
    global _KIO
    if _KIO is None:
        _KIO = KioDecoder()
    for b in batches:
        yield _KIO.batch(b)


def passthrough_map(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    return batches


# -- checks -----------------------------------------------------------------------------------------


def _compare(kwire: Any, kio: Any, path: str, skipped: set[str], problems: list[str]) -> None:
    if isinstance(kwire, dict) and isinstance(kio, dict):
        for key in kwire:
            sub = f"{path}.{key}"
            if kio.get(key) is None and kwire[key] is not None:
                skipped.add(sub.split("[", 1)[0] if "[" not in sub else _strip_index(sub))
                continue
            _compare(kwire[key], kio.get(key), sub, skipped, problems)
    elif isinstance(kwire, list) and isinstance(kio, list) and len(kwire) == len(kio):
        for i, (a, b) in enumerate(zip(kwire, kio)):
            _compare(a, b, f"{path}[]", skipped, problems)
    elif kwire != kio and len(problems) < 10:
        problems.append(f"{path}: kwire {kwire!r} != kio {kio!r}")


def _strip_index(path: str) -> str:
    return path.replace("[]", "")


def check_kio(data: Path) -> dict[str, Any]:
    """kio's decoder and kwire's agree on a sample, but for the columns only kwire fills."""
    from kwire.spark.api import plan
    from kwire.spark.decode import decode_request_array

    frames = pq.read_table(data_files(data)[0]).column("frame").combine_chunks()[:SAMPLE]
    dec = KioDecoder()
    kio_rows = pa.StructArray.from_arrays(dec.decode(frames), fields=dec.arrow_fields).to_pylist()
    kwire_rows = decode_request_array(frames, plan("request")).to_pylist()
    skipped: set[str] = set()
    problems: list[str] = []
    for i, (a, b) in enumerate(zip(kwire_rows, kio_rows)):
        _compare(a, b, f"row {i}", skipped, problems)
    skipped_cols = sorted({s.split(".", 1)[1] for s in skipped})
    allowed = ("consumer_subscription", "consumer_assignment")
    unexpected = [s for s in skipped_cols if not s.endswith(allowed)]
    if unexpected:
        problems.append(f"kio leaves these non-null kwire columns null: {unexpected}")
    errors = sum(r["error"] is not None for r in kio_rows)
    if errors:
        problems.append(
            f"kio: {errors} decode errors, e.g. {next(r['error'] for r in kio_rows if r['error'])}"
        )
    return {
        "rows": len(kio_rows),
        "ok": not problems,
        "problems": problems,
        "kwire_only_columns": skipped_cols,
    }


def python_only(data: Path, rows: int = 50_000, repeats: int = 3) -> dict[str, Any]:
    """Rows/s of the Python side alone, on one core, outside Spark: kwire's batch decoder (what
    kwire_full runs per Arrow batch) and the kio variant's, on the first `rows` frames in
    batches of 10,000 (Spark's default Arrow batch). Separates decoding from Spark's share."""
    from kwire.spark.api import plan
    from kwire.spark.decode import decode_request_array

    frames = pq.read_table(data_files(data)[0]).column("frame").combine_chunks()[:rows]
    batches = [frames[i : i + 10_000] for i in range(0, len(frames), 10_000)]
    kio, full, pruned = KioDecoder(), plan("request"), plan("request", None, PRUNED_FIELDS)
    decoders = {
        "kwire_full": lambda b: decode_request_array(b, full),
        "kwire_pruned": lambda b: decode_request_array(b, pruned),
        "kio": kio.decode,
    }
    out: dict[str, Any] = {"rows": len(frames)}
    for name, decode in decoders.items():
        best = math.inf
        for _ in range(repeats):
            started = time.perf_counter()
            for b in batches:
                decode(b)
            best = min(best, time.perf_counter() - started)
        out[f"{name}_rows_per_second"] = len(frames) / best
    out["kwire_full_over_kio"] = out["kwire_full_rows_per_second"] / out["kio_rows_per_second"]
    return out


# -- variants (run in a child process) --------------------------------------------------------------


SQL_HEADER = {
    "api_key": "cast(if(u16(1) >= 32768, u16(1) - 65536, u16(1)) as smallint)",
    "api_version": "cast(if(u16(3) >= 32768, u16(3) - 65536, u16(3)) as smallint)",
    "correlation_id": "cast(if(u32(5) >= 2147483648, u32(5) - 4294967296, u32(5)) as int)",
    "client_id": "if(u16(9) < 32768, cast(substring(frame, 11, cast(u16(9) as int)) as string), null)",
}


def _sql(expr: str) -> str:
    """Expands u16(pos)/u32(pos): the unsigned big-endian integer at a 1-based byte position."""
    import re

    return re.sub(
        r"u(16|32)\((\d+)\)",
        lambda m: f"cast(conv(hex(substring(frame, {m[2]}, {int(m[1]) // 8})), 16, 10) as bigint)",
        expr,
    )


def build(variant: str, spark: Any, path: str) -> Any:
    """The variant's DataFrame over the frames at `path` (not yet written)."""
    # Python workers import the mapInArrow functions from this module (on PYTHONPATH), also
    # when it runs as __main__ (which cloudpickle would otherwise pickle by value).
    from benchmarks import spark as this

    df = spark.read.parquet(path)
    if variant == "sql_header":
        return df.selectExpr("frame", *[f"{_sql(e)} AS {name}" for name, e in SQL_HEADER.items()])
    if variant == "passthrough":
        return df.mapInArrow(this.passthrough_map, df.schema)
    if variant == "sink_floor":  # `path` holds kwire_full's output (see run_variant)
        return df
    if variant == "kio":
        from pyspark.sql.types import BinaryType, StructField, StructType

        from kwire.spark.api import plan

        schema = StructType(
            [StructField("frame", BinaryType())] + plan("request").spark_type.fields
        )
        return df.mapInArrow(this.kio_map, schema)
    from kwire import spark as udfs

    if variant == "kwire_full":
        return udfs.decode_requests(df)
    if variant == "kwire_mix_families":  # the layout cost: only the mix's 4 API structs
        return udfs.decode_requests(df, families=list(MIX_FAMILIES))
    if variant == "kwire_pruned":
        return udfs.decode_requests(df, fields=list(PRUNED_FIELDS))
    raise ValueError(f"unknown variant {variant!r}")


def check_sql_header(spark: Any, data: Path, scratch: Path) -> dict[str, Any]:
    """The built-in-functions header equals kwire's on a sample (with a negative and a null
    client id length mixed in)."""
    import generated

    first = str(data_files(data)[0])
    rows = build("sql_header", spark, first).limit(SAMPLE).collect()
    extra = [
        generated.encode_request(
            generated.RequestHeader(
                request_api_key=12, request_api_version=1, correlation_id=-5, client_id=None
            ),
            generated.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"),
        )[4:],
        b"\xff\xfe\x00\x01\x80\x00\x00\x00\x00\x01x",  # negative key, min int32 correlation id
    ]
    extra_df = spark.createDataFrame([(f,) for f in extra], "frame binary")
    extra_df.write.mode("overwrite").parquet(str(scratch / "extra"))
    rows += build("sql_header", spark, str(scratch / "extra")).collect()
    problems: list[str] = []
    for r in rows:
        frame = bytes(r["frame"])
        k, v, c = struct.unpack_from(">hhi", frame)
        try:
            header, _ = generated.decode_request(frame)
            want = (
                header.request_api_key,
                header.request_api_version,
                header.correlation_id,
                header.client_id,
            )
        except generated.KwireError:
            want = (k, v, c, frame[10:11].decode())  # the hand-made frame: 1-byte client id
        got = (r["api_key"], r["api_version"], r["correlation_id"], r["client_id"])
        if got != want and len(problems) < 10:
            problems.append(f"{frame[:16].hex()}: sql {got} != kwire {want}")
    return {"rows": len(rows), "ok": not problems, "problems": problems}


class MemorySampler:
    """Peak resident memory of this process's descendants (the Spark JVM, the Python daemon and
    workers), sampled from /proc."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.root = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reset()

    def reset(self) -> None:
        self.peak_total = self.peak_jvm = self.peak_python = 0
        self.jvm_hwm = self.worker_hwm = 0
        self.max_workers = 0
        self.samples = 0

    def _descendants(self) -> list[int]:
        parent: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                parent[int(entry)] = int(text[text.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError):
                continue
        children: dict[int, list[int]] = {}
        for pid, ppid in parent.items():
            children.setdefault(ppid, []).append(pid)
        out, todo = [], [self.root]
        while todo:
            for c in children.get(todo.pop(), []):
                out.append(c)
                todo.append(c)
        return out

    def sample(self) -> None:
        total = jvm = py = workers = 0
        for pid in self._descendants():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            rss = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
            hwm = int(fields.get("VmHWM", "0 kB").split()[0]) * 1024
            name = fields.get("Name", "").strip()
            # Only the JVM and Python count: a process the JVM forks for a moment (Hadoop's
            # local file system runs shell commands) shows the JVM's shared pages as its own.
            if name == "java":
                jvm += rss
                self.jvm_hwm = max(self.jvm_hwm, hwm)
            elif name.startswith("python"):
                py += rss
                workers += 1
                self.worker_hwm = max(self.worker_hwm, hwm)
            else:
                continue
            total += rss
        self.peak_total = max(self.peak_total, total)
        self.peak_jvm = max(self.peak_jvm, jvm)
        self.peak_python = max(self.peak_python, py)
        self.max_workers = max(self.max_workers, workers)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def report(self) -> dict[str, Any]:
        return {
            "peak_rss_bytes": self.peak_total,
            "peak_jvm_rss_bytes": self.peak_jvm,
            "peak_python_rss_bytes": self.peak_python,
            "jvm_vmhwm_bytes": self.jvm_hwm,
            "largest_python_vmhwm_bytes": self.worker_hwm,
            "max_python_processes": self.max_workers,
            "samples": self.samples,
        }


def run_variant(args: argparse.Namespace) -> dict[str, Any]:
    """In the child process: warm up, then time `repeats` writes of the whole table."""
    from kwire.spark.session import build_session

    data = Path(args.data)
    files = data_files(data)
    rows = table_rows(data)
    out = Path(tempfile.mkdtemp(prefix=f"kwire-bench-{args.run_variant}-"))
    # Python workers import this module's functions (pickled by reference when not __main__).
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    sampler = MemorySampler()
    sampler.start()
    conf = [
        ("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.arrow_batch)),
        ("spark.sql.files.maxPartitionBytes", str(max(f.stat().st_size for f in files))),
        ("spark.driver.memory", args.driver_memory),
        ("spark.ui.enabled", "false"),
        ("spark.sql.parquet.compression.codec", "snappy"),
    ]
    spark = build_session(args.master, f"kwire-bench-{args.run_variant}", conf)
    result: dict[str, Any] = {"variant": args.run_variant, "rows": rows}
    try:
        if args.run_variant == "sql_header":
            result["check"] = check_sql_header(spark, data, out)
        source, first = data, files[0]
        if args.run_variant == "sink_floor":
            # kwire_full's output, decoded once (untimed), is read back and written again: the
            # Spark side of a full decode with no Python at all, which caps kwire_full.
            from kwire import spark as udfs

            decoded = out / "decoded"
            udfs.decode_requests(spark.read.parquet(str(data))).write.parquet(str(decoded))
            source, first = decoded, sorted(decoded.glob("*.parquet"))[0]
        started = time.perf_counter()
        build(args.run_variant, spark, str(first)).write.mode("overwrite").parquet(
            str(out / "warmup")
        )
        result["warmup_seconds"] = time.perf_counter() - started
        df = build(args.run_variant, spark, str(source))
        result["tasks"] = df.rdd.getNumPartitions()
        sampler.reset()
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            df.write.mode("overwrite").parquet(str(out / "run"))
            seconds.append(time.perf_counter() - started)
        sampler.sample()
        result["memory"] = sampler.report()
        written = sorted((out / "run").glob("*.parquet"))
        result["rows_written"] = sum(pq.ParquetFile(f).metadata.num_rows for f in written)
        if "error" in df.columns:
            errors = pq.read_table(written[0].parent, columns=["error"]).column("error")
            result["decode_errors"] = len(errors) - errors.null_count
        result["seconds"] = seconds
        result["arrow_batch"] = int(
            str(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
        )
    finally:
        sampler.stop()
        spark.stop()
        subprocess.run(["rm", "-rf", str(out)], check=False)
    return result


# -- parent -----------------------------------------------------------------------------------------


def spawn(variant: str, args: argparse.Namespace, data: Path) -> dict[str, Any]:
    """Runs one variant in a child process; a failure becomes an entry with its error."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_file = Path(f.name)
    cmd = [
        sys.executable, "-m", "benchmarks.spark", "--run-variant", variant,
        "--data", str(data), "--result", str(result_file), "--repeats", str(args.repeats),
        "--arrow-batch", str(args.arrow_batch), "--master", args.master,
        "--driver-memory", args.driver_memory,
    ]  # fmt: skip
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, timeout=args.timeout, capture_output=True, text=True)
        failed = proc.returncode != 0
        tail = (proc.stderr or "").strip().splitlines()[-15:]
    except subprocess.TimeoutExpired:
        failed, tail = True, [f"timed out after {args.timeout:.0f} s"]
    took = time.perf_counter() - started
    result: dict[str, Any] = {"variant": variant, "process_seconds": took}
    if not failed:
        try:
            result.update(json.loads(result_file.read_text()))
        except (OSError, ValueError) as e:
            failed, tail = True, [f"no result: {e}"]
    result_file.unlink(missing_ok=True)
    if failed:
        result["failed"] = True
        result["error"] = "\n".join(tail)
    return result


def summarize(results: dict[str, dict[str, Any]], rows: int) -> None:
    for r in results.values():
        if r.get("seconds"):
            r["median_seconds"] = statistics.median(r["seconds"])
            r["rows_per_second"] = rows / r["median_seconds"]
    ref = results.get(REFERENCE, {}).get("rows_per_second")
    kio = results.get("kio", {}).get("rows_per_second")
    for name, r in results.items():
        rps = r.get("rows_per_second")
        if rps and ref:
            r["ratio_to_sql_header"] = rps / ref
            if name in TARGETS:
                r["target"] = TARGETS[name]
                r["verdict"] = "PASS" if r["ratio_to_sql_header"] >= TARGETS[name] else "MISS"
        if name == "kwire_full" and rps and kio:
            r["ratio_to_kio"] = rps / kio
            r["verdict_vs_kio"] = "PASS" if rps / kio >= KIO_TARGET else "MISS"


def _mib(n: int | None) -> str:
    return "-" if not n else f"{n / 2**20:,.0f}"


def render(results: dict[str, dict[str, Any]]) -> str:
    head = (
        f"{'variant':<13} {'seconds':>8} {'rows/s':>10} {'vs sql':>7} {'target':>11} "
        f"{'verdict':>7} {'peak MiB':>9} {'(jvm':>6} {'python)':>8}"
    )
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        if r.get("failed"):
            lines.append(f"{name:<13} FAILED: {r['error'].splitlines()[-1] if r['error'] else ''}")
            continue
        ratio = r.get("ratio_to_sql_header")
        if name in TARGETS:
            target = f">= {TARGETS[name]:.2f}"
        else:
            target = EXPECTED.get(name, "ref" if name == REFERENCE else "")
        mem = r.get("memory", {})
        lines.append(
            f"{name:<13} {r['median_seconds']:>8.2f} {r['rows_per_second']:>10,.0f} "
            f"{'' if ratio is None else f'{ratio:.3f}':>7} {target:>11} {r.get('verdict', ''):>7} "
            f"{_mib(mem.get('peak_rss_bytes')):>9} {_mib(mem.get('peak_jvm_rss_bytes')):>6} "
            f"{_mib(mem.get('peak_python_rss_bytes')):>8}"
        )
    full = results.get("kwire_full", {})
    if "ratio_to_kio" in full:
        lines.append(
            f"kwire_full / kio = {full['ratio_to_kio']:.2f}x (target >= {KIO_TARGET})  "
            f"{full['verdict_vs_kio']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.spark", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--rows", type=int, help="frames in the table (default 1000000; quick 50000)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 50k frames, 1 repeat")
    parser.add_argument("--repeats", type=int, help="timed runs per variant (default 3; quick 1)")
    parser.add_argument("--files", type=int, default=8, help="Parquet files (= tasks), default 8")
    parser.add_argument("--seed", type=int, default=1, help="frame mix seed")
    parser.add_argument(
        "--data",
        type=Path,
        help="frames table directory: reused if it has files, else written there",
    )
    parser.add_argument(
        "--only", action="append", choices=VARIANTS, help="run only this variant (repeatable)"
    )
    parser.add_argument(
        "--arrow-batch",
        type=int,
        default=10000,
        help="spark.sql.execution.arrow.maxRecordsPerBatch (default 10000)",
    )
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--driver-memory", default="4g", help="spark.driver.memory (default 4g)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per variant process")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="results file")
    parser.add_argument("--no-json", action="store_true", help="write no results file")
    parser.add_argument("--run-variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)  # fmt: skip
    args.repeats = args.repeats or (1 if args.quick else 3)
    rows = args.rows or (50_000 if args.quick else 1_000_000)
    if args.repeats < 1 or rows < 1 or args.files < 1:
        parser.error("--repeats, --rows and --files must be >= 1")

    if args.run_variant:  # child process
        result = run_variant(args)
        assert args.result is not None
        args.result.write_text(json.dumps(result) + "\n")
        return 0

    from benchmarks.codecs import _load_note, machine_info

    started = time.perf_counter()
    machine = machine_info()
    try:
        import pyspark

        machine["packages"]["pyspark"] = pyspark.__version__
    except ImportError:
        pass
    machine["packages"]["pyarrow"] = pa.__version__
    temp = None
    if args.data is not None and data_files(args.data):
        data = args.data
        print(f"frames table: reusing {data}", file=sys.stderr)
        info = json.loads((data / "_mix.json").read_text()) if (data / "_mix.json").exists() else {}
    else:
        if args.data is None:
            temp = tempfile.TemporaryDirectory(prefix="kwire-bench-frames-")
            data = Path(temp.name)
        else:
            data = args.data
        print(f"frames table: writing {rows:,} frames to {data} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        info = write_frames(data, rows, args.files, args.seed)
        print(f"  written in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    rows = table_rows(data)
    size = sum(f.stat().st_size for f in data_files(data))
    print(
        f"kwire Spark benchmark: {rows:,} request frames ({size / 2**20:.0f} MiB Parquet, "
        f"{len(data_files(data))} files); {machine['cpu_model']}, {machine['cores_usable']} usable "
        f"cores, Python {machine['python']}, pyspark {machine['packages'].get('pyspark')}"
        + _load_note(machine["load_average_at_start"])
    )
    print(
        f"each variant: own Spark process on {args.master}, warm-up on one file, then the median "
        f"of {args.repeats} timed Parquet writes; arrow maxRecordsPerBatch {args.arrow_batch}\n"
    )

    variants = [v for v in VARIANTS if not args.only or v in args.only]
    checks: dict[str, Any] = {}
    if "kio" in variants:
        try:
            checks["kio_vs_kwire"] = check_kio(data)
        except Exception as e:  # reported, the timings still run
            checks["kio_vs_kwire"] = {"ok": False, "problems": [f"{type(e).__name__}: {e}"]}
    if "kio" in variants and "kwire_full" in variants:
        checks["python_only"] = python_only(data)
        checks["python_only"]["ok"] = True
    results: dict[str, dict[str, Any]] = {}
    for v in variants:
        print(f"  running {v} ...", file=sys.stderr, flush=True)
        results[v] = spawn(v, args, data)
        r = results[v]
        if r.get("failed"):
            print(f"  {v} FAILED:\n{r['error']}", file=sys.stderr)
        else:
            print(
                f"  {v}: {', '.join(f'{s:.2f}' for s in r['seconds'])} s "
                f"(warm-up {r['warmup_seconds']:.1f} s, {r['tasks']} tasks)",
                file=sys.stderr,
                flush=True,
            )
        if "check" in r:
            checks["sql_header_vs_kwire"] = r["check"]
        if not r.get("failed") and r.get("rows_written") != rows:
            r["failed"] = True
            r["error"] = f"wrote {r.get('rows_written')} rows, expected {rows}"
    summarize(results, rows)
    print(render(results))
    print(
        "\nratios are rows/s over sql_header's rows/s; peak MiB: sum of the Spark JVM's and its "
        "Python processes' resident memory during the timed runs"
    )
    py = checks.pop("python_only", None)
    if py is not None:
        print(
            f"outside Spark, one core, {py['rows']:,} frames: kwire_full "
            f"{py['kwire_full_rows_per_second']:,.0f} rows/s, kwire_pruned "
            f"{py['kwire_pruned_rows_per_second']:,.0f}, kio {py['kio_rows_per_second']:,.0f} "
            f"(kwire_full / kio = {py['kwire_full_over_kio']:.2f}x)"
        )
    for name, c in checks.items():
        state = "ok" if c.get("ok") else "FAILED"
        print(f"check {name}: {state} on {c.get('rows', 0)} rows" + (
            f"; kwire-only columns: {', '.join(c['kwire_only_columns'])}"
            if c.get("kwire_only_columns") else ""
        ))  # fmt: skip
        for p in c.get("problems", []):
            print(f"  {p}")
    for name, r in results.items():
        if r.get("decode_errors"):
            print(f"note: {name} reported {r['decode_errors']} decode errors")
    took = time.perf_counter() - started
    machine["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    print(f"\nrun took {took:.0f} s{_load_note(machine['load_average_at_end'])}")

    failed = [v for v, r in results.items() if r.get("failed")]
    bad_checks = [n for n, c in checks.items() if not c.get("ok")]
    if not args.no_json:
        report = {
            "benchmark": "kwire Spark decode throughput",
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(
                ["python -m benchmarks.spark", *(argv if argv is not None else sys.argv[1:])]
            ),
            "machine": machine,
            "settings": {
                "rows": rows,
                "files": len(data_files(data)),
                "parquet_bytes": size,
                "mix": info.get("mix"),
                "seed": info.get("seed"),
                "repeats": args.repeats,
                "master": args.master,
                "arrow_max_records_per_batch": args.arrow_batch,
                "driver_memory": args.driver_memory,
                "sink": "df.write.mode('overwrite').parquet(tmp), snappy, unpartitioned",
                "statistic": "median wall seconds of the timed writes, after a warm-up on one file",
                "ratio": "rows/s over sql_header rows/s",
                "pruned_fields": list(PRUNED_FIELDS),
            },
            "targets": {
                **{f"{k} vs sql_header": t for k, t in TARGETS.items()},
                "kwire_full vs kio": KIO_TARGET,
                "expected": EXPECTED,
            },
            "checks": checks,
            "python_only": py,
            "results": results,
            "failed": failed,
            "run_seconds": took,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {args.json}")
    if temp is not None:
        temp.cleanup()
    return 1 if failed or bad_checks else 0


if __name__ == "__main__":
    sys.exit(main())
