"""The compiled records loops (kwire/records/_compiled.pyx, built by `make setup`) held to the Python
reference: batches drawn from every codec of every format (v2 batches, legacy message sets of
magic 0 and 1, plain and compressed), the same bytes damaged (byte flips, cuts), the hand-made
faults and the extremes decode to equal batches -- records, statuses, error texts, offsets, and
the CRCs, positions and sizes equality leaves out -- under both; and clean input is read by the
compiled loops themselves, not by their Python fallbacks.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from typing import Any, Iterator

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwire import records as R
from kwire.records import decode as D

from .support import VARIANTS, batches, v2_record_bytes

BUILT = D._COMPILED is not None
needs_build = pytest.mark.skipif(
    not BUILT,
    reason="the compiled records loop is not built here (make setup builds it) or "
    "KWIRE_PURE_PYTHON is set: only the Python loop is tested",
)
V2 = [v for v in VARIANTS if v.magic == 2]
LEGACY = [v for v in VARIANTS if v.magic != 2]


def test_the_compiled_loop_is_in_use_where_it_was_built() -> None:
    if os.environ.get("KWIRE_EXPECT_COMPILED") == "1":
        assert R.backend() == "compiled", (
            "KWIRE_EXPECT_COMPILED=1 but the records loop is Python: kwire.records._compiled did "
            "not build or does not import (python scripts/build_native.py says why)"
        )


def both(data: bytes, **kw: Any) -> tuple[list[R.Batch], list[R.Batch]]:
    """The field decoded by the Python loop, then by the compiled one."""
    was = R.backend()
    try:
        R.set_backend("python")
        python = R.decode_records(data, **kw)
        R.set_backend("compiled")
        compiled = R.decode_records(data, **kw)
    finally:
        R.set_backend(was)
    return python, compiled


def same(python: list[R.Batch], compiled: list[R.Batch]) -> None:
    assert compiled == python
    for p, c in zip(python, compiled):
        # Every Batch slot, the ones equality leaves out (crc, position, size...) included.
        assert [getattr(c, name) for name in R.Batch.__slots__] == [
            getattr(p, name) for name in R.Batch.__slots__
        ]
        # Record fields one by one: equality of ints hides nothing, but types must agree too.
        for rp, rc in zip(p.records, c.records):
            assert [type(x) for x in vars_of(rc)] == [type(x) for x in vars_of(rp)]


def vars_of(r: R.Record) -> list[Any]:
    return [getattr(r, name) for name in R.Record.__slots__]


class Counting:
    """Counts the compiled loop's hand-offs to the Python reader."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> int:
        self.calls += 1
        return D._read_v2_records_python(*args)


@pytest.fixture
def fallback() -> Iterator[Counting]:
    from kwire.records import _compiled as native

    counting = Counting()
    D.install_compiled(native, counting)
    try:
        yield counting
    finally:
        D.install_compiled(native, D._read_v2_records_python)


@needs_build
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(V2).flatmap(batches))
def test_drawn_batches_decode_alike(base: list[R.Batch]) -> None:
    same(*both(R.encode_records(base)))


