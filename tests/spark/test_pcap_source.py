"""The pcap data source: `spark.read.format("pcap")` reads captures by byte ranges.

Its rows are held to the whole-file reader (kwire.capture.pcapfile, from the start of the file):
every packet once, at any range size, local files and S3 alike (a local S3-compatible server,
moto's, holds the objects; pyarrow's filesystem reads them by ranges). The capture step built on
it gives the single-process frames for one big file cut into many ranges.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from kwire import capture
from kwire.capture import pcapfile
from kwire.capture.packets import Skip, decode
from kwire.capture.distributed import list_files, plan_ranges
from kwire.spark.source import PACKET_SCHEMA, register_source
from kwire.spark.spark_capture import capture_frames

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
sys.path.insert(0, str(ROOT / "tests" / "capture"))
import ring  # noqa: E402


def _expected(path: Path, shown: str | None = None) -> Counter[tuple[Any, ...]]:
    """(path, offset, ts, src, sport, dst, dport, seq, payload, note) of every packet, read whole."""
    out: Counter[tuple[Any, ...]] = Counter()
    stats = pcapfile.FileStats(str(path))
    with open(path, "rb") as f:
        src = pcapfile.Source(f)
        head = pcapfile.read_head(src, stats)
        for off, p in pcapfile.iter_range(src, head, stats, 0, src.size):
            try:
                s = decode(p.linktype, p.data, p.orig_len)
                tcp: tuple[Any, ...] = (s.src, s.sport, s.dst, s.dport, s.seq, s.payload, None)
            except Skip as why:
                tcp = (None,) * 6 + (str(why),)
            out[(shown or str(path), off, p.ts_us) + tcp] += 1
    return out


def _rows(df: Any) -> Counter[tuple[Any, ...]]:
    table = pa.Table.from_batches(df._collect_as_arrow())
    out: Counter[tuple[Any, ...]] = Counter()
    cols = ["path", "offset", "ts", "src", "sport", "dst", "dport", "seq", "payload", "note"]
    for r in table.select(cols).to_pylist():
        ts = r["ts"]
        us = None if ts is None else int(ts.timestamp() * 1_000_000 + 0.5)
        out[(r["path"], r["offset"], us) + tuple(r[c] for c in cols[3:])] += 1
    return out


def test_packets_equal_the_whole_file_reader_at_any_range_size(spark: SparkSession) -> None:
    register_source(spark)
    files = [DATA / "mock_records_librdkafka.pcapng", DATA / "tansu_ipv6.pcap"]
    want: Counter[tuple[Any, ...]] = Counter()
    for f in files:
        want += _expected(f)
    for split in (8192, 50_000, 128 << 20):
        df = (
            spark.read.format("pcap")
            .option("paths", json.dumps([str(f) for f in files]))
            .option("splitSize", str(split))
            .load()
        )
        assert df.schema.names == PACKET_SCHEMA.names
        # One task per planned range, small ones packed together as Spark packs file splits.
        tasks = plan_ranges(list_files([str(f) for f in files]), split)
        assert df.rdd.getNumPartitions() == len(tasks) == (1 if split > 1e6 else len(tasks)), split
        if split < 1e6:
            assert len(tasks) == sum(-(-f.stat().st_size // split) for f in files)
        assert _rows(df) == want, split


def test_a_directory_with_a_stray_file_and_a_broken_one(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Files in a directory that are not captures are passed over, in one row each that says
    so; a named file that is not a capture is one row saying why, with its path."""
    register_source(spark)
    d = tmp_path / "ring"
    d.mkdir()
    (d / "a.pcap").write_bytes((DATA / "mock_group_classic.pcap").read_bytes())
    (d / "notes.txt").write_text("not a capture\n")
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x00" * 100)
    df = spark.read.format("pcap").option("paths", json.dumps([str(d), str(bad)])).load()
    rows = _rows(df)
    stray = str(d / "notes.txt")
    passed_over = (stray, 0) + (None,) * 7 + ("skipped: not a capture file (in a directory)",)
    assert rows[passed_over] == 1
    rows -= Counter({passed_over: 1})
    assert rows - Counter({k: v for k, v in rows.items() if k[0] == str(bad)}) == _expected(
        d / "a.pcap"
    )
    errors = [k for k in rows if k[0] == str(bad)]
    assert len(errors) == 1 and errors[0][-1].startswith("error: not a pcap or pcapng file")


