"""The capture step fed corrupted pcap/pcapng files: clean errors or error rows, no traceback.

capture.read_frames(errors="raise") may raise only capture.CaptureFileError; errors="report" must
not raise at all. Every complete frame it yields is decoded too, under the decoding contract.
Inputs: synthetic captures of model-derived frames (tests/fuzz/pcaps.py knows where their record
and block lengths are) and the committed real captures under tests/data.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from tests.fuzz import mutate, pcaps
from tests.fuzz.harness import Crash, is_known

HYP = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def check(data: bytes, path: Path, ports: tuple[int, ...] = (9092,)) -> list[str]:
    """pcaps.check_capture, stepping over the crashes already pinned by the xfail tests below
    (harness.KNOWN_CRASHES); any other crash fails the test."""
    try:
        return pcaps.check_capture(data, path, ports)
    except Crash as c:
        if is_known(c):
            return ["known crash"]
        raise


def _synthetic(corpus: Any) -> list[pcaps.CaptureSeed]:
    return [c for c in corpus.captures if c.fields]


def _real(corpus: Any) -> list[pcaps.CaptureSeed]:
    return [c for c in corpus.captures if not c.fields]


def test_synthetic_captures_are_read_back_exactly(tmp_path: Path) -> None:
    """The builder itself: what the mutations start from must be a capture capture reads."""
    request = g.encode_request(g.RequestHeader(12, 4, 77, "fuzz"), g.HeartbeatRequest("g", 3))
    response = g.encode_response(g.ResponseHeader(77), g.HeartbeatResponse(), 4)
    packets = pcaps.conversation([(request, response)], mss=9)
    for data, _ in (pcaps.pcap_file(packets), pcaps.pcapng_file(packets, big_endian=True)):
        path = tmp_path / "ok.cap"
        path.write_bytes(data)
        rows, summary = pcaps.read_capture(path, "raise")
        assert [(r["direction"], r["frame"], r["error"]) for r in rows] == [
            ("request", request[4:], None),
            ("response", response[4:], None),
        ]
        assert rows[1]["api_key"] == 12 and rows[1]["api_version"] == 4
        assert check(data, path)[1:] == ["ok", "ok"]


def test_every_capture_seed_reads_cleanly(corpus: Any, tmp_path: Path) -> None:
    for seed in corpus.captures:
        kinds = check(seed.data, tmp_path / "seed.cap", seed.broker_ports)
        assert kinds[0] == "capture ok", (seed.name, kinds[:3])


def test_truncated_captures(corpus: Any, tmp_path: Path) -> None:
    """Each capture cut at ~24 points (inside headers, records, packets and frames)."""
    for seed in corpus.captures:
        n = len(seed.data)
        cuts = sorted({0, 1, 3, 4, 23, 24, 27, 40, n - 1} | set(range(0, n, max(1, n // 16))))
        for cut in cuts:
            if 0 <= cut < n:
                check(seed.data[:cut], tmp_path / "cut.cap", seed.broker_ports)


def test_inflated_record_and_block_lengths(corpus: Any, tmp_path: Path) -> None:
    """Every caplen/origlen/block length of two synthetic captures (one of each format) set to
    extreme and small values."""
    seeds = [
        next(s for s in _synthetic(corpus) if s.data[:4] == fmt)
        for fmt in (b"\xd4\xc3\xb2\xa1", b"\x0a\x0d\x0d\x0a")
    ]
    for seed in seeds:
        for pos, kind in seed.fields[:24]:
            for value in pcaps.U32_VALUES:
                if value in (0x10000001, 0x0FFFFFFF):  # near the 256 MiB record limit: slow
                    continue
                check(pcaps.set_u32(seed.data, pos, kind, value), tmp_path / "x.cap")


@HYP
@given(data=st.data())
def test_mutated_captures(corpus: Any, tmp_path: Path, data: st.DataObject) -> None:
    seeds = corpus.captures
    seed = data.draw(
        (
            st.sampled_from(_synthetic(corpus))
            if data.draw(st.integers(0, 4))
            else st.sampled_from(_real(corpus) or seeds)
        ),
        label="seed",
    )
    other = data.draw(st.sampled_from(seeds), label="other").data
    r = data.draw(st.randoms(use_true_random=False), label="mutation choices")
    mutated, how = mutate.mutate(seed.data, r, other=other)
    if seed.fields and data.draw(st.booleans(), label="inflate a length"):
        pos, kind = data.draw(st.sampled_from(seed.fields))
        value = data.draw(st.sampled_from([v for v in pcaps.U32_VALUES if v < 1 << 20]))
        mutated = pcaps.set_u32(mutated, pos, kind, value)
    check(mutated, tmp_path / "m.cap", seed.broker_ports)


@HYP
@given(data=st.data())
def test_random_bytes_behind_a_capture_header(tmp_path: Path, data: st.DataObject) -> None:
    head = data.draw(
        st.sampled_from(
            [
                bytes.fromhex("d4c3b2a1 0200 0400 00000000 00000000 ffff0000 01000000"),
                bytes.fromhex("a1b23c4d 0002 0004 00000000 00000000 0000ffff 00000065"),
                bytes.fromhex("0a0d0d0a 1c000000 4d3c2b1a 0100 0000 ffffffffffffffff 1c000000"),
                b"",
            ]
        )
    )
    check(head + data.draw(st.binary(max_size=200)), tmp_path / "r.cap")


# -- crashes found by fuzzing (regression tests; the fix is pending in capture/) -----------------

SHB = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
IDB_ETHERNET = struct.pack("<IIHHII", 1, 20, 1, 0, 65535, 20)
IDB_RAW = struct.pack("<IIHHII", 1, 20, 101, 0, 65535, 20)

# An enhanced packet block whose total length is 12: no room for its 20-byte fixed part.
SHORT_EPB = SHB + IDB_ETHERNET + struct.pack("<III", 6, 12, 12)


def _epb_with_timestamp(ts_hi: int) -> bytes:
    """One Heartbeat request to port 9092 in an enhanced packet block with this high word."""
    frame = g.encode_request(g.RequestHeader(12, 0, 1, ""), g.HeartbeatRequest())
    pkt = pcaps.tcp_packet(
        (bytes([10, 0, 0, 1]), 40000),
        (bytes([10, 0, 0, 2]), 9092),
        1000,
        0,
        0x18,
        frame,
        pcaps.LINK_RAW,
    )
    body = struct.pack("<IIIII", 0, ts_hi, 0, len(pkt), len(pkt)) + pkt + b"\0" * (-len(pkt) % 4)
    epb = struct.pack("<II", 6, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))
    return SHB + IDB_RAW + epb


# A packet timestamp of 2^64 - 2^32 microseconds: beyond int64, so the Arrow timestamp overflows.
HUGE_TIMESTAMP = _epb_with_timestamp(0xFFFFFFFF)


def test_regression_inputs_are_what_the_report_says() -> None:
    assert SHORT_EPB.hex() == (
        "0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c000000"
        "010000001400000001000000ffff000014000000"
        "060000000c0000000c000000"
    )
    assert len(HUGE_TIMESTAMP) == 144


def test_sane_timestamp_reads(tmp_path: Path) -> None:
    kinds = check(_epb_with_timestamp(0x00060000), tmp_path / "ok.pcapng")
    assert kinds[0] == "capture ok" and "ok" in kinds


def test_pcapng_packet_block_shorter_than_its_fixed_part(tmp_path: Path) -> None:
    """Regression (found by fuzzing): struct.error escaped read_frames; now a file warning
    naming the block's byte offset. The block's own length is sound, so reading goes on after
    it (nothing follows here)."""
    kinds = check(SHORT_EPB, tmp_path / "x.pcapng")
    assert kinds == [
        "capture ok",
        "capture file warning: corrupt packet block at byte #: too short; skipped",
    ]


def test_pcapng_timestamp_beyond_int64(tmp_path: Path) -> None:
    """Regression (found by fuzzing): OverflowError escaped from the Arrow timestamp column."""
    kinds = check(HUGE_TIMESTAMP, tmp_path / "x.pcapng")
    assert kinds == [
        "capture ok",
        "capture file warning: corrupt packet block at byte #: timestamp # us is outside years "
        "##; skipped",
    ]


@pytest.mark.parametrize("kind", ["pcap", "pcapng"])
def test_huge_record_length_in_a_small_file_allocates_nothing_big(
    tmp_path: Path, kind: str
) -> None:
    """Regression (found by the long fuzz run: a 168 MB traced peak on a small capture): a record
    claiming 200 MB made Python's buffered read allocate 200 MB before seeing the file end."""
    import tracemalloc

    from kwire import capture

    claim = 200 * 1024 * 1024
    if kind == "pcap":
        header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        data = header + struct.pack("<IIII", 1, 0, claim, claim) + b"\0" * 64
    else:
        data = SHB + IDB_RAW + struct.pack("<II", 6, claim) + b"\0" * 64
    path = tmp_path / f"huge.{kind}"
    path.write_bytes(data)
    summary = capture.Summary()
    tracemalloc.start()
    try:
        rows = [b for b in capture.read_frames([str(path)], summary=summary, errors="report")]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(b.num_rows for b in rows) == 0
    assert "truncated" in (summary.files[0].get("warning") or ""), summary.files
    assert peak < 8 * 1024 * 1024, f"peak {peak:,} bytes"
