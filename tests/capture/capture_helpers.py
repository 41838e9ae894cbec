"""Shared helpers for the capture tests: the committed captures and ways to edit their packets."""

from __future__ import annotations

import json
import socket
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import dpkt

from kwire import capture

DATA = Path(__file__).resolve().parent.parent / "data" / "capture"


def expectations() -> list[dict[str, Any]]:
    """One record per committed capture: file, scenario, broker ports, tshark counts."""
    return [json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))]


def capture_path(record: dict[str, Any]) -> Path:
    return DATA / record["capture"]


def by_name(name: str) -> dict[str, Any]:
    return next(r for r in expectations() if r["capture"] == name)


def counts(table: Any) -> dict[str, dict[str, dict[str, int]]]:
    """Rows per direction, api key and version, shaped like the recorded tshark counts."""
    c: Counter[tuple[str, str, str]] = Counter()
    for r in table.select(["direction", "api_key", "api_version"]).to_pylist():
        if r["api_key"] is None:
            c[(r["direction"], "unpaired", "-1")] += 1
        else:
            c[(r["direction"], str(r["api_key"]), str(r["api_version"]))] += 1
    out: dict[str, dict[str, dict[str, int]]] = {"request": {}, "response": {}}
    for (d, k, v), n in c.items():
        out[d].setdefault(k, {})[v] = n
    return out


def rows(path: Path | str, ports: Any = (9092,), **options: Any) -> list[dict[str, Any]]:
    return capture.frames_table(path, ports, **options).to_pylist()


def frame_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies a frame independently of file names and link layers."""
    return (
        row["connection_id"],
        row["direction"],
        row["ts_first"],
        row["frame"],
        row["api_key"],
        row["api_version"],
        row["correlation_id"],
        row["error"],
    )


# -- packet lists -----------------------------------------------------------------------------


def read_packets(path: Path) -> tuple[int, list[tuple[int, bytes]]]:
    """(link type, [(timestamp in microseconds, packet bytes)]) of a pcap or pcapng file."""
    with open(path, "rb") as f:
        stats = capture.pcapfile.FileStats(str(path))
        packets = [(p.ts_us, p.data) for p in capture.pcapfile.iter_packets(f, stats)]
    (linktype,) = stats.linktypes
    return linktype, packets


def write_pcap(
    path: Path,
    linktype: int,
    packets: list[tuple[int, bytes]],
    snaplen: int | None = None,
    byteorder: str = "<",
) -> Path:
    """A classic pcap; with `snaplen`, packets are cut to it but keep their original length."""
    with open(path, "wb") as f:
        f.write(
            struct.pack(byteorder + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen or 262144, linktype)
        )
        for ts, data in packets:
            kept = data[:snaplen] if snaplen else data
            f.write(
                struct.pack(
                    byteorder + "IIII", ts // 1_000_000, ts % 1_000_000, len(kept), len(data)
                )
            )
            f.write(kept)
    return path


def write_pcapng(path: Path, linktype: int, packets: list[tuple[int, bytes]]) -> Path:
    with open(path, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=262144, linktype=linktype)
        for ts, data in packets:
            w.writepkt(data, ts=ts / 1_000_000)
    return path


def tcp_of(linktype: int, data: bytes) -> Any:
    """The dpkt TCP object of a packet (Ethernet, SLL or SLL2 link types)."""
    if linktype == dpkt.pcap.DLT_EN10MB:
        ip = dpkt.ethernet.Ethernet(data).data
    elif linktype == dpkt.pcap.DLT_LINUX_SLL:
        ip = dpkt.sll.SLL(data).data
    else:
        ip = dpkt.ip.IP(data[20:])
    return ip, ip.data


def data_packets(linktype: int, packets: list[tuple[int, bytes]]) -> list[int]:
    """Indexes of packets that carry TCP payload."""
    out = []
    for i, (_, data) in enumerate(packets):
        _, tcp = tcp_of(linktype, data)
        if isinstance(tcp, dpkt.tcp.TCP) and len(tcp.data):
            out.append(i)
    return out


def flow(linktype: int, data: bytes) -> tuple[Any, ...]:
    ip, tcp = tcp_of(linktype, data)
    return (ip.src, tcp.sport, ip.dst, tcp.dport)


def ethernet_to(linktype: int, packets: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Re-wrap the IP packets of an Ethernet capture in another link layer."""
    out = []
    for ts, data in packets:
        ip = bytes(data[14:])
        if linktype == 0:  # BSD loopback: family in the capturing host's order (little here)
            out.append((ts, struct.pack("<I", socket.AF_INET) + ip))
        elif linktype == 108:  # OpenBSD loopback: network order
            out.append((ts, struct.pack(">I", socket.AF_INET) + ip))
        elif linktype in (101, 228):
            out.append((ts, ip))
        else:
            raise ValueError(linktype)
    return out


