"""`kwire live RING -o OUT`: follows a rotating capture ring and keeps OUT's tables current.

One Structured Streaming query: the `kwire-ring` source (kwire.live.source) admits closed files
in ring order; each micro-batch (`foreachBatch`) runs the batch job's steps on them:

1. capture: the batch's segments and every flow's state carried from the batch before are
   regrouped by flow; kwire.live.track restores each flow's TCP reassembly, half-read frames and
   outstanding requests, feeds the new segments and saves what is still open (OUT/_live/state,
   one version per batch). Pairing, latency and records are therefore those of the batch job.
2. decode, records: the batch job's steps on the batch's frames.
3. commit: every table's new files are moved into OUT/frames.parquet, OUT/requests,
   OUT/responses and OUT/records under names that carry the batch number; then the group tables
   are built again from the committed requests and responses (OUT/groups, swapped in whole) and
   OUT/manifest.json says which batch OUT holds.

Exactly once: Spark's checkpoint (OUT/_live/checkpoint) logs each batch's offsets (file numbers)
before the batch runs and marks it done after `foreachBatch` returns; a batch interrupted by a
crash is run again with the same files, reads the state version before it, and replaces whatever
it had moved into the tables (files named with its number) and its state version. So after a
restart no row is lost and none is there twice. A reader that lists a table while a batch is
being moved in can see part of that batch; the manifest names the last batch complete.

Decisions: the decoded tables carry a struct column for every message family (the batch job
carries those present): live tables keep one schema across batches, as Parquet readers need.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from kwire.spark.driver import is_connect, parallelism
from kwire.capture.distributed import FRAMES_SCHEMA, SPLIT_BYTES, load_keylog, merge_stats
from kwire.capture.tls import KeyLogError
from kwire.capture.summary import Summary
from kwire.live import inputs
from kwire.live.source import MAX_FILES, Registry, closed_files, detect_layout, register_ring
from kwire.live.track import IDLE_US, LIVE_SCHEMA, track_live
from kwire.spark.faults import fault_point

LIVE = "_live"
TABLES = ("frames.parquet", "requests", "responses", "records")
# What each batch keeps of them for the group rebuild (kwire.pipeline.derived_inputs).
DERIVED_INPUTS = ("requests", "responses", "records")


class LiveError(Exception):
    """What stops `kwire live` with a one-line reason."""


def say(message: str) -> None:
    print(f"kwire live: {message}", flush=True)


@dataclass
class Paths:
    out: str

    @property
    def live(self) -> str:
        return os.path.join(self.out, LIVE)

    @property
    def registry(self) -> str:
        return os.path.join(self.live, "files.jsonl")

    @property
    def checkpoint(self) -> str:
        return os.path.join(self.live, "checkpoint")

    @property
    def state(self) -> str:
        return os.path.join(self.live, "state")

    @property
    def batches(self) -> str:
        return os.path.join(self.live, "batches")

    @property
    def final(self) -> str:
        return os.path.join(self.live, "final")

    @property
    def inputs(self) -> str:
        """What the group rebuild reads of the decoded tables (kwire.pipeline.derived_inputs),
        a narrow file per batch and table."""
        return os.path.join(self.live, "inputs")

    @property
    def rebuilds(self) -> str:
        """One log per group rebuild, named by the last batch it read (its "upto")."""
        return os.path.join(self.live, "rebuilds")

    @property
    def through(self) -> str:
        """The last batch each family of rebuilt tables (groups, share, delivery) includes."""
        return os.path.join(self.live, "through.json")

    @property
    def snapshots(self) -> str:
        """The inputs a background rebuild reads: hard links to the committed batches' files,
        so that batches committed while it runs do not change what it reads half-way."""
        return os.path.join(self.live, "snapshots")

    def staging(self, tag: str) -> str:
        return os.path.join(self.live, "staging", tag)


# The family of rebuilt tables a directory of OUT is counted in (tables_through).
THROUGH = {"delivery_summary": "delivery"}


def tag_of(batch_id: int, final: bool = False) -> str:
    return f"{batch_id:09d}" + ("e" if final else "")


def _versions(paths: Paths) -> list[str]:
    try:
        return sorted(n for n in os.listdir(paths.state) if n.startswith("v") and ".tmp" not in n)
    except FileNotFoundError:
        return []


def state_before(paths: Paths, tag: str) -> str | None:
    """The state version a batch starts from: the newest one written before it."""
    older = [v for v in _versions(paths) if v < f"v{tag}"]
    return os.path.join(paths.state, older[-1]) if older else None


def batch_logs(paths: Paths) -> list[dict[str, Any]]:
    try:
        names = sorted(os.listdir(paths.batches))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        if name.endswith(".json"):
            with open(os.path.join(paths.batches, name), encoding="utf-8") as f:
                out.append(json.load(f))
    return out


def rebuild_families(
    logs: list[dict[str, Any]], pending: set[int] | None, chosen: list[str] | None
) -> list[str] | None:
    """The families whose api keys the batches with frames saw (each batch logs its own), and
    `pending`'s: what a group rebuild reads of the decoded tables, which live mode writes with a
    column per family whether it occurs or not. Spark plans the rebuild's queries against the
    columns it reads: on two small captures' history the rebuild took 11.9-12.7 s with all 95
    families' columns and 7.4-8.2 s with the 16 that occur (a warm session). None (every
    family) when a batch with frames has no such log (written by an older kwire live). With
    --families (`chosen`), those of them that occur."""
    from kwire.pipeline import present_families

    keys = set(pending or ())
    for log in logs:
        if not log.get("frames"):
            continue
        if log.get("api_keys") is None:
            return chosen
        keys.update(log["api_keys"])
    seen = present_families(keys)
    return [f for f in seen if f in chosen] if chosen is not None else seen


def rebuild_logs(paths: Paths) -> list[dict[str, Any]]:
    """The group rebuilds' logs, oldest first."""
    try:
        names = sorted(n for n in os.listdir(paths.rebuilds) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        with open(os.path.join(paths.rebuilds, name), encoding="utf-8") as f:
            out.append(json.load(f))
    return out


def link_tree(src: str, dst: str, keep: Any) -> int:
    """Hard links (copies where links are refused) of the files under `src` whose names
    `keep(name)` accepts, in the same directories under `dst`. Returns how many."""
    n = 0
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        for name in files:
            if not keep(name):
                continue
            target_dir = os.path.normpath(os.path.join(dst, rel))
            os.makedirs(target_dir, exist_ok=True)
            try:
                os.link(os.path.join(root, name), os.path.join(target_dir, name))
            except OSError:
                shutil.copy2(os.path.join(root, name), os.path.join(target_dir, name))
            n += 1
    return n


class _Background:
    """The group rebuild running beside the batches (one at a time), the lock that keeps a
    batch's commit, a rebuild's snapshot and the tables' swap apart, and a failed rebuild's
    error (raised by the next batch)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def join(self) -> None:
        thread = self.thread
        if thread is not None:
            thread.join()

    def raise_error(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise LiveError(f"the group tables' rebuild failed: {error}") from error


def _write_json(path: str, body: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(body, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def move_in(staged: str, table: str, tag: str) -> int:
    """Moves the Parquet files Spark wrote under `staged` into `table` (same partition
    directories), named `b<tag>-...`, after removing any that an interrupted run of the same
    batch moved there. Returns how many files were moved."""
    prefix = f"b{tag}-"
    if os.path.isdir(table):
        for root, _dirs, files in os.walk(table):
            for name in files:
                if name.startswith(prefix):
                    os.remove(os.path.join(root, name))
    moved = 0
    if not os.path.isdir(staged):
        return 0
    for root, _dirs, files in os.walk(staged):
        rel = os.path.relpath(root, staged)
        for name in sorted(files):
            if not name.endswith(".parquet") or name.startswith((".", "_")):
                continue
            target_dir = os.path.normpath(os.path.join(table, rel))
            os.makedirs(target_dir, exist_ok=True)
            os.replace(os.path.join(root, name), os.path.join(target_dir, prefix + name))
            moved += 1
    return moved


@dataclass
class Live:
    """One follower of one ring into one OUT."""

    spark: SparkSession
    ring: str
    out: str
    broker_ports: list[int]
    layout: str = "auto"
    families: list[str] | None = None
    tolerant: bool = True
    groups: bool = True
    share: bool = True
    records: bool = True
    max_files: int = MAX_FILES
    split_size: int = SPLIT_BYTES
    idle_us: int = IDLE_US
    quiet: bool = False
    groups_every: float = 60.0
    keylogs: list[str] = field(default_factory=list)
    # The session catalog's database the tables are kept in (kwire.spark.catalog), if any.
    database: str | None = None
    started_at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        self.paths = Paths(self.out)
        if self.layout == "auto":
            self.layout = detect_layout(self.ring)

    def __getstate__(self) -> dict[str, Any]:
        # Over Spark Connect foreachBatch runs a copy of this object in the server's Python:
        # the background rebuild's thread and lock stay here.
        state = dict(self.__dict__)
        state.pop("_bg", None)
        return state

    @property
    def background(self) -> _Background:
        bg = self.__dict__.get("_bg")
        if bg is None:
            bg = self.__dict__["_bg"] = _Background()
        return bg

    # -- one batch ------------------------------------------------------------------------

    def process(self, batch: DataFrame, batch_id: int, final: bool = False) -> None:
        """foreachBatch: the batch's files (or, `final`, the end of the capture) into OUT."""
        from kwire import pipeline
        from kwire.pipeline import size_batches
        from kwire.spark.sink import write_parquet
        from kwire.spark.steps import Steps

        t0 = time.monotonic()
        # Seconds of each step of the batch, one after the other (the decode stage's steps
        # side by side).
        steps: dict[str, float] = {}
        mark = [t0]

        def lap(name: str) -> None:
            now = time.monotonic()
            steps[name], mark[0] = now - mark[0], now

        if is_connect(batch.sparkSession) and not final:
            # Over Spark Connect foreachBatch runs this in a Python process of the server's, on
            # a copy of this object: the batch's session is the query's own there. (The end of
            # the capture, end(), runs here in the client.)
            self.spark = batch.sparkSession
            self.quiet = True  # the client tells each batch from its log (run())
        spark = self.spark
        paths = self.paths
        tag = tag_of(batch_id, final)
        staging = paths.staging(tag)
        shutil.rmtree(staging, ignore_errors=True)
        logs = [b for b in batch_logs(paths) if b["tag"] < tag]
        horizon = max((b["max_us"] for b in logs if b.get("max_us") is not None), default=None)
        registry = Registry(paths.registry)
        seq_paths = {e["seq"]: e["path"] for e in registry.entries}
        ports = list(self.broker_ports)
        idle_us = self.idle_us
        # Read again each batch: clients append the keys of new sessions as the ring runs.
        keylog = load_keylog(self.keylogs) if self.keylogs else None

        files_seen = Observation(f"kwire_live_files_{tag}")
        tracked = Observation(f"kwire_live_tracked_{tag}")
        stats_rows = F.struct(
            F.col("file_time"), F.col("file_index"), F.col("offset"), F.col("stats")
        )
        segments = batch.observe(
            files_seen,
            F.collect_list(F.when(F.col("stats").isNotNull(), stats_rows)).alias("files"),
            F.max("max_us").alias("max_us"),
            F.count(F.when(F.col("stats").isNull(), 1)).alias("runs"),
        ).where(F.col("stats").isNull())
        segments = segments.select(
            *[c for c in segments.columns if c != "stats"],
            F.lit(None).cast("binary").alias("state"),
            F.lit(None).cast("long").alias("last_us"),
        )
        before = state_before(paths, tag)
        if before is not None:
            carried = spark.read.parquet(before)
            segments = segments.unionByName(carried, allowMissingColumns=True)

        def track(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield from track_live(
                batches,
                seq_paths,
                ports,
                horizon_us=horizon,
                final=final,
                idle_us=idle_us,
                keylog=keylog,
            )

        from pyspark.sql.pandas.types import from_arrow_schema

        out = (
            # Flows over a few tasks (streaming runs without adaptive execution, so Spark's 200
            # shuffle partitions would be 200 Python tasks for a few files).
            segments.repartition(self.tasks(), "flow")
            .sortWithinPartitions(F.col("state").isNull(), "file_index", "offset")
            .mapInArrow(track, from_arrow_schema(LIVE_SCHEMA))
            .observe(tracked, F.collect_list("stats").alias("tracked"))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            state_tmp = os.path.join(paths.state, f"v{tag}.tmp")
            shutil.rmtree(state_tmp, ignore_errors=True)
            write_parquet(
                out.where(F.col("state").isNotNull()).select(
                    "a_addr", "a_port", "b_addr", "b_port", "flow", "state", "last_us"
                ),
                state_tmp,
            )
            frames_path = os.path.join(staging, "frames.parquet")
            frames_cols = [c for c in FRAMES_SCHEMA.names if c != "stats"]
            lap("state")
            write_parquet(
                out.where(F.col("state").isNull() & F.col("stats").isNull()).select(*frames_cols),
                frames_path,
            )
            lap("frames")
        finally:
            out.unpersist()
        try:
            got = files_seen.get
        except Exception:  # a final batch has no source rows
            got = {"files": [], "max_us": None, "runs": 0}
        ranges = sorted(got.get("files") or [], key=lambda r: (r[1], r[2]))
        summary = merge_stats([r[3] for r in ranges], tracked.get["tracked"])
        t_capture = time.monotonic() - t0
        frames = spark.read.parquet(frames_path)
        n_frames = summary.frames["request"] + summary.frames["response"]
        keys: set[int] | None = None
        if n_frames:
            _, _, _, keys = size_batches(spark, frames)
            lap("sizes")
            # The pipeline's decode and records stages over the batch's frames, into staging.
            stages = Steps(spark)
            pipeline.decode(stages, frames, staging, self.families, self.tolerant)
            if self.records:
                pipeline.records(stages, frames, staging)
            stages.run()
            steps.update(stages.seconds)
            # What the group rebuild reads of them: a narrow file per table, where the decoded
            # tables have a wide one per api key (the rebuild read every batch's again).
            if self.groups:
                narrow = pipeline.derived_inputs(spark, staging, self.records)
                kept = Steps(spark)
                for name, df in narrow.items():
                    target = os.path.join(staging, "_inputs", name)
                    kept.add(
                        f"group inputs: {name}", partial(write_parquet, df.coalesce(1), target)
                    )
                kept.run()
                lap("group inputs")
        t_decode = time.monotonic() - t0 - t_capture
        bg = self.background
        bg.raise_error()  # a rebuild that failed beside the previous batches stops the run
        groups_s = None
        group_steps: dict[str, float] = {}
        if final:
            bg.join()  # the end of the capture builds the group tables once more, itself
            bg.raise_error()
        # Commit: the tables' new files, then the state version, then (the end of the
        # capture) the group tables, then the batch's log (its presence says the batch is
        # done). A rebuild running beside takes its inputs' snapshot and swaps its tables in
        # between two commits, never inside one.
        with bg.lock:
            for i, table in enumerate(TABLES):
                if i == 2:
                    fault_point("live-commit")  # the fault tests: a driver killed mid-commit
                move_in(os.path.join(staging, table), os.path.join(self.out, table), tag)
            for name in DERIVED_INPUTS:
                move_in(
                    os.path.join(staging, "_inputs", name), os.path.join(paths.inputs, name), tag
                )
            target = os.path.join(paths.state, f"v{tag}")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(state_tmp, target)
            shutil.rmtree(staging, ignore_errors=True)
            if final and self.groups and self._groups_due(final=True, pending=n_frames):
                # Before the log: an OUT whose last batch says "final" has its tables whole.
                whole = all(b.get("inputs") for b in batch_logs(paths) if b["frames"])
                groups_s, group_steps = self.rebuild_groups(
                    tag, paths.inputs if whole else None, background=False, pending=keys
                )
            seqs = sorted({r[1] for r in ranges})
            log = {
                "committed_at": time.time(),
                "tag": tag,
                "batch": batch_id,
                "final": final,
                "files": [{"seq": s, "path": seq_paths.get(s)} for s in seqs],
                "lost": [f["path"] for f in summary.files if "lost" in str(f.get("error", ""))],
                "errors": [f"{f['path']}: {f['error']}" for f in summary.files if f.get("error")],
                "max_us": got.get("max_us") if got.get("max_us") is not None else horizon,
                "packets": summary.packets,
                "frames": n_frames,
                # The api keys its frames have: the group rebuild reads the columns of the
                # families its batches saw (rebuild_families), not all of them.
                "api_keys": sorted(keys) if keys is not None else None,
                "inputs": bool(n_frames and self.groups),
                "state_flows": self.spark.read.parquet(target).count() if not final else 0,
                "state_bytes": sum(
                    os.path.getsize(os.path.join(target, n))
                    for n in os.listdir(target)
                    if n.endswith(".parquet")
                ),
                "summary": summary.state(),
                "seconds": {
                    "capture": round(t_capture, 2),
                    "decode": round(t_decode, 2),
                    "groups": groups_s,
                    "total": round(time.monotonic() - t0, 2),
                    "steps": {k: round(v, 2) for k, v in steps.items()},
                    # The group rebuild's steps when this batch ran it (the end of the
                    # capture; the others' are in their rebuild logs), each its own seconds
                    # (side by side: they overlap).
                    "group_steps": {k: round(v, 2) for k, v in group_steps.items()},
                },
            }
            _write_json(os.path.join(paths.batches, f"{tag}.json"), log)
            for old in _versions(paths)[:-2]:
                shutil.rmtree(os.path.join(paths.state, old), ignore_errors=True)
            self.write_manifest(tag)
        self.tell(log, registry)
        if self.groups and not final:
            self.start_rebuild()

    def _groups_due(self, final: bool = False, pending: int = 0) -> bool:
        """Whether to build the group tables again: when frames came since the last build
        (`pending`: the frames of a batch not yet logged), and no closed file is waiting: a
        ring that fell behind catches up first, building them now and then
        (`groups_every`), then its stories are built once more."""
        logs = batch_logs(self.paths)
        rebuilt = rebuild_logs(self.paths)
        upto = rebuilt[-1]["upto"] if rebuilt else ""
        # An OUT begun by an older kwire live: its batch logs say which batches built them.
        older = [b["tag"] for b in logs if b["seconds"].get("groups") is not None]
        upto = max([upto, *older[-1:]])
        since = [b for b in logs if b["tag"] > upto]
        if not pending and not any(b["frames"] for b in since):
            return False
        if final:
            return True
        done = max((f["seq"] for b in logs for f in b["files"]), default=0)
        if not self._waiting(done):
            return True
        # Behind: still build now and then, so a ring that rotates faster than a batch with its
        # group tables takes still gets current stories.
        last = rebuilt[-1]["committed_at"] if rebuilt else self.started_at
        return time.time() - last >= self.groups_every

    def start_rebuild(self) -> None:
        """After a batch's commit: the group tables built again from the committed history
        when due (_groups_due), beside the next batches (a thread of this driver), so a file's
        decoded rows need not wait for the rebuilds of the files before it. One rebuild runs
        at a time; when it ends it goes on while frames came since it began. Over Spark
        Connect (the batch runs in the server's Python) and on an OUT whose older batches kept
        no inputs, the batch builds them itself."""
        bg = self.background
        with bg.lock:  # the running rebuild decides under it whether to go on
            if bg.thread is not None or not self._groups_due():
                return
            whole = all(b.get("inputs") for b in batch_logs(self.paths) if b["frames"])
            if whole and not is_connect(self.spark):
                bg.thread = threading.Thread(
                    target=self._rebuild_loop, name="kwire-live-groups", daemon=True
                )
                bg.thread.start()
                return
        self._rebuild_once(snapshot=False)

    def _rebuild_loop(self) -> None:
        """The background rebuild: again while frames came since it began; a failure is kept
        for the next batch to raise."""
        bg = self.background
        try:
            while True:
                self._rebuild_once(snapshot=True)
                with bg.lock:
                    if not self._groups_due():
                        bg.thread = None
                        return
        except BaseException as e:  # noqa: BLE001 - raised by the next batch (LiveError)
            with bg.lock:
                bg.error = e
                bg.thread = None

    def _rebuild_once(self, snapshot: bool) -> None:
        """One rebuild from every batch committed now; `snapshot`: from hard links to their
        inputs (batches commit beside it), else from the inputs (or the decoded tables, on an
        OUT whose older batches kept none) as they are."""
        paths = self.paths
        with self.background.lock:
            logs = batch_logs(paths)
            if not logs:
                return
            upto = logs[-1]["tag"]
            whole = all(b.get("inputs") for b in logs if b["frames"])
            inputs_at = paths.inputs if whole else None
            if whole and snapshot:
                tags = {b["tag"] for b in logs}
                shutil.rmtree(paths.snapshots, ignore_errors=True)
                inputs_at = os.path.join(paths.snapshots, upto)
                for name in DERIVED_INPUTS:
                    table = os.path.join(paths.inputs, name)
                    # The committed batches' files (kwire.live.inputs: merged ones hold only
                    # committed batches), none that a merged file covers.
                    taken = {
                        p.name
                        for p in inputs.live_parts(table)
                        if p.name.startswith("m") or p.first in tags
                    }
                    link_tree(table, os.path.join(inputs_at, name), taken.__contains__)
        seconds, _ = self.rebuild_groups(upto, inputs_at, background=snapshot)
        if inputs_at and inputs_at != paths.inputs:
            shutil.rmtree(inputs_at, ignore_errors=True)
        if snapshot:
            self._merge_inputs()
        if not self.quiet:
            batch = int(upto.rstrip("e"))
            say(f"group tables through batch {batch}: {seconds:.1f} s")

    def _merge_inputs(self) -> None:
        """The committed batches' inputs merged, FANOUT files at a time (kwire.live.inputs), so
        that the next rebuilds read a few files per table, not one per batch. In the rebuild's
        thread, after it: the merge's Spark job runs beside the batches, the move into place
        under the lock their commits take."""
        from kwire.spark.sink import write_parquet

        paths = self.paths
        committed = {b["tag"] for b in batch_logs(paths)}
        spark = self.spark

        def write(files: list[str], into: str) -> None:
            write_parquet(spark.read.parquet(*files).coalesce(1), into)

        def locked(swap: Any) -> None:
            with self.background.lock:
                swap()

        for name in DERIVED_INPUTS:
            table = os.path.join(paths.inputs, name)
            while (group := inputs.due(table, committed)) is not None:
                inputs.merge(table, group, write, paths.staging(f"merge-{name}"), locked)

    def _log_rebuild(
        self,
        upto: str,
        started: float,
        seconds: float,
        steps: dict[str, float],
        background: bool,
        swapped: dict[str, float],
    ) -> None:
        _write_json(
            os.path.join(self.paths.rebuilds, f"{upto}.json"),
            {
                "upto": upto,
                "started_at": started,
                "committed_at": time.time(),
                # When each family of its tables went in (OUT/groups before the rest).
                "in_place_at": swapped,
                "seconds": seconds,
                "background": background,
                "group_steps": {k: round(v, 2) for k, v in steps.items()},
            },
        )

    def _waiting(self, done: int) -> bool:
        """Whether closed files wait beyond file number `done`."""
        registry = Registry(self.paths.registry)
        if registry.between(done, 1 << 62):
            return True
        include = os.path.exists(self.paths.final)
        return any(
            (f["path"], f["inode"], f["size"], f["mtime_ns"]) not in registry.known
            for f in closed_files(self.ring, self.layout, include_newest=include)
        )

    def tasks(self) -> int:
        return max(2, 2 * parallelism(self.spark))

    def rebuild_groups(
        self,
        tag: str,
        inputs_at: str | None,
        background: bool,
        pending: set[int] | None = None,
    ) -> tuple[float, dict[str, float]]:
        """The group tables, and delivery when records are kept, from the committed history
        through batch `tag` (`inputs_at`: where the batches' narrow inputs are, else the
        decoded tables): written to a staging directory, then each swapped in whole, and the
        rebuild's log written (OUT/_live/rebuilds). `pending`: the api keys of a batch with
        frames whose log is not written yet (the end of the capture's). Returns the seconds
        it took and each of its steps' own seconds."""
        from kwire.groups.build import writing_step
        from kwire.pipeline import derived
        from kwire.spark.steps import Steps

        t, started = time.monotonic(), time.time()
        families = rebuild_families(batch_logs(self.paths), pending, self.families)
        staging = self.paths.staging(f"{tag}-groups")
        shutil.rmtree(staging, ignore_errors=True)
        steps = Steps(self.spark)
        written = derived(
            steps,
            self.spark,
            self.out,
            staging,
            share=self.share,
            delivery=self.records,
            with_records=self.records,
            inputs_at=inputs_at,
            families=families,
        )
        # Beside the batches, the group tables and the share tables go in as soon as their own
        # steps have written them, not when delivery has too (which reads the group tables'
        # staged files on: they go in as hard links). A rebuild a batch runs (the end of the
        # capture's) holds the lock the swaps take, and puts all its tables in at its end.
        swapped: dict[str, float] = {}
        for family in ("groups", "share") if background else ():
            writers = [writing_step(name) for name, _ in written if name.startswith(family + "/")]
            if writers:
                swap = partial(self._swap_in, staging, [family], tag, swapped, link=True)
                steps.add(f"{family}/ in place", swap, after=writers)
        steps.run()
        rest = sorted({name.split("/")[0] for name, _ in written} - set(swapped))
        with self.background.lock:
            self._swap_in(staging, rest, tag, swapped, link=False)
            seconds = round(time.monotonic() - t, 2)
            self._log_rebuild(tag, started, seconds, steps.seconds, background, swapped)
        shutil.rmtree(staging, ignore_errors=True)
        return seconds, dict(steps.seconds)

    def _swap_in(
        self, staging: str, names: list[str], tag: str, swapped: dict[str, float], link: bool
    ) -> None:
        """Puts the rebuilt tables under `staging`'s directories `names` (groups, share,
        delivery, delivery_summary) in place of OUT's, each whole, under the lock batches commit
        under; records them as through batch `tag` (the manifest's `*_through`) and in
        `swapped`. `link`: as hard links of staging's files, which the steps still running go on
        reading."""
        if not names:
            return
        fresh = {name: os.path.join(self.paths.live, f"{name}.new") for name in names}
        for name in names if link else ():
            shutil.rmtree(fresh[name], ignore_errors=True)
            link_tree(os.path.join(staging, name), fresh[name], lambda _: True)
        with self.background.lock:
            for name in names:
                target = os.path.join(self.out, name)
                old = os.path.join(self.paths.live, f"{name}.old")
                shutil.rmtree(old, ignore_errors=True)
                if os.path.exists(target):
                    os.replace(target, old)
                os.replace(fresh[name] if link else os.path.join(staging, name), target)
                shutil.rmtree(old, ignore_errors=True)
                swapped[name] = time.time()
            through = self.tables_through()
            through.update({THROUGH.get(name, name): tag for name in names})
            _write_json(self.paths.through, through)
            logs = batch_logs(self.paths)
            if logs and logs[-1]["tag"] >= tag:
                self.write_manifest(logs[-1]["tag"])  # lists the tables new this rebuild

    def tables_through(self) -> dict[str, str]:
        """The last batch each family of rebuilt tables includes ({} before any): from
        OUT/_live/through.json, or from the last rebuild's log on an OUT begun by an older
        kwire, whose rebuilds put every table in at once."""
        try:
            with open(self.paths.through, encoding="utf-8") as f:
                return dict(json.load(f))
        except FileNotFoundError:
            rebuilt = rebuild_logs(self.paths)
            return (
                {f: rebuilt[-1]["upto"] for f in ("groups", "share", "delivery")} if rebuilt else {}
            )

    def write_manifest(self, tag: str) -> None:
        from kwire import __version__
        from kwire.groups.schema import SHARE_TABLES
        from kwire.groups.schema import TABLES as GROUP_TABLES
        from kwire.spark import manifest

        tables = {
            t.removesuffix(".parquet"): t
            for t in TABLES
            if os.path.isdir(os.path.join(self.out, t))
        }
        if os.path.isdir(os.path.join(self.out, "groups")):
            tables.update({f"groups/{g}": f"groups/{g}" for g in GROUP_TABLES})
        if os.path.isdir(os.path.join(self.out, "share")):
            tables.update({f"share/{g}": f"share/{g}" for g in SHARE_TABLES})
        for name in ("delivery", "delivery_summary"):
            if os.path.isdir(os.path.join(self.out, name)):
                tables[name] = name
        logs = batch_logs(self.paths)
        through = self.tables_through()
        manifest.write(
            self.out,
            tables,
            kwire=__version__,
            inputs=[self.ring],
            live={
                "batch": tag,
                "files": sum(len(b["files"]) for b in logs),
                "ended": tag.endswith("e"),
                # The group, share and delivery tables are built beside the batches: the last
                # batch each includes (the decoded tables are through "batch"). A rebuild puts
                # the group tables in first, so they may be a rebuild ahead of the others.
                "groups_through": through.get("groups"),
                "share_through": through.get("share"),
                "delivery_through": through.get("delivery"),
            },
            families=self.families,
            strict=not self.tolerant,
        )
        if self.database:
            from kwire.spark import catalog

            catalog.publish(self.spark, self.database, self.out, tables, replace=False)

    def tell(self, log: dict[str, Any], registry: Registry) -> None:
        if self.quiet:
            return
        files = log["files"]
        span = f"files {files[0]['seq']}-{files[-1]['seq']}" if files else "no new file"
        behind = registry.last - (files[-1]["seq"] if files else registry.last)
        lag = ""
        if files and files[-1]["path"] and os.path.exists(files[-1]["path"]):
            # A file's close: its last write (a ring), or its move into the spool (ctime).
            lag = f", {time.time() - os.stat(files[-1]['path']).st_ctime:.1f} s after its close"
        took = log["seconds"]
        groups = f", groups {took['groups']:.1f} s" if took.get("groups") else ""
        what = "end of capture" if log["final"] else f"batch {log['batch']}"
        lost = f", {len(log['lost'])} file(s) LOST" if log["lost"] else ""
        say(
            f"{what}: {span} ({len(files)}), {log['packets']:,} packets, {log['frames']:,} frames"
            f"{lost}; {behind} closed file(s) waiting{lag}; {took['total']:.1f} s{groups}"
        )

    # -- the run --------------------------------------------------------------------------

    def stream(self) -> DataFrame:
        register_ring(self.spark)
        os.makedirs(self.paths.live, exist_ok=True)
        return (
            self.spark.readStream.format("kwire-ring")
            .option("registry", self.paths.registry)
            .option("layout", self.layout)
            .option("maxFilesPerTrigger", str(self.max_files))
            .option("splitSize", str(self.split_size))
            .option("final", self.paths.final)
            .load(self.ring)
        )

    def run(self, trigger_s: float = 2.0, until_idle: float | None = None) -> None:
        """Runs until stopped (Ctrl-C), or, with `until_idle`, until no new closed file came for
        that many seconds: the run then ends the capture (every flow ended, as the batch job's
        end does) and returns."""
        paths = self.paths
        ended = [b for b in batch_logs(paths) if b["final"]]
        if ended:
            say(f"{self.out} ended at batch {ended[-1]['batch']}; following on from there")
        if os.path.exists(paths.final):
            os.remove(paths.final)
        for name in DERIVED_INPUTS:  # a merge that a crash interrupted (kwire.live.inputs)
            inputs.tidy(os.path.join(paths.inputs, name))
        query = (
            self.stream()
            .writeStream.foreachBatch(lambda df, i: self.process(df, i))
            .option("checkpointLocation", paths.checkpoint)
            .trigger(processingTime=f"{trigger_s} seconds")
            .queryName("kwire-live")
            .start()
        )
        say(f"following {self.ring} ({self.layout}) into {self.out}; Ctrl-C stops")
        try:
            last_change = time.monotonic()
            seen = self._files_seen()
            told = {b["tag"] for b in batch_logs(paths)}
            while query.isActive:
                query.awaitTermination(1)
                if is_connect(self.spark):
                    told = self._tell_new(told)
                now_seen = self._files_seen()
                if now_seen != seen:
                    seen, last_change = now_seen, time.monotonic()
                if until_idle is None or time.monotonic() - last_change < until_idle:
                    continue
                if not self._caught_up():
                    continue
                if self.layout == "ring" and not os.path.exists(paths.final):
                    # The file still open is read as it stands before the run ends.
                    open(paths.final, "w").close()
                    last_change = time.monotonic()
                    continue
                break
            if query.exception() is not None:
                raise LiveError(f"the streaming query failed: {query.exception()}")
        finally:
            query.stop()
        if is_connect(self.spark):
            self._tell_new(told)
        self.end()

    def _tell_new(self, told: set[str]) -> set[str]:
        """Tells the batches whose logs appeared since (over Spark Connect the batches run in
        the server's Python, whose output is the server's)."""
        for log in batch_logs(self.paths):
            if log["tag"] not in told:
                self.tell(log, Registry(self.paths.registry))
                told.add(log["tag"])
        return told

    def _files_seen(self) -> int:
        return len(closed_files(self.ring, self.layout, include_newest=True))

    def _caught_up(self) -> bool:
        logs = batch_logs(self.paths)
        done = max((f["seq"] for b in logs for f in b["files"]), default=0)
        return not self._waiting(done)

    def end(self) -> None:
        """The end of the capture: every flow still held is ended (idempotent)."""
        logs = batch_logs(self.paths)
        if not logs or logs[-1]["final"]:
            return
        empty = self.spark.createDataFrame([], schema=self._segment_type())
        self.process(empty, logs[-1]["batch"], final=True)

    def _segment_type(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        from kwire.capture.distributed import SEGMENT_SCHEMA

        return from_arrow_schema(SEGMENT_SCHEMA)


# -- command line ---------------------------------------------------------------------------


def configure(parser: argparse.ArgumentParser) -> None:
    from kwire.job import _size
    from kwire.options import add_broker_ports, add_database, add_keylog, add_quiet, add_spark

    parser.add_argument("ring", help="the spool directory (kwire-spool) or the ring directory")
    parser.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    parser.add_argument(
        "--layout",
        choices=("auto", "spool", "ring"),
        default="auto",
        help="spool: every file is closed (moved in by kwire-spool); ring: the newest file is "
        "being written; auto (default): spool when every file carries kwire-spool's number",
    )
    parser.add_argument(
        "--trigger", type=float, default=2.0, metavar="SECONDS", help="seconds between checks"
    )
    parser.add_argument(
        "--until-idle",
        type=float,
        metavar="SECONDS",
        help="end the run (and the capture: what is still open is reported, as the batch "
        "job's end does) after this long without a new closed file",
    )
    parser.add_argument(
        "--max-files", type=int, default=MAX_FILES, help="files per batch at most (default 8)"
    )
    parser.add_argument(
        "--idle-minutes",
        type=float,
        default=IDLE_US / 60e6,
        help="end a connection with no packet for this long, in capture time (default 15)",
    )
    parser.add_argument(
        "--groups-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="while behind the ring, build the group tables at most this often (default 60); "
        "once caught up, after every batch",
    )
    parser.add_argument("--no-records", action="store_true", help="skip OUT/records")
    parser.add_argument("--no-groups", action="store_true", help="skip OUT/groups and OUT/share")
    parser.add_argument("--no-share", action="store_true", help="skip OUT/share")
    parser.add_argument("--strict", action="store_true", help="as kwire decode --strict")
    parser.add_argument(
        "--split-size",
        type=_size,
        default=SPLIT_BYTES,
        metavar="BYTES",
        help="bytes of a file per task (default 128m)",
    )
    add_broker_ports(parser)
    add_keylog(parser)
    add_spark(parser)
    add_database(parser)
    add_quiet(parser)


def run(args: argparse.Namespace, spark: SparkSession | None = None) -> None:
    from kwire.capture import DEFAULT_BROKER_PORTS
    from kwire.spark.session import (
        ConnectError,
        ExecutorSetupError,
        build_session,
        executor_setup,
    )

    if not os.path.isdir(args.ring):
        raise LiveError(f"{args.ring} is not a directory")
    if "://" in args.output:
        raise LiveError("kwire live writes to a local (or mounted) OUT")
    existing = [t for t in TABLES if os.path.exists(os.path.join(args.output, t))]
    if existing and not os.path.isdir(os.path.join(args.output, LIVE)):
        raise LiveError(f"{args.output} holds a batch job's tables; give a new OUT")
    try:
        load_keylog(args.keylog)  # a bad key log stops the run before Spark starts
    except KeyLogError as e:
        raise LiveError(str(e)) from None
    if args.database:
        from kwire.spark.catalog import CatalogError, quoted

        try:
            quoted(args.database)
        except CatalogError as e:
            raise LiveError(str(e)) from None
    if spark is None and args.remote:
        say(f"connecting to Spark Connect at {args.remote}")
        try:
            spark = build_session(remote=args.remote, conf=args.conf)
            # The server's executors get kwire from here when their Python lacks it.
            executor_setup(spark, say)
        except (ConnectError, ExecutorSetupError) as e:
            raise LiveError(str(e)) from None
    elif spark is None:
        say(f"starting Spark on {args.master}")
        spark = build_session(args.master, "kwire-live", args.conf, tell=say, live=True)
    live = Live(
        spark,
        os.path.abspath(args.ring),
        os.path.abspath(args.output),
        args.broker_ports or list(DEFAULT_BROKER_PORTS),
        layout=args.layout,
        tolerant=not args.strict,
        groups=not args.no_groups,
        share=not args.no_share,
        records=not args.no_records,
        max_files=args.max_files,
        split_size=args.split_size,
        idle_us=int(args.idle_minutes * 60e6),
        quiet=args.quiet,
        groups_every=args.groups_every,
        keylogs=list(args.keylog),
        database=args.database,
    )
    live.run(args.trigger, args.until_idle)
