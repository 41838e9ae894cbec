"""Encoding batches back to bytes, and building batches the way Kafka producers do.

:func:`encode_batch` writes exactly what a :class:`Batch` holds: header fields are taken as given
(nothing is "fixed up"), only lengths, counts and CRCs are computed.  That is what makes
``encode(decode(bytes)) == bytes`` hold for uncompressed data.  Compressed payloads are
re-compressed, so their bytes differ from another library's (the fact sheet's section 7), and only
the decoded meaning round-trips.

:func:`make_batch` and :func:`make_message_set` derive the header fields from the records as Java's
``MemoryRecordsBuilder`` does (base timestamp = first record's, max timestamp, last offset delta,
sequences, control types), so tests can state records and compare ``decode(encode(x)) == [x]``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence

import crc32c

from .compression import compress
from .errors import RecordsEncodeError, RecordsError
from .model import (
    CODEC_IDS,
    CONTROL_TYPE_IDS,
    CONTROL_TYPES,
    LOG_APPEND_TIME,
    NONE,
    OK,
    UNKNOWN_CONTROL,
    Batch,
    Header,
    Record,
)

_V2_AFTER_CRC = struct.Struct(">hiqqqhii")
_V2_BEFORE_CRC = struct.Struct(">qiibI")
_LEGACY_HEAD = struct.Struct(">qiI")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INT32_MAX = 2**31 - 1


def _put_varint(out: bytearray, value: int, bounds: tuple[int, int], what: str) -> None:
    """Append ``value`` as a zigzag varint (shortest form, as every Kafka writer does)."""
    if not bounds[0] <= value <= bounds[1]:
        raise RecordsEncodeError(f"{what} {value} does not fit the varint's range")
    z = (value << 1) ^ (value >> 63)
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _put_bytes(out: bytearray, data: bytes | None, what: str) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        _put_varint(out, len(data), _INT32, what)
        out += data


def _encode_v2_record(out: bytearray, r: Record, base_offset: int, base_ts: int) -> None:
    body = bytearray(b"\x00")  # attributes: no bits defined
    written_ts = r.timestamp if r.own_timestamp is None else r.own_timestamp
    _put_varint(body, written_ts - base_ts, _INT64, "timestampDelta")
    _put_varint(body, r.offset - base_offset, _INT32, "offsetDelta")
    _put_bytes(body, r.key, "key length")
    _put_bytes(body, r.value, "value length")
    _put_varint(body, len(r.headers), _INT32, "header count")
    for hkey, hvalue in r.headers:
        if not isinstance(hkey, str):
            raise RecordsEncodeError(f"header key {hkey!r} is not a str (keys are not nullable)")
        _put_bytes(body, hkey.encode("utf-8", "surrogateescape"), "header key length")
        _put_bytes(body, hvalue, "header value length")
    _put_varint(out, len(body), _INT32, "record length")
    out += body


def _codec(batch: Batch) -> int:
    codec = CODEC_IDS.get(batch.compression or "")
    if codec is None:
        raise RecordsEncodeError(f"cannot encode compression {batch.compression!r}")
    return codec


def _encode_v2(batch: Batch) -> bytes:
    codec = _codec(batch)
    attributes = codec | batch.extra_attributes
    if batch.timestamp_type == LOG_APPEND_TIME:
        attributes |= 0x08
    if batch.is_transactional:
        attributes |= 0x10
    if batch.is_control:
        attributes |= 0x20
    body = bytearray()
    for r in batch.records:
        _encode_v2_record(body, r, batch.base_offset, batch.base_timestamp)
    payload = compress(
        codec, bytes(body), snappy_xerial=batch.snappy_xerial, lz4_broken_hc=batch.lz4_broken_hc
    )
    after_crc = (
        _V2_AFTER_CRC.pack(
            attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records),
        )
        + payload
    )
    head = _V2_BEFORE_CRC.pack(
        batch.base_offset,
        9 + len(after_crc),  # leader epoch 4 + magic 1 + crc 4, then the rest
        batch.partition_leader_epoch,
        2,
        crc32c.crc32c(after_crc),
    )
    return head + after_crc


def _legacy_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytearray((magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for data in (key, value):
        if data is None:
            body += b"\xff\xff\xff\xff"
        else:
            body += struct.pack(">i", len(data))
            body += data
    return _LEGACY_HEAD.pack(offset, 4 + len(body), zlib.crc32(body)) + bytes(body)


def _encode_legacy(batch: Batch) -> bytes:
    codec = _codec(batch)
    magic = batch.magic
    ts_bit = 0x08 if magic == 1 and batch.timestamp_type == LOG_APPEND_TIME else 0
    for r in batch.records:
        if r.headers:
            raise RecordsEncodeError(f"magic {magic} messages have no headers (offset {r.offset})")
    if codec == 0:
        if len(batch.records) != 1:
            raise RecordsEncodeError(
                f"an uncompressed magic {magic} entry holds exactly one message, "
                f"not {len(batch.records)}"
            )
        r = batch.records[0]
        ts = r.timestamp if r.own_timestamp is None else r.own_timestamp
        return _legacy_message(
            batch.base_offset, magic, ts_bit | batch.extra_attributes, ts, r.key, r.value
        )
    if codec == 4:
        raise RecordsEncodeError(f"zstd is not defined for magic {magic} messages")
    if not batch.records:
        raise RecordsEncodeError("a compressed wrapper needs at least one inner message")
    first, last = batch.records[0].offset, batch.records[-1].offset
    if magic == 1 and batch.base_offset not in (0, last):
        raise RecordsEncodeError(
            f"magic 1 wrapper offset {batch.base_offset} must be 0 or the last offset {last}"
        )
    relative = magic == 1 and batch.base_offset != 0
    inner = bytearray()
    for r in batch.records:
        ts = r.timestamp if r.own_timestamp is None else r.own_timestamp
        offset = r.offset - first if relative else r.offset
        inner += _legacy_message(offset, magic, 0, ts, r.key, r.value)
    payload = compress(
        codec, bytes(inner), snappy_xerial=batch.snappy_xerial, lz4_broken_hc=batch.lz4_broken_hc
    )
    attributes = codec | ts_bit | batch.extra_attributes
    return _legacy_message(batch.base_offset, magic, attributes, batch.max_timestamp, None, payload)


def encode_batch(batch: Batch) -> bytes:
    """The bytes of one entry of a records field (a v2 batch or a magic 0/1 message)."""
    if batch.status != OK:
        raise RecordsEncodeError(f"cannot encode a batch with status {batch.status}")
    try:
        if batch.magic == 2:
            return _encode_v2(batch)
        if batch.magic in (0, 1):
            return _encode_legacy(batch)
    except RecordsError:
        raise
    except (struct.error, ValueError, OverflowError, TypeError) as exc:
        raise RecordsEncodeError(f"batch at offset {batch.base_offset}: {exc}") from None
    raise RecordsEncodeError(f"unknown magic {batch.magic}")


def encode_records(batches: Iterable[Batch]) -> bytes:
    """A whole records field: the entries one after another (formats may be mixed)."""
    return b"".join(encode_batch(b) for b in batches)


# -- building batches as producers do ---------------------------------------------------------------


def control_record(
    offset: int, timestamp: int, control_type: str = "commit", coordinator_epoch: int = 0
) -> Record:
    """A transaction marker record (``commit``/``abort``) or another control type by name."""
    type_id = CONTROL_TYPE_IDS.get(control_type)
    if type_id is None:
        raise RecordsEncodeError(f"unknown control type {control_type!r}")
    key = struct.pack(">hh", 0, type_id)
    value = struct.pack(">hi", 0, coordinator_epoch) if type_id in (0, 1) else b""
    return Record(offset, timestamp, key, value, [], NONE, control_type)


def _written_ts(r: Record) -> int:
    return r.timestamp if r.own_timestamp is None else r.own_timestamp


def _sequence(base: int, delta: int) -> int:
    if base == NONE:
        return NONE
    seq = base + delta
    return seq - (_INT32_MAX + 1) if seq > _INT32_MAX else seq


def _control_name(key: bytes | None) -> str:
    if key is None or len(key) < 4:
        raise RecordsEncodeError("a control record key is version int16, type int16")
    return CONTROL_TYPES.get(struct.unpack_from(">h", key, 2)[0], UNKNOWN_CONTROL)


def make_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    compression: str = "none",
    timestamp_type: str = "create",
    is_transactional: bool = False,
    is_control: bool = False,
    producer_id: int = NONE,
    producer_epoch: int = NONE,
    base_sequence: int = NONE,
    partition_leader_epoch: int = NONE,
    max_timestamp: int | None = None,
    snappy_xerial: bool = True,
    lz4_broken_hc: bool = False,
) -> Batch:
    """A v2 batch whose derived fields are set as Java's producer sets them.

    ``records`` carry the timestamps they were written with; with ``timestamp_type`` log_append
    the batch's ``max_timestamp`` (the broker's append time, required) becomes every record's
    reported timestamp and the written one moves to ``own_timestamp``, exactly as decoding reports.
    """
    if base_offset is None:
        base_offset = records[0].offset if records else 0
    written = [_written_ts(r) for r in records]
    base_ts = written[0] if records else NONE
    if timestamp_type == LOG_APPEND_TIME:
        if max_timestamp is None:
            raise RecordsEncodeError("a log_append batch needs max_timestamp (the append time)")
    elif max_timestamp is None:
        max_timestamp = max(written) if records else NONE
    out: list[Record] = []
    for r, ts in zip(records, written):
        own = None
        if timestamp_type == LOG_APPEND_TIME:
            own = ts if ts != max_timestamp else None
            ts = max_timestamp
        out.append(
            Record(
                r.offset,
                ts,
                r.key,
                r.value,
                list(r.headers),
                _sequence(base_sequence, r.offset - base_offset),
                _control_name(r.key) if is_control else None,
                own,
            )
        )
    return Batch(
        base_offset,
        2,
        compression,
        timestamp_type,
        is_transactional,
        is_control,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
        base_ts,
        max_timestamp,
        (records[-1].offset - base_offset) if records else 0,
        records=out,
        snappy_xerial=snappy_xerial,
        lz4_broken_hc=lz4_broken_hc,
    )


def make_message_set(
    records: Sequence[Record],
    *,
    magic: int,
    compression: str = "none",
    timestamp_type: str = "create",
    wrapper_offset: int | None = None,
    wrapper_timestamp: int | None = None,
    snappy_xerial: bool = True,
    lz4_broken_hc: bool | None = None,
) -> list[Batch]:
    """Magic 0/1 entries for ``records``: one message each, or one compressed wrapper.

    The wrapper offset defaults to the last record's offset (what a broker stores); pass 0 for
    what kafka-python and librdkafka put in produce requests.  The wrapper timestamp defaults to
    the largest inner timestamp (Java's choice).  ``lz4_broken_hc`` defaults to Kafka's own rule:
    the KAFKA-3160 checksum for magic 0 only.
    """
    if magic not in (0, 1):
        raise RecordsEncodeError(f"magic {magic} is not a legacy message format")
    broken = (magic == 0) if lz4_broken_hc is None else lz4_broken_hc
    log_append = magic == 1 and timestamp_type == LOG_APPEND_TIME
    ts_type = LOG_APPEND_TIME if log_append else "create"
    written = [_written_ts(r) if magic == 1 else NONE for r in records]
    if compression == "none":
        return [
            Batch(
                r.offset,
                magic,
                "none",
                ts_type,
                max_timestamp=ts,
                records=[Record(r.offset, ts, r.key, r.value, [])],
            )
            for r, ts in zip(records, written)
        ]
    if not records:
        raise RecordsEncodeError("a compressed wrapper needs at least one record")
    wrapper_ts = NONE
    if magic == 1:
        wrapper_ts = wrapper_timestamp if wrapper_timestamp is not None else max(written)
    out: list[Record] = []
    for r, ts in zip(records, written):
        own = None
        if log_append:
            own = ts if ts != wrapper_ts else None
            ts = wrapper_ts
        out.append(Record(r.offset, ts, r.key, r.value, [], NONE, None, own))
    return [
        Batch(
            records[-1].offset if wrapper_offset is None else wrapper_offset,
            magic,
            compression,
            ts_type,
            max_timestamp=wrapper_ts,
            records=out,
            snappy_xerial=snappy_xerial,
            lz4_broken_hc=broken,
        )
    ]


__all__ = [
    "Header",
    "control_record",
    "encode_batch",
    "encode_records",
    "make_batch",
    "make_message_set",
]
