"""The capture step on Spark gives the frames `kwire capture` gives, for any file layout.

The reference is the single-process reader (capture.frames_table); the distributed path reads
files in parallel, regroups segments by TCP flow and reassembles each flow with the same tracker.
They must agree row for row (as multisets: row order is not part of the contract) and on the
summary, on every real capture and on a synthetic ring (tests/capture/ring.py) cut into files
in several ways: one file, cuts inside frames (a ring rotated mid-frame), pcap and pcapng mixed,
files named in shuffled order, a directory with a stray non-capture file.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from kwire import capture
from kwire.capture import distributed as dist
from kwire import job, pipeline
from kwire.spark.spark_capture import capture_frames
from tests.spark.test_sink import read_whole_in_a_default_session

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
sys.path.insert(0, str(ROOT / "tests" / "capture"))
import ring  # noqa: E402

REAL = sorted(DATA.glob("*.json"))


def _multiset(table: pa.Table, source_file: bool = True) -> Counter[str]:
    rows = table.select(capture.SCHEMA.names).to_pylist()
    if not source_file:
        for r in rows:
            del r["source_file"]
    return Counter(json.dumps(r, default=str, sort_keys=True) for r in rows)


def _in_python(
    paths: Iterable[str], ports: list[int], split: int = dist.SPLIT_BYTES, positions: bool = False
) -> tuple[pa.Table, capture.Summary]:
    """Both halves of kwire.capture.distributed without Spark: read every file by byte ranges
    of `split` bytes (tasks in reverse, as a cluster may finish them), regroup, track. With
    `positions`, the runs carry where their payloads are and the tracking reads the files."""
    files = dist.list_files(paths)
    stamps = {i: dist.FileStamp.of(p) for i, (p, _, _) in enumerate(files)} if positions else {}
    segments, stats = [], []
    for task in reversed(dist.plan_ranges(files, split)):
        for batch in dist.read_segments(task, positions=stamps):
            t = pa.Table.from_batches([batch])
            done = t.filter(pc.is_valid(t["stats"]))
            stats += [
                (r["file_time"], r["file_index"], r["offset"], r["stats"]) for r in done.to_pylist()
            ]
            segments.append(t.filter(pc.is_null(t["stats"])))
    # Regroup by flow across several "tasks", each in capture order.
    table = pa.concat_tables(segments)
    frames, tracked = [], []
    for part in range(4):
        mine = table.filter(pc.equal(pc.bit_wise_and(table["flow"], 3), part))
        mine = mine.sort_by([(c, "ascending") for c in dist.ORDER])
        paths_ = [p for p, _, _ in files]
        for batch in dist.track_segments(mine.to_batches(500), paths_, ports, stamps=stamps):
            t = pa.Table.from_batches([batch])
            tracked += [s for s in t["stats"].to_pylist() if s]
            frames.append(t.filter(pc.is_null(t["stats"])).drop(["stats"]))
    stats.sort(key=lambda e: (e[0] == dist.NO_TIME, e[0], e[1], e[2]))
    return pa.concat_tables(frames), dist.merge_stats([s for *_, s in stats], tracked)


def _reference(paths: list[str], ports: list[int]) -> tuple[pa.Table, capture.Summary]:
    summary = capture.Summary()
    return capture.frames_table(paths, ports, summary=summary, errors="report"), summary


@pytest.mark.parametrize("meta", REAL, ids=[p.stem for p in REAL])
def test_real_captures_split_in_two_halves_equal_the_reference(meta: Path) -> None:
    record = json.loads(meta.read_text())
    paths = [str(DATA / record["capture"])]
    for ports in (record["broker_ports"], []):  # known broker ports, and direction inferred
        want, want_summary = _reference(paths, ports)
        # one range per file, and ranges of 1 kB (most packets' records cross a range's edge)
        for split, positions in ((dist.SPLIT_BYTES, False), (1024, False), (1024, True)):
            got, got_summary = _in_python(paths, ports, split, positions)
            assert _multiset(got) == _multiset(want), (split, positions)
            assert got_summary.as_dict() == want_summary.as_dict(), (split, positions)


@pytest.fixture(scope="module")
def ring_capture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    packets, frames = ring.ring_packets()
    base = tmp_path_factory.mktemp("ring")
    n = len(packets)
    layouts: dict[str, list[str]] = {}
    one = ring.write(base / "one", [packets])
    layouts["one file"] = [str(p) for p in one]
    five = ring.write(base / "five", ring.split(packets, [n // 5 * k + 7 for k in range(1, 5)]))
    layouts["five files cut mid-frame"] = [str(p) for p in five]
    cuts = sorted(random.Random(3).sample(range(1, n), 6))
    mixed = [str(p) for p in ring.write(base / "mixed", ring.split(packets, cuts), "mixed")]
    random.Random(4).shuffle(mixed)
    layouts["seven pcap and pcapng files in shuffled order"] = mixed
    directory = base / "dir"
    ring.write(directory, ring.split(packets, [n // 3, 2 * n // 3]), "pcapng")
    (directory / "notes.txt").write_text("not a capture\n")
    layouts["a directory with a stray file"] = [str(directory)]
    reference, summary = _reference(layouts["one file"], [9092])
    return {"layouts": layouts, "frames": frames, "reference": reference, "summary": summary}


def test_the_ring_is_whole(ring_capture: dict[str, Any]) -> None:
    """Ground truth from the generator: every frame it sent is a row, none has an error, and the
    several-MB Fetch response is one of them."""
    reference = ring_capture["reference"]
    assert reference.num_rows == ring_capture["frames"]
    assert reference.column("error").null_count == reference.num_rows
    assert max(reference.column("frame_length").to_pylist()) > 3_000_000
    assert ring_capture["summary"].retransmitted_bytes > 0


def test_every_layout_in_python_equals_the_single_process_reader(
    ring_capture: dict[str, Any],
) -> None:
    want = _multiset(ring_capture["reference"], source_file=False)
    for name, paths in ring_capture["layouts"].items():
        single, single_summary = _reference(paths, [9092])
        for positions in (False, True):
            got, got_summary = _in_python(paths, [9092], split=64 * 1024, positions=positions)
            # source_file differs between layouts; everything else is the one file's rows.
            assert _multiset(got) == _multiset(single), (name, positions)
            assert got_summary.as_dict() == single_summary.as_dict(), (name, positions)
        # Only the file names differ from the one-file capture.
        assert _multiset(single, source_file=False) == want, name


def _segments(path: Path, positions: bool) -> pa.Table:
    files = dist.list_files([str(path)])
    t = pa.Table.from_batches(
        [b for task in dist.plan_ranges(files) for b in dist.read_segments(task, positions={0})]
        if positions
        else [b for task in dist.plan_ranges(files) for b in dist.read_segments(task)]
    )
    return t.filter(pc.is_null(t["stats"])).sort_by([(c, "ascending") for c in dist.ORDER])


def _track(segments: pa.Table, path: Path, stamps: dict[int, dist.FileStamp]) -> pa.Table:
    t = pa.Table.from_batches(
        list(dist.track_segments(segments.to_batches(100), [str(path)], [9092], stamps=stamps))
    )
    return t.filter(pc.is_null(t["stats"])).drop(["stats"])


def test_runs_with_positions_carry_no_payload_and_read_the_file_again(tmp_path: Path) -> None:
    """The runs that carry positions hold no payload bytes, and tracking them reads the same
    frames from the file; a file that grew since (a capture still being written) still gives
    them, as the bytes listed are unchanged."""
    packets, frames = ring.ring_packets()
    (path,) = ring.write(tmp_path / "r", [packets])
    stamps = {0: dist.FileStamp.of(str(path))}
    inline, placed = _segments(path, False), _segments(path, True)
    assert placed.num_rows == inline.num_rows
    assert placed["payload"].null_count == placed.num_rows
    assert inline["payload"].null_count == 0
    assert pc.sum(pc.binary_length(inline["payload"])).as_py() > 3_000_000
    where = [
        (s[7], s[5])
        for r in placed["segments"].to_pylist()
        for s in dist.SEGMENT_RECORD.iter_unpack(r)
    ]
    size = path.stat().st_size
    assert all(24 < at and at + length <= size for at, length in where)
    inline_where = {
        s[7] for r in inline["segments"].to_pylist() for s in dist.SEGMENT_RECORD.iter_unpack(r)
    }
    assert inline_where == {-1}
    want = _track(inline, path, {})
    assert want.num_rows == frames
    assert _multiset(_track(placed, path, stamps)) == _multiset(want)
    with open(path, "ab") as f:  # grows: more packet records after those listed
        f.write(path.read_bytes()[24:4096])
    assert _multiset(_track(placed, path, stamps)) == _multiset(want)


def test_payloads_read_together_are_the_bytes_at_their_positions(tmp_path: Path) -> None:
    """Positional reads of nearby payloads together, for every gap and span: each payload is
    the file's bytes at its offset, segments without payload read as empty ones."""
    rng = random.Random(7)
    data = rng.randbytes(200_000)
    path = tmp_path / "f"
    path.write_bytes(data)
    views = dist._Views([str(path)], {})
    try:
        f = views.get(0)
        for _ in range(200):
            ats, lengths, at = [], [], rng.randrange(100)
            while at < len(data) - 3000:
                length = rng.choice([0, 0, 1, 52, 1448, 2900])
                ats.append(at)
                lengths.append(length)
                at += length + rng.choice([0, 0, 16, 66, 5000, 40_000])
            gap, span = rng.choice([0, 100, 16384]), rng.choice([1, 3000, 1 << 20])
            got = dist.read_payloads(f, ats, lengths, gap, span)
            assert got == [data[a : a + n] for a, n in zip(ats, lengths)]
        with pytest.raises(dist.FileChanged, match="it ends at byte 200,000"):
            dist.read_payloads(f, [199_990], [20])
    finally:
        views.close()


