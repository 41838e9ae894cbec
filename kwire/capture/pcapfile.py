"""Reading pcap and pcapng files packet by packet, with the facts reassembly needs, whole or by
byte ranges.

dpkt's own readers hide the original packet length (needed to spot snaplen truncation), use only
the first pcapng interface and stop silently on a cut file, so the record loop is ours; dpkt
supplies the file and block header formats.

A file is read as one range or as many: `read_head` reads what every range needs from the start
of the file (the pcap file header; pcapng's section byte order and the interfaces described before
the first packet), and `iter_range` yields the packets whose records start in [start, end), and
goes on reading past `end` until it reaches a record where a chain of plausible records starts
(usually the first record past `end`): that is where the next range starts reading, since a range
that starts inside the file resynchronises on exactly such a chain:
it looks for the first offset where a chain of plausible records begins (pcap: capture lengths
within the snap length and the original length, sub-second fields in range, times near the
file's first packet; pcapng: a known block type, a length that is a multiple of 4 and repeated at
the block's end; see CHAIN) and follows the records from there. The whole file is the range [0, size): the
single-process reader and the ranges run the same loop, so the packets of all ranges together
are the whole file's. Each range records where it synchronised and where its last record ended,
so a caller can check that consecutive ranges met (`RangeStats.synced`, `RangeStats.next`).

A corrupt record (a length no packet has) is reported with its byte offset and reading goes on
at the next offset where a chain of plausible records starts, the same rule a range's start uses.
Such an event (and a record cut by the end of the file) is reported by the range whose reading
reaches it, so it is reported once however the file is cut.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import dpkt
import numpy as np
from dpkt import pcap as dpcap
from dpkt import pcapng as dpcapng

# A packet record claiming more than this is corruption, not a packet.
MAX_RECORD = 256 * 1024 * 1024
# Capture times must fit the timestamp column and Python's datetime (years 1 to 9999).
MIN_TS_US = -62_135_596_800_000_000
MAX_TS_US = 253_402_300_799_999_999

_PCAP_MAGICS = {
    # magic as read big-endian -> (byte order, nanosecond timestamps, modified header)
    dpcap.TCPDUMP_MAGIC: (">", False, False),
    dpcap.TCPDUMP_MAGIC_NANO: (">", True, False),
    dpcap.PMUDPCT_MAGIC: ("<", False, False),
    dpcap.PMUDPCT_MAGIC_NANO: ("<", True, False),
    dpcap.MODPCAP_MAGIC: (">", False, True),
    dpcap.PACPDOM_MAGIC: ("<", False, True),
}
_PCAPNG_MAGIC = dpcapng.PCAPNG_BT_SHB
_PCAP_HEADER = 24

# Bytes read ahead from the file at a time (records are cut from this window).
CHUNK = 1 << 20
# Resynchronising: records (or blocks) that must follow one another plausibly from a candidate
# offset (fewer when the file ends first, exactly at a record's end).
CHAIN = 8
# A chain may end sooner where the sequential reader stops or resynchronises (the end of the
# file, a record it cuts short, a corrupt length), but only after this many plausible records.
CHAIN_BEFORE_END = 3
# A resynchronised pcap record's time lies within this of the file's first packet, and each
# record of the chain within DRIFT_S of the one before it.
WINDOW_S = 10 * 365 * 86400
DRIFT_S = 30 * 86400
# pcapng block types a resynchronised chain may hold (with the custom blocks, 0x0BAD/0x40000BAD).
_PCAPNG_TYPES = np.array(
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x0BAD, 0x40000BAD, _PCAPNG_MAGIC], dtype=np.uint32
)


class CaptureFileError(Exception):
    """A file that cannot be read as a capture (not pcap/pcapng, bad header)."""


@dataclass(slots=True)
class Packet:
    ts_us: int
    linktype: int
    data: bytes
    orig_len: int
    # The byte offset of `data` in its file (-1 when not read from a file).
    at: int = -1


@dataclass
class FileStats:
    path: str
    format: str = ""
    size: int = 0
    packets: int = 0
    linktypes: set[int] = field(default_factory=set)
    # What was unusual (the file ends inside a record, a corrupt record skipped), in file order.
    warnings: list[str] = field(default_factory=list)
    # Where the range's first record starts and where its last one ends (None: no record).
    synced: int | None = None
    next: int | None = None

    @property
    def warning(self) -> str | None:
        return "; ".join(self.warnings) if self.warnings else None


@dataclass(slots=True)
class _Interface:
    linktype: int
    # Timestamp units per second, and a whole-second offset to add (if_tsresol, if_tsoffset).
    units: int = 1_000_000
    offset_s: int = 0


@dataclass
class Head:
    """What every range of a file needs from the file's start."""

    format: str  # "pcap" or "pcapng"
    size: int
    data_start: int  # the first record (pcap) or the first packet block (pcapng)
    first_ts: int | None = None  # the first packet's time in microseconds
    # pcap
    order: str = "<"
    nano: bool = False
    linktype: int = 0
    snaplen: int = 0
    record: struct.Struct = field(default_factory=lambda: struct.Struct("<IIII"))
    # pcapng: the section's byte order and its interfaces, as they stand at data_start
    le: bool = True
    ifaces: list[_Interface] = field(default_factory=list)
    linktypes: set[int] = field(default_factory=set)


