"""Decoding a records field: v2 record batches and magic 0/1 message sets, mixed.

The walk over entries follows Kafka's ``ByteBufferLogInputStream``: every entry starts with
``offset int64, size int32`` and has its magic byte at offset 16, whatever the format, so one
field (a Fetch response reading old and new log segments) can mix all three.  A cut last entry is
normal for Fetch responses (the broker reads the log by byte count) and becomes one ``partial``
batch.  Everything else that is wrong becomes a batch status with the byte offset and the field
that was being read; decoding goes on with the next entry whenever the entry's own size is
trustworthy, and never raises for bad bytes.

All offsets in error texts are relative to the start of the records field, except inside a
decompressed payload, where the text says so ("byte N of the decompressed payload of the batch at
byte P") because those bytes do not exist in the field.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Any, Callable
from collections.abc import Iterator

import crc32c

from .compression import (
    DEFAULT_MAX_DECOMPRESSED,
    XERIAL_MAGIC,
    decompress,
    lz4_header_checksums,
)
from .errors import (
    CompressionError,
    DecompressedTooLarge,
    RecordsDecodeError,
    RecordsError,
    UnsupportedCodec,
)
from .model import (
    CODEC_NAMES,
    CONTROL_TYPES,
    CRC_MISMATCH,
    CREATE_TIME,
    LOG_APPEND_TIME,
    MALFORMED,
    NONE,
    OK,
    PARTIAL,
    TOO_LARGE,
    UNKNOWN_CONTROL,
    UNSUPPORTED_CODEC,
    Batch,
    Header,
    Record,
)

_ENTRY = struct.Struct(">qi")
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61 bytes before a v2 batch's records
_LEGACY_HEADER = struct.Struct(">qiIbB")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

V2_HEADER_SIZE = 61
_MIN_SIZE = {0: 14, 1: 22, 2: 49}  # smallest "size" field per magic (bytes after it)
_MIN_RECORD = 7  # length, attributes, ts delta, offset delta, key len, value len, header count
_INT32_MAX = 2**31 - 1


def _to_bytes(data: object) -> bytes:
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise RecordsError(f"records field must be bytes-like or None, not {type(data).__name__}")


def _fail(batch: Batch, status: str, text: str) -> None:
    """Record a problem; the first status sticks, later texts are appended to the error."""
    if batch.status == OK:
        batch.status = status
    batch.error = text if batch.error is None else f"{batch.error}; {text}"


def _varint(buf: bytes, p: int, max_bytes: int, what: str) -> tuple[int, int]:
    """Zigzag varint/varlong at ``p`` (the multi-byte path; callers inline the 1-byte case)."""
    start = p
    shift = 0
    raw = 0
    while True:
        if p - start >= max_bytes:
            raise RecordsDecodeError(start, what, f"varint longer than {max_bytes} bytes")
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), p
        shift += 7


def _read_v2_records_python(
    buf: bytes,
    p: int,
    stop: int,
    count: int,
    out: list[Record],
    batch: Batch,
) -> int:
    """Append ``count`` records read from ``buf[p:stop]`` to ``out``; return where they end.

    Raises :class:`RecordsDecodeError` at the first fault (records before it stay in ``out``).

    The one-byte varint case is inlined (most deltas, lengths and counts are below 64) because
    this loop is where decoding time goes.  Reads that run past ``stop`` surface as IndexError
    (at the buffer end) or as a length mismatch with the record's declared length.
    """
    base_offset = batch.base_offset
    base_ts = batch.base_timestamp
    append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
    base_seq = batch.base_sequence
    is_control = batch.is_control
    append = out.append
    i = 0
    rec_start = p
    try:
        for i in range(count):
            rec_start = p
            b = buf[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:  # two-byte lengths are the common case for 64..8191
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                length, p = _varint(buf, p, 5, f"record {i} length")
            rec_end = p + length
            if length < 0 or rec_end > stop:
                raise RecordsDecodeError(
                    rec_start, f"record {i} length", f"{length} declared, {stop - p} bytes left"
                )
            p += 1  # attributes: Kafka defines no record attribute bits
            b = buf[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = _varint(buf, p, 10, f"record {i} timestampDelta")
            b = buf[p]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                offset_delta, p = _varint(buf, p, 5, f"record {i} offsetDelta")
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                n, p = _varint(buf, p, 5, f"record {i} keyLength")
            if n < 0:
                if n != -1:
                    raise RecordsDecodeError(p, f"record {i} keyLength", f"{n} (only -1 is null)")
                key = None
            else:
                if p + n > rec_end:
                    raise RecordsDecodeError(
                        p, f"record {i} key", f"{n} bytes declared, {rec_end - p} left in record"
                    )
                key = buf[p : p + n]
                p += n
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif buf[p + 1] < 0x80:
                raw = (b & 0x7F) | (buf[p + 1] << 7)
                n = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                n, p = _varint(buf, p, 5, f"record {i} valueLength")
            if n < 0:
                if n != -1:
                    raise RecordsDecodeError(p, f"record {i} valueLength", f"{n} (only -1 is null)")
                value = None
            else:
                if p + n > rec_end:
                    raise RecordsDecodeError(
                        p, f"record {i} value", f"{n} bytes declared, {rec_end - p} left in record"
                    )
                value = buf[p : p + n]
                p += n
            b = buf[p]
            if b == 0:
                headers: list[Header] = []
                p += 1
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    n, p = _varint(buf, p, 5, f"record {i} headerCount")
                if n < 0 or n > rec_end - p:
                    raise RecordsDecodeError(
                        p, f"record {i} headerCount", f"{n} with {rec_end - p} bytes left"
                    )
                headers, p = _read_headers(buf, p, rec_end, n, i)
            if p != rec_end:
                raise RecordsDecodeError(
                    rec_start,
                    f"record {i}",
                    f"fields end at {p}, declared length ends at {rec_end}",
                )
            timestamp = base_ts + ts_delta
            own = None
            if append_time is not None and timestamp != append_time:
                own = timestamp
                timestamp = append_time
            elif append_time is not None:
                timestamp = append_time
            if base_seq == -1:
                sequence = -1
            else:
                sequence = base_seq + offset_delta
                if sequence > _INT32_MAX:
                    sequence -= _INT32_MAX + 1  # Kafka wraps sequences to 0
                if not -_INT32_MAX - 1 <= sequence <= _INT32_MAX:
                    # Only an offset delta Kafka never writes (negative, or past 2^31) gets
                    # here: Java's int arithmetic wraps it around, and so does this.
                    sequence = ((sequence + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            control = _control_type(key, rec_start, i) if is_control else None
            append(
                Record(
                    base_offset + offset_delta,
                    timestamp,
                    key,
                    value,
                    headers,
                    sequence,
                    control,
                    own,
                )
            )
    except IndexError:
        raise RecordsDecodeError(rec_start, f"record {i}", "bytes end inside the record") from None
    return p


def install_compiled(module: Any, v2_reader: Callable[..., int]) -> None:
    """Binds the compiled module to this package's classes and its v2 fallback reader (tests
    bind a counting one)."""
    module.install(
        v2_reader, Record, Batch, LOG_APPEND_TIME, CREATE_TIME, CODEC_NAMES[0], zlib.crc32
    )


def _load_compiled() -> Any:
    """The compiled twins of the records loops (kwire/records/_compiled.pyx, built by `make
    setup` or into the wheel), or None: not built, built for another interface, or
    KWIRE_PURE_PYTHON set."""
    if os.environ.get("KWIRE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from kwire.records import _compiled as module  # type: ignore[attr-defined]
    except ImportError:
        return None  # not built, or built for another Python
    if getattr(module, "API", None) != 2:
        return None
    install_compiled(module, _read_v2_records_python)
    return module


_NATIVE = _load_compiled()
_COMPILED: Callable[..., int] | None = None if _NATIVE is None else _NATIVE.read_v2_records
# The readers in use, in boxes so set_backend can swap them: compiled when built, else Python.
_READ_V2: list[Callable[..., int]] = [_COMPILED or _read_v2_records_python]
_LEGACY: list[Any] = [_NATIVE]  # the module whose read_legacy / read_inner serve, or None


def backend() -> str:
    """Which records loops decode: "compiled" or "python" (the reference)."""
    return "compiled" if _READ_V2[0] is _COMPILED else "python"


def set_backend(name: str) -> None:
    """Switches the records loops between "compiled" (needs the build) and "python"."""
    if name not in ("python", "compiled"):
        raise ValueError(f"unknown backend {name!r}: 'python' or 'compiled'")
    if name == "compiled" and _COMPILED is None:
        raise RuntimeError("the compiled records reader is not built (make setup)")
    _READ_V2[0] = _COMPILED if name == "compiled" and _COMPILED else _read_v2_records_python
    _LEGACY[0] = _NATIVE if name == "compiled" else None


def _read_headers(
    buf: bytes, p: int, rec_end: int, count: int, index: int
) -> tuple[list[Header], int]:
    """``count`` headers read from ``p``, and where they end."""
    headers: list[Header] = []
    for h in range(count):
        b = buf[p]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            klen, p = _varint(buf, p, 5, f"record {index} header {h} keyLength")
        if klen < 0 or p + klen > rec_end:
            raise RecordsDecodeError(
                p, f"record {index} header {h} key", f"length {klen}, {rec_end - p} bytes left"
            )
        raw = buf[p : p + klen]
        p += klen
        try:
            hkey = raw.decode("utf-8")
        except UnicodeDecodeError:
            # Java writes UTF-8; keep foreign bytes recoverable rather than failing the batch.
            hkey = raw.decode("utf-8", "surrogateescape")
        b = buf[p]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            vlen, p = _varint(buf, p, 5, f"record {index} header {h} valueLength")
        if vlen < -1 or p + vlen > rec_end:
            raise RecordsDecodeError(
                p, f"record {index} header {h} value", f"length {vlen}, {rec_end - p} bytes left"
            )
        if vlen == -1:
            hvalue = None
        else:
            hvalue = buf[p : p + vlen]
            p += vlen
        headers.append((hkey, hvalue))
    return headers, p


def _control_type(key: bytes | None, at: int, index: int) -> str:
    """The control record's type name from its key (``version int16, type int16``)."""
    if key is None or len(key) < 4:
        raise RecordsDecodeError(
            at, f"control record {index} key", "needs 4 bytes (version int16, type int16)"
        )
    version = _I16.unpack_from(key, 0)[0]
    if version < 0:
        raise RecordsDecodeError(at, f"control record {index} key version", f"{version} < 0")
    return CONTROL_TYPES.get(_I16.unpack_from(key, 2)[0], UNKNOWN_CONTROL)


