"""`kwire live` equals the batch job on the same files, through a crash and a restart.

Two real captures (librdkafka's mock cluster: a consumer group, a member killed, a rebalance;
then share consumers with redeliveries, a record archived at the limit and a late acknowledgement
refused) are cut into ring files, in time order; the files are dropped into a spool one by one with the real hook
(kwire.live.spool). The first run, `kwire live` in its own process, is SIGKILLed in the middle
of committing a batch (after some tables took the batch's files, before the others did); a
second run goes on from the checkpoint while the last file closes, and ends on idle. Every table must then equal the
batch job's (`kwire decode` over the same files), row for row: nothing lost, nothing twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from kwire.capture.pcapfile import FileStats, iter_packets
from kwire.live.spool import spool_file
from tests.fuzz.pcaps import pcap_file

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
# Each capture and the ring files it is cut into: the share capture was made later.
CAPTURES = [(DATA / "mock_gt_eager_kill.pcap", 3), (DATA / "mock_share_locks.pcap", 2)]
PIECES = sum(n for _, n in CAPTURES)

pytestmark = pytest.mark.xdist_group("live")


def cut(path: Path, pieces: int, into: Path, first: int = 0) -> list[Path]:
    """The capture's packets in `pieces` pcap files of about equal packet counts, named as
    tcpdump -C names a ring's files (from ring.pcap<first>)."""
    with open(path, "rb") as f:
        packets = list(iter_packets(f, FileStats(str(path))))
    linktype = packets[0].linktype
    assert all(p.linktype == linktype for p in packets)
    into.mkdir(parents=True, exist_ok=True)
    out = []
    step = -(-len(packets) // pieces)
    for i in range(pieces):
        chunk = packets[i * step : (i + 1) * step]
        data, _ = pcap_file([(p.ts_us, p.data) for p in chunk], linktype)
        target = into / f"ring.pcap{first + i}"
        target.write_bytes(data)
        out.append(target)
    return out


def _live(spool: Path, out: Path, ports: str, *extra: str, env: dict[str, str]) -> Any:
    cmd = [sys.executable, "-m", "kwire", "live", str(spool), "-o", str(out), "-p", ports]
    cmd += ["--trigger", "0.5", "--max-files", "2", "--master", "local[2]", *extra]
    cmd += ["--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(proc: Any, timeout: float) -> tuple[int, str]:
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        pytest.fail(f"kwire live did not finish in {timeout} s:\n{text}")
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the JVM, should it outlive its driver
    except ProcessLookupError:
        pass
    return proc.returncode, text


def _rows(path: Path, columns: list[str] | None = None) -> Counter[str]:
    table = ds.dataset(str(path), format="parquet", partitioning="hive").to_table(columns=columns)
    return Counter(json.dumps(r, sort_keys=True, default=repr) for r in table.to_pylist())


def _ring_name(source_file: str | None) -> str | None:
    """A frame's file, as the ring named it (the spool prefixes a sequence number)."""
    if source_file is None:
        return None
    name = os.path.basename(source_file)
    return name.split("-", 1)[1] if name[:12].isdigit() else name


def test_rebuild_reads_the_families_its_batches_saw() -> None:
    from kwire.live.job import rebuild_families
    from kwire.spark.model import FAMILIES

    logs = [
        {"frames": 10, "api_keys": [FAMILIES["fetch"], FAMILIES["join_group"]]},
        {"frames": 0, "api_keys": None},  # an empty batch logs none
        {"frames": 4, "api_keys": [FAMILIES["heartbeat"]]},
    ]
    assert rebuild_families(logs, None, None) == ["fetch", "join_group", "heartbeat"]
    # The end of the capture's batch, not logged yet.
    got = rebuild_families(logs, {FAMILIES["produce"]}, None)
    assert got == ["produce", "fetch", "join_group", "heartbeat"]
    # --families: those of them that occur.
    assert rebuild_families(logs, None, ["heartbeat", "sync_group"]) == ["heartbeat"]
    # A batch with frames logged by an older kwire live: every family (or the chosen ones).
    older = [*logs, {"frames": 3}]
    assert rebuild_families(older, None, None) is None
    assert rebuild_families(older, None, ["heartbeat"]) == ["heartbeat"]


def test_live_equals_batch_through_a_crash(tmp_path: Path, spark: Any, monkeypatch: Any) -> None:
    from kwire import job
    from kwire.live import inputs

    # The batches' inputs merged two at a time (kwire.live.inputs), so that the rebuilds after
    # the first read merged files: the tables compared below come from them.
    monkeypatch.setattr(inputs, "FANOUT", 2)

    ports = ",".join(
        str(p)
        for capture, _ in CAPTURES
        for p in json.loads(capture.with_suffix(".json").read_text())["broker_ports"]
    )
    ring: list[Path] = []
    for capture, pieces in CAPTURES:
        ring += cut(capture, pieces, tmp_path / "ring", first=len(ring))
    batch_in = tmp_path / "batch_in"
    batch_in.mkdir()
    for f in ring:
        (batch_in / f.name).write_bytes(f.read_bytes())
    spool = tmp_path / "spool"
    spool.mkdir()
    out = tmp_path / "live"
    faults = tmp_path / "faults"
    faults.mkdir()
    env = {**os.environ, "KWIRE_FAULTS": "live-commit", "KWIRE_FAULTS_DIR": str(faults)}

    # Run 1: two files closed; killed while committing its first batch.
    for f in ring[:2]:
        spool_file(str(f), str(spool))
    code, text = _finish(_live(spool, out, ports, env=env), 240)
    assert (faults / "fault-live-commit").exists(), text
    assert code == -signal.SIGKILL, text
    assert not (out / "manifest.json").exists(), "a killed first batch left a manifest"
    committed = list((out / "requests").rglob("*.parquet")) if (out / "requests").exists() else []
    assert committed, "the crash should come after the requests took the batch's files"

    # Run 2: goes on from the checkpoint while the other files close one by one (in this
    # process, on the tests' session: a second JVM would only cost time).
    from kwire.live.job import Live

    def close_the_rest() -> None:
        for f in ring[2:]:
            time.sleep(1.0)
            spool_file(str(f), str(spool))

    feeder = threading.Thread(target=close_the_rest)
    feeder.start()
    live = Live(spark, str(spool), str(out), [int(p) for p in ports.split(",")], max_files=2)
    try:
        live.run(trigger_s=0.5, until_idle=3)
    finally:
        feeder.join()
    logs = [json.loads(p.read_text()) for p in sorted((out / "_live" / "batches").glob("*.json"))]
    read = [f["seq"] for b in logs for f in b["files"]]
    assert sorted(read) == list(range(1, PIECES + 1)), read  # every file once
    assert logs[-1]["final"], "the run did not end the capture"
    # Each batch's horizon (which ends idle flows) is the latest packet time written into the
    # files read so far: the ring's pieces are in time order (their copies in batch_in: the
    # spool took the files themselves).
    latest = {}
    for seq, f in enumerate(ring, 1):
        with open(batch_in / f.name, "rb") as fh:
            latest[seq] = max(p.ts_us for p in iter_packets(fh, FileStats(f.name)))
    seen: list[int] = []
    for b in logs:
        seen += [f["seq"] for f in b["files"]]
        assert b["max_us"] == max(latest[s] for s in seen), (b, seen)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["live"]["ended"] is True
    # The group tables were built beside the batches (a thread of the driver, from a snapshot
    # of the batches committed when it began), the last time after the last batch with frames:
    # the end of the capture has none, so the tables compared below are that rebuild's.
    rebuilds = [
        json.loads(p.read_text()) for p in sorted((out / "_live" / "rebuilds").glob("*.json"))
    ]
    assert logs[-1]["frames"] == 0, logs[-1]
    last_with_frames = max(b["tag"] for b in logs if b["frames"])
    assert rebuilds and rebuilds[-1]["upto"] == last_with_frames, rebuilds
    assert rebuilds[-1]["background"], rebuilds
    assert manifest["live"]["groups_through"] == last_with_frames, manifest["live"]
    assert manifest["live"]["share_through"] == last_with_frames, manifest["live"]
    assert manifest["live"]["delivery_through"] == last_with_frames, manifest["live"]
    # A rebuild beside the batches put the group tables in place as soon as they were written,
    # then the share tables, and delivery's two at its end.
    in_place = rebuilds[-1]["in_place_at"]
    assert set(in_place) == {"groups", "share", "delivery", "delivery_summary"}, in_place
    assert in_place["groups"] <= in_place["delivery"] <= rebuilds[-1]["committed_at"]
    assert in_place["share"] <= in_place["delivery"]
    assert not (out / "_live" / "snapshots").exists() or not any(
        (out / "_live" / "snapshots").iterdir()
    )
    # Each batch with frames kept what the group rebuild reads (a narrow file per table): the
    # tables compared below were rebuilt from those, not from the decoded tables.
    with_frames = [b["tag"] for b in logs if b["frames"]]
    assert with_frames and all(b["inputs"] for b in logs if b["frames"])
    for name in ("requests", "responses", "records"):
        table = out / "_live" / "inputs" / name
        parts = inputs.live_parts(str(table))
        assert sorted(p.name for p in parts) == sorted(p.name for p in table.glob("*.parquet"))
        kept = sorted(t for p in parts for t in with_frames if p.first <= t <= p.last)
        assert kept == with_frames, (name, parts)
        assert any(p.name.startswith("m") for p in parts), (name, parts)

    # The batch job on the same files.
    batch_out = tmp_path / "batch"
    args = job.parse_args([str(batch_in), "-o", str(batch_out), "-p", ports, "--no-summary", "-q"])
    job.run(args, spark)
    # Each batch with frames logged their api keys (the rebuild reads those families' columns).
    frames = ds.dataset(str(batch_out / "frames.parquet")).to_table(["api_key"])["api_key"]
    keys = {k for k in frames.to_pylist() if k is not None}
    assert {k for b in logs if b["frames"] for k in b["api_keys"]} == keys

    for table in ("requests", "responses", "records"):
        columns = [
            c
            for c in ds.dataset(str(batch_out / table), partitioning="hive").schema.names
            if c != "source_file"
        ]
        want = _rows(batch_out / table, columns)
        got = _rows(out / table, columns)
        assert sum(want.values()) > 0, table
        assert got == want, f"{table}: {sum(got.values())} rows live, {sum(want.values())} batch"
    names = Counter(
        _ring_name(r["source_file"])
        for r in ds.dataset(str(out / "frames.parquet")).to_table(["source_file"]).to_pylist()
    )
    want_names = Counter(
        _ring_name(r["source_file"])
        for r in ds.dataset(str(batch_out / "frames.parquet")).to_table(["source_file"]).to_pylist()
    )
    assert names == want_names
    # Every derived table: the group tables, the share group's records attempt by attempt, and
    # each record's trip (OUT/delivery, its summary), as the batch job has them.
    listed = json.loads((batch_out / "manifest.json").read_text())["tables"]
    assert set(manifest["tables"]) == set(listed)
    derived = sorted(n for n in listed if n.startswith(("groups/", "share/", "delivery")))
    assert {"share/deliveries", "share/records", "delivery", "delivery_summary"} <= set(derived)
    for name in derived:
        want = _rows(batch_out / listed[name])
        assert _rows(out / manifest["tables"][name]) == want, name
    for name in ("share/deliveries", "share/records", "share/sessions", "share/progress"):
        assert sum(_rows(batch_out / listed[name]).values()) > 0, name
    assert sum(_rows(batch_out / "delivery").values()) > 0
    from kwire.groups.story import tell

    assert tell(out) == tell(batch_out)