class Source:
    """Positional reads of a file of known size through a read-ahead window."""

    def __init__(self, f: BinaryIO, size: int | None = None) -> None:
        self.f = f
        self.size = _size_of(f) if size is None else size
        self.buf = b""
        self.at = 0

    def get(self, pos: int, n: int) -> bytes:
        """Up to n bytes at pos (fewer at the end of the file); never allocates more than the
        file holds, so a corrupt length of 200 MB in a 1 kB file costs nothing."""
        off = pos - self.at
        if 0 <= off and off + n <= len(self.buf):
            return self.buf[off : off + n]
        n = max(0, min(n, self.size - pos))
        if n == 0:
            return b""
        want = min(max(n, CHUNK), self.size - pos)
        self.f.seek(pos)
        data = self.f.read(want)
        self.buf, self.at = data, pos
        return data[:n]


def _size_of(f: BinaryIO) -> int:
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        here = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(here)
        return end


def looks_like_capture(path: str) -> bool:
    """Whether a file starts with a pcap or pcapng magic number."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return is_capture_head(head)


def is_capture_head(head: bytes) -> bool:
    """Whether four bytes are a pcap or pcapng magic number."""
    return len(head) == 4 and struct.unpack(">I", head)[0] in (_PCAPNG_MAGIC, *_PCAP_MAGICS)


def first_timestamp(path: str) -> int | None:
    """The first packet's capture time in microseconds, or None (used to order ring files)."""
    try:
        with open(path, "rb") as f:
            return read_head(Source(f), FileStats(path)).first_ts
    except (CaptureFileError, OSError):
        return None


def iter_packets(f: BinaryIO, stats: FileStats) -> Iterator[Packet]:
    """The packets of an open capture file; CaptureFileError if it cannot be read at all."""
    src = Source(f)
    stats.size = stats.size or src.size
    head = read_head(src, stats)
    for _, packet in iter_range(src, head, stats, 0, src.size):
        yield packet


def read_head(src: Source, stats: FileStats) -> Head:
    """The file's format and the context every range needs; CaptureFileError if the file is not
    a readable capture."""
    try:
        return _read_head(src, stats)
    except (struct.error, ValueError, OverflowError, IndexError, dpkt.UnpackError) as e:
        raise CaptureFileError(f"unreadable {stats.format or 'capture'} header: {e}") from None


