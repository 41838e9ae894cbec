"""Round trips over every format x codec: decode(encode(x)) == x, and bytes for uncompressed."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kwire import records as R

from .support import VARIANTS, Variant, batches

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
@SETTINGS
@given(data=st.data())
def test_decode_of_encode_is_identity(variant: Variant, data: st.DataObject) -> None:
    built = data.draw(batches(variant))
    encoded = R.encode_records(built)
    decoded = R.decode_records(encoded)
    assert decoded == built
    assert all(b.status == R.OK and b.crc_ok for b in decoded)
    for b in decoded:
        assert b.compression == variant.compression
        if variant.compression == "snappy":
            assert b.snappy_xerial == variant.snappy_xerial
        if variant.compression == "lz4":
            assert b.lz4_broken_hc == variant.lz4_broken_hc
    # Positions tile the field.
    assert sum(b.size for b in decoded) == len(encoded)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.compression == "none"], ids=str)
@SETTINGS
@given(data=st.data())
def test_encode_of_decode_is_identity_uncompressed(variant: Variant, data: st.DataObject) -> None:
    encoded = R.encode_records(data.draw(batches(variant)))
    assert R.encode_records(R.decode_records(encoded)) == encoded


@SETTINGS
@given(
    parts=st.lists(st.sampled_from(VARIANTS).flatmap(batches), min_size=1, max_size=5),
    cut=st.integers(1, 10_000),
)
@example(parts=[[R.make_batch([R.Record(0, 0, None, None)])]], cut=0).via("a cut at the start")
def test_mixed_fields_and_partial_tail(parts: list[list[R.Batch]], cut: int) -> None:
    """Formats mix freely in one field; cutting the field inside its last entry gives exactly
    the earlier batches plus one partial batch (what Fetch responses look like)."""
    flat = [b for part in parts for b in part]
    encoded = [R.encode_batch(b) for b in flat]
    field = b"".join(encoded)
    assert R.decode_records(field) == flat
    if not flat:
        return
    last = len(encoded[-1])
    # Cut strictly inside the last entry: at least one of its bytes kept, at least one lost
    # (a cut at its very start would leave no partial batch at all).
    inside = 1 + cut % (last - 1)
    keep = len(field) - last + inside
    decoded = R.decode_records(field[:keep])
    assert decoded[:-1] == flat[:-1]
    tail = decoded[-1]
    assert tail.status == R.PARTIAL and not tail.records
    assert f"at byte {len(field) - last}" in (tail.error or "")
    if inside >= 8:
        assert tail.base_offset == flat[-1].base_offset
    if inside >= 17:
        assert tail.magic == flat[-1].magic


def test_v2_log_append_time_reports_max_timestamp_and_keeps_own() -> None:
    recs = [R.Record(5, 1000, None, b"a"), R.Record(6, 900, None, b"b")]
    b = R.make_batch(recs, timestamp_type="log_append", max_timestamp=5000)
    (d,) = R.decode_records(R.encode_batch(b))
    assert [r.timestamp for r in d.records] == [5000, 5000]
    assert [r.own_timestamp for r in d.records] == [1000, 900]
    assert d.base_timestamp == 1000


def test_v1_wrapper_relative_offsets_resolved_from_wrapper_offset() -> None:
    """KIP-31: inner offsets 0..n-1 and wrapper offset = last absolute offset."""
    recs = [R.Record(100 + i, 10 + i, None, b"v%d" % i) for i in range(3)]
    (wrapper,) = R.make_message_set(recs, magic=1, compression="gzip")
    field = R.encode_batch(wrapper)
    (d,) = R.decode_records(field)
    assert [r.offset for r in d.records] == [100, 101, 102]
    assert d.base_offset == 102
    # The inner set really holds relative offsets: decompress it and read the first offset.
    inner = R.decompress(1, field[12 + 4 + 2 + 8 + 4 + 4 :], magic=1)
    assert struct.unpack_from(">q", inner, 0)[0] == 0


def test_v1_wrapper_offset_below_last_inner_is_malformed() -> None:
    recs = [R.Record(i, 10, None, b"x") for i in range(3)]
    (wrapper,) = R.make_message_set(recs, magic=1, compression="gzip", wrapper_offset=0)
    field = bytearray(R.encode_batch(wrapper))
    struct.pack_into(">q", field, 0, 1)  # 1 < last inner offset 2, and not 0
    (d,) = R.decode_records(bytes(field))
    assert d.status == R.MALFORMED and "below the last inner offset 2" in (d.error or "")


def test_control_batches_transaction_markers() -> None:
    for kind in ("commit", "abort"):
        marker = R.control_record(42, 1234, kind, coordinator_epoch=7)
        b = R.make_batch(
            [marker], is_control=True, is_transactional=True, producer_id=9, producer_epoch=3
        )
        raw = R.encode_batch(b)
        assert len(raw) == 78  # the fact sheet's verified marker batch size
        assert raw[61:66] == bytes.fromhex("2000000008")
        assert raw[66:70] == struct.pack(">hh", 0, 0 if kind == "abort" else 1)
        (d,) = R.decode_records(raw)
        assert d == b and d.is_control and d.is_transactional
        assert d.records[0].control_type == kind and d.records[0].sequence == -1
        rows = list(R.iter_rows(raw))
        assert rows[0][R.ROW_COLUMNS.index("control_type")] == kind


def test_header_order_duplicates_and_null_vs_empty() -> None:
    rec = R.Record(0, 1, b"", None, [("a", b"1"), ("a", None), ("b", b""), ("a", b"3")])
    (d,) = R.decode_records(R.encode_batch(R.make_batch([rec])))
    got = d.records[0]
    assert got.key == b"" and got.value is None
    assert got.headers == [("a", b"1"), ("a", None), ("b", b""), ("a", b"3")]


def test_fact_sheet_record_example_bytes() -> None:
    """Key null, value 'abc', no headers, deltas 0 -> 12 00 00 00 01 06 61 62 63 00."""
    raw = R.encode_batch(R.make_batch([R.Record(0, 0, None, b"abc")]))
    assert raw[61:] == bytes.fromhex("12000000010661626300")


def test_sequence_wraps_to_zero() -> None:
    recs = [R.Record(i, 0, None, None) for i in range(3)]
    b = R.make_batch(recs, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    (d,) = R.decode_records(R.encode_batch(b))
    assert [r.sequence for r in d.records] == [2**31 - 2, 2**31 - 1, 0]


def test_empty_and_null_field() -> None:
    assert R.decode_records(b"") == []
    assert R.decode_records(None) == []
    with pytest.raises(R.RecordsError):
        R.decode_records("not bytes")  # type: ignore[arg-type]
