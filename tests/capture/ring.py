"""A synthetic ring capture for the layout tests: many interleaved Kafka connections over TCP.

The frames come from benchmarks/synth.py (consumer groups, modern and legacy clients); each of
its connections becomes a TCP conversation (tests/fuzz/pcaps.py) with MSS-sized segments, the
conversations interleave in time, one connection's client port is reused by a later one, some
data segments are retransmitted, and one Fetch response is several MB. `split` cuts the packets
into files however a test wants: whatever the cut, the capture is the same.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

from benchmarks import synth
from tests.fuzz.pcaps import conversation, pcap_file, pcapng_file

Packet = tuple[int, bytes]
T0 = 1_760_000_000_000_000


def _prefixed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def exchanges_of(rows: list[dict[str, Any]]) -> list[list[tuple[bytes, bytes | None]]]:
    """Per synthetic connection: (request, response) frames with length prefixes, in order."""
    by_conn: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_conn.setdefault(r["connection_id"], []).append(r)
    out = []
    for conn_rows in by_conn.values():
        responses = {
            r["correlation_id"]: r["frame"] for r in conn_rows if r["direction"] == "response"
        }
        out.append(
            [
                (_prefixed(r["frame"]), _prefixed(responses[r["correlation_id"]]))
                for r in conn_rows
                if r["direction"] == "request" and r["correlation_id"] in responses
            ]
        )
    return [e for e in out if e]


def big_fetch(size: int) -> tuple[bytes, bytes]:
    """A Fetch v4 request and a response of `size` bytes (the capture does not read bodies)."""
    request = struct.pack(">hhih", 1, 4, 77, 6) + b"ring-c" + bytes(40)
    body = random.Random(size).randbytes(size - 4)
    return _prefixed(request), _prefixed(struct.pack(">i", 77) + body)


def ring_packets(big: int = 3 * 1024 * 1024, seed: int = 5) -> tuple[list[Packet], int]:
    """The packets in capture order, and how many frames they carry (the ground truth)."""
    rng = random.Random(seed)
    conversations = exchanges_of(synth.synthetic_rows(damaged=False))
    packets: list[Packet] = []
    frames = 0
    end = T0
    for i, exchanges in enumerate(conversations):
        t0 = T0 + i * 170
        conv = conversation(exchanges, client_port=40000 + i, t0_us=t0)
        packets.extend(conv)
        end = max(end, conv[-1][0])
        frames += 2 * len(exchanges)
    # The first connection's client port again, after everything else: a new connection.
    again = conversation(conversations[0][:3], client_port=40000, t0_us=end + 1000)
    packets.extend(again)
    frames += 2 * len(conversations[0][:3])
    # One Fetch whose response is several MB, interleaved with the rest.
    fetch = conversation([big_fetch(big)], client_port=45000, t0_us=T0 + 333)
    packets.extend(fetch)
    frames += 2
    packets.sort(key=lambda p: p[0])
    # Retransmissions: some data segments again, a little later (the TCP layer drops them).
    data = [i for i, (_, pkt) in enumerate(packets) if len(pkt) > 54 + 100]
    for i in sorted(rng.sample(data, 25), reverse=True):
        ts, pkt = packets[i]
        packets.insert(i + 2, (ts, pkt))
    return packets, frames


def split(packets: list[Packet], cuts: list[int]) -> list[list[Packet]]:
    """The packets cut before each index in `cuts`."""
    bounds = [0, *cuts, len(packets)]
    return [packets[a:b] for a, b in zip(bounds, bounds[1:])]


def write(directory: Path, parts: list[list[Packet]], formats: str = "pcap") -> list[Path]:
    """Each part as a file ring.pcap0, ring.pcap1, ... (or pcapng, or alternating: 'mixed')."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i, part in enumerate(parts):
        kind = formats if formats != "mixed" else ("pcap", "pcapng")[i % 2]
        data, _ = (pcap_file if kind == "pcap" else pcapng_file)(part)
        path = directory / f"ring.{kind}{i}"
        path.write_bytes(data)
        out.append(path)
    return out