def iter_range(
    src: Source, head: Head, stats: FileStats, start: int, end: int
) -> Iterator[tuple[int, Packet]]:
    """(byte offset, packet) for every packet record starting in [start, end)."""
    try:
        if head.format == "pcap":
            yield from _pcap_range(src, head, stats, start, end)
        else:
            yield from _pcapng_range(src, head, stats, start, end)
    except (struct.error, ValueError, OverflowError, IndexError, dpkt.UnpackError) as e:
        # A corruption the checks did not foresee: still a clean, located error.
        raise CaptureFileError(
            f"unreadable {head.format} data after packet {stats.packets}: {e}"
        ) from None


# -- the file's head ---------------------------------------------------------------------------


def _read_head(src: Source, stats: FileStats) -> Head:
    magic_bytes = src.get(0, 4)
    if len(magic_bytes) < 4:
        raise CaptureFileError("empty or too short to be a capture file")
    (magic,) = struct.unpack(">I", magic_bytes)
    if magic in _PCAP_MAGICS:
        stats.format = "pcap"
        order, nano, modified = _PCAP_MAGICS[magic]
        raw = src.get(0, _PCAP_HEADER)
        if len(raw) < _PCAP_HEADER:
            raise CaptureFileError("pcap file header is cut short")
        hdr = dpcap.LEFileHdr(raw) if order == "<" else dpcap.FileHdr(raw)
        linktype = hdr.linktype & 0xFFFF  # upper bits may carry FCS information
        stats.linktypes.add(linktype)
        head = Head(
            "pcap",
            src.size,
            _PCAP_HEADER,
            order=order,
            nano=nano,
            linktype=linktype,
            snaplen=hdr.snaplen,
            record=struct.Struct(order + ("IIIIIHBB" if modified else "IIII")),
            linktypes={linktype},
        )
        first = src.get(_PCAP_HEADER, head.record.size)
        if len(first) == head.record.size:
            sec, frac = head.record.unpack(first)[:2]
            head.first_ts = sec * 1_000_000 + frac // (1000 if nano else 1)
        return head
    if magic == _PCAPNG_MAGIC:
        stats.format = "pcapng"
        return _pcapng_head(src, stats)
    raise CaptureFileError(
        f"not a pcap or pcapng file (starts with bytes {magic_bytes.hex()}; gzip-compressed or "
        "other formats must be converted first, e.g. with editcap)"
    )


def _pcapng_head(src: Source, stats: FileStats) -> Head:
    """Walks the blocks from the start to the first packet block: the section's byte order and
    the interfaces described so far."""
    head = Head("pcapng", src.size, src.size)
    ctx = _Context(True, [])
    pos = 0
    while pos < src.size:
        block = _block_at(src, pos, ctx, first=pos == 0)
        if block is None:
            break
        btype, blen, body = block
        if btype in (dpcapng.PCAPNG_BT_EPB, dpcapng.PCAPNG_BT_PB, dpcapng.PCAPNG_BT_SPB):
            head.data_start = pos
            if btype != dpcapng.PCAPNG_BT_SPB:
                ts = _epb_time(btype, body, ctx)
                head.first_ts = ts
            break
        _context_block(btype, body, ctx, stats)
        pos += blen
    head.le, head.ifaces = ctx.le, list(ctx.ifaces)
    head.linktypes = {i.linktype for i in ctx.ifaces}
    if head.data_start == src.size:
        head.data_start = pos
    return head


@dataclass
class _Context:
    le: bool
    ifaces: list[_Interface]