def ethernet_to_ipv6(packets: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The same TCP segments carried over IPv6 between ::1 and ::1 (raw IPv6 link type)."""
    out = []
    for ts, data in packets:
        ip = dpkt.ethernet.Ethernet(data).data
        tcp_bytes = bytes(ip.data)
        hdr = struct.pack(">IHBB", 6 << 28, len(tcp_bytes), 6, 64)
        src = b"\x00" * 15 + b"\x01"
        out.append((ts, hdr + src + src + tcp_bytes))
    return out


def resegment(packets: list[tuple[int, bytes]], size: int) -> list[tuple[int, bytes]]:
    """Split every TCP payload of an Ethernet capture into segments of at most `size` bytes,
    one microsecond apart (so frames span many segments and segments start mid-frame)."""
    out = []
    for ts, data in packets:
        eth = dpkt.ethernet.Ethernet(data)
        ip = eth.data
        tcp = ip.data
        payload = bytes(tcp.data)
        if len(payload) <= size:
            out.append((ts, data))
            continue
        for n, start in enumerate(range(0, len(payload), size)):
            piece = dpkt.ethernet.Ethernet(data)
            t = piece.data.data
            t.seq = (tcp.seq + start) & 0xFFFFFFFF
            t.data = payload[start : start + size]
            if start + size < len(payload):
                t.flags &= ~dpkt.tcp.TH_FIN
            piece.data.len = piece.data.hl * 4 + len(bytes(t))
            out.append((ts + n, bytes(piece)))
    return out


def remove_segment(packets: list[tuple[int, bytes]], index: int) -> list[tuple[int, bytes]]:
    """Drop one payload packet of an Ethernet capture as if it had never been sent: later
    sequence numbers of its direction (and the peer's acknowledgements) move back."""
    ts0, data0 = packets[index]
    gone = dpkt.ethernet.Ethernet(data0)
    n = len(gone.data.data.data)
    f = flow(1, data0)
    back = (f[2], f[3], f[0], f[1])
    out = packets[:index]
    for ts, data in packets[index + 1 :]:
        g = flow(1, data)
        if g not in (f, back):
            out.append((ts, data))
            continue
        eth = dpkt.ethernet.Ethernet(data)
        tcp = eth.data.data
        if g == f:
            tcp.seq = (tcp.seq - n) & 0xFFFFFFFF
        elif tcp.flags & dpkt.tcp.TH_ACK:
            tcp.ack = (tcp.ack - n) & 0xFFFFFFFF
        out.append((ts, bytes(eth)))
    return out


def killed_a_client(record: dict[str, Any]) -> bool:
    """Whether the capture's scenario SIGKILLed a client (its truth says so): a response in
    flight to it is then cut by the closed connection, as it was on the wire."""
    for key in ("group_truth", "share_truth", "streams_truth"):
        truth = record.get(key) or {}
        events = truth.get("events") or truth.get("timeline") or []
        if any(e.get("event") == "killed" or e.get("action") == "kill" for e in events):
            return True
    return False


def cut_by_kill(table: Any) -> Any:
    """The rows of a frames table without the frames a closed connection cut."""
    import pyarrow.compute as pc

    cut = pc.fill_null(pc.starts_with(table["error"], capture.E_CLOSED), False)
    return table.filter(pc.invert(cut))