def test_one_big_file_in_many_ranges_gives_the_single_process_frames(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A synthetic ring written as one file (its 3 MB Fetch response in ~2,000 MTU-sized
    packets), read in 64 kB ranges: ~80 tasks, the frames are `kwire capture`'s."""
    packets, frames = ring.ring_packets()
    (path,) = ring.write(tmp_path / "one", [packets])
    want = capture.frames_table([str(path)], [9092])
    assert want.num_rows == frames
    run = capture_frames(spark, [str(path)], [9092], split_size=64 * 1024)
    run.frames.write.parquet(str(tmp_path / "frames"))
    got = pq.read_table(tmp_path / "frames")

    def rows(t: pa.Table) -> Counter[str]:
        return Counter(
            json.dumps(r, default=str, sort_keys=True)
            for r in t.select(capture.SCHEMA.names).to_pylist()
        )

    assert rows(got) == rows(want)
    assert run.ranges_read() == -(-path.stat().st_size // (64 * 1024)) > 40
    summary = run.summary()
    assert summary.packets == len(packets)
    assert summary.files[0]["packets"] == len(packets)


# -- S3 ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3(spark: SparkSession) -> Iterator[dict[str, str]]:
    """moto's S3 server on a loopback port, with a bucket holding two captures and a stray file."""
    pytest.importorskip("moto", reason="moto[server] is a test dependency (pip install -e .[test])")
    import boto3

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    # The same keys the spark fixture gave the workers (tests/conftest.py).
    assert os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_EC2_METADATA_DISABLED")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.2)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="caps")
        for name in ("mock_group_classic.pcap", "mock_static_members.pcapng"):
            client.put_object(Bucket="caps", Key=f"ring/{name}", Body=(DATA / name).read_bytes())
        client.put_object(Bucket="caps", Key="ring/README", Body=b"not a capture")
        yield {"query": f"endpoint_override=127.0.0.1:{port}&scheme=http", "endpoint": endpoint}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_s3_objects_read_by_ranges_equal_the_local_files(
    spark: SparkSession, s3: dict[str, str]
) -> None:
    register_source(spark)
    url = f"s3://caps/ring/?{s3['query']}"
    names = ("mock_group_classic.pcap", "mock_static_members.pcapng")
    want: Counter[tuple[Any, ...]] = Counter()
    for name in names:
        want += _expected(DATA / name, f"s3://caps/ring/{name}?{s3['query']}")
    # The object that is not a capture: passed over, in one row that says so.
    readme = (f"s3://caps/ring/README?{s3['query']}", 0) + (None,) * 7
    want[(*readme, "skipped: not a capture file (in a directory)")] = 1
    df = spark.read.format("pcap").option("splitSize", "8192").load(url)
    assert _rows(df) == want


def test_the_capture_step_reads_s3(spark: SparkSession, s3: dict[str, str], tmp_path: Path) -> None:
    name = "mock_static_members.pcapng"
    meta = json.loads((DATA / "mock_static_members.json").read_text())
    want = capture.frames_table([str(DATA / name)], meta["broker_ports"])
    url = f"s3://caps/ring/{name}?{s3['query']}"
    run = capture_frames(spark, [url], meta["broker_ports"], split_size=16384)
    run.frames.write.parquet(str(tmp_path / "frames"))
    assert run.ranges_read() > 3
    got = pq.read_table(tmp_path / "frames")
    cols = [c for c in capture.SCHEMA.names if c != "source_file"]

    def rows(t: pa.Table) -> Counter[str]:
        return Counter(
            json.dumps(r, default=str, sort_keys=True) for r in t.select(cols).to_pylist()
        )

    assert got.num_rows == want.num_rows > 0
    assert rows(got) == rows(want)
    assert run.summary().files[0]["path"] == url


def test_the_job_refuses_ranges_that_disagree(spark: SparkSession, tmp_path: Path) -> None:
    """A packet whose payload is a pcap with the capture's own times: ranges starting inside it
    find the look-alike chain. The job stops with one line naming the file and the byte offset
    and leaves no frames table behind; in one range the same file decodes."""
    from capture_helpers import read_packets, write_pcap

    from kwire import job

    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    inner = write_pcap(tmp_path / "inner.pcap", linktype, packets[:20]).read_bytes()[24:]
    carrier = packets[5][1][:54] + inner
    path = write_pcap(tmp_path / "outer.pcap", linktype, packets[:3] + [(packets[3][0], carrier)])
    split = next(s for s in range(300, 3000, 37) if _disagree(path, s))
    out = tmp_path / "out"
    args = ["-o", str(out), "--capture-on", "spark", "--no-records", "--no-groups", "-q"]
    with pytest.raises(job.JobError, match=r"outer\.pcap: the byte range from \d+ .*byte \d+"):
        job.run(job.parse_args([str(path), *args, "--split-size", str(split)]), spark=spark)
    assert not (out / "frames.parquet").exists()
    job.run(job.parse_args([str(path), *args, "--overwrite", "--no-summary"]), spark=spark)
    assert (out / "frames.parquet").exists()


def _disagree(path: Path, split: int) -> bool:
    """Whether ranges of `split` bytes disagree, read without Spark."""
    from kwire.capture import distributed as dist

    states = []
    for task in dist.plan_ranges([(str(path), False, path.stat().st_size)], split, open_cost=0):
        for piece in task:
            entry: dict[str, Any] = {}
            for _ in dist.read_range_packets(piece, entry):
                pass
            part = dist.Summary()
            part.files.append(entry)
            states.append(json.dumps(part.state()))
    try:
        dist.merge_stats(states, [])
    except dist.SplitError:
        return True
    return False