def _block_at(
    src: Source, pos: int, ctx: _Context, first: bool = False
) -> tuple[int, int, bytes] | None:
    """(type, length, the bytes after the 8-byte header) of a whole block at pos, else None. A
    section header sets ctx.le; the head's first block must be one (CaptureFileError)."""
    head = src.get(pos, 8)
    if len(head) < 8:
        if first:
            raise CaptureFileError("pcapng section header is cut short")
        return None
    btype_be = struct.unpack_from(">I", head)[0]
    if btype_be == _PCAPNG_MAGIC:
        bom = src.get(pos + 8, 4)
        if bom == b"\x4d\x3c\x2b\x1a":
            le = True
        elif bom == b"\x1a\x2b\x3c\x4d":
            le = False
        elif len(bom) < 4:
            if first:
                raise CaptureFileError("pcapng section header is cut short")
            return None
        else:
            raise CaptureFileError("pcapng section header has an unknown byte-order magic")
        btype = _PCAPNG_MAGIC
        blen = struct.unpack_from("<I" if le else ">I", head, 4)[0]
    else:
        if first:
            raise CaptureFileError("pcapng file does not start with a section header")
        le = ctx.le
        btype, blen = struct.unpack("<II" if le else ">II", head)
    if blen < 12 or blen % 4 or blen > MAX_RECORD:
        if first:
            raise CaptureFileError(f"pcapng section header has a bad length {blen}")
        return None
    body = src.get(pos + 8, blen - 8)
    if len(body) < blen - 8:
        if first:
            raise CaptureFileError("pcapng section header is cut short")
        return None
    if struct.unpack_from("<I" if le else ">I", body, blen - 12)[0] != blen:
        # The trailing copy of the length disagrees: which one is right cannot be known.
        if first:
            raise CaptureFileError("pcapng section header's trailing length does not match")
        return None
    if btype == _PCAPNG_MAGIC:
        ctx.le = le
    return btype, blen, body


def _context_block(btype: int, body: bytes, ctx: _Context, stats: FileStats) -> None:
    """A section header resets the interfaces; an interface description adds one."""
    if btype == _PCAPNG_MAGIC:
        ctx.ifaces = []
    elif btype == dpcapng.PCAPNG_BT_IDB:
        prefix = struct.pack("<II" if ctx.le else ">II", btype, len(body) + 8)
        iface = _interface(prefix + body, ctx.le)
        ctx.ifaces.append(iface)
        stats.linktypes.add(iface.linktype)


def _interface(block: bytes, le: bool) -> _Interface:
    try:
        idb = (
            dpcapng.InterfaceDescriptionBlockLE(block)
            if le
            else dpcapng.InterfaceDescriptionBlock(block)
        )
    except (dpkt.UnpackError, struct.error, UnicodeDecodeError) as e:
        raise CaptureFileError(f"bad pcapng interface description block: {e}") from None
    iface = _Interface(idb.linktype)
    for opt in idb.opts:
        if opt.code == dpcapng.PCAPNG_OPT_IF_TSRESOL and opt.data:
            v = opt.data[0]
            iface.units = 2 ** (v & 0x7F) if v & 0x80 else 10 ** (v & 0x7F)
        elif opt.code == dpcapng.PCAPNG_OPT_IF_TSOFFSET and len(opt.data) == 8:
            iface.offset_s = struct.unpack("<q" if le else ">q", opt.data)[0]
    return iface


def _epb_time(btype: int, body: bytes, ctx: _Context) -> int | None:
    if len(body) < 24:
        return None
    if btype == dpcapng.PCAPNG_BT_EPB:
        iface_id, ts_hi, ts_lo = struct.unpack_from("<III" if ctx.le else ">III", body)
    else:
        iface_id, _drops, ts_hi, ts_lo = struct.unpack_from("<HHII" if ctx.le else ">HHII", body)
    if iface_id >= len(ctx.ifaces):
        return None
    iface = ctx.ifaces[iface_id]
    return iface.offset_s * 1_000_000 + ((ts_hi << 32) | ts_lo) * 1_000_000 // iface.units


def _skipped(stats: FileStats, problem: str, found: int | None) -> int | None:
    """Records a corrupt record and where reading resumes (None: nothing readable after it)."""
    resumed = f"reading resumed at byte {found}" if found is not None else "stopped"
    stats.warnings.append(f"{problem}; {resumed}")
    return found


# -- pcap --------------------------------------------------------------------------------------


