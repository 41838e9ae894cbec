"""Reading pcap and pcapng files packet by packet, with the facts reassembly needs.

dpkt's own readers hide the original packet length (needed to spot snaplen truncation), use only
the first pcapng interface and stop silently on a cut file, so the record loop is ours; dpkt
supplies the file and block header formats.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import dpkt
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


# Reads up to this size go straight to the file; larger ones are first cut to what the file holds.
_SMALL_READ = 1 << 16


def _bounded_reader(f: BinaryIO) -> Callable[[int], bytes]:
    """f.read, except that a large read is cut to the bytes left in the file first: Python's
    buffered read(n) allocates n bytes up front, so a corrupt length of 200 MB in a 1 KB file
    would otherwise allocate 200 MB before finding out that the file is short."""
    read = f.read

    def left() -> int | None:
        try:
            return os.fstat(f.fileno()).st_size - f.tell()
        except (AttributeError, OSError, ValueError):
            try:
                here = f.tell()
                end = f.seek(0, os.SEEK_END)
                f.seek(here)
                return end - here
            except (AttributeError, OSError, ValueError):
                return None

    def bounded(n: int) -> bytes:
        if n > _SMALL_READ:
            remaining = left()
            if remaining is not None and remaining < n:
                return read(max(remaining, 0))
        return read(n)

    return bounded


class CaptureFileError(Exception):
    """A file that cannot be read as a capture (not pcap/pcapng, bad header)."""


@dataclass(slots=True)
class Packet:
    ts_us: int
    linktype: int
    data: bytes
    orig_len: int


@dataclass
class FileStats:
    path: str
    format: str = ""
    size: int = 0
    packets: int = 0
    linktypes: set[int] = field(default_factory=set)
    # Set when the file ends inside a record or has a corrupt record: what was read is kept.
    warning: str | None = None


def first_timestamp(path: str) -> int | None:
    """The first packet's capture time in microseconds, or None (used to order ring files)."""
    try:
        with open(path, "rb") as f:
            for packet in iter_packets(f, FileStats(path)):
                return packet.ts_us
    except (CaptureFileError, OSError):
        return None
    return None


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


def iter_packets(f: BinaryIO, stats: FileStats) -> Iterator[Packet]:
    """The packets of an open capture file; CaptureFileError if it cannot be read at all."""
    try:
        yield from _iter_packets(f, stats)
    except (struct.error, ValueError, OverflowError, IndexError, dpkt.UnpackError) as e:
        # A corruption the checks above did not foresee: still a clean, located error.
        raise CaptureFileError(
            f"unreadable {stats.format or 'capture'} data after packet {stats.packets}: {e}"
        ) from None


def _iter_packets(f: BinaryIO, stats: FileStats) -> Iterator[Packet]:
    head = f.read(4)
    if len(head) < 4:
        raise CaptureFileError("empty or too short to be a capture file")
    f.seek(0)
    (magic,) = struct.unpack(">I", head)
    if magic == _PCAPNG_MAGIC:
        stats.format = "pcapng"
        yield from _iter_pcapng(f, stats)
    elif magic in _PCAP_MAGICS:
        stats.format = "pcap"
        yield from _iter_pcap(f, stats, *_PCAP_MAGICS[magic])
    else:
        raise CaptureFileError(
            f"not a pcap or pcapng file (starts with bytes {head.hex()}; gzip-compressed or "
            "other formats must be converted first, e.g. with editcap)"
        )


