"""Cross-checks against kafka-python's and aiokafka's record code on the same bytes.

Bytes come from *their* builders (every codec each supports, magic 0/1/2) and from ours; the
expected values are what the builders were given.  Each peer's reader is a second opinion on
the same bytes: it must agree with us on offsets, timestamps, keys, values and headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import codec as aio_codec
from aiokafka.record import MemoryRecords as AioMemoryRecords
from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER
from aiokafka.record.control_record import ControlRecord as AioControlRecord
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioDefaultBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kp_codec
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpDefaultBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder

from kwire import records as R

from .support import VARIANTS, Variant, batches, record_inputs

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_KP_HAS = {
    0: True,
    1: True,
    2: kp_codec.has_snappy(),
    3: kp_codec.has_lz4(),
    4: kp_codec.has_zstd(),
}
_AIO_HAS = {
    0: True,
    1: True,
    2: aio_codec.has_snappy(),
    3: aio_codec.has_lz4(),
    4: aio_codec.has_zstd(),
}

PeerRecord = tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _b(x: Any) -> bytes | None:
    return None if x is None else bytes(x)


def peer_read(memory_records: Callable[[bytes], Any], data: bytes) -> list[list[PeerRecord]]:
    """Records per batch as a peer's MemoryRecords sees them (CRC checked first)."""
    out = []
    mr = memory_records(data)
    while mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        out.append(
            [
                (r.offset, r.timestamp, _b(r.key), _b(r.value), [(k, _b(v)) for k, v in r.headers])
                for r in batch
            ]
        )
    return out


def ours(batches_: list[R.Batch], magic0_ts: bool = False) -> list[list[PeerRecord]]:
    """Our decode in the peers' shape (peers report None for magic 0 timestamps)."""
    return [
        [
            (
                r.offset,
                None if b.magic == 0 and not magic0_ts else r.timestamp,
                r.key,
                r.value,
                list(r.headers),
            )
            for r in b.records
        ]
        for b in batches_
    ]


PEERS = {
    "kafka-python": (KpDefaultBuilder, KpLegacyBuilder, KpMemoryRecords, _KP_HAS),
    "aiokafka": (AioDefaultBuilder, AioLegacyBuilder, AioMemoryRecords, _AIO_HAS),
}


def _v2_cases() -> list[tuple[str, int]]:
    return [(peer, c) for peer in PEERS for c in range(5)]


@pytest.mark.parametrize("peer, codec", _v2_cases(), ids=lambda x: str(x))
@SETTINGS
@given(data=st.data())
def test_v2_built_by_peer(peer: str, codec: int, data: st.DataObject) -> None:
    builder_cls, _, memory_records, has = PEERS[peer]
    if not has[codec]:
        pytest.skip(f"{peer} has no {R.CODEC_NAMES[codec]} library here")
    recs = data.draw(record_inputs(with_headers=True, min_size=1))
    first = recs[0].offset
    recs = [R.Record(r.offset - first, r.timestamp, r.key, r.value, r.headers) for r in recs]
    idempotent = data.draw(st.booleans())
    txn = idempotent and data.draw(st.booleans())
    pid, epoch, seq = (
        (12345, 3, data.draw(st.integers(0, 2**31 - 1))) if idempotent else (-1, -1, -1)
    )
    builder = builder_cls(2, codec, txn, pid, epoch, seq, 2**30)
    for r in recs:
        builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
    raw = bytes(builder.build())

    (b,) = R.decode_records(raw)
    assert b.status == R.OK and b.crc_ok
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (pid, epoch, seq)
    assert b.is_transactional == txn and not b.is_control
    assert b.compression in ("none", R.CODEC_NAMES[codec])  # peers skip codecs that do not shrink
    expected = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
    assert ours([b]) == [expected]
    if seq != -1:
        assert b.records[-1].sequence == (seq + recs[-1].offset) % 2**31
    assert peer_read(memory_records, raw) == [expected]
    if b.compression == "none":
        assert R.encode_batch(b) == raw  # byte-exact re-encode of a peer's batch


def _legacy_cases() -> list[tuple[str, int, int]]:
    return [(peer, m, c) for peer in PEERS for m in (0, 1) for c in range(4)]