def _pcap_range(
    src: Source, head: Head, stats: FileStats, start: int, end: int
) -> Iterator[tuple[int, Packet]]:
    rec = head.record
    rsize = rec.size
    divisor = 1000 if head.nano else 1
    frac_limit, snap = _pcap_limits(head)
    linktype = head.linktype
    stats.linktypes.add(linktype)
    pos: int | None = head.data_start if start <= head.data_start else None
    if pos is None:
        pos = _pcap_resync(src, head, start, end)
    stats.synced = pos if pos is not None and pos < end else None
    size = src.size
    # A record that is not a packet (corrupt, or cut by the end of the file) is handled by the
    # range whose reading reaches it, even past `end`: the next range's resynchronisation passes
    # over it without a word, so every event is reported once and both agree where reading goes on.
    while pos is not None:
        raw = src.get(pos, rsize)
        if not raw:
            break
        if len(raw) < rsize:
            stats.warnings.append(
                f"truncated: file ends inside the header of the packet record at byte {pos}"
            )
            pos = size
            break
        sec, frac, caplen, origlen = rec.unpack(raw)[:4]
        if caplen > MAX_RECORD:
            found = _pcap_resync(src, head, pos + 1, size)
            problem = f"corrupt packet record at byte {pos}: captured length {caplen}"
            pos = _skipped(stats, problem, found)
            continue
        if pos + rsize + caplen > size:
            stats.warnings.append(
                f"truncated: file ends inside the packet record at byte {pos} "
                f"({size - pos - rsize} of {caplen} bytes)"
            )
            pos = size
            break
        if pos >= end and _pcap_chain(src, head, pos, frac_limit, snap):
            break  # where the next range's resynchronisation starts reading
        data = src.get(pos + rsize, caplen)
        stats.packets += 1
        yield pos, Packet(
            sec * 1_000_000 + frac // divisor, linktype, data, max(origlen, caplen), pos + rsize
        )
        pos += rsize + caplen
    stats.next = pos


def _pcap_limits(head: Head) -> tuple[int, int]:
    """The sub-second field's bound, and the largest captured length a resynchronised record may
    have (some writers keep packets longer than the snap length they declare: 256 kB at least)."""
    frac_limit = 1_000_000_000 if head.nano else 1_000_000
    return frac_limit, max(head.snaplen, 262144) if head.snaplen > 0 else MAX_RECORD


def _pcap_resync(src: Source, head: Head, start: int, end: int) -> int | None:
    """The first offset in [start, end) where a chain of plausible records starts, else None."""
    rsize = head.record.size
    dtype = np.dtype(head.order + "u4")
    frac_limit, snap = _pcap_limits(head)
    anchor = (head.first_ts or 0) // 1_000_000
    pos = start
    while pos < end:
        span = min(CHUNK, end - pos)
        window = src.get(pos, span + rsize)
        if len(window) < rsize:
            return None
        candidates = []
        for shift in range(4):
            words = (len(window) - shift) // 4
            if words < 4:
                continue
            a = np.frombuffer(window, dtype=dtype, count=words, offset=shift)
            sec, frac, cap, orig = a[:-3], a[1:-2], a[2:-1], a[3:]
            ok = (
                (frac < frac_limit)
                & (cap <= snap)
                & (cap <= orig)
                & (orig <= MAX_RECORD)
                & (np.abs(sec.astype(np.int64) - anchor) <= WINDOW_S)
            )
            idx = np.nonzero(ok)[0] * 4 + shift
            candidates.append(idx[idx < span])
        for off in np.sort(np.concatenate(candidates)) if candidates else ():
            p = pos + int(off)
            if _pcap_chain(src, head, p, frac_limit, snap):
                return p
        pos += span
    return None