@needs_build
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from([v for v in V2 if v.compression == "none"]).flatmap(batches),
    flips=st.lists(st.tuples(st.integers(61, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000),
)
def test_damaged_records_decode_alike(
    base: list[R.Batch], flips: list[tuple[int, int]], cut: int
) -> None:
    """Flips past the batch header land in the records (the CRC mismatch still decodes them):
    every fault the loop can meet, against the reference's reading of it."""
    raw = bytearray(R.encode_records(base))
    for at, value in flips:
        raw[at % len(raw)] = value
    data = bytes(raw[: len(raw) - cut % max(len(raw) // 4, 1)])
    same(*both(data, max_decompressed=1 << 20))


def _batch(records: bytes, count: int, *, attributes: int = 0, base_offset: int = 0,
           base_ts: int = 0, max_ts: int = 0, base_sequence: int = -1) -> bytes:  # fmt: skip
    after = struct.pack(
        ">hiqqqhii", attributes, max(count - 1, 0), base_ts, max_ts, -1, -1, base_sequence, count
    )
    after += records
    head = struct.pack(">qiibI", base_offset, 9 + len(after), -1, 2, crc32c.crc32c(after))
    return head + after


EXTREMES = {
    "long varints (10-byte timestamp delta)": _batch(
        bytes.fromhex("1400ffffffffffffffffff01") + b"\x00\x01\x00\x00", 1
    ),
    "offset near 2**63": _batch(v2_record_bytes(5, 0, None, b"v"), 1, base_offset=2**63 - 3),
    "timestamp near 2**63": _batch(v2_record_bytes(0, 9, None, b"v"), 1, base_ts=2**63 - 5),
    "sequence wraps": _batch(v2_record_bytes(7, 0, None, b"v"), 1, base_sequence=2**31 - 3),
    "log append time": _batch(v2_record_bytes(0, 3, b"k", b"v"), 1, attributes=0x08, max_ts=99),
    "control batch": _batch(
        v2_record_bytes(0, 0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"), 1,
        attributes=0x30,
    ),
    "non-UTF-8 header key": R.encode_batch(
        R.make_batch([R.Record(0, 1, None, b"v", [("\udcff\udcfe", None), ("k", b"")])])
    ),
    "zero records": _batch(b"", 0),
}  # fmt: skip


@needs_build
@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_extremes_decode_alike(name: str) -> None:
    same(*both(EXTREMES[name]))


@needs_build
@pytest.mark.parametrize(
    "record, count",
    [
        (b"\x7f" + v2_record_bytes(0, 0, None, b"abc")[1:], 1),
        (bytes.fromhex("10000000") + b"\x03" + b"abcdefghijk", 1),
        (bytes.fromhex("12000000010661626301"), 1),
        (bytes.fromhex("14000000010661626300") + b"\x00", 1),
        (v2_record_bytes(0, 0, None, b"abc") + b"\x00" * 8, 1),
        (bytes.fromhex("1400ffffffffffffffffffff"), 1),
        (v2_record_bytes(0, 0, None, b"abc")[:-2], 1),
    ],
)
def test_faults_give_the_references_errors(record: bytes, count: int) -> None:
    python, compiled = both(_batch(record, count))
    assert python[0].status == R.MALFORMED
    same(python, compiled)


@needs_build
def test_a_clean_batch_is_read_by_the_compiled_loop(fallback: Counting) -> None:
    recs = [R.Record(i, 1000 + i, b"k%d" % i, b"v" * 200, [("h", b"x")]) for i in range(50)]
    data = R.encode_batch(R.make_batch(recs, producer_id=7, producer_epoch=0, base_sequence=0))
    R.set_backend("compiled")
    (batch,) = R.decode_records(data)
    assert batch.status == R.OK and [r.value for r in batch.records] == [b"v" * 200] * 50
    assert fallback.calls == 0
    bad = _batch(b"\x7f" + v2_record_bytes(0, 0, None, b"abc")[1:], 1)
    (broken,) = R.decode_records(bad)
    assert broken.status == R.MALFORMED and fallback.calls == 1


def test_set_backend_refuses_what_is_not_there() -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        R.set_backend("rust")
    if not BUILT:
        with pytest.raises(RuntimeError, match="not built"):
            R.set_backend("compiled")


@needs_build
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LEGACY).flatmap(batches))
def test_drawn_message_sets_decode_alike(base: list[R.Batch]) -> None:
    same(*both(R.encode_records(base)))


@needs_build
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.sampled_from(LEGACY).flatmap(batches),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000),
)
def test_damaged_message_sets_decode_alike(
    base: list[R.Batch], flips: list[tuple[int, int]], cut: int
) -> None:
    """Flips anywhere (sizes, magic, attributes, CRCs, lengths, compressed payloads) and cuts:
    the compiled legacy readers stop where the reference would report, and hand over."""
    raw = bytearray(R.encode_records(base))
    if raw:
        for at, value in flips:
            raw[at % len(raw)] = value
    data = bytes(raw[: len(raw) - cut % max(len(raw) // 4, 1)])
    same(*both(data, max_decompressed=1 << 20))


def _legacy(offset: int, value: bytes, *, magic: int = 1, attributes: int = 0,
            timestamp: int = 0, key: bytes | None = None) -> bytes:  # fmt: skip
    body = bytes([magic, attributes])
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) if key is None else struct.pack(">i", len(key)) + key
    body += struct.pack(">i", len(value)) + value
    crc = struct.pack(">I", zlib.crc32(body))
    return struct.pack(">qi", offset, 4 + len(body)) + crc + body


def _wrapper(inner: bytes, offset: int, *, attributes: int = 1, timestamp: int = 0) -> bytes:
    return _legacy(offset, gzip.compress(inner), attributes=attributes, timestamp=timestamp)


LEGACY_EXTREMES = {
    "offset near 2**63": _legacy(2**63 - 1, b"v"),
    "negative offset": _legacy(-5, b"v", magic=0),
    "timestamp near -2**63": _legacy(0, b"v", timestamp=-(2**63)),
    "log append time, unused attribute bits": _legacy(3, b"v", attributes=0x08 | 0xF0),
    "magic 0 with attribute bit 3": _legacy(3, b"v", magic=0, attributes=0x08),
    "empty value, null key": _legacy(0, b""),
    "wrapper below its last inner offset": _wrapper(_legacy(0, b"a") + _legacy(9, b"b"), 4),
    "wrapper offset near 2**63": _wrapper(_legacy(0, b"a") + _legacy(1, b"b"), 2**63 - 1),
    "inner offsets near -2**63": _wrapper(_legacy(-(2**63), b"a"), 7),
    "log append wrapper": _wrapper(
        _legacy(0, b"a", timestamp=5) + _legacy(1, b"b", timestamp=77), 10,
        attributes=0x09, timestamp=77,
    ),
    "magic 0 inside magic 1": _wrapper(_legacy(0, b"a", magic=0) + _legacy(1, b"b"), 10),
    "nested compression": _wrapper(_legacy(0, b"a", attributes=1), 3),
    "empty wrapper payload": _wrapper(b"", 3),
    "bad inner crc": _wrapper(_legacy(0, b"a")[:12] + b"\0\0\0\0" + _legacy(0, b"a")[16:], 3),
    "a clean run then a cut": _legacy(0, b"a") + _legacy(1, b"b") + _legacy(2, b"c")[:-3],
}  # fmt: skip


@needs_build
@pytest.mark.parametrize("name", sorted(LEGACY_EXTREMES))
def test_legacy_extremes_decode_alike(name: str) -> None:
    same(*both(LEGACY_EXTREMES[name]))


@needs_build
def test_clean_message_sets_are_read_by_the_compiled_readers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = {"message": 0, "inner": 0}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls[name] += 1
            return fn(*args)

        return wrapper

    monkeypatch.setattr(D, "_decode_legacy", counted("message", D._decode_legacy))
    monkeypatch.setattr(D, "_read_inner", counted("inner", D._read_inner))
    R.set_backend("compiled")
    recs = [R.Record(i, 1000 + i, b"k%d" % i, b"v" * 50) for i in range(40)]
    for magic in (0, 1):
        plain = R.encode_records(R.make_message_set(recs, magic=magic))
        assert [r.offset for b in R.decode_records(plain) for r in b.records] == list(range(40))
    assert calls == {"message": 0, "inner": 0}
    packed = R.encode_records(R.make_message_set(recs, magic=1, compression="gzip"))
    (batch,) = R.decode_records(packed)
    assert batch.status == R.OK and [r.value for r in batch.records] == [b"v" * 50] * 40
    assert calls == {"message": 1, "inner": 0}  # the wrapper is Python's, its inner loop not
    # A damaged message in the middle: the run before it is compiled, it and the rest Python's.
    # (the last byte of message 20's value: its CRC no longer matches).
    twentieth = R.decode_records(plain)[20]
    raw = bytearray(plain)
    raw[twentieth.position + twentieth.size - 1] ^= 0xFF
    decoded = R.decode_records(bytes(raw))
    assert [b.status for b in decoded] == [R.OK] * 20 + [R.CRC_MISMATCH] + [R.OK] * 19
    assert calls["message"] == 2  # the damaged one, then the next (the compiled run from 22 on)


def test_a_sequence_past_int32_wraps_as_javas_int_does() -> None:
    """Found by the long fuzz (an ArrowInvalid out of rows_to_arrow): a record whose offset delta
    is negative, in a batch whose base sequence is near -2^31, gave a sequence below int32. Java's
    DefaultRecordBatch.incrementSequence computes in int and wraps; so does kwire, both loops."""
    fuzzed = bytes.fromhex(
        "000000000000000a00000062ffffffff0207c007f80003fffffff80000018bcfe5680080000000cfe56802ff"
        "ffffffffffffffffff800000000000000304224d187040ad1e00008010000013046b30000012000211046b31"
        "0276001400040f046b32047676005770a45300000000"
    )
    python, compiled = both(fuzzed)
    same(python, compiled)
    sequences = [r.sequence for b in python for r in b.records]
    assert sequences and all(-(2**31) <= s < 2**31 for s in sequences)
    for _ in R.rows_to_arrow(R.iter_rows(fuzzed)):
        pass
