"""Kafka's four codecs, as real producers write them, with a cap on decompressed size.

Libraries do the compression work (ISA-L's zlib twin for gzip, cramjam for snappy, lz4 and
zstd); this module only adds what no library handles: snappy-java's "xerial" framing, the LZ4
frame-descriptor checksum that Kafka < 0.10 computed wrongly (KAFKA-3160, still written and
accepted for magic 0), and a memory bound.  The bound matters because record batches come from
untrusted captures and compress extremely well (1 GiB of zeros is 32 KiB of zstd): no call here
ever holds more than about ``cap`` bytes of output (plus one copy when returning it), whatever the
input declares.

* gzip: ``decompressobj`` with ``max_length``, member by member (Java reads concatenated
  members, so do we), from python-isal (Intel's ISA-L), which inflates 2-3x faster than zlib:
  gzip was the records step's largest cost on the benchmark rings (3.6 of 13.9 s in Python).
  Without isal (a platform it has no wheel for), the standard library's zlib does the same.
* snappy: each raw block starts with its uncompressed length, so the total is checked against
  the cap before anything is decompressed.
* lz4 / zstd: cramjam's ``decompress_into`` writes into a caller-sized buffer and fails with
  "failed to write whole buffer" when it is too small, without allocating more.  We start from
  the frame's declared content size (or a guess) and grow the buffer by 4x up to ``cap + 1``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from types import ModuleType

import cramjam

from .errors import CompressionError, DecompressedTooLarge, UnsupportedCodec
from .model import CODEC_NAMES

_inflate: ModuleType
try:
    from isal import isal_zlib as _inflate
except ImportError:  # pragma: no cover - isal is a dependency; zlib reads the same bytes
    _inflate = zlib
_InflateError: type[Exception] = _inflate.error

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024  # snappy-java, kafka-python and aiokafka all cut input at 32 KiB

LZ4_MAGIC = b"\x04\x22\x4d\x18"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

_MIN_GUESS = 64 * 1024
_TOO_SMALL = ("failed to write whole buffer", "smaller than required")

_BE_INT = struct.Struct(">i")


# -- xxh32 ----------------------------------------------------------------------------------------
# Only needed to recompute the one-byte LZ4 header checksum over a descriptor of at most 15 bytes
# (18 for the broken magic-0 variant); the project has no xxhash dependency, and cramjam does not
# expose the hash, so the reference algorithm is written out here.

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """The 32-bit xxHash of ``data`` (the LZ4 frame format's checksum)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                word = int.from_bytes(data[i : i + 4], "little")
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        h = (_rotl((h + int.from_bytes(data[i : i + 4], "little") * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(frame: bytes | memoryview) -> int:
    """Index of the HC byte of an LZ4 frame (the descriptor runs from byte 4 up to it)."""
    if len(frame) < 7 or bytes(frame[:4]) != LZ4_MAGIC:
        raise CompressionError("lz4: not an LZ4 frame (magic 04224d18 missing)")
    flg = frame[4]
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def lz4_header_checksums(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(stored HC, correct HC, KAFKA-3160 HC) of the first frame in ``frame``."""
    hc_at = _lz4_descriptor_end(frame)
    if len(frame) <= hc_at:
        raise CompressionError("lz4: frame ends inside its descriptor")
    correct = (xxh32(bytes(frame[4:hc_at])) >> 8) & 0xFF
    broken = (xxh32(bytes(frame[0:hc_at])) >> 8) & 0xFF
    return frame[hc_at], correct, broken


def _set_lz4_hc(frame: bytes, broken: bool) -> bytes:
    stored, correct, wrong = lz4_header_checksums(frame)
    hc = wrong if broken else correct
    if stored == hc:
        return frame
    hc_at = _lz4_descriptor_end(frame)
    return frame[:hc_at] + bytes((hc,)) + frame[hc_at + 1 :]


# -- decompression --------------------------------------------------------------------------------


def _grow_into(
    fn: Callable[[bytes, memoryview], int], data: bytes, guess: int, cap: int, codec: str
) -> bytes:
    """Decompress with ``fn(data, out)`` into a buffer grown from ``guess`` up to ``cap + 1``."""
    size = min(max(guess, _MIN_GUESS), cap + 1)
    while True:
        buf = bytearray(size)
        try:
            n = int(fn(data, memoryview(buf)))
        except cramjam.DecompressionError as exc:
            text = str(exc)
            if not any(marker in text for marker in _TOO_SMALL):
                prefix = "" if text.startswith(codec) else f"{codec}: "
                raise CompressionError(prefix + text) from None
            if size > cap:
                raise DecompressedTooLarge(
                    f"{codec}: decompressed size exceeds the cap of {cap} bytes"
                ) from None
            size = min(size * 4, cap + 1)
            continue
        if n > cap:
            raise DecompressedTooLarge(f"{codec}: decompressed size exceeds the cap of {cap} bytes")
        del buf[n:]
        return bytes(buf)


def _gunzip(data: bytes, cap: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest = data
    while True:
        d = _inflate.decompressobj(31)
        try:
            chunk = d.decompress(rest, cap + 1 - total)
        except (_InflateError, zlib.error) as exc:
            raise CompressionError(f"gzip: {exc}") from None
        total += len(chunk)
        if total > cap:
            raise DecompressedTooLarge(f"gzip: decompressed size exceeds the cap of {cap} bytes")
        parts.append(chunk)
        if not d.eof:
            raise CompressionError(
                f"gzip: stream ends before its end marker ({total} bytes decompressed)"
            )
        rest = d.unused_data
        if not rest:
            return b"".join(parts)


def _snappy_raw_len(block: bytes | memoryview, what: str) -> int:
    try:
        return int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"snappy: {what}: {exc}") from None


def _unsnappy(data: bytes, cap: int) -> bytes:
    if data[:8] != XERIAL_MAGIC:
        size = _snappy_raw_len(data, "raw block")
        if size > cap:
            raise DecompressedTooLarge(f"snappy: raw block declares {size} bytes, cap is {cap}")
        out = bytearray(size)
        try:
            cramjam.snappy.decompress_raw_into(data, out)
        except cramjam.DecompressionError as exc:
            raise CompressionError(f"snappy: raw block: {exc}") from None
        return bytes(out)
    # xerial: 16-byte header, then (int32 length, raw block) pairs.  First walk the blocks and
    # add up their declared sizes, so a bomb is refused before any output exists.
    if len(data) < 16:
        raise CompressionError(f"snappy: xerial header cut at {len(data)} of 16 bytes")
    view = memoryview(data)
    blocks: list[tuple[memoryview, int]] = []
    total = 0
    pos = 16
    while pos < len(data):
        if data[pos : pos + 8] == XERIAL_MAGIC:  # snappy-java accepts a repeated header
            pos += 16
            continue
        if pos + 4 > len(data):
            raise CompressionError(f"snappy: xerial block length cut at payload byte {pos}")
        (length,) = _BE_INT.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CompressionError(
                f"snappy: xerial block at payload byte {pos - 4} declares {length} bytes, "
                f"{len(data) - pos} left"
            )
        block = view[pos : pos + length]
        size = _snappy_raw_len(block, f"xerial block at payload byte {pos - 4}")
        total += size
        if total > cap:
            raise DecompressedTooLarge(f"snappy: xerial blocks declare over the cap of {cap} bytes")
        blocks.append((block, size))
        pos += length
    out = bytearray(total)
    at = 0
    for block, size in blocks:
        try:
            cramjam.snappy.decompress_raw_into(block, memoryview(out)[at : at + size])
        except cramjam.DecompressionError as exc:
            raise CompressionError(f"snappy: xerial block: {exc}") from None
        at += size
    return bytes(out)


def _unlz4(data: bytes, cap: int, magic: int) -> bytes:
    hc_at = _lz4_descriptor_end(data)
    if len(data) <= hc_at:
        raise CompressionError("lz4: frame ends inside its descriptor")
    if magic == 0:
        # Kafka skips the HC check for magic 0 (writers hashed the magic too); make it right.
        data = _set_lz4_hc(data, broken=False)
    guess = 4 * len(data)
    if data[4] & 0x08:
        declared = int.from_bytes(data[6:14], "little")
        if declared > cap:
            raise DecompressedTooLarge(f"lz4: frame declares {declared} bytes, cap is {cap}")
        guess = declared
    return _grow_into(cramjam.lz4.decompress_into, data, guess, cap, "lz4")


def _zstd_declared_size(data: bytes) -> int | None:
    """The first frame's content size, when its header carries one."""
    if len(data) < 6 or data[:4] != ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or at + width > len(data):
        return None
    value = int.from_bytes(data[at : at + width], "little")
    return value + 256 if width == 2 else value


def _unzstd(data: bytes, cap: int) -> bytes:
    declared = _zstd_declared_size(data)
    if declared is not None and declared > cap:
        raise DecompressedTooLarge(f"zstd: frame declares {declared} bytes, cap is {cap}")
    guess = declared if declared is not None else 4 * len(data)
    return _grow_into(cramjam.zstd.decompress_into, data, guess, cap, "zstd")


def decompress(
    codec: int, data: bytes, *, magic: int, cap: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress one batch payload written with Kafka codec ``codec`` for message ``magic``.

    Raises :class:`UnsupportedCodec` for ids 5-7 (and zstd below magic 2, which Kafka rejects),
    :class:`DecompressedTooLarge` beyond ``cap`` bytes, :class:`CompressionError` otherwise.
    """
    if codec == 1:
        return _gunzip(data, cap)
    if codec == 2:
        return _unsnappy(data, cap)
    if codec == 3:
        return _unlz4(data, cap, magic)
    if codec == 4:
        if magic < 2:
            raise UnsupportedCodec(f"zstd (codec 4) is not defined for magic {magic} messages")
        return _unzstd(data, cap)
    if codec == 0:
        return data
    raise UnsupportedCodec(f"unknown compression codec id {codec}")


# -- compression ----------------------------------------------------------------------------------


def _xerial(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    # At least one block, even for no data: librdkafka and aiokafka take a stream of 20 bytes
    # or less for raw snappy, so a bare header would not read back there.
    for at in range(0, max(len(data), 1), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[at : at + XERIAL_BLOCK]))
        parts.append(_BE_INT.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4(data: bytes, broken_hc: bool) -> bytes:
    # Independent blocks and no content checksum, as Kafka's Java reader requires (cramjam's
    # defaults use linked blocks, which Java rejects).
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(data)
    frame = bytes(compressor.finish())
    return _set_lz4_hc(frame, broken=True) if broken_hc else frame


def compress(
    codec: int, data: bytes, *, snappy_xerial: bool = True, lz4_broken_hc: bool = False
) -> bytes:
    """Compress ``data`` as Kafka producers do.

    Snappy is xerial-framed by default (Java, kafka-python, aiokafka) or one raw block
    (librdkafka); ``lz4_broken_hc`` writes the KAFKA-3160 header checksum that magic 0 uses.
    """
    if codec == 0:
        return data
    if codec == 1:
        return zlib.compress(data, 6, 31)  # gzip container, no mtime: reproducible bytes
    if codec == 2:
        return _xerial(data) if snappy_xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == 3:
        return _lz4(data, lz4_broken_hc)
    if codec == 4:
        return bytes(cramjam.zstd.compress(data, level=3))
    raise UnsupportedCodec(f"cannot compress with codec id {codec} ({CODEC_NAMES.get(codec)})")