def _pcap_chain(src: Source, head: Head, pos: int, frac_limit: int, snap: int) -> bool:
    """Whether CHAIN plausible records follow one another from pos. The chain may end sooner
    where the sequential reader stops or skips: the end of the file, a record the file cuts
    short, a corrupt length (after at least one plausible record)."""
    rec = head.record
    prev: int | None = None
    for n in range(CHAIN):
        if pos == src.size:
            return n > 0
        raw = src.get(pos, rec.size)
        if len(raw) < rec.size:
            return n >= CHAIN_BEFORE_END
        sec, frac, cap, orig = rec.unpack(raw)[:4]
        if cap > MAX_RECORD or pos + rec.size + cap > src.size:
            return n >= CHAIN_BEFORE_END
        if frac >= frac_limit or cap > snap or cap > orig or orig > MAX_RECORD:
            return False
        if prev is not None and abs(sec - prev) > DRIFT_S:
            return False
        prev = sec
        pos += rec.size + cap
    return True


# -- pcapng ------------------------------------------------------------------------------------


def _pcapng_range(
    src: Source, head: Head, stats: FileStats, start: int, end: int
) -> Iterator[tuple[int, Packet]]:
    ctx = _Context(head.le, list(head.ifaces))
    stats.linktypes.update(head.linktypes)
    exact = start <= head.data_start
    pos: int | None = head.data_start if exact else _pcapng_resync(src, ctx, start, end)
    stats.synced = pos if pos is not None and pos < end else None
    size = src.size
    last_ts = head.first_ts or 0
    # As for pcap: a corrupt or cut block is handled by the range whose reading reaches it.
    while pos is not None:
        hdr = src.get(pos, 8)
        if not hdr:
            break
        if len(hdr) < 8:
            stats.warnings.append(f"truncated: file ends inside the block at byte {pos}")
            pos = size
            break
        le = ctx.le
        block = _block_at(src, pos, ctx)
        if block is None:
            blen_raw = struct.unpack_from("<I" if ctx.le else ">I", hdr, 4)[0]
            if pos + blen_raw > size and 12 <= blen_raw <= MAX_RECORD and not blen_raw % 4:
                stats.warnings.append(f"truncated: file ends inside the block at byte {pos}")
                pos = size
                break
            found = _pcapng_resync(src, ctx, pos + 4, size)
            what = f"corrupt block at byte {pos}: length {blen_raw}"
            trailer = src.get(pos + blen_raw - 4, 4) if 12 <= blen_raw <= MAX_RECORD else b""
            if len(trailer) == 4:
                copy = struct.unpack("<I" if ctx.le else ">I", trailer)[0]
                if copy != blen_raw:
                    what += f", trailing length {copy}"
            pos = _skipped(stats, what, found)
            continue
        if pos >= end:
            ctx.le = le
            if _pcapng_chain(src, ctx, pos):
                break  # where the next range's resynchronisation starts reading
            block = _block_at(src, pos, ctx)
            assert block is not None
        btype, blen, body = block
        if btype in (dpcapng.PCAPNG_BT_EPB, dpcapng.PCAPNG_BT_PB):
            if len(body) < 24:  # 20 bytes of fixed fields and the trailing length
                problem = "too short"
            else:
                if btype == dpcapng.PCAPNG_BT_EPB:
                    iface_id, ts_hi, ts_lo, caplen, pkt_len = struct.unpack_from(
                        "<IIIII" if ctx.le else ">IIIII", body
                    )
                else:
                    iface_id, _drops, ts_hi, ts_lo, caplen, pkt_len = struct.unpack_from(
                        "<HHIIII" if ctx.le else ">HHIIII", body
                    )
                if iface_id >= len(ctx.ifaces) and not exact:
                    # An interface described after the file's head: learn the context exactly.
                    ctx = _walk_context(src, head, pos, stats)
                    exact = True
                    continue
                problem = ""
                if iface_id >= len(ctx.ifaces) or 20 + caplen > len(body):
                    problem = "bad interface or length"
                else:
                    iface = ctx.ifaces[iface_id]
                    ticks = (ts_hi << 32) | ts_lo
                    ts_us = iface.offset_s * 1_000_000 + ticks * 1_000_000 // iface.units
                    if not MIN_TS_US <= ts_us <= MAX_TS_US:
                        problem = f"timestamp {ts_us} us is outside years 1-9999"
            if problem:
                stats.warnings.append(f"corrupt packet block at byte {pos}: {problem}; skipped")
                pos += blen
                continue
            last_ts = ts_us
            stats.packets += 1
            data = body[20 : 20 + caplen]
            yield pos, Packet(ts_us, iface.linktype, data, max(pkt_len, caplen), pos + 28)
        elif btype == dpcapng.PCAPNG_BT_SPB:
            if not ctx.ifaces or len(body) < 8:
                stats.warnings.append(
                    f"corrupt packet block at byte {pos}: no interface or too short; skipped"
                )
                pos += blen
                continue
            (pkt_len,) = struct.unpack_from("<I" if ctx.le else ">I", body)
            caplen = min(pkt_len, len(body) - 8)
            stats.packets += 1
            # Simple packet blocks carry no timestamp: reuse the previous packet's.
            yield pos, Packet(
                last_ts, ctx.ifaces[0].linktype, body[4 : 4 + caplen], pkt_len, pos + 12
            )
        else:
            # section headers and interface descriptions change the context; name resolution,
            # statistics and custom blocks carry no packets
            _context_block(btype, body, ctx, stats)
        pos += blen
    stats.next = pos