def _relocate(exc: RecordsDecodeError, base: int, where: str | None) -> str:
    """An error text with the offset made field-relative (or explained for decompressed bytes)."""
    if where is None:
        return f"malformed at byte {exc.offset + base}: {exc.what}" + (
            f": {exc.detail}" if exc.detail else ""
        )
    return f"malformed at byte {exc.offset} of {where}: {exc.what}" + (
        f": {exc.detail}" if exc.detail else ""
    )


def _payload(batch: Batch, codec: int, data: bytes, at: int, end: int, cap: int) -> bytes | None:
    """The decompressed records of a batch/wrapper, or None with the batch status set."""
    compressed = data[at:end]
    if codec == 2:
        batch.snappy_xerial = compressed[:8] == XERIAL_MAGIC
    try:
        if codec == 3:
            stored, correct, broken = lz4_header_checksums(compressed)
            batch.lz4_broken_hc = stored == broken and stored != correct
        return decompress(codec, compressed, magic=batch.magic, cap=cap)
    except UnsupportedCodec as exc:
        _fail(
            batch,
            UNSUPPORTED_CODEC,
            f"{exc} (attributes at byte {batch.position + 21 if batch.magic == 2 else batch.position + 17})",
        )
    except DecompressedTooLarge as exc:
        _fail(batch, TOO_LARGE, f"payload at byte {at}: {exc}")
    except CompressionError as exc:
        _fail(batch, MALFORMED, f"malformed at byte {at}: compressed payload: {exc}")
    return None


