"""Capture files read by byte ranges give exactly the packets of the whole file.

The reference is the whole file read from its start (`iter_packets`). A range starting inside the
file resynchronises on a chain of plausible records (kwire.capture.pcapfile); every range reads
the records that start in it. Checked on every real capture at several range sizes (1 kB among
them), on small files cut at every byte offset (pcap in both byte orders, with nanosecond
times, and pcapng), on packets bigger than the ranges, on a corrupt record in the middle, on an
interface described mid-file, and on a packet whose payload is itself a pcap (a record look-alike
chain, where ranges disagree and the merge says so instead of giving wrong packets).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import dpkt
import pytest

from kwire.capture import distributed as dist
from kwire.capture import pcapfile
from capture_helpers import read_packets, write_pcap, write_pcapng

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"
REAL = sorted(p for p in DATA.iterdir() if p.suffix in (".pcap", ".pcapng"))


def _whole(path: Path) -> tuple[list[tuple[int, int, bytes, int]], pcapfile.FileStats]:
    stats = pcapfile.FileStats(str(path))
    with open(path, "rb") as f:
        src = pcapfile.Source(f)
        head = pcapfile.read_head(src, stats)
        got = [
            (off, p.ts_us, p.data, p.orig_len)
            for off, p in pcapfile.iter_range(src, head, stats, 0, src.size)
        ]
    return got, stats


def _ranged(path: Path, split: int) -> tuple[list[tuple[int, int, bytes, int]], dict[str, Any]]:
    """Packets of all ranges of `split` bytes, in range order, and the merged file entry."""
    size = path.stat().st_size
    got = []
    summary = dist.Summary()
    states = []
    for task in dist.plan_ranges([(str(path), False, size)], split, open_cost=0):
        for piece in task:
            entry: dict[str, Any] = {}
            for off, p in dist.read_range_packets(piece, entry):
                got.append((off, p.ts_us, p.data, p.orig_len))
            part = dist.Summary()
            part.files.append(entry)
            part.packets = entry.get("packets", 0)
            states.append(json.dumps(part.state()))
    summary = dist.merge_stats(states, [])
    return got, summary.files[0]


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_captures_by_ranges_equal_the_whole_file(path: Path) -> None:
    want, stats = _whole(path)
    assert want and stats.warning is None
    for split in (1024, 1500, 4096, 65536, path.stat().st_size + 1):
        got, entry = _ranged(path, split)
        assert got == want, split
        assert entry["packets"] == len(want)
        assert entry["format"] == stats.format


def _small_files(tmp_path: Path) -> list[Path]:
    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    packets = packets[:40]
    files = [
        write_pcap(tmp_path / "le.pcap", linktype, packets),
        write_pcap(tmp_path / "be.pcap", linktype, packets, byteorder=">"),
        write_pcapng(tmp_path / "x.pcapng", linktype, packets),
    ]
    # nanosecond timestamps, big-endian
    nano = tmp_path / "nano.pcap"
    with open(nano, "wb") as f:
        f.write(struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype))
        for ts, data in packets:
            sec, us = divmod(ts, 1_000_000)
            f.write(struct.pack(">IIII", sec, us * 1000 + 7, len(data), len(data)))
            f.write(data)
    files.append(nano)
    return files


def test_a_cut_at_every_byte_offset_gives_the_whole_file(tmp_path: Path) -> None:
    for path in _small_files(tmp_path):
        want, _ = _whole(path)
        size = path.stat().st_size
        assert len(want) == 40
        for cut in range(1, size):
            pieces = [
                dist.Range(0, str(path), 0, cut, size),
                dist.Range(0, str(path), cut, size, size),
            ]
            got = []
            synced = []
            for piece in pieces:
                entry: dict[str, Any] = {}
                got += [
                    (o, p.ts_us, p.data, p.orig_len)
                    for o, p in dist.read_range_packets(piece, entry)
                ]
                synced.append((entry["synced"], entry["next"]))
            assert got == want, (path.name, cut)
            # The second range starts where the first one's last record ended (or has none).
            first_next, (second_synced, _) = synced[0][1], synced[1]
            assert second_synced in (None, first_next), (path.name, cut)


def test_packets_bigger_than_the_ranges(tmp_path: Path) -> None:
    """Records of 60 kB read in ranges of 1 kB: most ranges hold no record start at all."""
    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    ts0 = packets[0][0]
    big = [(ts0 + i, packets[5][1][:54] + bytes([i]) * 60_000) for i in range(12)]
    for path in (
        write_pcap(tmp_path / "big.pcap", linktype, big),
        write_pcapng(tmp_path / "big.pcapng", linktype, big),
    ):
        want, _ = _whole(path)
        got, entry = _ranged(path, 1024)
        assert got == want and len(got) == 12


def test_a_corrupt_record_is_named_and_reading_resumes_after_it(tmp_path: Path) -> None:
    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    path = write_pcap(tmp_path / "ok.pcap", linktype, packets[:30])
    raw = bytearray(path.read_bytes())
    # The 11th record's captured length becomes 3 GB.
    want, _ = _whole(path)
    at = want[10][0]
    raw[at + 8 : at + 12] = struct.pack("<I", 3_000_000_000)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(bytes(raw))
    got, stats = _whole(bad)
    assert f"corrupt packet record at byte {at}" in (stats.warning or "")
    assert f"reading resumed at byte {want[11][0]}" in (stats.warning or "")
    assert got == want[:10] + want[11:]
    for split in (512, 1024, 1111, 2048, 5000):
        ranged, entry = _ranged(bad, split)
        assert ranged == got, split
        assert entry["warning"] == stats.warning
    # Two ranges cut at every byte: the corrupt record is reported once, by the range whose
    # reading reaches it, and the second range starts where the first stopped.
    size = bad.stat().st_size
    for cut in range(1, size):
        entries: list[dict[str, Any]] = [{}, {}]
        ranged = []
        for entry, (a, b) in zip(entries, ((0, cut), (cut, size))):
            piece = dist.Range(0, str(bad), a, b, size)
            ranged += [
                (o, p.ts_us, p.data, p.orig_len) for o, p in dist.read_range_packets(piece, entry)
            ]
        assert ranged == got, cut
        warnings = entries[0].get("warnings", []) + entries[1].get("warnings", [])
        assert "; ".join(warnings) == stats.warning, cut
        assert entries[1]["synced"] in (None, entries[0]["next"]), cut


def test_an_interface_described_mid_file(tmp_path: Path) -> None:
    """A second interface (another link type) appears after packets: ranges past it learn it."""
    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    path = tmp_path / "two.pcapng"
    with open(path, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=262144, linktype=linktype)
        for ts, data in packets[:20]:
            w.writepkt(data, ts=ts / 1_000_000)
        idb = dpkt.pcapng.InterfaceDescriptionBlockLE(linktype=101, snaplen=262144)
        f.write(bytes(idb))
        for ts, data in packets[20:40]:
            epb = dpkt.pcapng.EnhancedPacketBlockLE(
                iface_id=1, ts_high=ts >> 32, ts_low=ts & 0xFFFFFFFF,
                caplen=len(data) - 14, pkt_len=len(data) - 14, pkt_data=data[14:],
            )  # fmt: skip
            f.write(bytes(epb))
    want, stats = _whole(path)
    assert len(want) == 40 and stats.linktypes == {linktype, 101}
    for split in (512, 1024, 3000):
        got, entry = _ranged(path, split)
        assert got == want, split


def test_a_pcap_inside_a_packet_is_caught_not_read(tmp_path: Path) -> None:
    """A packet whose payload is a run of pcap records with the capture's own times: a range
    starting inside it finds the look-alike chain. The ranges then disagree on where records
    start, and merging their statistics raises SplitError rather than passing on packets that
    are not in the file."""
    linktype, packets = read_packets(DATA / "mock_group_classic.pcap")
    inner = write_pcap(tmp_path / "inner.pcap", linktype, packets[:20]).read_bytes()[24:]
    carrier = packets[5][1][:54] + inner
    path = write_pcap(tmp_path / "outer.pcap", linktype, packets[:3] + [(packets[3][0], carrier)])
    want, _ = _whole(path)
    assert len(want) == 4
    errors = 0
    for split in range(600, 3000, 97):
        try:
            got, _ = _ranged(path, split)
        except dist.SplitError as e:
            errors += 1
            assert "larger split size" in str(e)
        else:
            assert got == want, split
    assert errors > 0


def test_relative_paths_are_read_from_where_the_ranges_were_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Spark executor's working directory is not the driver's: a relative path is opened from
    the planning directory (`base`), while the file keeps the name it was given."""
    data = tmp_path / "data"
    data.mkdir()
    frame = bytes(dpkt.ethernet.Ethernet(data=b"\x00" * 40))
    write_pcap(data / "a.pcap", 1, [(i, frame) for i in range(20)])
    size = (data / "a.pcap").stat().st_size
    for name in ("a.pcap", "file:a.pcap"):
        (task,) = dist.plan_ranges([(name, False, size)], base=str(data))
        assert task[0].path == name and task[0].where() == str(data / "a.pcap")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(exist_ok=True)
        monkeypatch.chdir(elsewhere)  # as an executor in its own work directory
        entry: dict[str, Any] = {}
        read = list(dist.read_range_packets(task[0], entry))
        assert len(read) == 20 and entry["path"] == name and "error" not in entry
    # Absolute paths and URLs of remote stores stay as they are.
    assert dist.anchored(str(data / "a.pcap"), "/x") == str(data / "a.pcap")
    assert dist.anchored("s3://bucket/ring/a.pcap", "/x") == "s3://bucket/ring/a.pcap"
