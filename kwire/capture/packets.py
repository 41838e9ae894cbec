"""Link layer, IPv4/IPv6 and TCP headers: from a captured packet to a TCP segment.

Parsed by hand with struct rather than dpkt's packet classes: it is several times faster, and a
packet cut short by the snaplen still yields its sequence numbers and the true payload length.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

# Link types (LINKTYPE_* values as stored in pcap and pcapng files).
LINK_NULL = 0  # BSD loopback: 4-byte address family in the capturing host's byte order
LINK_ETHERNET = 1
LINK_RAW_OPENBSD = 14
LINK_RAW_BSD = 12
LINK_RAW = 101
LINK_LOOP = 108  # OpenBSD loopback: address family in network byte order
LINK_SLL = 113
LINK_IPV4 = 228
LINK_IPV6 = 229
LINK_SLL2 = 276

SUPPORTED_LINKTYPES = {
    LINK_NULL: "BSD loopback (null)",
    LINK_ETHERNET: "Ethernet",
    LINK_RAW_BSD: "raw IP",
    LINK_RAW_OPENBSD: "raw IP",
    LINK_RAW: "raw IP",
    LINK_LOOP: "OpenBSD loopback",
    LINK_SLL: "Linux cooked (SLL)",
    LINK_IPV4: "raw IPv4",
    LINK_IPV6: "raw IPv6",
    LINK_SLL2: "Linux cooked v2 (SLL2)",
}

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
_ETH_VLAN = (0x8100, 0x88A8, 0x9100)
_BSD_AF_INET6 = (24, 28, 30)  # AF_INET6 differs between the BSDs and macOS

TCP_FIN = 0x01
TCP_SYN = 0x02
TCP_RST = 0x04
TCP_ACK = 0x10

_U16 = struct.Struct(">H")
_TCP = struct.Struct(">HHIIBB")

_addr_cache: dict[bytes, str] = {}


def _addr(raw: bytes) -> str:
    s = _addr_cache.get(raw)
    if s is None:
        s = socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)
        if len(_addr_cache) < 65536:
            _addr_cache[raw] = s
    return s


@dataclass(slots=True)
class Segment:
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    # Payload bytes the packet carried but the capture did not keep (snaplen).
    missing: int
    # Where the payload starts in the packet's captured bytes (Packet.data).
    at: int = 0


class Skip(Exception):
    """The packet carries no TCP segment we can use; the message is the summary's reason."""


def _network(linktype: int, data: bytes) -> tuple[int, int]:
    """(ethertype, offset of the network header) for a link-layer frame."""
    if linktype == LINK_ETHERNET:
        if len(data) < 14:
            raise Skip("truncated link header")
        etype = _U16.unpack_from(data, 12)[0]
        off = 14
        while etype in _ETH_VLAN:
            if len(data) < off + 4:
                raise Skip("truncated link header")
            etype = _U16.unpack_from(data, off + 2)[0]
            off += 4
        return etype, off
    if linktype == LINK_SLL:
        if len(data) < 16:
            raise Skip("truncated link header")
        return _U16.unpack_from(data, 14)[0], 16
    if linktype == LINK_SLL2:
        if len(data) < 20:
            raise Skip("truncated link header")
        return _U16.unpack_from(data, 0)[0], 20
    if linktype in (LINK_NULL, LINK_LOOP):
        if len(data) < 4:
            raise Skip("truncated link header")
        fam = data[:4]
        # DLT_NULL stores the family in host order; a family fits in one byte, so look for it.
        family = fam[0] if fam[0] else fam[3]
        if family == socket.AF_INET:
            return ETH_IPV4, 4
        if family in _BSD_AF_INET6 or family == socket.AF_INET6:
            return ETH_IPV6, 4
        raise Skip("not IP")
    if linktype in (LINK_RAW, LINK_RAW_BSD, LINK_RAW_OPENBSD, LINK_IPV4, LINK_IPV6):
        if not data:
            raise Skip("truncated link header")
        version = data[0] >> 4
        if version == 4:
            return ETH_IPV4, 0
        if version == 6:
            return ETH_IPV6, 0
        raise Skip("not IP")
    raise Skip(f"unsupported link type {linktype}")


def decode(linktype: int, data: bytes, orig_len: int) -> Segment:
    """The TCP segment in one captured packet; raises Skip for anything else."""
    etype, off = _network(linktype, data)
    n = len(data)
    if etype == ETH_IPV4:
        if n < off + 20:
            raise Skip("truncated IP header")
        vihl = data[off]
        ihl = (vihl & 0x0F) * 4
        if vihl >> 4 != 4 or ihl < 20:
            raise Skip("bad IP header")
        total = _U16.unpack_from(data, off + 2)[0]
        frag = _U16.unpack_from(data, off + 6)[0]
        if frag & 0x3FFF:
            raise Skip("IP fragment")
        if data[off + 9] != 6:
            raise Skip("not TCP")
        if n < off + ihl:
            raise Skip("truncated IP header")
        src = _addr(data[off + 12 : off + 16])
        dst = _addr(data[off + 16 : off + 20])
        # A zero total length appears for segmentation-offloaded packets: trust the capture.
        ip_end = off + total if total else orig_len
        tcp = off + ihl
    elif etype == ETH_IPV6:
        if n < off + 40:
            raise Skip("truncated IP header")
        if data[off] >> 4 != 6:
            raise Skip("bad IP header")
        plen = _U16.unpack_from(data, off + 4)[0]
        nxt = data[off + 6]
        src = _addr(data[off + 8 : off + 24])
        dst = _addr(data[off + 24 : off + 40])
        ip_end = off + 40 + plen if plen else orig_len
        tcp = off + 40
        while nxt in (0, 43, 60):  # hop-by-hop, routing, destination options
            if n < tcp + 8:
                raise Skip("truncated IP header")
            nxt, hlen = data[tcp], (data[tcp + 1] + 1) * 8
            tcp += hlen
        if nxt == 44:
            raise Skip("IP fragment")
        if nxt != 6:
            raise Skip("not TCP")
    else:
        raise Skip("not IP")
    if n < tcp + 20:
        raise Skip("truncated TCP header")
    sport, dport, seq, ack, doff, flags = _TCP.unpack_from(data, tcp)
    start = tcp + (doff >> 4) * 4
    if start < tcp + 20:
        raise Skip("bad TCP header")
    # The true payload ends where the IP packet ends (Ethernet padding is not payload).
    true_end = max(min(ip_end, orig_len), start)
    kept_end = min(true_end, n)
    payload = data[start:kept_end] if kept_end > start else b""
    missing = true_end - max(kept_end, start)
    return Segment(src, sport, dst, dport, seq, ack, flags, payload, missing, start)
