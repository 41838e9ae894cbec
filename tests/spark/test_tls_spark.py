"""TLS on Spark: the decode job with --keylog on the real TLS captures (tests/data/capture/tls).

The capture step decrypts on the executors: read by 1 kB ranges, its frames are the single
process's; the job's tables say what the clients did (the group's assignments as the members
reported them), the connections without keys are `encrypted` rows, and no key material reaches
an output, the manifest or the job's output."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from kwire import capture, job
from kwire.capture.tls import KeyLog
from kwire.spark.spark_capture import capture_frames

ROOT = Path(__file__).resolve().parents[2]
TLS = ROOT / "tests" / "data" / "capture" / "tls"
METAS = {m["scenario"]: m for m in (json.loads(p.read_text()) for p in TLS.glob("*.json"))}


def _rows(table: pa.Table) -> Counter[str]:
    rows = table.select(capture.SCHEMA.names).to_pylist()
    return Counter(json.dumps(r, default=str, sort_keys=True) for r in rows)


def _secrets(meta: dict[str, Any]) -> list[str]:
    lines = (TLS / meta["keylog"]).read_text().splitlines()
    return [line.split()[2] for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize("scenario", ["tls12-group", "tls-partial-keys"])
def test_capture_on_spark_by_1kb_ranges_equals_the_single_process(
    spark: SparkSession, tmp_path: Path, scenario: str
) -> None:
    meta = METAS[scenario]
    path = str(TLS / meta["capture"])
    keylog = KeyLog.load([str(TLS / meta["keylog"])])
    reference = capture.frames_table(path, meta["broker_ports"], keylog=keylog)
    run = capture_frames(spark, [path], meta["broker_ports"], split_size=1024, keylog=keylog)
    run.frames.write.parquet(str(tmp_path / "frames"))
    assert run.ranges_read() > 50
    got = pq.read_table(tmp_path / "frames")
    assert _rows(got) == _rows(reference)
    assert run.summary().tls == _summary_tls(path, meta, keylog)


def _summary_tls(path: str, meta: dict[str, Any], keylog: KeyLog) -> Counter[str]:
    summary = capture.Summary()
    capture.frames_table(path, meta["broker_ports"], keylog=keylog, summary=summary)
    assert summary.tls
    return summary.tls


@pytest.mark.long(20)
def test_the_job_decrypts_and_tells_the_groups_story(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    group, partial = METAS["tls12-group"], METAS["tls-partial-keys"]
    out = tmp_path / "out"
    inputs = [str(TLS / group["capture"]), str(TLS / partial["capture"])]
    args = job.parse_args(
        [
            *inputs,
            "-o",
            str(out),
            "-p",
            "9093,9094",
            "--keylog",
            str(TLS / group["keylog"]),
            "--keylog",
            str(TLS / partial["keylog"]),
            "--capture-on",
            "spark",
            "--split-size",
            "16k",
            "--no-delivery",
        ]
    )
    summary = job.run(args, spark=spark)
    assert summary is not None
    printed = capsys.readouterr()
    # The partial capture's clients without keys: each connection one encrypted row per side.
    without = [t for t in partial["tls"] if not t["keys_logged"]]
    responses = spark.read.parquet(str(out / "responses"))
    requests = spark.read.parquet(str(out / "requests"))
    for table in (requests, responses):
        by_status = {r["status"]: r["count"] for r in table.groupBy("status").count().collect()}
        assert by_status.get("encrypted") == len(without)
        assert set(by_status) <= {"ok", "encrypted"}
    # The summary says it once per kind of failure, not once per connection.
    kind = "encrypted: no key for client random … in the key log (TLS 1.3 TLS_AES_256_GCM_SHA384)"
    assert ("request", kind, len(without)) in summary.top_errors
    assert ("response", kind, len(without)) in summary.top_errors
    enc = requests.where("status = 'encrypted'").collect()
    assert {r["client_port"] for r in enc} == {t["client_port"] for t in without}
    assert all("no key for client random" in r["error"] for r in enc)
    # Every request tshark counted (with the key logs) decoded.
    tshark = sum(
        n for m in (group, partial) for v in m["counts"]["request"].values() for n in v.values()
    )
    assert requests.where("status = 'ok'").count() == tshark
    # The group's assignments, member by member, as the clients reported them.
    members = {
        r["member_id"]: r["client_id"]
        for r in spark.read.parquet(str(out / "groups" / "members")).collect()
    }
    seen: dict[str, list[list[str]]] = {}
    assignments = spark.read.parquet(str(out / "groups" / "assignments"))
    rows = assignments.where("group_id = 'g-tls12'").orderBy("generation").collect()
    by_member_gen: dict[tuple[str, int], list[str]] = {}
    for r in rows:
        key = (members[r["member_id"]], r["generation"])
        by_member_gen.setdefault(key, []).extend(f"{r['topic']}[{p}]" for p in r["partitions"])
    for (client, _), parts in sorted(by_member_gen.items(), key=lambda kv: kv[0][1]):
        history = seen.setdefault(client, [])
        if not history or history[-1] != sorted(parts):
            history.append(sorted(parts))
    reported: dict[str, list[list[str]]] = {}
    for a in sorted(group["assignments"], key=lambda a: a["t"]):
        if a["assigned"] != "closed":
            reported.setdefault(a["client_id"], []).append(sorted(a["assigned"]))
    assert seen == reported
    # No key material anywhere: the job's output, the manifest, any string column of any table.
    secrets = _secrets(group) + _secrets(partial)
    text = printed.out + printed.err + (out / "manifest.json").read_text()
    for path in out.rglob("*.parquet"):
        table = pq.read_table(path) if path.is_file() else None
        if table is None:
            continue
        for column in table.columns:
            if pa.types.is_string(column.type):
                text += "\n".join(v for v in column.to_pylist() if v)
    assert not [s for s in secrets if s in text]
