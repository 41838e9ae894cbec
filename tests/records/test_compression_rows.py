"""Codec framing facts (xerial, raw snappy, LZ4 header checksum, gzip members) and the rows/Arrow
output for the Spark job."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pyarrow as pa
import pytest

from kwire import records as R
from kwire.records.compression import LZ4_MAGIC, XERIAL_MAGIC, lz4_header_checksums, xxh32


def test_xxh32_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F  # > 16 bytes


def test_lz4_header_checksum_values_from_the_fact_sheet() -> None:
    """FLG 60, BD 40 (Java's writer): correct HC 82, the KAFKA-3160 one 1a."""
    _, correct, broken = lz4_header_checksums(LZ4_MAGIC + bytes((0x60, 0x40, 0x00)))
    assert (correct, broken) == (0x82, 0x1A)


def test_lz4_frames_we_write_are_independent_blocks_and_read_by_cramjam() -> None:
    data = b"abc" * 50_000
    frame = R.compress(3, data)
    assert frame[:4] == LZ4_MAGIC and frame[4] & 0x20  # block independence set
    assert bytes(cramjam.lz4.decompress(frame)) == data
    broken = R.compress(3, data, lz4_broken_hc=True)
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(broken)  # strict readers reject it, as the fact sheet says
    assert R.decompress(3, broken, magic=0) == data
    with pytest.raises(R.CompressionError):
        R.decompress(3, broken, magic=2)


def test_snappy_xerial_and_raw() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes: three 32 KiB xerial blocks
    xerial = R.compress(2, data)
    assert xerial[:8] == XERIAL_MAGIC and struct.unpack(">ii", xerial[8:16]) == (1, 1)
    lengths = []
    pos = 16
    while pos < len(xerial):
        (n,) = struct.unpack_from(">i", xerial, pos)
        block = xerial[pos + 4 : pos + 4 + n]
        lengths.append(len(bytes(cramjam.snappy.decompress_raw(block))))
        pos += 4 + n
    assert lengths == [32768, 32768, 11264]
    assert R.decompress(2, xerial, magic=2) == data
    raw = R.compress(2, data, snappy_xerial=False)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == data
    assert R.decompress(2, raw, magic=2) == data
    # Version/compat ints are ignored (a producer wrote them little-endian), and snappy-java
    # accepts a second header where a block length would start.
    odd = XERIAL_MAGIC + struct.pack("<ii", 1, 1) + xerial[16:] + xerial
    assert R.decompress(2, odd, magic=2) == data + data
    with pytest.raises(R.CompressionError):
        R.decompress(2, xerial[:-3], magic=2)
    with pytest.raises(R.CompressionError):
        R.decompress(2, bytes(cramjam.snappy.compress(data)), magic=2)  # Google framing: not Kafka


@pytest.fixture(params=["isal", "zlib"])
def inflater(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """gzip read by ISA-L (kwire's default) and by the standard library's zlib, its fallback."""
    from kwire.records import compression

    if request.param == "isal":
        from isal import isal_zlib

        monkeypatch.setattr(compression, "_inflate", isal_zlib)
    else:
        monkeypatch.setattr(compression, "_inflate", zlib)
    return str(request.param)


def test_gzip_concatenated_members_and_truncation(inflater: str) -> None:
    two = zlib.compress(b"first ", 6, 31) + zlib.compress(b"second", 6, 31)
    assert R.decompress(1, two, magic=2) == b"first second"
    with pytest.raises(R.CompressionError, match="end marker"):
        R.decompress(1, two[:-4], magic=2)
    with pytest.raises(R.CompressionError, match="^gzip: "):
        R.decompress(1, two[:10] + bytes(reversed(two[10:])), magic=2)


def test_gzip_inflaters_agree_and_keep_the_cap(inflater: str) -> None:
    import random

    rng = random.Random(7)
    for _ in range(50):
        data = bytes(rng.choice(b"abcdefgh ") for _ in range(rng.randint(0, 50000)))
        level = rng.choice([1, 6, 9])
        assert R.decompress(1, zlib.compress(data, level, 31), magic=2) == data
    bomb = zlib.compress(bytes(10_000_000), 9, 31)
    with pytest.raises(R.DecompressedTooLarge, match="cap of 1000000 bytes"):
        R.decompress(1, bomb, magic=2, cap=1_000_000)


def test_zstd_multiple_frames_and_no_content_size() -> None:
    c = cramjam.zstd.Compressor(level=3)
    c.compress(b"streamed ")
    streamed = bytes(c.finish())
    assert streamed[4] == 0x00  # frame header descriptor without a content size, as Java writes
    assert R.decompress(4, streamed + R.compress(4, b"then more"), magic=2) == (
        b"streamed then more"
    )


def test_rows_columns_and_null_row_for_unreadable_batch() -> None:
    good = R.make_batch(
        [R.Record(7, 1_700_000_000_123, b"k", None, [("h", b"v")])],
        compression="gzip",
        producer_id=5,
        producer_epoch=1,
        base_sequence=10,
    )
    legacy = R.make_message_set([R.Record(3, 0, None, b"old")], magic=0)
    field = R.encode_batch(good) + R.encode_records(legacy) + b"\x00" * 11
    rows = [dict(zip(R.ROW_COLUMNS, row)) for row in R.iter_rows(field)]
    assert len(rows) == 3
    assert rows[0] | {"batch_error": None} == {
        "batch_index": 0,
        "batch_offset": 7,
        "magic": 2,
        "compression": "gzip",
        "timestamp_type": "create",
        "is_transactional": False,
        "is_control": False,
        "producer_id": 5,
        "producer_epoch": 1,
        "base_sequence": 10,
        "partition_leader_epoch": -1,
        "batch_status": "ok",
        "batch_error": None,
        "offset": 7,
        "sequence": 10,
        "timestamp": 1_700_000_000_123,
        "key": b"k",
        "value": None,
        "headers": [("h", b"v")],
        "control_type": None,
    }
    assert rows[1]["magic"] == 0 and rows[1]["timestamp"] is None and rows[1]["value"] == b"old"
    assert rows[1]["producer_id"] == -1 and rows[1]["sequence"] == -1
    assert rows[2]["batch_status"] == "partial" and rows[2]["batch_index"] == 2
    assert all(rows[2][c] is None for c in R.RECORD_COLUMNS)

    (table_batch,) = list(R.rows_to_arrow(R.iter_rows(field)))
    assert table_batch.schema == R.arrow_schema()
    table = pa.Table.from_batches([table_batch])
    ts = table.column("timestamp")[0].as_py()
    assert ts.tzinfo is not None and int(ts.timestamp() * 1000) == 1_700_000_000_123
    assert table.column("headers")[0].as_py() == [{"key": "h", "value": b"v"}]
    assert table.column("offset").null_count == 1


def test_rows_to_arrow_bounds_batches_by_rows_and_bytes() -> None:
    recs = [R.Record(i, 0, None, bytes(1000)) for i in range(100)]
    field = R.encode_batch(R.make_batch(recs))
    by_rows = list(R.rows_to_arrow(R.iter_rows(field), max_rows=30))
    assert [b.num_rows for b in by_rows] == [30, 30, 30, 10]
    by_bytes = list(R.rows_to_arrow(R.iter_rows(field), max_bytes=10_000))
    assert sum(b.num_rows for b in by_bytes) == 100
    assert max(b.num_rows for b in by_bytes) <= 10 and len(by_bytes) >= 10


def test_non_utf8_header_key_survives_decode_encode_and_arrow() -> None:
    rec_bytes = bytearray(R.encode_batch(R.make_batch([R.Record(0, 0, None, None, [("ab", b"")])])))
    at = rec_bytes.index(b"ab")
    rec_bytes[at] = 0xFF
    after = bytes(rec_bytes[21:])
    import crc32c

    struct.pack_into(">I", rec_bytes, 17, crc32c.crc32c(after))
    (b,) = R.decode_records(bytes(rec_bytes))
    assert b.status == R.OK
    assert R.encode_batch(b) == bytes(rec_bytes)
    (arrow_batch,) = list(R.rows_to_arrow(R.iter_rows(bytes(rec_bytes))))
    assert arrow_batch.column("headers")[0].as_py()[0]["key"] == "\\xffb"
