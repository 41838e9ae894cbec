"""Hostile captures (scripts/capture/make_hostile.py): each case is read, or reported in one line
naming its byte offset, never a crash, a hang or state that grows with the attack; by the single
process, by the byte ranges the Spark executors read (1 kB each), and by the pcap source on Spark.

The corpus holds the traffic of one real capture, dressed or damaged one way per case, so what
must come out is that capture's frames (less what the damage took), as the single process reads
the undamaged file: the reference is the undamaged capture, never the damaged one.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from kwire import capture
from kwire.capture import engine
from kwire.capture.summary import Summary

from test_capture_ranges import _ranged, _whole

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "capture"))
import make_hostile  # noqa: E402

FLOOD = 3000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_hostile.make(tmp_path_factory.mktemp("hostile"), flood=FLOOD)


def _read(path: Path) -> tuple[list[dict[str, Any]], Summary]:
    summary = Summary()
    table = capture.frames_table([str(path)], summary=summary, errors="report")
    return table.to_pylist(), summary


def _frames(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What the clients and brokers said, in order per direction: wherever it was carried."""
    return sorted((r["direction"], r["ts_first"], r["frame"], r["error"]) for r in rows)


def _notes(summary: Summary) -> list[str]:
    return [f.get("error") or f.get("warning") or f.get("skipped") or "" for f in summary.files]


BASE_ROWS, BASE_SUMMARY = _read(make_hostile.BASE)
BASE = _frames(BASE_ROWS)


def test_the_corpus_is_every_case_and_small(corpus: dict[str, Path]) -> None:
    assert set(corpus) == set(make_hostile.CASES)
    for case, d in corpus.items():
        assert sum(p.stat().st_size for p in d.iterdir()) < 300_000, case


@pytest.mark.parametrize("case", ["nanosecond_swapped", "vlan_qinq", "seq_wrap", "pcapng_blocks"])
def test_dressed_traffic_reads_as_the_plain_capture(corpus: dict[str, Path], case: str) -> None:
    rows, summary = _read(corpus[case])
    assert _frames(rows) == BASE
    notes = [n for n in _notes(summary) if n]
    if case == "pcapng_blocks":
        # Two interfaces of two link types carry alternate packets; the unknown block is skipped
        # quietly (pcapng allows new types); the bad ones are named by offset.
        (note,) = notes
        assert note.startswith("corrupt block at byte 11000: length 1073741824; reading resumed")
        assert "corrupt block at byte 16328: length 100, trailing length 28" in note
        assert note.endswith("truncated: file ends inside the block at byte 67988")
    else:
        assert notes == []


def test_ipv6_with_extension_headers(corpus: dict[str, Path]) -> None:
    rows, _ = _read(corpus["ipv6_ext"])
    assert _frames(rows) == BASE  # the same frames, between ::1 and ::1
    assert {r["client_addr"] for r in rows} == {"::1"}


def test_a_ring_with_empty_and_garbage_files(corpus: dict[str, Path]) -> None:
    rows, summary = _read(corpus["ring_with_garbage"])
    assert _frames(rows) == BASE  # connections carried over the bad files
    names = [Path(f["path"]).name for f in summary.files if f.get("skipped")]
    assert names == ["ring.pcap1", "ring.pcap2"]
    assert set(_notes(summary)) == {"", "not a capture file (in a directory)"}


