"""A corpus of hostile captures, made from one real capture: broken and adversarial files that
the capture readers must read or report in one line, never crash on, hang on, or grow on.

    python scripts/capture/make_hostile.py OUT_DIR [--flood N]

Every case is a directory of its own under OUT_DIR (a ring is several files) holding the same
traffic as the base capture (tests/data/capture/mock_group_classic.pcap, Ethernet), damaged or
dressed one way. `make()` returns what each case is; tests/capture/test_hostile.py says what the
readers must do with it. Nothing here is random but `garbage` (seeded): the corpus is the same on
every run, a few hundred kB in all (`--flood N`: N fake SYNs before the traffic, 70 bytes each,
for the memory figure of a real flood).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "tests" / "data" / "capture" / "mock_group_classic.pcap"
GIGA4 = 0xFFFFFFF0  # a record header's captured length of almost 4 GB

CASES = {
    "ring_with_garbage": "a ring of 4 files: the first half, an empty file, 4 kB of garbage, the "
    "second half",
    "giant_record": "one record header in the middle claims a captured length of 4 GB",
    "caplen_over_snaplen": "a file with snaplen 256 whose records are longer than 256 bytes",
    "pcapng_blocks": "pcapng: two interfaces (Ethernet and raw IP) carrying alternate packets, an "
    "unknown block type, a block claiming 1 GB, a block whose trailer does not match, and a "
    "last block cut short",
    "nanosecond_swapped": "big-endian pcap with nanosecond timestamps",
    "vlan_qinq": "packets alternately in an 802.1Q tag and in QinQ (802.1ad + 802.1Q)",
    "ipv6_ext": "the traffic over IPv6 with hop-by-hop and destination-options headers before TCP",
    "fragments": "five data packets each cut into two IPv4 fragments",
    "not_kafka": "an HTTP exchange on the broker port beside the Kafka traffic",
    "syn_flood": "fake SYNs from as many source ports before the traffic",
    "seq_wrap": "every connection's sequence numbers wrap past 2^32 mid-stream",
}


def _read(path: Path) -> tuple[int, list[tuple[int, bytes]]]:
    sys.path.insert(0, str(ROOT))
    from kwire.capture import pcapfile

    with open(path, "rb") as f:
        stats = pcapfile.FileStats(str(path))
        packets = [(p.ts_us, bytes(p.data)) for p in pcapfile.iter_packets(f, stats)]
    (linktype,) = stats.linktypes
    return linktype, packets


def _pcap(
    path: Path,
    packets: list[tuple[int, bytes]],
    linktype: int = 1,
    snaplen: int = 262144,
    order: str = "<",
    nanos: bool = False,
) -> list[int]:
    """Writes a classic pcap; returns each record's byte offset."""
    offsets = []
    with open(path, "wb") as f:
        magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
        f.write(struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))
        pos = 24
        for ts, data in packets:
            frac = (ts % 1_000_000) * (1000 if nanos else 1)
            kept = data[:snaplen]
            f.write(struct.pack(order + "IIII", ts // 1_000_000, frac, len(kept), len(data)))
            f.write(kept)
            offsets.append(pos)
            pos += 16 + len(kept)
    return offsets


def _block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", kind, n) + body + struct.pack("<I", n)


def _epb(interface: int, ts: int, data: bytes) -> bytes:
    body = struct.pack("<IIIII", interface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
    return _block(6, body + data)


def _ip(packet: bytes) -> tuple[int, bytes]:
    """(ethertype, network packet) of an Ethernet packet."""
    return struct.unpack_from(">H", packet, 12)[0], packet[14:]


def _checksum(data: bytes) -> int:
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _fragments(packet: bytes) -> list[bytes]:
    """An Ethernet/IPv4 packet cut into two fragments at 8 bytes of payload past the header."""
    eth, ip = packet[:14], packet[14:]
    ihl = (ip[0] & 0x0F) * 4
    payload = ip[ihl:]
    first, second = payload[:8], payload[8:]
    out = []
    for chunk, offset, more in ((first, 0, 0x2000), (second, 1, 0)):
        hdr = bytearray(ip[:ihl])
        struct.pack_into(">H", hdr, 2, ihl + len(chunk))
        struct.pack_into(">H", hdr, 6, more | offset)
        struct.pack_into(">H", hdr, 10, 0)
        struct.pack_into(">H", hdr, 10, _checksum(bytes(hdr)))
        out.append(eth + bytes(hdr) + chunk)
    return out


def _ipv6_ext(packet: bytes) -> bytes:
    """The packet's TCP segment over IPv6 (::1 to ::1) behind a hop-by-hop and a
    destination-options header (8 bytes each), in an Ethernet frame."""
    ip = packet[14:]
    ihl = (ip[0] & 0x0F) * 4
    tcp = ip[ihl:]
    hop = bytes([60, 0]) + b"\x01\x04\0\0\0\0"  # next: destination options; PadN
    dest = bytes([6, 0]) + b"\x01\x04\0\0\0\0"  # next: TCP
    src = bytes(15) + b"\x01"
    hdr = struct.pack(">IHBB", 6 << 28, len(hop) + len(dest) + len(tcp), 0, 64) + src + src
    return packet[:12] + b"\x86\xdd" + hdr + hop + dest + tcp


def _tcp_fields(packet: bytes) -> tuple[int, int]:
    """(offset of the TCP header in the packet, its flags) of an Ethernet/IPv4 packet."""
    ihl = (packet[14] & 0x0F) * 4
    at = 14 + ihl
    return at, packet[at + 13]


def _shift_seq(packets: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Every direction's sequence numbers moved so they wrap 1000 bytes after its first; the
    other direction's acks moved with them."""

    def ends(packet: bytes) -> tuple[bytes, bytes]:
        at, _ = _tcp_fields(packet)
        return packet[26:30] + packet[at : at + 2], packet[30:34] + packet[at + 2 : at + 4]

    shift: dict[tuple[bytes, bytes], int] = {}
    for _, packet in packets:
        at, _ = _tcp_fields(packet)
        (seq,) = struct.unpack_from(">I", packet, at + 4)
        shift.setdefault(ends(packet), (0x100000000 - 1000 - seq) & 0xFFFFFFFF)
    out = []
    for ts, packet in packets:
        at, flags = _tcp_fields(packet)
        here = ends(packet)
        seq, ack = struct.unpack_from(">II", packet, at + 4)
        p = bytearray(packet)
        struct.pack_into(">I", p, at + 4, (seq + shift[here]) & 0xFFFFFFFF)
        if flags & 0x10:
            back = shift.get((here[1], here[0]), 0)
            struct.pack_into(">I", p, at + 8, (ack + back) & 0xFFFFFFFF)
        out.append((ts, bytes(p)))
    return out


def _syn(i: int, ts: int) -> tuple[int, bytes]:
    src = struct.pack(">I", 0x0B000000 + i // 50000)
    tcp = struct.pack(">HHIIBBHHH", 10000 + i % 50000, 9092, i, 0, 5 << 4, 0x02, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, src, b"\x0a\x63\x00\x01")
    return ts, b"\0" * 6 + b"\x02" + b"\0" * 5 + b"\x08\x00" + ip + tcp


def make(out: Path, flood: int = 3000) -> dict[str, Path]:
    """Writes every case under `out`; returns case -> its directory."""
    linktype, packets = _read(BASE)
    assert linktype == 1, linktype
    cases: dict[str, Path] = {}

    def case(name: str) -> Path:
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        cases[name] = d
        return d

    half = len(packets) // 2
    d = case("ring_with_garbage")
    _pcap(d / "ring.pcap0", packets[:half])
    (d / "ring.pcap1").write_bytes(b"")
    (d / "ring.pcap2").write_bytes(random.Random(7).randbytes(4096))
    _pcap(d / "ring.pcap3", packets[half:])

    d = case("giant_record")
    offsets = _pcap(d / "capture.pcap", packets)
    raw = bytearray((d / "capture.pcap").read_bytes())
    struct.pack_into("<I", raw, offsets[half] + 8, GIGA4)
    (d / "capture.pcap").write_bytes(bytes(raw))

    d = case("caplen_over_snaplen")
    offsets = _pcap(d / "capture.pcap", packets, snaplen=256)
    raw = bytearray((d / "capture.pcap").read_bytes())
    struct.pack_into("<I", raw, 16, 256)
    # The records were cut to 256 bytes; one of them, whole, claims more than the snaplen.
    big = max(range(len(packets)), key=lambda i: len(packets[i][1]))
    ts, data = packets[big]
    head = struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, len(data), len(data))
    at = offsets[big]
    kept = min(len(data), 256)
    raw[at : at + 16 + kept] = head + data
    (d / "capture.pcap").write_bytes(bytes(raw))

    d = case("pcapng_blocks")
    shb = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb_eth = _block(1, struct.pack("<HHI", 1, 0, 262144))
    idb_raw = _block(1, struct.pack("<HHI", 101, 0, 262144))
    body = [shb, idb_eth, idb_raw]
    for i, (ts, data) in enumerate(packets):
        body.append(_epb(i % 2, ts, data if i % 2 == 0 else _ip(data)[1]))
        if i == 40:
            body.append(_block(0x0BADF00D, b"an unknown block type, whole"))
        if i == 80:
            body.append(struct.pack("<II", 6, 0x40000000) + b"\0" * 60)  # claims 1 GB
        if i == 120:
            bad = bytearray(_epb(0, ts, data))
            bad[-4:] = struct.pack("<I", 28)  # the trailer disagrees with the header
            body.append(bytes(bad))
    body.append(_epb(0, packets[-1][0] + 1, packets[-1][1])[:-30])  # cut short at the end
    (d / "capture.pcapng").write_bytes(b"".join(body))

    d = case("nanosecond_swapped")
    _pcap(d / "capture.pcap", packets, order=">", nanos=True)

    d = case("vlan_qinq")
    tagged = []
    for i, (ts, data) in enumerate(packets):
        etype = data[12:14]
        if i % 2:
            tags = b"\x81\x00\x00\x0a"
        else:
            tags = b"\x88\xa8\x00\x64\x81\x00\x00\x0a"
        tagged.append((ts, data[:12] + tags + etype + data[14:]))
    _pcap(d / "capture.pcap", tagged)

    d = case("ipv6_ext")
    _pcap(d / "capture.pcap", [(ts, _ipv6_ext(data)) for ts, data in packets])

    d = case("fragments")
    fragmented: list[tuple[int, bytes]] = []
    cut = 0
    for ts, data in packets:
        at, _ = _tcp_fields(data)
        has_payload = len(data) > at + (data[at + 12] >> 4) * 4
        if has_payload and cut < 5 and len(fragmented) > 100:
            fragmented.extend((ts, f) for f in _fragments(data))
            cut += 1
        else:
            fragmented.append((ts, data))
    _pcap(d / "capture.pcap", fragmented)

    d = case("not_kafka")
    http = (
        b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
    )
    start = packets[0][0] - 1000
    extra = []
    for k, text in enumerate(http):
        src, dst = (b"\x0a\x01\x01\x01", b"\x0a\x01\x01\x02")[:: 1 if k == 0 else -1]
        sport, dport = (40000, 9092) if k == 0 else (9092, 40000)
        tcp = struct.pack(">HHIIBBHHH", sport, dport, 1 + k * 1000, 1, 5 << 4, 0x18, 65535, 0, 0)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(text), 0, 0, 64, 6, 0, src, dst)
        extra.append((start + k, b"\0" * 12 + b"\x08\x00" + ip + tcp + text))
    _pcap(d / "capture.pcap", extra + packets)

    d = case("syn_flood")
    first = packets[0][0] - flood - 10
    _pcap(d / "capture.pcap", [_syn(i, first + i) for i in range(flood)] + packets)

    d = case("seq_wrap")
    _pcap(d / "capture.pcap", _shift_seq(packets))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--flood", type=int, default=3000, help="fake SYNs in syn_flood")
    args = parser.parse_args()
    for name, path in make(args.out, args.flood).items():
        size = sum(p.stat().st_size for p in path.iterdir())
        print(f"{name:<22} {size:>9,} bytes  {CASES[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
