"""Synthetic captures of Kafka conversations, and running the capture step on (corrupted) files.

The writer knows where every record/block length of the file it builds is, so the fuzzers can
inflate exactly those. Captures in tests/data/*.pcap* (when present) are used as they are.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tests.fuzz.harness import Crash, Target, Violation, run_one

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"

SYN, FIN, ACK, PSH = 0x02, 0x01, 0x10, 0x08
LINK_ETHERNET, LINK_RAW = 1, 101

# (offset, "u32le"/"u32be") of the length fields in a built file.
Fields = list[tuple[int, str]]


class CaptureSeed(NamedTuple):
    name: str
    data: bytes
    fields: Fields  # empty for real captures
    broker_ports: tuple[int, ...] = (9092,)


def _checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def tcp_packet(
    src: tuple[bytes, int],
    dst: tuple[bytes, int],
    seq: int,
    ack: int,
    flags: int,
    payload: bytes,
    link: int = LINK_ETHERNET,
) -> bytes:
    """An IPv4/TCP packet (with an Ethernet header unless link is raw IP)."""
    tcp = (
        struct.pack(
            "!HHIIBBHHH",
            src[1],
            dst[1],
            seq & 0xFFFFFFFF,
            ack & 0xFFFFFFFF,
            5 << 4,
            flags,
            65535,
            0,
            0,
        )
        + payload
    )
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0x4000, 64, 6, 0, src[0], dst[0])
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    if link == LINK_RAW:
        return ip + tcp
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00" + ip + tcp


def conversation(
    exchanges: Sequence[tuple[bytes, bytes | None]],
    client_port: int = 40000,
    broker_port: int = 9092,
    mss: int = 1460,
    close: bool = True,
    link: int = LINK_ETHERNET,
    t0_us: int = 1_700_000_000_000_000,
) -> list[tuple[int, bytes]]:
    """(ts_us, packet) for one TCP connection: handshake, each (request, response) frame pair
    (frames with their length prefix), then FIN/ACK both ways."""
    c = (bytes([10, 0, 0, 1]), client_port)
    b = (bytes([10, 0, 0, 2]), broker_port)
    cseq, bseq = 1000, 5000
    t = t0_us
    out: list[tuple[int, bytes]] = []

    def send(frm: Any, to: Any, seq: int, ack: int, flags: int, payload: bytes = b"") -> None:
        nonlocal t
        t += 50
        out.append((t, tcp_packet(frm, to, seq, ack, flags, payload, link)))

    send(c, b, cseq, 0, SYN)
    send(b, c, bseq, cseq + 1, SYN | ACK)
    cseq += 1
    bseq += 1
    send(c, b, cseq, bseq, ACK)
    for request, response in exchanges:
        for i in range(0, len(request), mss):
            chunk = request[i : i + mss]
            send(c, b, cseq, bseq, ACK | PSH, chunk)
            cseq += len(chunk)
        if response is not None:
            for i in range(0, len(response), mss):
                chunk = response[i : i + mss]
                send(b, c, bseq, cseq, ACK | PSH, chunk)
                bseq += len(chunk)
    if close:
        send(c, b, cseq, bseq, FIN | ACK)
        send(b, c, bseq, cseq + 1, FIN | ACK)
        send(c, b, cseq + 1, bseq + 1, ACK)
    return out


def pcap_file(
    packets: Iterable[tuple[int, bytes]],
    linktype: int = LINK_ETHERNET,
    big_endian: bool = False,
    nano: bool = False,
) -> tuple[bytes, Fields]:
    """A classic pcap file, and where its record lengths (caplen, origlen) are."""
    o = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    kind = "u32be" if big_endian else "u32le"
    out = bytearray(struct.pack(o + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype))
    fields: Fields = []
    for ts, pkt in packets:
        frac = (ts % 1_000_000) * (1000 if nano else 1)
        fields += [(len(out) + 8, kind), (len(out) + 12, kind)]
        out += struct.pack(o + "IIII", ts // 1_000_000, frac, len(pkt), len(pkt)) + pkt
    return bytes(out), fields


def _pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def pcapng_file(
    packets: Iterable[tuple[int, bytes]], linktype: int = LINK_ETHERNET, big_endian: bool = False
) -> tuple[bytes, Fields]:
    """A pcapng file (section header, interface with if_tsresol 6, enhanced packet blocks),
    and where its block lengths and captured/original packet lengths are."""
    o = ">" if big_endian else "<"
    kind = "u32be" if big_endian else "u32le"
    fields: Fields = []
    out = bytearray()

    def block(btype: int, body: bytes, extra: Sequence[int] = ()) -> None:
        n = 12 + len(body)
        start = len(out)
        fields.append((start + 4, kind))
        fields.append((start + 8 + len(body), kind))
        fields.extend((start + 8 + e, kind) for e in extra)
        out.extend(struct.pack(o + "II", btype, n) + body + struct.pack(o + "I", n))

    block(0x0A0D0D0A, struct.pack(o + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = struct.pack(o + "HH", 9, 1) + b"\x06\0\0\0" + struct.pack(o + "HH", 0, 0)
    block(1, struct.pack(o + "HHI", linktype, 0, 65535) + opts)
    for ts, pkt in packets:
        body = struct.pack(o + "IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(pkt), len(pkt))
        block(6, body + _pad4(pkt), extra=(12, 16))
    return bytes(out), fields


def set_u32(data: bytes, pos: int, kind: str, value: int) -> bytes:
    packed = struct.pack("<I" if kind == "u32le" else ">I", value & 0xFFFFFFFF)
    return data[:pos] + packed + data[pos + 4 :]


U32_VALUES = (0xFFFFFFFF, 0x7FFFFFFF, 0x10000001, 0x0FFFFFFF, 0x00100000, 0, 1, 3, 7, 8, 12)


# -- running the capture step ---------------------------------------------------------------------


def read_capture(
    path: str | os.PathLike[str], errors: str, broker_ports: Sequence[int] = (9092,)
) -> tuple[list[dict[str, Any]], Any]:
    """All rows of one capture file through capture.read_frames, and the summary.

    Timestamps come back as int microseconds: a corrupted capture can carry times that Arrow
    holds but Python's datetime cannot (after year 9999); check_capture reports those.
    """
    from kwire import capture
    import pyarrow as pa

    summary = capture.Summary()
    rows: list[dict[str, Any]] = []
    batches = capture.read_frames([os.fspath(path)], broker_ports, summary=summary, errors=errors)
    for batch in batches:
        if batch.schema != capture.SCHEMA:
            raise AssertionError(f"batch schema differs from capture.SCHEMA: {batch.schema}")
        columns = {}
        for name, column in zip(batch.schema.names, batch.columns):
            if pa.types.is_timestamp(column.type):
                column = column.cast(pa.int64())
            columns[name] = column.to_pylist()
        rows.extend(dict(zip(columns, values)) for values in zip(*columns.values()))
    return rows, summary


# Microseconds since the epoch that Python's datetime (and Spark's TimestampType) can hold.
DATETIME_MIN_US = -62135596800 * 10**6
DATETIME_MAX_US = 253402300800 * 10**6 - 1


def check_capture(
    data: bytes,
    path: str | os.PathLike[str],
    broker_ports: Sequence[int] = (9092,),
    decode_frames: bool = True,
) -> list[str]:
    """Writes `data` to path and runs the capture step on it in both error modes.

    errors="raise" may raise only capture.CaptureFileError; errors="report" must not raise.
    Every complete frame it yields is then decoded (decode_request / decode_response), which
    must keep the decoding contract. Returns the outcome kinds; raises Crash or Violation.
    """
    from kwire import capture
    import generated as g

    with open(path, "wb") as f:
        f.write(data)
    kinds = []
    try:
        read_capture(path, "raise", broker_ports)
        kinds.append("capture ok")
    except capture.CaptureFileError as e:
        kinds.append("capture CaptureFileError: " + _file_error_shape(str(e), os.fspath(path)))
    except Exception as e:  # noqa: BLE001
        raise Crash("capture:raise", data, e) from None
    try:
        rows, summary = read_capture(path, "report", broker_ports)
    except Exception as e:  # noqa: BLE001
        raise Crash("capture:report", data, e) from None
    for entry in summary.files:
        if entry.get("error"):
            kinds.append(
                "capture file error: " + _file_error_shape(entry["error"], os.fspath(path))
            )
        if entry.get("warning"):
            kinds.append("capture file warning: " + _file_error_shape(entry["warning"], ""))
    for row in rows:
        for column in ("ts_first", "ts_last"):
            if not DATETIME_MIN_US <= row[column] <= DATETIME_MAX_US:
                kinds.append(f"capture row {column} outside datetime's years 1-9999")
        if row["error"]:
            for part in row["error"].split("; "):
                kinds.append("capture row error: " + _row_error_shape(part))
        if not decode_frames or row["frame"] is None:
            continue
        frame = row["frame"]
        if row["direction"] == "request":
            kinds.append(run_one(REQUEST, frame))
        elif row["api_key"] is not None and row["api_key"] in g.REGISTRY:
            key, version = row["api_key"], row["api_version"]
            kinds.append(run_one(response_target(key, version), frame))
    return kinds


def _file_error_shape(text: str, path: str) -> str:
    from tests.fuzz.harness import shape

    return shape(text.replace(path, "<path>") if path else text)[:120]


def _row_error_shape(text: str) -> str:
    from tests.fuzz.harness import shape

    return shape(text.split(" (")[0].split(":")[0])[:80]


def response_target(key: int, version: int) -> Target:
    return Target(f"response:{key}:v{version}", lambda d: _response(d, key, version))


def _response(data: bytes, key: int, version: int) -> Any:
    import generated as g

    return g.decode_response(data, key, version)


def _request(data: bytes) -> Any:
    import generated as g

    return g.decode_request(data)


REQUEST = Target("request", _request)


def real_captures() -> list[tuple[Path, tuple[int, ...]]]:
    """Committed captures under tests/data (*.pcap, *.pcapng, any depth), each with the broker
    ports its sidecar JSON names (9092 when it has none)."""
    if not DATA.is_dir():
        return []
    out = []
    for p in sorted(DATA.rglob("*")):
        if p.suffix not in (".pcap", ".pcapng") or not p.is_file():
            continue
        ports: tuple[int, ...] = (9092,)
        sidecar = p.with_suffix(".json")
        if sidecar.is_file():
            try:
                ports = tuple(int(x) for x in json.loads(sidecar.read_text())["broker_ports"])
            except (ValueError, KeyError, TypeError):
                pass
        out.append((p, ports))
    return out


__all__ = [
    "CaptureSeed",
    "Crash",
    "Violation",
    "U32_VALUES",
    "check_capture",
    "conversation",
    "pcap_file",
    "pcapng_file",
    "read_capture",
    "real_captures",
    "set_u32",
    "tcp_packet",
]
