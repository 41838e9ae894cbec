"""OUT/_live/produced: the produced records and their offsets, carried from one group rebuild
to the next, so that a rebuild reads the Produce traffic of the batches committed since the one
before, not the whole history's.

What a rebuild of kwire live needs of the produced records is what `kwire decode` computes from
every Produce request and response of the capture (kwire.groups.delivery.produced): one row per
record, an idempotent producer's retries merged into one. Here the rows merged so far are kept
as Parquet files with the columns merging needs (kwire.groups.delivery.merge_produced), and each
rebuild:

1. makes the attempts of the new batches' Produce requests (their responses are in the same
   batch: kwire live holds a request until its response comes);
2. merges them with the carried rows they are retries of (an idempotent key already carried:
   the files holding such rows are read and written again without them);
3. writes the merged rows as a new file, and every few files of a size merges them into one
   (a file of level L+1 out of MERGE_AT of level L), so that a long run reads a few dozen files
   at most and each row is written again a few times, not once per rebuild.

The carried rows are then exactly what merging every attempt at once gives. Where that would not
hold, the rebuild computes them all from the history instead and starts carrying again from
there (`full` in its log, with the reason): nothing carried yet; the cluster id of a broker the
carried rows were produced to changed (it is part of the key, and a Metadata answer can name a
broker after its records were carried; brokers no carried row went to may come and go freely);
a Produce answer whose request is not in its batch (an acks=0 request that a broker answered
anyway, or a request with no readable record). A live OUT whose older batches kept no narrow
inputs carries nothing (kwire.live.job).

`index.json` names the files and the last batch they include (`through`), and is replaced (a
rename) only once the files it names are written: a rebuild killed half-way leaves the index
before it, whose files are all there, and the next rebuild removes what the index does not name.
One rebuild runs at a time (kwire.live.job).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kwire.groups.delivery import (
    PRODUCE_KEY,
    answered_apart,
    broker_endpoint,
    merge_produced,
    produce_attempts,
    produced,
    produced_rows,
    retried,
)
from kwire.spark.driver import parallelism
from kwire.spark.session import hold, release
from kwire.spark.faults import fault_point
from kwire.spark.sink import write_parquet

INDEX = "index.json"
# Files of one level merged into one file of the next (written once per rebuild at level 0).
MERGE_AT = 4
# The level of the files a rebuild that computed everything wrote: never merged again.
FULL = 99
# Carrying starts once the batches' narrow records (OUT/_live/inputs/records) hold this many
# bytes. Below it, computing the rows from the history is one Spark job and costs less than
# carrying's half-dozen: on the live benchmark's 0.61 GB ring (1.4 MB of narrow records at its
# end, 60 k produced records), 2.3-3.4 s from the history against 4.4-9.7 s carried.
CARRY_FROM_BYTES = 4 << 20


def batch_number(tag: str) -> int:
    """A batch's number from its tag ("000000012", "000000012e" for the end of a capture)."""
    return int(tag.rstrip("e"))


def file_tag(name: str) -> str:
    """The batch tag of a narrow input file (`b<tag>-part-...`, kwire.live.job.move_in)."""
    return name[1:].split("-", 1)[0]


def _rows_in(path: str) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