def _decode_v2(data: bytes, pos: int, size: int, cap: int) -> Batch:
    end = pos + 12 + size
    (
        base_offset,
        _length,
        leader_epoch,
        _magic,
        crc,
        attributes,
        last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _V2_HEADER.unpack_from(data, pos)
    computed = crc32c.crc32c(memoryview(data)[pos + 21 : end])
    codec = attributes & 0x07
    batch = Batch(
        base_offset,
        2,
        CODEC_NAMES.get(codec),
        LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME,
        bool(attributes & 0x10),
        bool(attributes & 0x20),
        producer_id,
        producer_epoch,
        base_sequence,
        leader_epoch,
        base_ts,
        max_ts,
        last_offset_delta,
        (attributes & ~0x3F) & 0xFFFF,
        crc=crc,
        crc_computed=computed,
        position=pos,
        size=12 + size,
    )
    if crc != computed:
        _fail(
            batch,
            CRC_MISMATCH,
            f"crc mismatch at byte {pos + 17}: stored {crc:#010x}, CRC-32C of bytes "
            f"{pos + 21}..{end} is {computed:#010x}; records decoded anyway",
        )
    start = pos + V2_HEADER_SIZE
    where: str | None = None
    if codec == 0:
        buf: bytes | None = data
        stop = end
    else:
        buf = _payload(batch, codec, data, start, end, cap)
        if buf is None:
            return batch
        start, stop = 0, len(buf)
        where = f"the decompressed payload of the batch at byte {pos}"
    if count < 0 or count > (stop - start) // _MIN_RECORD:
        text = f"recordsCount {count} does not fit in {stop - start} bytes of records"
        _fail(batch, MALFORMED, f"malformed at byte {pos + 57}: {text}")
        return batch
    assert buf is not None
    try:
        consumed = _READ_V2[0](buf, start, stop, count, batch.records, batch)
        if consumed != stop:
            raise RecordsDecodeError(
                consumed, "records", f"{stop - consumed} bytes left after {count} records"
            )
    except RecordsDecodeError as exc:
        _fail(batch, MALFORMED, _relocate(exc, 0, where))
    return batch


def _legacy_fields(
    buf: bytes, at: int, end: int, magic: int, label: str
) -> tuple[int, bytes | None, bytes | None]:
    """(timestamp, key, value) of the message whose entry starts at ``at`` and ends at ``end``."""
    p = at + 18
    timestamp = NONE
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    fields: list[bytes | None] = []
    for name in ("key", "value"):
        if p + 4 > end:
            raise RecordsDecodeError(p, f"{label} {name} length", "message ends before it")
        (n,) = _I32.unpack_from(buf, p)
        p += 4
        if n < -1 or p + n > end:
            raise RecordsDecodeError(
                p - 4, f"{label} {name}", f"length {n}, {end - p} bytes left in message"
            )
        if n == -1:
            fields.append(None)
        else:
            fields.append(buf[p : p + n])
            p += n
    if p != end:
        raise RecordsDecodeError(p, label, f"{end - p} bytes after the value")
    return timestamp, fields[0], fields[1]


def _decode_legacy(data: bytes, pos: int, size: int, cap: int) -> Batch:
    end = pos + 12 + size
    offset, _size, crc, magic, attributes = _LEGACY_HEADER.unpack_from(data, pos)
    computed = zlib.crc32(memoryview(data)[pos + 16 : end])
    codec = attributes & 0x07
    known_bits = 0x0F if magic == 1 else 0x07
    batch = Batch(
        offset,
        magic,
        CODEC_NAMES.get(codec),
        LOG_APPEND_TIME if magic == 1 and attributes & 0x08 else CREATE_TIME,
        extra_attributes=attributes & ~known_bits & 0xFF,
        crc=crc,
        crc_computed=computed,
        position=pos,
        size=12 + size,
    )
    if crc != computed:
        _fail(
            batch,
            CRC_MISMATCH,
            f"crc mismatch at byte {pos + 12}: stored {crc:#010x}, CRC-32 of bytes "
            f"{pos + 16}..{end} is {computed:#010x}; records decoded anyway",
        )
    try:
        timestamp, key, value = _legacy_fields(data, pos, end, magic, "message")
    except RecordsDecodeError as exc:
        _fail(batch, MALFORMED, _relocate(exc, 0, None))
        return batch
    batch.max_timestamp = timestamp
    if codec == 0:
        batch.records.append(Record(offset, timestamp, key, value, []))
        return batch
    if value is None:
        _fail(batch, MALFORMED, f"malformed at byte {pos}: compressed wrapper with a null value")
        return batch
    value_at = end - len(value)
    inner = _payload(batch, codec, data, value_at, end, cap)
    if inner is None:
        return batch
    where = f"the decompressed payload of the message at byte {pos}"
    try:
        native = _LEGACY[0]
        if native is None or not native.read_inner(inner, batch):
            _read_inner(inner, batch)
    except RecordsDecodeError as exc:
        _fail(batch, MALFORMED, _relocate(exc, 0, where))
    return batch


def _read_inner(inner: bytes, batch: Batch) -> None:
    """Inner messages of a compressed wrapper, offsets made absolute as Kafka does."""
    entries: list[tuple[int, int, int, bytes | None, bytes | None]] = []
    p = 0
    n = len(inner)
    while p < n:
        if n - p < 17:
            raise RecordsDecodeError(p, "inner message header", f"only {n - p} bytes left")
        ioffset, isize = _ENTRY.unpack_from(inner, p)
        imagic = inner[p + 16]
        if imagic not in (0, 1):
            raise RecordsDecodeError(p + 16, "inner message magic", str(imagic))
        if isize < _MIN_SIZE[imagic] or p + 12 + isize > n:
            raise RecordsDecodeError(
                p + 8, "inner message size", f"{isize}, {n - p - 12} bytes left"
            )
        iend = p + 12 + isize
        stored = _I32.unpack_from(inner, p + 12)[0] & 0xFFFFFFFF
        computed = zlib.crc32(memoryview(inner)[p + 16 : iend])
        if stored != computed:
            _fail(
                batch,
                CRC_MISMATCH,
                f"crc mismatch in inner message {len(entries)} (offset {ioffset}): "
                f"stored {stored:#010x}, computed {computed:#010x}",
            )
        if inner[p + 17] & 0x07:
            raise RecordsDecodeError(p + 17, "inner message attributes", "nested compression")
        label = f"inner message {len(entries)}"
        ts, key, value = _legacy_fields(inner, p, iend, imagic, label)
        entries.append((ioffset, imagic, ts, key, value))
        p = iend
    if not entries:
        raise RecordsDecodeError(0, "inner message set", "empty")
    shift = 0
    if batch.magic == 1 and batch.base_offset != 0:
        # KIP-31: inner offsets are relative and the wrapper carries the last absolute offset.
        # A wrapper offset of 0 (produce requests) leaves inner offsets as they are.
        last_inner = entries[-1][0]
        if batch.base_offset < last_inner:
            _fail(
                batch,
                MALFORMED,
                f"malformed at byte {batch.position}: wrapper offset {batch.base_offset} is below "
                f"the last inner offset {last_inner}",
            )
        else:
            shift = batch.base_offset - last_inner
    append_time = batch.max_timestamp if batch.timestamp_type == LOG_APPEND_TIME else None
    for ioffset, imagic, ts, key, value in entries:
        own = None
        if append_time is not None and imagic == 1:
            own = ts if ts != append_time else None
            ts = append_time
        batch.records.append(Record(ioffset + shift, ts, key, value, [], NONE, None, own))


def _header_only(data: bytes, pos: int, status: str, text: str) -> Batch:
    """A batch for an entry that cannot be decoded, with whatever header fields are present."""
    left = len(data) - pos
    batch = Batch(NONE, NONE, None, status=status, error=text, position=pos, size=left)
    if left >= 8:
        batch.base_offset = _I64.unpack_from(data, pos)[0]
    if left >= 17:
        # Signed, as Kafka reads it (the magic column is an int8): 0x80 and up are negative.
        batch.magic = int.from_bytes(data[pos + 16 : pos + 17], "big", signed=True)
    if batch.magic == 2 and left >= V2_HEADER_SIZE:
        head = _V2_HEADER.unpack_from(data, pos)
        attributes = head[5]
        batch.partition_leader_epoch = head[2]
        batch.crc = head[4]
        batch.compression = CODEC_NAMES.get(attributes & 0x07)
        batch.timestamp_type = LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME
        batch.is_transactional = bool(attributes & 0x10)
        batch.is_control = bool(attributes & 0x20)
        batch.extra_attributes = (attributes & ~0x3F) & 0xFFFF
        batch.last_offset_delta, batch.base_timestamp, batch.max_timestamp = head[6:9]
        batch.producer_id, batch.producer_epoch, batch.base_sequence = head[9:12]
    elif batch.magic in (0, 1) and left >= 18:
        attributes = data[pos + 17]
        batch.crc = _I32.unpack_from(data, pos + 12)[0] & 0xFFFFFFFF
        batch.compression = CODEC_NAMES.get(attributes & 0x07)
        if batch.magic == 1 and attributes & 0x08:
            batch.timestamp_type = LOG_APPEND_TIME
        if batch.magic == 1 and left >= 26:
            batch.max_timestamp = _I64.unpack_from(data, pos + 18)[0]
    return batch


def iter_batches(
    data: bytes | bytearray | memoryview | None,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> Iterator[Batch]:
    """Yield the batches of a records field in order (see the module docstring).

    ``data`` is the field's bytes (None and empty both give no batches).  ``max_decompressed``
    caps each batch's decompressed payload; a batch over it gets status ``too_large``.
    Only :class:`records.RecordsError` is raised, and only for a non-bytes argument.
    """
    buf = _to_bytes(data)
    n = len(buf)
    pos = 0
    while pos < n:
        left = n - pos
        if left < 12:
            yield _header_only(
                buf,
                pos,
                PARTIAL,
                f"partial entry at byte {pos}: {left} bytes, offset and size need 12",
            )
            return
        size = _ENTRY.unpack_from(buf, pos)[1]
        if size < _MIN_SIZE[0]:
            yield _header_only(
                buf, pos, MALFORMED, f"malformed at byte {pos + 8}: entry size {size} is below 14"
            )
            return
        if left < 17:
            yield _header_only(
                buf, pos, PARTIAL, f"partial entry at byte {pos}: {left} bytes, magic is at 16"
            )
            return
        magic = buf[pos + 16]
        if magic not in _MIN_SIZE:
            yield _header_only(
                buf,
                pos,
                MALFORMED,
                f"malformed at byte {pos + 16}: magic byte {magic} is not 0, 1 or 2",
            )
            return
        if size < _MIN_SIZE[magic]:
            yield _header_only(
                buf,
                pos,
                MALFORMED,
                f"malformed at byte {pos + 8}: size {size} is below {_MIN_SIZE[magic]} for magic {magic}",
            )
            return
        if left < 12 + size:
            yield _header_only(
                buf,
                pos,
                PARTIAL,
                f"partial entry at byte {pos}: {12 + size} bytes declared, {left} present",
            )
            return
        native = _LEGACY[0]
        if magic != 2 and native is not None:
            # A run of uncompressed legacy messages, one Batch each, read in C up to the first
            # entry it does not decide; that entry is the Python reader's.
            run: list[Batch] = []
            end = native.read_legacy(buf, pos, n, run)
            if run:
                yield from run
                pos = end
                continue
        try:
            if magic == 2:
                yield _decode_v2(buf, pos, size, max_decompressed)
            else:
                yield _decode_legacy(buf, pos, size, max_decompressed)
        except (RecordsError, ValueError, IndexError, struct.error, OverflowError) as exc:
            # Every known fault is turned into a status inside the decoders; this is the last
            # line that keeps one unforeseen fault from losing the rest of the field.
            yield _header_only(
                buf, pos, MALFORMED, f"malformed at byte {pos}: {type(exc).__name__}: {exc}"
            )
        pos += 12 + size


def decode_records(
    data: bytes | bytearray | memoryview | None,
    *,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Batch]:
    """All batches of a records field, in order; see :func:`iter_batches`."""
    return list(iter_batches(data, max_decompressed=max_decompressed))