def _walk_context(src: Source, head: Head, target: int, stats: FileStats) -> _Context:
    """The section and interfaces in force at `target`, by walking the block headers from the
    file's first packet block (only when a range meets an interface its head did not describe)."""
    ctx = _Context(head.le, list(head.ifaces))
    pos = head.data_start
    while pos < target:
        block = _block_at(src, pos, ctx)
        if block is None:
            raise CaptureFileError(f"pcapng blocks do not lead to byte {target}")
        btype, blen, body = block
        _context_block(btype, body, ctx, stats)
        pos += blen
    if pos != target:
        raise CaptureFileError(f"pcapng blocks do not lead to byte {target}")
    return ctx


def _pcapng_resync(src: Source, ctx: _Context, start: int, end: int) -> int | None:
    """The first 4-aligned offset in [start, end) where a chain of plausible blocks starts."""
    dtype = np.dtype(("<" if ctx.le else ">") + "u4")
    pos = (start + 3) // 4 * 4
    while pos < end:
        span = min(CHUNK, end - pos)
        window = src.get(pos, span + 8)
        words = len(window) // 4
        if words < 3:
            return None
        a = np.frombuffer(window, dtype=dtype, count=words)
        btype, blen = a[:-1], a[1:]
        ok = np.isin(btype, _PCAPNG_TYPES) & (blen % 4 == 0) & (blen >= 12) & (blen <= MAX_RECORD)
        for i in np.nonzero(ok)[0]:
            off = int(i) * 4
            if off >= span:
                break
            if _pcapng_chain(src, ctx, pos + off):
                return pos + off
        pos += span
    return None


def _pcapng_chain(src: Source, ctx: _Context, pos: int) -> bool:
    """Whether CHAIN whole blocks, each with its length repeated at its end, follow one another
    from pos (or end the file exactly)."""
    fmt = "<II" if ctx.le else ">II"
    tail = "<I" if ctx.le else ">I"
    for n in range(CHAIN):
        if pos == src.size:
            return n > 0
        hdr = src.get(pos, 8)
        if len(hdr) < 8:
            return n >= CHAIN_BEFORE_END
        btype, blen = struct.unpack(fmt, hdr)
        if btype == _PCAPNG_MAGIC and n > 0:
            return True  # a new section: its own byte order follows
        if blen < 12 or blen % 4 or blen > MAX_RECORD or pos + blen > src.size:
            return n >= CHAIN_BEFORE_END  # where the sequential reader stops or resynchronises
        if btype not in _KNOWN_TYPES:
            return False
        trailer = src.get(pos + blen - 4, 4)
        if struct.unpack(tail, trailer)[0] != blen:
            return False
        pos += blen
    return True


_KNOWN_TYPES = frozenset(int(t) for t in _PCAPNG_TYPES)


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
