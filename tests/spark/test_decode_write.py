"""kwire.spark.api.write_decoded and kwire.spark.explode.write_records: the decoded tables and
the records written by the decoding and exploding tasks themselves (as the job writes
OUT/requests, OUT/responses and OUT/records) are the tables Spark's own writer makes of
decode_requests / decode_responses / records_table: the same schema read back, the same rows,
the same partitions, on real captures (records of every codec), synthetic traffic with damaged
frames, and frames the capture could not complete (redacted SASL bytes, TLS without keys,
frames cut short)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks import synth
from kwire import capture
from kwire.pipeline import present_families
from kwire.spark.api import decode_requests, decode_responses, write_decoded
from kwire.spark.explode import records_table, write_records
from kwire.spark.sink import write_parquet
from tests.sampling import SWEEP

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
# Records of every codec, and an admin's APIs (the synthetic traffic has every family besides);
# the group protocol's real frames are decoded and written by every job test.
CAPTURES = ["mock_records_librdkafka", "tansu_admin_topics"]


def _frames_table() -> pa.Table:
    tables = [synth.frames_table()]
    for name in CAPTURES:
        meta = json.loads((DATA / f"{name}.json").read_text())
        tables.append(capture.frames_table([str(DATA / meta["capture"])], meta["broker_ports"]))
    # A TLS capture read without its keys: rows with no frame and the capture's reason.
    meta = json.loads((DATA / "tls" / "tls12_group.json").read_text())
    tables.append(capture.frames_table([str(DATA / "tls" / meta["capture"])], meta["broker_ports"]))
    table = pa.concat_tables(t.select(capture.SCHEMA.names).cast(capture.SCHEMA) for t in tables)
    # Frames the capture could not complete, in both directions.
    extra = []
    for direction in ("request", "response"):
        for reason in ("redacted: SASL bytes", "encrypted: TLS", "cut short at the end", None):
            row = table.slice(0, 1).to_pylist()[0]
            row.update(direction=direction, frame=None, frame_length=None, error=reason)
            extra.append(row)
    return pa.concat_tables([table, pa.Table.from_pylist(extra, schema=capture.SCHEMA)])


@pytest.fixture(scope="module")
def frames(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    path = tmp_path_factory.mktemp("frames") / "frames.parquet"
    pq.write_table(_frames_table(), path)
    return spark.read.parquet(str(path))


def _hashes(df: DataFrame) -> DataFrame:
    return df.select(F.sha2(F.to_json(F.struct(*[F.col(c) for c in df.columns])), 256).alias("h"))


def _same(spark: SparkSession, ours: Path, theirs: Path) -> None:
    a, b = spark.read.parquet(str(ours)), spark.read.parquet(str(theirs))
    assert a.schema == b.schema
    # The same rows, as multisets of their hashes (a few thousand rows: compared here, where two
    # exceptAll queries hashed each wide table twice).
    mine = Counter(r[0] for r in _hashes(a).collect())
    others = Counter(r[0] for r in _hashes(b).collect())
    assert sum(mine.values()) > 0
    assert mine == others, f"{sum((mine - others).values())} rows differ"
    assert sorted(p.name for p in ours.glob("api_key=*")) == sorted(  # none for records
        p.name for p in theirs.glob("api_key=*")
    )
    assert (ours / "_SUCCESS").exists() and not (ours / "_temporary").exists()


@pytest.mark.long(21)
@pytest.mark.parametrize("tolerant", [True, False])
def test_written_by_the_tasks_as_by_sparks_writer(
    spark: SparkSession, frames: DataFrame, tmp_path: Path, tolerant: bool
) -> None:
    if not tolerant:
        # Strict decoding differs from tolerant only on damaged frames: it runs over the
        # synthetic traffic (damaged frames of every kind), the TLS capture and the frames the
        # capture could not complete; the real captures' frames are compared once, tolerant.
        frames = frames.where(~F.col("source_file").rlike("|".join(CAPTURES)))
    keys = {r[0] for r in frames.select("api_key").distinct().collect() if r[0] is not None}
    families = present_families(keys)
    statuses = set()
    for direction, decode in (("request", decode_requests), ("response", decode_responses)):
        mine = frames.where(F.col("direction") == direction)
        ours, theirs = tmp_path / f"ours_{direction}", tmp_path / f"theirs_{direction}"
        write_decoded(mine, str(ours), direction, families, tolerant)
        df = decode(mine, families=families, tolerant=tolerant)
        write_parquet(df, str(theirs), partition_by="api_key")
        _same(spark, ours, theirs)
        statuses |= {r[0] for r in spark.read.parquet(str(ours)).select("status").collect()}
    # The rows cover what the projection decides: decoded, damaged and missing frames.
    assert {"ok", "malformed", "redacted", "encrypted", "incomplete"} <= statuses


@pytest.mark.long(19)
def test_every_family_without_the_capture_columns(
    spark: SparkSession, frames: DataFrame, tmp_path: Path
) -> None:
    """All families (no selection), from a frames table that has only what decoding needs. The
    schemas of every API are most of a minute of Spark planning per direction: make test takes
    the responses (the wider one), make sweep both."""
    small = (
        frames.where(F.col("frame").isNotNull())
        .select("direction", "frame", "api_key", "api_version")
        .limit(300)
    )
    both = (("request", decode_requests), ("response", decode_responses))
    for direction, decode in both if SWEEP else both[1:]:
        mine = small.where(F.col("direction") == direction)
        ours, theirs = tmp_path / f"ours_{direction}", tmp_path / f"theirs_{direction}"
        write_decoded(mine, str(ours), direction)
        write_parquet(decode(mine), str(theirs), partition_by="api_key")
        _same(spark, ours, theirs)


def test_records_written_by_the_tasks_as_by_sparks_writer(
    spark: SparkSession, frames: DataFrame, tmp_path: Path
) -> None:
    responses = decode_responses(frames.where(F.col("direction") == "response"))
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    rows = write_records(frames, str(ours), responses)
    write_parquet(records_table(frames, responses), str(theirs))
    _same(spark, ours, theirs)
    assert rows == spark.read.parquet(str(theirs)).count()
    codecs = {
        r[0] for r in spark.read.parquet(str(ours)).select("compression").distinct().collect()
    }
    assert {"none", "gzip", "snappy", "lz4", "zstd"} <= codecs