def test_a_file_written_anew_between_the_two_reads_is_a_clear_error(tmp_path: Path) -> None:
    """A ring's oldest file rotated over while the job runs: the positions point into other
    bytes, and tracking stops with an error naming the file, never with wrong frames."""
    packets, _ = ring.ring_packets()
    (path,) = ring.write(tmp_path / "r", [packets])
    stamps = {0: dist.FileStamp.of(str(path))}
    placed = _segments(path, True)
    other = ring.write(tmp_path / "o", [packets[len(packets) // 2 :]])[0].read_bytes()
    path.write_bytes(other)
    with pytest.raises(dist.FileChanged, match=f"{path}: the file changed .* first bytes"):
        _track(placed, path, stamps)
    path.write_bytes(b"")
    with pytest.raises(dist.FileChanged, match="bytes when listed, 0 now, cut short"):
        _track(placed, path, stamps)
    path.unlink()
    with pytest.raises(dist.FileChanged, match="cannot open it again"):
        _track(placed, path, stamps)


def test_the_job_names_a_capture_written_anew_while_it_ran(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The executors find the file is not what the driver listed (as when tcpdump rotates over
    a ring's file mid-job): the job stops with one line naming the file, and leaves no frames
    table."""
    packets, _ = ring.ring_packets()
    (path,) = ring.write(tmp_path / "r", [packets])
    real = dist.FileStamp.of

    def listed_before_rewrite(cls: type, name: str) -> dist.FileStamp:
        return dataclasses.replace(real(name), mtime_ns=1, head="0" * 32)

    monkeypatch.setattr(dist.FileStamp, "of", classmethod(listed_before_rewrite))
    out = tmp_path / "out"
    with pytest.raises(job.JobError) as raised:
        pipeline.run_capture_on_spark(spark, [str(path)], str(out), [9092])
    message = str(raised.value)
    assert message.startswith(f"{path}: the file changed while the capture step read it")
    assert "first bytes rewritten" in message and "\n" not in message
    assert not (out / "frames.parquet").exists()


@pytest.mark.parametrize(
    "layout",
    ["five files cut mid-frame", "seven pcap and pcapng files in shuffled order",
     "a directory with a stray file"],
)  # fmt: skip
def test_spark_capture_equals_the_single_process_reader(
    spark: SparkSession, ring_capture: dict[str, Any], layout: str, tmp_path: Path
) -> None:
    """Written as the job writes it: each tracking task writes its own file, committed once
    every task has succeeded (CaptureRun.write)."""
    paths = ring_capture["layouts"][layout]
    want, want_summary = _reference(paths, [9092])
    run = capture_frames(spark, paths, [9092])
    out = tmp_path / "frames"
    assert run.write(str(out)) == ring_capture["frames"]
    got = pq.read_table(out)
    assert got.num_rows == ring_capture["frames"]
    assert _multiset(got) == _multiset(want)
    assert run.summary().as_dict() == want_summary.as_dict()
    # Committed as Spark commits its own tables: no staging left, _SUCCESS, Spark's codec.
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("part-")) == ["_SUCCESS"]
    parts = sorted(out.glob("part-*.snappy.parquet"))
    assert parts and len(parts) == len(list(out.glob("part-*")))
    assert spark.read.parquet(str(out)).count() == ring_capture["frames"]


def test_spark_capture_written_by_spark_equals_the_single_process_reader(
    spark: SparkSession, ring_capture: dict[str, Any], tmp_path: Path
) -> None:
    """The lazy frames DataFrame (a notebook's, or a remote table's) written by Spark's writer
    gives the same rows as the tasks' own files."""
    paths = ring_capture["layouts"]["five files cut mid-frame"]
    want, want_summary = _reference(paths, [9092])
    run = capture_frames(spark, paths, [9092])
    run.frames.write.parquet(str(tmp_path / "frames"))
    assert _multiset(pq.read_table(tmp_path / "frames")) == _multiset(want)
    assert run.summary().as_dict() == want_summary.as_dict()


def test_a_capture_without_frames_writes_an_empty_table_in_the_sessions_codec(
    spark: SparkSession, ring_capture: dict[str, Any], tmp_path: Path
) -> None:
    """No Kafka port and no direction inferred: no frames, and still a table Spark reads (with
    the frames' columns), in the codec the session names for Parquet."""
    paths = ring_capture["layouts"]["one file"]
    spark.conf.set("spark.sql.parquet.compression.codec", "zstd")
    try:
        empty = capture_frames(spark, paths, [1], infer_direction=False)
        assert empty.write(str(tmp_path / "none")) == 0
        some = capture_frames(spark, paths, [9092])
        assert some.write(str(tmp_path / "some")) == ring_capture["frames"]
    finally:
        spark.conf.unset("spark.sql.parquet.compression.codec")
    assert empty.summary().as_dict()["frames"] == {"request": 0, "response": 0}
    table = spark.read.parquet(str(tmp_path / "none"))
    assert table.count() == 0
    assert table.columns == capture.SCHEMA.names
    files = list((tmp_path / "some").glob("part-*.zstd.parquet"))
    assert files
    for name in files:
        meta = pq.ParquetFile(name).metadata
        assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {
            "ZSTD"
        }


def _udp_packet() -> bytes:
    """An Ethernet frame carrying one UDP datagram (dpkt builds it, not kwire)."""
    import dpkt

    udp = dpkt.udp.UDP(sport=5353, dport=5353, data=b"abcd")
    udp.ulen = len(udp)
    ip = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), p=17, data=udp)
    ip.len = len(ip)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_captures_without_a_tcp_segment_still_give_their_summary(
    spark: SparkSession, tmp_path: Path
) -> None:
    """No segment reaches the shuffle (no TCP at all, no packets, a file no task can open):
    the table is written empty and the summary says what each file held. Adaptive execution
    once dropped the ranges' statistics with the empty shuffle, and the summary failed."""
    from capture_helpers import write_pcap

    udp = write_pcap(tmp_path / "udp.pcap", 1, [(1_000_000, _udp_packet())] * 3)
    empty = write_pcap(tmp_path / "empty.pcap", 1, [])
    gone = tmp_path / "gone.pcap"
    for paths, packets in (([udp], 3), ([empty], 0), ([udp, empty], 3), ([gone], 0)):
        run = capture_frames(spark, [str(p) for p in paths], [9092])
        out = tmp_path / f"frames-{len(paths)}-{paths[0].stem}"
        assert run.write(str(out)) == 0
        summary = run.summary()
        assert summary.packets == packets and summary.tcp_segments == 0
        assert spark.read.parquet(str(out)).count() == 0
        if paths[0] == udp:
            assert summary.skipped_packets == {"not TCP": 3}
        if paths == [gone]:
            assert summary.files[0]["path"] == str(gone)
            assert summary.files[0]["error"].startswith("cannot open"), summary.files
        else:
            assert [f["path"] for f in summary.files] == [str(p) for p in paths]
            assert not any(f.get("error") for f in summary.files)


@pytest.mark.long(12)
def test_the_job_on_a_capture_without_kafka_writes_every_table_empty(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A capture with no Kafka in it (wrong interface, wrong filter) is not a failure: every
    table is written with its columns and no rows, and a default session reads each one."""
    from capture_helpers import write_pcap

    udp = write_pcap(tmp_path / "udp.pcap", 1, [(1_000_000, _udp_packet())] * 2)
    out = tmp_path / "out"
    job.run(job.parse_args([str(udp), "-o", str(out), "--capture-on", "spark"]), spark=spark)
    tables = [p.parent for p in out.rglob("_SUCCESS") if p.parent != out] + [out / "frames.parquet"]
    names = {str(p.relative_to(out)) for p in tables}
    assert {"frames.parquet", "requests", "responses", "records"} <= names, names
    assert {f"groups/{t}" for t in ("commits", "progress", "members", "generations")} <= names
    for table in tables:
        df = spark.read.parquet(str(table))
        assert df.count() == 0 and df.columns, table
    assert "api_key" in spark.read.parquet(str(out / "requests")).columns
    said = capsys.readouterr()
    assert (
        "no Kafka frames in 0 TCP segments; packets passed over: 2 not TCP" in said.out + said.err
    )


def test_spark_capture_reads_file_urls(spark: SparkSession, tmp_path: Path) -> None:
    meta = json.loads((DATA / "mock_group_classic.json").read_text())
    path = DATA / meta["capture"]
    want, _ = _reference([str(path)], meta["broker_ports"])
    run = capture_frames(spark, [path.as_uri()], meta["broker_ports"])
    got = pa.Table.from_pylist(
        [r.asDict() for r in run.frames.collect()], schema=dist.FRAMES_SCHEMA.remove(17)
    )
    assert _multiset(got, source_file=False) == _multiset(want, source_file=False)
    assert set(got.column("source_file").to_pylist()) == {path.as_uri()}


def test_job_captures_on_spark_as_on_the_driver(spark: SparkSession, tmp_path: Path) -> None:
    meta = json.loads((DATA / "mock_static_members.json").read_text())
    path = str(DATA / meta["capture"])
    tables = {}
    for where in ("spark", "driver"):
        out = tmp_path / where
        args = job.parse_args(
            [path, "-o", str(out), "--capture-on", where, "--no-records", "--no-groups"]
            + ["--families", "heartbeat"]
        )
        job.run(args, spark=spark)
        tables[where] = pq.read_table(out / "frames.parquet")
    assert _multiset(tables["spark"]) == _multiset(tables["driver"])


@pytest.mark.long(35)
def test_job_accounts_for_every_frame_of_a_ring_cut_mid_frame(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The decode job on a ring of three files whose Fetch response is 24 MB and crosses both
    file boundaries: every frame the generator sent is a frames row and a decoded row."""
    packets, frames = ring.ring_packets(big=24 * 1024 * 1024)
    n = len(packets)
    parts = ring.split(packets, [n // 3, 2 * n // 3])
    # The big response's segments (broker port 9092 -> client port 45000) are in every file.
    fetch = (9092).to_bytes(2, "big") + (45000).to_bytes(2, "big")
    assert all(any(p[34:38] == fetch and len(p) > 1000 for _, p in part) for part in parts)
    files = ring.write(tmp_path / "ring", parts)
    out = tmp_path / "out"
    args = job.parse_args(
        [str(tmp_path / "ring"), "-o", str(out), "--no-groups", "--no-delivery"]
        + ["--capture-on", "spark"]
    )
    summary = job.run(args, spark=spark)
    assert summary is not None
    table = pq.read_table(out / "frames.parquet")
    assert table.num_rows == frames
    assert max(table.column("frame_length").to_pylist()) > 24_000_000
    assert summary.requests + summary.response_count == frames
    lengths = pq.read_table(out / "frames.parquet", columns=["source_file", "frame_length"])
    sources = {s for s, n in zip(*lengths.to_pydict().values()) if n and n > 24_000_000}
    assert sources and sources <= {str(f) for f in files}
    # Every table, every column, read whole by a default session (no settings, 1 GB heap).
    tables = [out / "frames.parquet", out / "requests", out / "responses", out / "records"]
    done = read_whole_in_a_default_session(*map(str, tables))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("read whole:") == len(tables)
