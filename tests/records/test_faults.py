"""Bad bytes become statuses: crc_mismatch, malformed, partial, too_large, unsupported_codec.

Decoding must never raise for any bytes, never hang and never allocate from an unchecked length;
bombs are refused with a bounded traced allocation.
"""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire import records as R
from kwire.records.compression import XERIAL_HEADER

from .support import VARIANTS, batches, v2_record_bytes

MIB = 1024 * 1024
CAP = 1 * MIB
BOMB = 64 * MIB  # 64x the cap


def v2_batch(payload: bytes, *, attributes: int, count: int, base_offset: int = 0) -> bytes:
    """A v2 batch around an arbitrary (already compressed) payload, with a correct CRC."""
    after = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    after += payload
    head = struct.pack(">qiibI", base_offset, 9 + len(after), -1, 2, crc32c.crc32c(after))
    return head + after


def legacy_message(
    offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytes((magic, attributes)) + (struct.pack(">q", 0) if magic == 1 else b"")
    for part in (key, value):
        body += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def _gzip_bomb() -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(MIB)
    return b"".join([co.compress(chunk) for _ in range(BOMB // MIB)] + [co.flush()])


def _streamed(compressor: object) -> bytes:
    chunk = bytes(MIB)
    for _ in range(BOMB // MIB):
        compressor.compress(chunk)  # type: ignore[attr-defined]
    return bytes(compressor.finish())  # type: ignore[attr-defined]


def _xerial_bomb() -> bytes:
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    framed = struct.pack(">i", len(block)) + block
    return XERIAL_HEADER + framed * (BOMB // (32 * 1024))


BOMBS = {
    "gzip": (1, _gzip_bomb),
    "zstd-streamed": (4, lambda: _streamed(cramjam.zstd.Compressor(level=3))),
    "zstd-declared": (4, lambda: bytes(cramjam.zstd.compress(bytes(BOMB), level=1))),
    "lz4": (3, lambda: _streamed(cramjam.lz4.Compressor(block_linked=False))),
    "snappy-raw": (2, lambda: bytes(cramjam.snappy.compress_raw(bytes(BOMB)))),
    "snappy-xerial": (2, _xerial_bomb),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_is_too_large_with_bounded_allocation(name: str) -> None:
    codec, make = BOMBS[name]
    bomb = make()
    assert len(bomb) < BOMB // 10
    good = R.encode_batch(R.make_batch([R.Record(9, 1, b"k", b"v")], compression="gzip"))
    field = v2_batch(bomb, attributes=codec, count=1) + good
    tracemalloc.start()
    try:
        decoded = R.decode_records(field, max_decompressed=CAP)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [b.status for b in decoded] == [R.TOO_LARGE, R.OK]
    assert "cap" in (decoded[0].error or "")
    assert decoded[1].records[0].value == b"v"  # the rest of the field still decodes
    # Never near the bomb's size: the cap, one grown buffer before it, and the input copies.
    assert peak < 3 * CAP + 2 * len(field), peak


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_payload_just_under_the_cap_decodes(codec: int) -> None:
    value = bytes(CAP - 200)
    raw = R.encode_batch(
        R.make_batch([R.Record(0, 0, None, value)], compression=R.CODEC_NAMES[codec])
    )
    (ok,) = R.decode_records(raw, max_decompressed=CAP)
    assert ok.status == R.OK and ok.records[0].value == value
    (big,) = R.decode_records(raw, max_decompressed=CAP - 300)
    assert big.status == R.TOO_LARGE and not big.records


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_v2(codec: int) -> None:
    payload = v2_record_bytes(0, 0, None, b"x")
    raw = v2_batch(payload, attributes=codec, count=1)
    (b,) = R.decode_records(raw)
    assert b.status == R.UNSUPPORTED_CODEC and b.compression is None
    assert f"codec id {codec}" in (b.error or "") and "byte 21" in (b.error or "")
    row = next(R.iter_rows(raw))
    assert row[R.ROW_COLUMNS.index("batch_status")] == R.UNSUPPORTED_CODEC
    assert row[R.ROW_COLUMNS.index("offset")] is None


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [4, 5, 7])
def test_unknown_or_zstd_codec_legacy(magic: int, codec: int) -> None:
    raw = legacy_message(3, magic, codec, None, b"whatever")
    (b,) = R.decode_records(raw)
    assert b.status == R.UNSUPPORTED_CODEC and b.base_offset == 3


def test_crc_mismatch_still_decodes_records() -> None:
    b = R.make_batch([R.Record(0, 5, b"key", b"value")])
    raw = bytearray(R.encode_batch(b))
    raw[-3] ^= 0xFF  # a byte of the value, covered by the CRC
    (d,) = R.decode_records(bytes(raw))
    assert d.status == R.CRC_MISMATCH and d.crc_ok is False
    assert "byte 17" in (d.error or "") and "decoded anyway" in (d.error or "")
    assert d.records[0].key == b"key" and d.records[0].value != b"value"
    # baseOffset and the leader epoch are outside the CRC: rewriting them keeps it valid.
    raw2 = bytearray(R.encode_batch(b))
    struct.pack_into(">qii", raw2, 0, 777, len(raw2) - 12, 12)
    (d2,) = R.decode_records(bytes(raw2))
    assert d2.status == R.OK and d2.records[0].offset == 777


def test_crc_mismatch_legacy_outer_and_inner() -> None:
    raw = bytearray(legacy_message(1, 1, 0, b"k", b"v"))
    raw[12] ^= 1
    (d,) = R.decode_records(bytes(raw))
    assert d.status == R.CRC_MISMATCH and d.records[0].value == b"v"
    inner = legacy_message(0, 1, 0, None, b"a") + legacy_message(1, 1, 0, None, b"b")
    bad_inner = bytearray(inner)
    bad_inner[-1] ^= 1
    wrapper = legacy_message(1, 1, 1, None, zlib.compress(bytes(bad_inner), 6, 31))
    (w,) = R.decode_records(wrapper)
    assert w.status == R.CRC_MISMATCH and "inner message 1" in (w.error or "")
    assert [r.value for r in w.records] == [b"a", b"c"]


def _one_record_batch(record: bytes, count: int = 1) -> bytes:
    return v2_batch(record, attributes=0, count=count)


@pytest.mark.parametrize(
    "record, count, expect",
    [
        (v2_record_bytes(0, 0, None, b"abc"), 2, "recordsCount 2"),
        (v2_record_bytes(0, 0, None, b"abc"), -1, "recordsCount -1"),
        (b"\x7f" + v2_record_bytes(0, 0, None, b"abc")[1:], 1, "record 0 length"),
        (bytes.fromhex("10000000") + b"\x03" + b"abcdefghijk", 1, "record 0 keyLength"),
        (bytes.fromhex("12000000010661626301"), 1, "record 0 headerCount"),
        (bytes.fromhex("14000000010661626300") + b"\x00", 1, "record 0"),
        (v2_record_bytes(0, 0, None, b"abc") + b"\x00" * 8, 1, "8 bytes left after 1 records"),
        (bytes.fromhex("1400ffffffffffffffffffff"), 1, "timestampDelta"),
    ],
)
def test_malformed_records_name_offset_and_field(record: bytes, count: int, expect: str) -> None:
    good = R.encode_batch(R.make_batch([R.Record(50, 1, None, b"ok")]))
    field = good + _one_record_batch(record, count) + good
    decoded = R.decode_records(field)
    assert [b.status for b in decoded] == [R.OK, R.MALFORMED, R.OK]
    err = decoded[1].error or ""
    assert expect in err and "at byte" in err, err
    assert decoded[2].records[0].value == b"ok"


def test_malformed_error_offset_is_field_relative() -> None:
    good = R.encode_batch(R.make_batch([R.Record(0, 1, None, b"ok")]))
    bad = _one_record_batch(b"\x7f" + v2_record_bytes(0, 0, None, b"abc")[1:])
    _, d = R.decode_records(good + bad)
    assert f"at byte {len(good) + 61}:" in (d.error or "")


@pytest.mark.parametrize(
    "patch, expect",
    [
        ((8, struct.pack(">i", 5)), "entry size 5 is below 14"),
        ((16, b"\x03"), "magic byte 3"),
        ((8, struct.pack(">i", 30)), "below 49 for magic 2"),
    ],
)
def test_broken_framing_stops_with_one_malformed_batch(
    patch: tuple[int, bytes], expect: str
) -> None:
    good = R.encode_batch(R.make_batch([R.Record(0, 1, None, b"ok")]))
    bad = bytearray(good)
    at, value = patch
    bad[at : at + len(value)] = value
    decoded = R.decode_records(good + bytes(bad) + good)
    assert [b.status for b in decoded] == [R.OK, R.MALFORMED]
    assert expect in (decoded[1].error or "") and f"byte {len(good) + at}" in (
        decoded[1].error or ""
    )


def test_overflow_entry_of_down_converted_fetch_is_partial() -> None:
    """Fetch v0-3: offset -1, size = remaining + 1, zero-filled."""
    good = R.encode_batch(R.make_batch([R.Record(0, 1, None, b"ok")]))
    overflow = struct.pack(">qi", -1, 70) + bytes(57)
    decoded = R.decode_records(good + overflow)
    assert [b.status for b in decoded] == [R.OK, R.PARTIAL]
    assert decoded[1].base_offset == -1


def test_lz4_broken_header_checksum_only_accepted_for_magic_0() -> None:
    recs = [R.Record(i, 7, None, b"lz4 payload %d" % i) for i in range(3)]
    for magic in (0, 1):
        (w,) = R.make_message_set(recs, magic=magic, compression="lz4", lz4_broken_hc=True)
        (d,) = R.decode_records(R.encode_batch(w))
        if magic == 0:
            assert d.status == R.OK and d.lz4_broken_hc
        else:
            assert d.status == R.MALFORMED and "headerChecksum" in (d.error or "")
    b = R.make_batch(recs, compression="lz4", lz4_broken_hc=True)
    (d,) = R.decode_records(R.encode_batch(b))
    assert d.status == R.MALFORMED


def test_nested_compression_and_empty_wrapper_are_malformed() -> None:
    nested = legacy_message(0, 1, 1, None, zlib.compress(b"x", 6, 31))
    (d,) = R.decode_records(legacy_message(0, 1, 1, None, zlib.compress(nested, 6, 31)))
    assert d.status == R.MALFORMED and "nested compression" in (d.error or "")
    (e,) = R.decode_records(legacy_message(0, 1, 1, None, zlib.compress(b"", 6, 31)))
    assert e.status == R.MALFORMED and "empty" in (e.error or "")
    (n,) = R.decode_records(legacy_message(0, 1, 1, None, None))
    assert n.status == R.MALFORMED and "null value" in (n.error or "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(VARIANTS).flatmap(batches),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000),
)
def test_mutated_fields_never_raise(
    base: list[R.Batch], flips: list[tuple[int, int]], cut: int
) -> None:
    raw = bytearray(R.encode_records(base))
    if not raw:
        return
    for at, value in flips:
        raw[at % len(raw)] = value
    data = bytes(raw[: len(raw) - cut % len(raw)])
    decoded = R.decode_records(data, max_decompressed=CAP)
    assert all(b.status in R.STATUSES for b in decoded)
    assert all((b.status == R.OK) == (b.error is None) for b in decoded)
    rows = list(R.iter_rows(data, max_decompressed=CAP))
    assert len(rows) >= len(decoded)
    for _ in R.rows_to_arrow(rows):
        pass


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data: bytes) -> None:
    for b in R.decode_records(data, max_decompressed=CAP):
        assert b.status in R.STATUSES


def test_a_magic_byte_of_128_or_more_is_read_signed() -> None:
    """Found by the fuzz test above: magic 0x80 was kept as 128, which the int8 magic column
    cannot hold; Kafka reads the byte signed."""
    raw = bytearray(R.encode_records([R.make_batch([R.Record(0, 1, b"k", b"v")])]))
    raw[16] = 0x80
    (batch,) = R.decode_records(bytes(raw))
    assert batch.status == R.MALFORMED and batch.magic == -128
    (table,) = R.rows_to_arrow(R.iter_rows(bytes(raw)))
    assert table.column("magic").to_pylist() == [-128]
