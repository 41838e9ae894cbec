"""The compiled records loop (records/_compiled.pyx, built by `make setup`) held to the Python
reference: batches drawn from every v2 codec, the same bytes damaged (byte flips, cuts), the
hand-made faults and the extremes decode to equal batches -- records, statuses, error texts and
offsets -- under both; and a clean batch is read by the compiled loop itself, not by its
Python fallback.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Iterator

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import records as R
from records import decode as D

from .support import VARIANTS, batches, v2_record_bytes

BUILT = D._COMPILED is not None
needs_build = pytest.mark.skipif(
    not BUILT,
    reason="the compiled records loop is not built here (make setup builds it) or "
    "KWIRE_PURE_PYTHON is set: only the Python loop is tested",
)
V2 = [v for v in VARIANTS if v.magic == 2]


def test_the_compiled_loop_is_in_use_where_it_was_built() -> None:
    if os.environ.get("KWIRE_EXPECT_COMPILED") == "1":
        assert R.backend() == "compiled", (
            "KWIRE_EXPECT_COMPILED=1 but the records loop is Python: kwire_native_records did "
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
    import kwire_native_records as native  # loaded by records.decode

    counting = Counting()
    native.install(counting, R.Record, R.model.LOG_APPEND_TIME)
    try:
        yield counting
    finally:
        native.install(D._read_v2_records_python, R.Record, R.model.LOG_APPEND_TIME)


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