def _iter_pcap(
    f: BinaryIO, stats: FileStats, order: str, nano: bool, modified: bool
) -> Iterator[Packet]:
    raw = f.read(dpcap.FileHdr.__hdr_len__)
    if len(raw) < dpcap.FileHdr.__hdr_len__:
        raise CaptureFileError("pcap file header is cut short")
    hdr = dpcap.LEFileHdr(raw) if order == "<" else dpcap.FileHdr(raw)
    linktype = hdr.linktype & 0xFFFF  # upper bits may carry FCS information
    stats.linktypes.add(linktype)
    rec = struct.Struct(order + ("IIIIIHBB" if modified else "IIII"))
    divisor = 1000 if nano else 1
    read = _bounded_reader(f)
    n = 0
    while True:
        raw = read(rec.size)
        if not raw:
            return
        if len(raw) < rec.size:
            stats.warning = f"truncated: file ends inside the header of packet record {n + 1}"
            return
        sec, frac, caplen, origlen = rec.unpack(raw)[:4]
        if caplen > MAX_RECORD:
            stats.warning = f"corrupt packet record {n + 1}: captured length {caplen}; stopped"
            return
        data = read(caplen)
        if len(data) < caplen:
            stats.warning = (
                f"truncated: file ends inside packet record {n + 1} "
                f"({len(data)} of {caplen} bytes)"
            )
            return
        n += 1
        stats.packets = n
        yield Packet(sec * 1_000_000 + frac // divisor, linktype, data, max(origlen, caplen))


@dataclass(slots=True)
class _Interface:
    linktype: int
    # Timestamp units per second, and a whole-second offset to add (if_tsresol, if_tsoffset).
    units: int = 1_000_000
    offset_s: int = 0


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


def _iter_pcapng(f: BinaryIO, stats: FileStats) -> Iterator[Packet]:
    read = _bounded_reader(f)
    le = True
    ifaces: list[_Interface] = []
    blocks = 0
    last_ts = 0
    while True:
        head = read(8)
        if not head:
            return
        if len(head) < 8:
            stats.warning = f"truncated: file ends inside block {blocks + 1}"
            return
        btype_be, blen_be = struct.unpack(">II", head)
        if btype_be == _PCAPNG_MAGIC:
            # A section header: its byte-order magic decides how to read everything after it.
            bom = read(4)
            if len(bom) < 4:
                stats.warning = "truncated: file ends inside a section header"
                return
            if bom == b"\x4d\x3c\x2b\x1a":
                le = True
            elif bom == b"\x1a\x2b\x3c\x4d":
                le = False
            else:
                raise CaptureFileError("pcapng section header has an unknown byte-order magic")
            blen = struct.unpack("<I" if le else ">I", head[4:])[0]
            rest_len = blen - 12
            prefix = head + bom
            ifaces = []
        else:
            if blocks == 0:
                raise CaptureFileError("pcapng file does not start with a section header")
            btype, blen = struct.unpack("<II" if le else ">II", head)
            rest_len = blen - 8
            prefix = head
        if blen < 12 or blen % 4 or blen > MAX_RECORD:
            if blocks == 0:
                raise CaptureFileError(f"pcapng section header has a bad length {blen}")
            stats.warning = f"corrupt block {blocks + 1}: length {blen}; stopped"
            return
        body = read(rest_len)
        if len(body) < rest_len:
            if blocks == 0:
                raise CaptureFileError("pcapng section header is cut short")
            stats.warning = f"truncated: file ends inside block {blocks + 1}"
            return
        blocks += 1
        if btype_be == _PCAPNG_MAGIC:
            continue
        if btype == dpcapng.PCAPNG_BT_IDB:
            iface = _interface(prefix + body, le)
            ifaces.append(iface)
            stats.linktypes.add(iface.linktype)
        elif btype in (dpcapng.PCAPNG_BT_EPB, dpcapng.PCAPNG_BT_PB):
            if len(body) < 24:  # 20 bytes of fixed fields and the trailing length
                stats.warning = f"corrupt packet block {blocks}: too short; stopped"
                return
            if btype == dpcapng.PCAPNG_BT_EPB:
                iface_id, ts_hi, ts_lo, caplen, pkt_len = struct.unpack_from(
                    "<IIIII" if le else ">IIIII", body
                )
            else:
                iface_id, _drops, ts_hi, ts_lo, caplen, pkt_len = struct.unpack_from(
                    "<HHIIII" if le else ">HHIIII", body
                )
            if iface_id >= len(ifaces) or 20 + caplen > len(body):
                stats.warning = f"corrupt packet block {blocks}: bad interface or length; stopped"
                return
            iface = ifaces[iface_id]
            ticks = (ts_hi << 32) | ts_lo
            ts_us = iface.offset_s * 1_000_000 + ticks * 1_000_000 // iface.units
            if not MIN_TS_US <= ts_us <= MAX_TS_US:
                stats.warning = (
                    f"corrupt packet block {blocks}: timestamp {ts_us} us is outside years "
                    "1-9999; stopped"
                )
                return
            last_ts = ts_us
            stats.packets += 1
            yield Packet(ts_us, iface.linktype, body[20 : 20 + caplen], max(pkt_len, caplen))
        elif btype == dpcapng.PCAPNG_BT_SPB:
            if not ifaces or len(body) < 8:
                stats.warning = f"corrupt packet block {blocks}: no interface or too short; stopped"
                return
            (pkt_len,) = struct.unpack_from("<I" if le else ">I", body)
            caplen = min(pkt_len, len(body) - 8)
            stats.packets += 1
            # Simple packet blocks carry no timestamp: reuse the previous packet's.
            yield Packet(last_ts, ifaces[0].linktype, body[4 : 4 + caplen], pkt_len)
        # other blocks (name resolution, statistics, custom) carry no packets


def file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
