"""Real captures with their packet lists edited: cut, reordered, duplicated, lost, truncated,
other link layers and file formats. Each edit must give the rows the edit implies, no more."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dpkt
import pytest

from kwire import capture
from capture_helpers import (
    by_name,
    capture_path,
    data_packets,
    ethernet_to,
    ethernet_to_ipv6,
    flow,
    frame_key,
    read_packets,
    resegment,
    rows,
    tcp_of,
    write_pcap,
    write_pcapng,
)

CLASSIC = by_name("mock_group_classic.pcap")
PORTS = CLASSIC["broker_ports"]


@pytest.fixture(scope="module")
def original() -> tuple[int, list[tuple[int, bytes]]]:
    return read_packets(capture_path(CLASSIC))


@pytest.fixture(scope="module")
def baseline() -> list[dict]:
    return rows(capture_path(CLASSIC), PORTS)


def keys(rs: list[dict]) -> list[tuple]:
    return sorted(frame_key(r) for r in rs)


def _pair_in_one_flow(linktype: int, packets: list, min_gap: int = 1) -> tuple[int, int]:
    """Two consecutive payload packets of the same flow and direction."""
    idx = data_packets(linktype, packets)
    for a, b in zip(idx, idx[1:]):
        if flow(linktype, packets[a][1]) == flow(linktype, packets[b][1]):
            return a, b
    raise AssertionError("no two consecutive payload packets in one direction")


def test_reordered_segment_changes_nothing(tmp_path: Path, original, baseline) -> None:
    linktype, packets = original
    a, b = _pair_in_one_flow(linktype, packets)
    edited = list(packets)
    edited[a], edited[b] = edited[b], edited[a]
    out = rows(write_pcap(tmp_path / "reordered.pcap", linktype, edited), PORTS)
    # ts_first may now be the later packet's time for frames that started in the moved one.
    strip = lambda rs: sorted(
        (r["connection_id"], r["direction"], r["frame"], r["error"]) for r in rs
    )
    assert strip(out) == strip(baseline)


def test_every_segment_retransmitted_changes_nothing(tmp_path: Path, original, baseline) -> None:
    linktype, packets = original
    edited = []
    carrying = set(data_packets(linktype, packets))
    for i, p in enumerate(packets):
        edited.append(p)
        if i in carrying:
            edited.append(p)  # an exact retransmission right after the original
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "dup.pcap", linktype, edited), PORTS, summary=summary)
    assert keys(out) == keys(baseline)
    assert summary.retransmitted_bytes > 0


def test_overlapping_retransmission_changes_nothing(tmp_path: Path, original, baseline) -> None:
    """A later segment re-sent as one with the previous one (a partial overlap)."""
    linktype, packets = original
    a, b = _pair_in_one_flow(linktype, packets)
    ip_a, tcp_a = tcp_of(linktype, packets[a][1])
    ip_b, tcp_b = tcp_of(linktype, packets[b][1])
    assert tcp_a.seq + len(tcp_a.data) == tcp_b.seq
    merged = dpkt.ethernet.Ethernet(packets[b][1])
    merged.data.data.seq = tcp_a.seq
    merged.data.data.data = bytes(tcp_a.data) + bytes(tcp_b.data)
    merged.data.len = merged.data.hl * 4 + len(bytes(merged.data.data))
    edited = list(packets)
    edited.insert(b + 1, (packets[b][0], bytes(merged)))
    out = rows(write_pcap(tmp_path / "overlap.pcap", linktype, edited), PORTS)
    assert keys(out) == keys(baseline)


def test_sequence_wraparound(tmp_path: Path, original, baseline) -> None:
    """Shift sequence numbers so every stream starts 300 bytes below 2**32 and wraps."""
    linktype, packets = original
    shift: dict[tuple, int] = {}
    for _, data in packets:
        f = flow(linktype, data)
        if f not in shift:
            _, tcp = tcp_of(linktype, data)
            shift[f] = (0xFFFFFFFF - 300 - tcp.seq) & 0xFFFFFFFF
    edited = []
    for ts, data in packets:
        eth = dpkt.ethernet.Ethernet(data)
        tcp = eth.data.data
        f = flow(linktype, data)
        tcp.seq = (tcp.seq + shift[f]) & 0xFFFFFFFF
        if tcp.flags & dpkt.tcp.TH_ACK:
            back = (f[2], f[3], f[0], f[1])
            tcp.ack = (tcp.ack + shift.get(back, 0)) & 0xFFFFFFFF
        edited.append((ts, bytes(eth)))
    out = rows(write_pcap(tmp_path / "wrap.pcap", linktype, edited), PORTS)
    assert keys(out) == keys(baseline)


def test_capture_started_mid_stream(tmp_path: Path, original, baseline) -> None:
    """Cut the capture in the middle of a multi-segment frame: that frame's tail is reported,
    and everything that starts after the cut is read as before."""
    linktype, packets = original
    idx = data_packets(linktype, packets)
    # The first payload packet that continues a frame (no length prefix at its start).
    full = {(r["connection_id"], r["direction"]): r for r in baseline}
    cut = idx[len(idx) // 3]
    edited = packets[cut:]
    cut_ts = packets[cut][0]
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "cut.pcap", linktype, edited), PORTS, summary=summary)
    complete_after = [
        r
        for r in baseline
        if r["ts_first"].timestamp() * 1e6 >= cut_ts and r["direction"] == "request"
    ]
    got = {(r["connection_id"], r["frame"]) for r in out if r["frame"] is not None}
    for r in complete_after:
        assert (r["connection_id"], r["frame"]) in got
    # Responses to requests sent before the cut cannot be paired: reported, not dropped.
    assert all(
        r["error"] is None or any(reason in r["error"] for reason in capture.ERROR_REASONS)
        for r in out
    )
    assert len(full) > 0


@pytest.mark.parametrize("size", [1, 7, 100])
def test_frames_spanning_many_segments(tmp_path: Path, original, baseline, size: int) -> None:
    linktype, packets = original
    split = resegment(packets, size)
    assert len(split) > len(packets)
    out = rows(write_pcap(tmp_path / "split.pcap", linktype, split), PORTS)
    strip = lambda rs: sorted(
        (r["connection_id"], r["direction"], r["frame"], r["error"]) for r in rs
    )
    assert strip(out) == strip(baseline)


def test_lost_middle_of_a_frame(tmp_path: Path, original, baseline) -> None:
    """One segment inside a multi-segment frame is lost: that frame is reported with its
    header and declared length, and the next frame is read normally."""
    linktype, packets = original
    split = resegment(packets, 40)
    # A segment that neither starts a frame nor ends it: in the middle of a long request.
    target = None
    for i in range(1, len(split) - 1):
        a, b, c = split[i - 1], split[i], split[i + 1]
        if flow(linktype, a[1]) == flow(linktype, b[1]) == flow(linktype, c[1]):
            if b[0] == a[0] + 1 and c[0] == b[0] + 1:
                target = i
                break
    assert target is not None
    edited = split[:target] + split[target + 1 :]
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "hole.pcap", linktype, edited), PORTS, summary=summary)
    damaged = [r for r in out if r["error"] and capture.E_MISSING in r["error"]]
    assert len(damaged) == 1
    (row,) = damaged
    assert row["frame"] is None and row["frame_length"] is not None
    assert row["api_key"] is not None  # the header was in the first segment
    # Everything else is as before.
    strip = lambda rs: sorted(
        (r["connection_id"], r["direction"], r["correlation_id"], r["frame"])
        for r in rs
        if r is not row
    )
    others = [r for r in out if r is not row]
    assert len(others) == len(baseline) - 1


def test_lost_segment_becomes_a_row_and_the_stream_recovers(
    tmp_path: Path, original, baseline
) -> None:
    linktype, packets = original
    idx = data_packets(linktype, packets)
    drop = idx[len(idx) // 2]
    edited = packets[:drop] + packets[drop + 1 :]
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "gap.pcap", linktype, edited), PORTS, summary=summary)
    assert summary.missing_bytes > 0
    assert summary.errors[capture.E_MISSING] >= 1
    conn = next(r for r in out if r["error"] and capture.E_MISSING in r["error"])["connection_id"]
    # Frames after the gap on the same connection are complete again.
    after = [
        r
        for r in out
        if r["connection_id"] == conn
        and r["frame"] is not None
        and r["ts_first"].timestamp() * 1e6 > packets[drop][0]
    ]
    expected = [
        r
        for r in baseline
        if r["connection_id"] == conn and r["ts_first"].timestamp() * 1e6 > packets[drop][0]
    ]
    assert len(after) >= len(expected) - 2


def test_snaplen_truncation(tmp_path: Path, original, baseline) -> None:
    linktype, packets = original
    summary = capture.Summary()
    out = rows(
        write_pcap(tmp_path / "snap.pcap", linktype, packets, snaplen=120), PORTS, summary=summary
    )
    assert summary.snaplen_bytes > 0
    truncated = [r for r in out if r["error"] and capture.E_SNAPLEN in r["error"]]
    assert truncated
    # Frames whose header was captured keep their api key and declared length.
    with_header = [r for r in truncated if r["frame_length"] is not None]
    assert with_header and all(r["frame"] is None for r in with_header)
    assert any(r["api_key"] is not None for r in with_header)
    # Small frames fit in the snaplen and are complete.
    assert any(r["frame"] is not None and r["error"] is None for r in out)
    assert len(out) <= len(baseline) + summary.errors[capture.E_SNAPLEN]


@pytest.mark.parametrize("fmt", ["pcapng", "pcap-big-endian"])
def test_file_formats_give_the_same_rows(tmp_path: Path, original, baseline, fmt: str) -> None:
    linktype, packets = original
    if fmt == "pcapng":
        path = write_pcapng(tmp_path / "x.pcapng", linktype, packets)
    else:
        path = write_pcap(tmp_path / "x.pcap", linktype, packets, byteorder=">")
    assert keys(rows(path, PORTS)) == keys(baseline)


@pytest.mark.parametrize("linktype", [0, 108, 101, 228])
def test_loopback_and_raw_link_types(tmp_path: Path, original, baseline, linktype: int) -> None:
    _, packets = original
    path = write_pcap(tmp_path / f"lt{linktype}.pcap", linktype, ethernet_to(linktype, packets))
    assert keys(rows(path, PORTS)) == keys(baseline)


def test_ipv6(tmp_path: Path, original, baseline) -> None:
    _, packets = original
    path = write_pcap(tmp_path / "v6.pcap", 229, ethernet_to_ipv6(packets))
    out = rows(path, PORTS)
    assert len(out) == len(baseline)
    assert {r["client_addr"] for r in out} == {"::1"}
    assert all(r["connection_id"].startswith("[::1]:") for r in out)
    strip = lambda rs: sorted((r["direction"], r["frame"], r["error"]) for r in rs)
    assert strip(out) == strip(baseline)


def test_ring_files_continue_connections(tmp_path: Path, original, baseline) -> None:
    """A capture split into three files (given out of order, or as a directory) reads as one."""
    linktype, packets = original
    ring = tmp_path / "ring"
    ring.mkdir()
    third = len(packets) // 3
    parts = [packets[:third], packets[third : 2 * third], packets[2 * third :]]
    paths = [write_pcap(ring / f"cap{i}", linktype, part) for i, part in enumerate(parts)]
    out = rows(ring, PORTS)
    strip = lambda rs: sorted(
        (r["connection_id"], r["direction"], r["frame"], r["error"]) for r in rs
    )
    assert strip(out) == strip(baseline)
    assert strip(rows([paths[2], paths[0], paths[1]], PORTS)) == strip(baseline)
    assert {r["source_file"] for r in out} == {str(p) for p in paths}


def test_port_reuse_gets_a_new_connection_id(tmp_path: Path, original) -> None:
    """The same capture twice in a row: each TCP connection reappears with new SYNs."""
    linktype, packets = original
    first = [(ts, d) for ts, d in packets]
    shift = packets[-1][0] - packets[0][0] + 1_000_000
    second = []
    for ts, data in packets:
        eth = dpkt.ethernet.Ethernet(data)
        tcp = eth.data.data
        tcp.seq = (tcp.seq + 7777) & 0xFFFFFFFF
        if tcp.flags & dpkt.tcp.TH_ACK:
            tcp.ack = (tcp.ack + 7777) & 0xFFFFFFFF
        second.append((ts + shift, bytes(eth)))
    out = rows(write_pcap(tmp_path / "twice.pcap", linktype, first + second), PORTS)
    ids = {r["connection_id"] for r in out}
    assert any(i.endswith("#2") for i in ids)
    assert len(out) == 2 * len(rows(capture_path(CLASSIC), PORTS))


def _replace_payloads(
    linktype: int, packets: list, which: Callable[[int, tuple], bool], fill: bytes
) -> list:
    """Overwrite the payload of chosen packets with text of the same length."""
    out = []
    for i, (ts, data) in enumerate(packets):
        f = flow(linktype, data)
        _, tcp = tcp_of(linktype, data)
        if len(tcp.data) and which(i, f):
            eth = dpkt.ethernet.Ethernet(data)
            n = len(eth.data.data.data)
            eth.data.data.data = (fill * (n // len(fill) + 1))[:n]
            data = bytes(eth)
        out.append((ts, data))
    return out


def test_not_kafka_on_a_broker_port_is_reported_and_skipped(
    tmp_path: Path, original, baseline
) -> None:
    linktype, packets = original
    first = data_packets(linktype, packets)[0]
    edited = _replace_payloads(linktype, packets, lambda i, f: i == first, b"GET / HTTP/1.1\r\n")
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "http.pcap", linktype, edited), PORTS, summary=summary)
    bad = [r for r in out if r["error"] and capture.E_BAD_LENGTH in r["error"]]
    assert len(bad) == 1 and bad[0]["frame"] is None
    assert "not Kafka or desynchronised" in bad[0]["error"]
    # The next request on that connection starts a segment: reading resumes there.
    assert len(out) >= len(baseline) - 2


def test_not_kafka_without_broker_ports_is_ignored(tmp_path: Path, original, baseline) -> None:
    linktype, packets = original
    victim = flow(linktype, packets[data_packets(linktype, packets)[0]][1])
    pair = {victim, (victim[2], victim[3], victim[0], victim[1])}
    edited = _replace_payloads(
        linktype, packets, lambda i, f: f in pair, b"ssh-2.0 and other non-Kafka chatter "
    )
    summary = capture.Summary()
    out = rows(write_pcap(tmp_path / "mixed.pcap", linktype, edited), (), summary=summary)
    assert sum(summary.connections_ignored.values()) == 1
    assert summary.connections == len({r["connection_id"] for r in baseline}) - 1
    assert not [r for r in out if r["error"] and capture.E_BAD_LENGTH in r["error"]]
