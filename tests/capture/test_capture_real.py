"""Every committed real capture: all frames reassembled and paired, counts as tshark counted."""

from __future__ import annotations

import struct
from datetime import datetime, timezone

import pytest

from kwire import capture
from capture_helpers import (
    capture_path,
    counts,
    cut_by_kill,
    killed_a_client,
    expectations,
    read_packets,
    remove_segment,
    write_pcap,
)

RECORDS = expectations()
IDS = [r["capture"] for r in RECORDS]
# A request still in flight when its connection closed (a long-poll Fetch, a JoinGroup of a
# member shutting down) is reported; no other error may appear in a clean capture.
ALLOWED = {capture.E_NO_RESPONSE}


def test_captures_are_committed() -> None:
    assert len(RECORDS) >= 5
    formats = {r["capture"].rsplit(".", 1)[1] for r in RECORDS}
    assert formats == {"pcap", "pcapng"}


@pytest.fixture(scope="module", params=RECORDS, ids=IDS)
def result(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    record = request.param
    summary = capture.Summary()
    table = capture.frames_table(capture_path(record), record["broker_ports"], summary=summary)
    return record, table, summary


def test_schema_is_the_contract(result) -> None:  # type: ignore[no-untyped-def]
    _, table, _ = result
    assert table.schema == capture.SCHEMA
    assert table.num_rows > 20


def test_counts_match_tshark(result) -> None:  # type: ignore[no-untyped-def]
    record, table, summary = result
    cut = 0
    if killed_a_client(record):
        # tshark counts no response a SIGKILL cut; kwire keeps it as a row that says so.
        whole = cut_by_kill(table)
        cut, table = table.num_rows - whole.num_rows, whole
    assert counts(table) == record["counts"]
    n = sum(sum(v.values()) for c in record["counts"].values() for v in c.values())
    assert summary.frames["request"] + summary.frames["response"] == n + cut


def test_every_frame_complete_and_every_response_paired(result) -> None:  # type: ignore[no-untyped-def]
    record, table, summary = result
    if killed_a_client(record):
        assert set(summary.errors) <= ALLOWED | {capture.E_CLOSED}
        table = cut_by_kill(table)
    else:
        assert set(summary.errors) <= ALLOWED
    for row in table.to_pylist():
        assert row["frame"] is not None, row
        assert row["frame_length"] == len(row["frame"])
        assert row["api_key"] is not None and row["correlation_id"] is not None
        assert row["ts_first"] <= row["ts_last"]
        if row["direction"] == "response":
            assert row["error"] is None
            assert row["latency_us"] is not None and row["latency_us"] >= 0
            assert struct.unpack(">i", row["frame"][:4])[0] == row["correlation_id"]
        else:
            api_key, version, corr = struct.unpack(">hhi", row["frame"][:8])
            assert (api_key, version, corr) == (
                row["api_key"],
                row["api_version"],
                row["correlation_id"],
            )
            assert row["latency_us"] is None
            assert row["error"] is None or row["error"].startswith(capture.E_NO_RESPONSE)


def test_no_tcp_trouble_in_clean_captures(result) -> None:  # type: ignore[no-untyped-def]
    _, _, summary = result
    d = summary.as_dict()
    assert d["tcp"]["missing_bytes"] == 0
    assert d["tcp"]["snaplen_truncated_bytes"] == 0
    assert not d["skipped_packets"]
    assert not d["connections_ignored"]


def test_direction_inferred_without_broker_ports(result) -> None:  # type: ignore[no-untyped-def]
    """Mock brokers listen on ephemeral ports: the frames alone must tell the broker side."""
    record, table, _ = result
    summary = capture.Summary()
    inferred = capture.frames_table(capture_path(record), (), summary=summary)
    # Frames wait until the direction is known, so rows may come out in another order.
    order = lambda r: (r["connection_id"], r["direction"], r["ts_first"], r["correlation_id"])
    assert sorted(inferred.to_pylist(), key=order) == sorted(table.to_pylist(), key=order)
    assert set(summary.direction_decided_by) == {"frames"}


def test_acks0_produce_is_not_waiting_for_a_response(tmp_path) -> None:  # type: ignore[no-untyped-def]
    record = next(r for r in RECORDS if r["scenario"] == "admin-groups")
    path = capture_path(record)
    table = capture.frames_table(path, record["broker_ports"]).to_pylist()
    acks0 = [
        r
        for r in table
        if r["api_key"] == 0
        and r["direction"] == "request"
        and r["client_id"] in ("rdk-acks0", "kpy-acks0")
    ]
    assert {r["client_id"] for r in acks0} == {"rdk-acks0", "kpy-acks0"}
    assert all(r["error"] is None for r in acks0)
    # Tansu answers acks=0 Produce requests although Kafka does not: those answers are paired.
    assert not [r for r in table if r["error"] and capture.E_UNPAIRED in r["error"]]
    # Without those answers (as from a Kafka broker) nothing is reported either.
    conns = {r["connection_id"] for r in acks0}
    linktype, packets = read_packets(path)
    answers = {
        r["ts_first"]
        for r in table
        if r["connection_id"] in conns and r["direction"] == "response" and r["api_key"] == 0
    }
    kept = packets
    for i in reversed(range(len(packets))):
        if datetime.fromtimestamp(packets[i][0] / 1e6, timezone.utc) in answers:
            kept = remove_segment(kept, i)
    assert len(kept) == len(packets) - len(answers) > 0
    edited = capture.frames_table(
        write_pcap(tmp_path / "acks0.pcap", linktype, kept), record["broker_ports"]
    ).to_pylist()
    assert all(r["error"] is None for r in edited if r["connection_id"] in conns)


def test_api_the_broker_lacks_is_a_request_without_response() -> None:
    """Tansu closes the connection on OffsetDelete (which it does not advertise)."""
    record = next(r for r in RECORDS if r["scenario"] == "admin-groups")
    table = capture.frames_table(capture_path(record), record["broker_ports"]).to_pylist()
    (row,) = [r for r in table if r["api_key"] == 47]
    assert row["direction"] == "request" and row["client_id"] == "kpy-admin"
    assert row["error"] == f"{capture.E_NO_RESPONSE} (connection closed)"
    assert row["frame"] is not None


def test_real_ipv6_connections() -> None:
    record = next(r for r in RECORDS if r["scenario"] == "ipv6-produce-consume")
    table = capture.frames_table(capture_path(record), record["broker_ports"]).to_pylist()
    v6 = [r for r in table if r["client_addr"] == "::1"]
    assert v6 and all(r["broker_addr"] == "::1" for r in v6)
    assert all(r["connection_id"].startswith("[::1]:") for r in v6)
    assert {r["api_key"] for r in v6} >= {18, 3}