@pytest.mark.parametrize("peer, magic, codec", _legacy_cases(), ids=lambda x: str(x))
@SETTINGS
@given(data=st.data())
def test_legacy_built_by_peer(peer: str, magic: int, codec: int, data: st.DataObject) -> None:
    _, builder_cls, memory_records, has = PEERS[peer]
    if not has[codec]:
        pytest.skip(f"{peer} has no {R.CODEC_NAMES[codec]} library here")
    if peer == "aiokafka" and magic == 0 and codec == 3:
        pytest.skip("aiokafka refuses magic-0 LZ4 (KAFKA-3160)")
    recs = data.draw(record_inputs(with_headers=False, min_size=1))
    builder = builder_cls(magic, codec, 2**30)
    for r in recs:
        builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value)
    raw = bytes(builder.build())

    decoded = R.decode_records(raw)
    assert all(b.status == R.OK and b.crc_ok for b in decoded), [b.error for b in decoded]
    assert all(b.magic == magic for b in decoded)
    expected = [(r.offset, None if magic == 0 else r.timestamp, r.key, r.value, []) for r in recs]
    assert [r for batch in ours(decoded) for r in batch] == expected
    # aiokafka's compiled reader reports a v1 timestamp of -1 (Kafka's NO_TIMESTAMP) as None,
    # with no timestamp type; Kafka's Java reader and kafka-python keep the -1, as kwire does.
    if peer == "aiokafka":
        expected = [(o, None if t == -1 else t, k, v, h) for o, t, k, v, h in expected]
    assert [r for batch in peer_read(memory_records, raw) for r in batch] == expected
    if codec == 0:
        assert len(decoded) == len(recs)
        assert R.encode_records(decoded) == raw
    else:
        assert len(decoded) == 1 and decoded[0].compression == R.CODEC_NAMES[codec]


def _readable_by(peer: str, v: Variant) -> bool:
    has = PEERS[peer][3]
    if not has[R.model.CODEC_IDS[v.compression]]:
        return False
    return not (peer == "aiokafka" and v.magic == 0 and v.compression == "lz4")


@pytest.mark.parametrize("peer", sorted(PEERS))
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_peers_read_our_bytes(peer: str, variant: Variant, data: st.DataObject) -> None:
    if not _readable_by(peer, variant):
        pytest.skip(f"{peer} cannot read {variant.name} here")
    built = data.draw(batches(variant))
    raw = R.encode_records(built)
    memory_records = PEERS[peer][2]
    got = peer_read(memory_records, raw)
    if variant.magic == 2:
        # Both peers report LogAppendTime records with the batch's max timestamp, as we do.
        assert got == ours(built)
    else:
        expected = [r for batch in ours(built) for r in batch]
        if peer == "aiokafka" and variant.magic == 1:
            # aiokafka reports a message's timestamp -1 (Kafka's NO_TIMESTAMP) as None; kwire
            # keeps the value on the wire, as kafka-python does.
            expected = [(o, None if ts == -1 else ts, *rest) for o, ts, *rest in expected]
        assert [r for batch in got for r in batch] == expected


@SETTINGS
@given(
    parts=st.lists(
        st.sampled_from([v for v in VARIANTS if v.compression in ("none", "gzip")]).flatmap(
            batches
        ),
        min_size=2,
        max_size=5,
    ),
    cut=st.integers(1, 1000),
)
def test_mixed_field_and_partial_tail_against_kafka_python(
    parts: list[list[R.Batch]], cut: int
) -> None:
    """aiokafka's compiled reader rejects mixed fields (fact sheet); kafka-python reads them."""
    flat = [b for p in parts for b in p]
    if not flat:
        return
    raw = R.encode_records(flat)
    got = [r for batch in peer_read(KpMemoryRecords, raw) for r in batch]
    assert got == [r for batch in ours(flat) for r in batch]
    cut_raw = raw[: len(raw) - 1 - cut % max(1, len(R.encode_batch(flat[-1])) - 1)]
    mine = R.decode_records(cut_raw)
    assert mine[-1].status == R.PARTIAL
    assert [r for batch in peer_read(KpMemoryRecords, cut_raw) for r in batch] == [
        r for batch in ours(mine[:-1]) for r in batch
    ]


def test_control_marker_read_by_aiokafka() -> None:
    for kind, expected_type in (("abort", 0), ("commit", 1)):
        b = R.make_batch(
            [R.control_record(10, 99, kind, coordinator_epoch=5)],
            is_control=True,
            is_transactional=True,
            producer_id=77,
            producer_epoch=2,
        )
        raw = R.encode_batch(b)
        mr = AioMemoryRecords(raw)
        batch = mr.next_batch()
        assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
        (rec,) = list(batch)
        control = AioControlRecord.parse(rec.key)
        assert control.type_ == expected_type and rec.offset == 10
        assert control == (ABORT_MARKER if kind == "abort" else COMMIT_MARKER)