def test_a_record_claiming_4_gb(corpus: dict[str, Path]) -> None:
    path = corpus["giant_record"] / "capture.pcap"
    rows, summary = _read(path)
    (note,) = [n for n in _notes(summary) if n]
    offset = 24 + sum(16 + len(d) for _, d in _packets()[: len(_packets()) // 2])
    assert note.startswith(f"corrupt packet record at byte {offset}: captured length 4294967280")
    # One packet is lost: every frame the others carry is there.
    lost = set(BASE) - set(_frames(rows))
    assert len(lost) <= 2, lost


def test_records_longer_than_the_snaplen(corpus: dict[str, Path]) -> None:
    rows, summary = _read(corpus["caplen_over_snaplen"] / "capture.pcap")
    assert len(rows) == len(BASE_ROWS)
    # The records cut to the snaplen leave frames incomplete; the whole one is read as it is.
    assert summary.snaplen_bytes > 0 and summary.errors.get("incomplete", 0) >= 0
    assert {r["error"] is None for r in rows} == {True, False}


def test_ip_fragments_are_counted_not_read(corpus: dict[str, Path]) -> None:
    rows, summary = _read(corpus["fragments"])
    assert summary.skipped_packets == {"IP fragment": 10}
    kept = set(_frames(rows)) & set(BASE)
    assert len(kept) >= len(BASE) - 10


def test_not_kafka_on_the_broker_port(corpus: dict[str, Path]) -> None:
    rows, _ = _read(corpus["not_kafka"])
    http = [r for r in rows if r["client_port"] == 40000]
    assert http and all(r["frame"] is None and r["error"] for r in http), http
    assert _frames([r for r in rows if r["client_port"] != 40000]) == BASE


def test_a_syn_flood_keeps_the_state_bounded(
    corpus: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fake SYNs past the bound of connections without a byte: the oldest are dropped (and
    counted), the real traffic after them reads in full. A million SYNs (70 MB) run by hand with
    the default bound: docs/reliability.md."""
    monkeypatch.setattr(engine, "MAX_QUIET", 500)
    rows, summary = _read(corpus["syn_flood"])
    assert _frames(rows) == BASE
    # Every fake one past the bound, and one more for each real connection that came in while
    # the fakes filled it (a real one carries bytes at once and leaves the list).
    assert FLOOD - 500 <= summary.quiet_connections_dropped <= FLOOD
    assert summary.connections == BASE_SUMMARY.connections


@pytest.mark.parametrize("case", sorted(make_hostile.CASES))
def test_ranges_read_what_the_whole_file_reads(corpus: dict[str, Path], case: str) -> None:
    """The Spark executors' reader: 1 kB ranges give the whole file's packets and warnings."""
    for path in sorted(corpus[case].iterdir()):
        if path.stat().st_size < 64 or path.name == "ring.pcap2":
            continue  # not captures: the planner's file listing reports them (test below)
        want, stats = _whole(path)
        got, entry = _ranged(path, 1024)
        assert got == want, path.name
        assert entry.get("warning") == stats.warning, path.name


def test_the_pcap_source_on_spark_reads_or_reports_every_file(
    spark: Any, corpus: dict[str, Path]
) -> None:
    from kwire.spark import register

    register(spark)
    packets = (
        spark.read.format("pcap").option("splitSize", "16k").load(str(corpus["ring_with_garbage"]))
    )
    by_file: dict[str, int] = {}
    errors: dict[str, str] = {}
    for r in packets.select("path", "note").collect():
        name = Path(r["path"]).name
        by_file[name] = by_file.get(name, 0) + 1
        if r["note"] and not r["note"].startswith("warning"):
            errors[name] = r["note"]
    base = len(_packets())
    assert by_file["ring.pcap0"] + by_file["ring.pcap3"] == base
    # The empty and the garbage file: one row each, saying so (a ring's other files are read).
    assert errors == {
        "ring.pcap1": "skipped: not a capture file (in a directory)",
        "ring.pcap2": "skipped: not a capture file (in a directory)",
    }
    assert by_file["ring.pcap1"] == by_file["ring.pcap2"] == 1


def _packets() -> list[tuple[int, bytes]]:
    return make_hostile._read(make_hostile.BASE)[1]


def test_flood_packets_are_well_formed() -> None:
    """The script's fake SYN is a SYN to the broker port (what the flood test relies on)."""
    _, data = make_hostile._syn(7, 1)
    flags = data[14 + 20 + 13]
    assert flags == 0x02 and struct.unpack_from(">H", data, 14 + 20 + 2)[0] == 9092


@pytest.mark.parametrize("case", sorted(make_hostile.CASES))
def test_the_distributed_capture_equals_the_single_process(
    corpus: dict[str, Path], case: str
) -> None:
    """The capture step as Spark runs it (ranges of 1 kB read, segments regrouped by flow over
    several tasks, tracked), without Spark: frames and summary as the single process's."""
    from tests.spark.test_capture_spark import _in_python, _multiset, _reference

    paths = [str(corpus[case])]
    want, want_summary = _reference(paths, [9092])
    got, got_summary = _in_python(paths, [9092], 1024)
    assert _multiset(got) == _multiset(want)
    assert got_summary.as_dict() == want_summary.as_dict()


@pytest.mark.parametrize("case", ["ring_with_garbage", "pcapng_blocks"])
def test_the_capture_on_spark_equals_the_single_process(
    spark: Any, corpus: dict[str, Path], case: str, tmp_path: Path
) -> None:
    from kwire.spark.spark_capture import capture_frames
    from tests.spark.test_capture_spark import _multiset, _reference

    import pyarrow.parquet as pq

    paths = [str(corpus[case])]
    want, want_summary = _reference(paths, [9092])
    run = capture_frames(spark, paths, [9092], split_size=16384)
    run.frames.write.parquet(str(tmp_path / "frames"))
    assert _multiset(pq.read_table(tmp_path / "frames")) == _multiset(want)
    assert run.summary().as_dict() == want_summary.as_dict()