class CarriedProduced:
    """The produced records of the history through batch `upto` for one rebuild (rows()),
    carried under `root` (OUT/_live/produced). `inputs_at`: the narrow inputs the rebuild reads
    (a file per batch and table, `b<tag>-...`); `committed`: the tags of the batches it
    includes."""

    def __init__(
        self,
        root: str,
        upto: str,
        inputs_at: str,
        committed: set[str],
        from_bytes: int = CARRY_FROM_BYTES,
    ) -> None:
        self.root, self.upto, self.inputs_at = root, upto, inputs_at
        self.committed = committed
        self.from_bytes = from_bytes
        self.log: dict[str, Any] = {}

    # -- the index -------------------------------------------------------------------------------

    def _index(self) -> dict[str, Any] | None:
        try:
            with open(os.path.join(self.root, INDEX), encoding="utf-8") as f:
                index: dict[str, Any] = json.load(f)
        except FileNotFoundError:
            return None
        if not all(os.path.exists(os.path.join(self.root, e["file"])) for e in index["files"]):
            return None
        return index

    def _write_index(self, body: dict[str, Any]) -> None:
        os.makedirs(self.root, exist_ok=True)
        tmp = os.path.join(self.root, f".{INDEX}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(body, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(self.root, INDEX))

    def _sweep(self, index: dict[str, Any] | None) -> None:
        """Removes the directories the index does not name a file in (a killed rebuild's)."""
        keep = {e["file"].split("/", 1)[0] for e in (index or {}).get("files", [])}
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return
        for name in names:
            path = os.path.join(self.root, name)
            if os.path.isdir(path) and name not in keep:
                shutil.rmtree(path, ignore_errors=True)

    # -- files -----------------------------------------------------------------------------------

    def _inputs(self, table: str, tags: set[str]) -> list[str]:
        folder = os.path.join(self.inputs_at, table)
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        return [
            os.path.join(folder, n)
            for n in names
            if n.startswith("b") and n.endswith(".parquet") and file_tag(n) in tags
        ]

    def _read(self, spark: Any, entries: list[dict[str, Any]]) -> DataFrame:
        return spark.read.parquet(*[os.path.join(self.root, e["file"]) for e in entries])

    def _write(self, df: DataFrame, level: int, files: int = 1) -> list[dict[str, Any]]:
        """`df` written as `files` new Parquet files of `level`; their entries (none for no
        rows)."""
        folder = f"{self.upto}-{uuid.uuid4().hex[:8]}"
        path = os.path.join(self.root, folder)
        write_parquet(df.coalesce(files) if files == 1 else df.repartition(files), path)
        entries = []
        for name in sorted(os.listdir(path)):
            if not name.endswith(".parquet"):
                continue
            rows = _rows_in(os.path.join(path, name))
            if rows:
                entries.append({"file": f"{folder}/{name}", "rows": rows, "level": level})
        return entries

    def _merged_levels(self, spark: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`entries` with every MERGE_AT files of a level below FULL merged into one of the
        next level, lowest level first."""
        while True:
            levels: dict[int, list[dict[str, Any]]] = {}
            for e in entries:
                levels.setdefault(e["level"], []).append(e)
            full = [lv for lv, es in sorted(levels.items()) if lv < FULL and len(es) >= MERGE_AT]
            if not full:
                return entries
            group = levels[full[0]]
            merged = self._write(self._read(spark, group), full[0] + 1)
            entries = [e for e in entries if e not in group] + merged

    # -- the rows --------------------------------------------------------------------------------

    def rows(
        self, records: DataFrame, responses: DataFrame, endpoints: DataFrame | None
    ) -> DataFrame:
        """produced(records, responses, endpoints) of the history through `upto` (`records`
        and `responses`: the rebuild's whole inputs, read only when nothing can be carried),
        from the carried rows and the new batches' attempts; the carried rows and the index
        updated. Its log (what it read, why it computed everything) in `self.log`."""
        t = time.monotonic()
        spark = records.sparkSession
        index = self._index()
        self._sweep(index)
        # Broker "host:port" -> cluster id as Metadata answers name them now.
        clusters = {r["_ep"]: r["cluster"] for r in (endpoints.collect() if endpoints else [])}
        through = batch_number(self.upto)
        new_tags = {t for t in self.committed if batch_number(t) <= through}
        if index is None and self.from_bytes:
            size = sum(os.path.getsize(p) for p in self._inputs("records", new_tags))
            if size < self.from_bytes:
                self.log = {"from_history": size}
                return hold(produced(records, responses, endpoints))
        reason = None
        if index is None:
            reason = "nothing carried"
        elif any(clusters.get(ep) != c for ep, c in index["brokers"].items()):
            reason = "the brokers' cluster ids changed"
        elif index["through"] > through:
            reason = "the carried rows are ahead of this rebuild"
        else:
            new_tags = {t for t in new_tags if batch_number(t) > index["through"]}
        log: dict[str, Any] = {"carried_through": index["through"] if index else None}
        if reason is None:
            assert index is not None
            new_records = self._inputs("records", new_tags)
            new_responses = self._inputs("responses", new_tags)
            entries = list(index["files"])
            brokers = dict(index["brokers"])
            log["batches"] = len(new_tags)
            rs = spark.read.parquet(*new_records) if new_records else records.limit(0)
            answers = spark.read.parquet(*new_responses) if new_responses else responses.limit(0)
            if new_responses and answered_apart(rs, answers).limit(1).count():
                reason = "a Produce answer without its request in its batch"
            elif new_records:
                entries, went = self._carry(spark, entries, rs, answers, endpoints, log)
                brokers.update({ep: clusters.get(ep) for ep in went})
        if reason is not None:
            log["full"] = reason
            everything = merge_produced(produce_attempts(records, responses, endpoints))
            entries = self._write(everything, FULL, max(2, parallelism(spark)))
            brokers = {ep: clusters.get(ep) for ep in _producer_brokers(records)}
        entries = self._merged_levels(spark, entries)
        fault_point("produced")
        # The brokers the carried rows were produced to, with the cluster ids their rows
        # carry: a later Metadata answer that names one otherwise makes them stale.
        self._write_index({"through": through, "brokers": brokers, "files": entries})
        self._sweep({"files": entries})
        log["files"], log["rows"] = len(entries), sum(e["rows"] for e in entries)
        log["seconds"] = round(time.monotonic() - t, 2)
        self.log = log
        if not entries:
            return hold(produced(records.limit(0), responses.limit(0), endpoints))
        # Held, as the rows computed from the history are: the lags, the share records and
        # delivery each read them.
        return hold(produced_rows(self._read(spark, entries)))

    def _carry(
        self,
        spark: Any,
        entries: list[dict[str, Any]],
        records: DataFrame,
        responses: DataFrame,
        endpoints: DataFrame | None,
        log: dict[str, Any],
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """`entries` with the new batches' attempts (`records`, `responses`) merged in: a new
        file, and the files holding rows they are retries of written again without those; and
        the brokers the attempts went to. The attempts are held while their facts are read,
        searched for and merged."""
        attempts = hold(produce_attempts(records, responses, endpoints))
        try:
            facts = attempts.select(
                "producer_id",
                "producer_epoch",
                "sequence",
                broker_endpoint("producer_connection").alias("_ep"),
            ).toArrow()
            touched: list[dict[str, Any]] = []
            near = _near(facts) if entries else None
            if near is not None:
                # Only the row groups whose producers and sequences the new attempts span:
                # the Parquet reader skips the rest by their statistics.
                old = self._read(spark, entries).where(near)
                old = old.select(*PRODUCE_KEY, F.col("_metadata.file_name").alias("_file"))
                hit = retried(old, attempts, "leftsemi").select("_file").distinct().collect()
                names = {r["_file"] for r in hit}
                touched = [e for e in entries if os.path.basename(e["file"]) in names]
            rows = merge_produced(attempts)
            if touched:
                old = self._read(spark, touched)
                again = retried(old, attempts, "leftsemi")
                rows = merge_produced(attempts.unionByName(again)).unionByName(
                    retried(old, attempts, "leftanti")
                )
            log["retried_files"] = len(touched)
            entries = [e for e in entries if e not in touched] + self._write(rows, 0)
        finally:
            release(attempts)
        return entries, set(facts.column("_ep").to_pylist())


# Past this many producers in one rebuild's batches, the carried rows are searched for retries
# without picking their row groups by producer first.
MAX_SPANS = 256


def _near(facts: Any) -> Any:
    """A filter of the carried rows that a retry among the attempts of `facts` (their
    producer_id, producer_epoch and sequence, in Arrow) can be: an idempotent producer's (id and
    epoch) within the sequences the attempts span; None when none is idempotent. True (all)
    past MAX_SPANS producers."""
    import pyarrow.compute as pc

    idempotent = pc.and_(
        pc.greater_equal(facts.column("producer_id"), 0),
        pc.greater_equal(facts.column("sequence"), 0),
    )
    spans = (
        facts.filter(pc.fill_null(idempotent, False))
        .group_by(["producer_id", "producer_epoch"])
        .aggregate([("sequence", "min"), ("sequence", "max")])
        .to_pylist()
    )
    if not spans:
        return None
    if len(spans) > MAX_SPANS:
        return F.lit(True)
    near = F.lit(False)
    for s in spans:
        near = near | (
            (F.col("producer_id") == s["producer_id"])
            & F.col("producer_epoch").eqNullSafe(s["producer_epoch"])
            & F.col("sequence").between(s["sequence_min"], s["sequence_max"])
        )
    return near


def _producer_brokers(records: DataFrame) -> set[str]:
    """The brokers ("host:port") the Produce requests among `records` went to."""
    produce = (F.col("direction") == "request") & (F.col("api_key") == 0)
    conns = records.where(produce).select(broker_endpoint("connection_id").alias("ep"))
    return {r["ep"] for r in conns.distinct().collect()}
