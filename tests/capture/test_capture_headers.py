"""The small header readers capture uses for every api key."""

from __future__ import annotations

import struct

from kwire.capture import kafka


def request(
    api_key: int, version: int, corr: int, client_id: bytes | None, body: bytes = b""
) -> bytes:
    head = struct.pack(">hhi", api_key, version, corr)
    if client_id is None:
        return head + struct.pack(">h", -1) + body
    return head + struct.pack(">h", len(client_id)) + client_id + body


def test_request_header_with_client_id() -> None:
    h = kafka.parse_request_header(request(3, 12, 7, b"app"))
    assert h is not None
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id, h.end) == (3, 12, 7, "app", 13)


def test_null_client_id_and_unknown_api_key() -> None:
    h = kafka.parse_request_header(request(4000, 1, -5, None))
    assert h is not None and h.client_id is None and h.api_key == 4000
    assert kafka.plausible_request(request(4000, 1, -5, None)) is None


def test_controlled_shutdown_v0_has_no_client_id() -> None:
    h = kafka.parse_request_header(struct.pack(">hhi", 7, 0, 9) + b"\x00\x00\x00\x01")
    assert h is not None and h.client_id is None and h.end == 8
    h1 = kafka.parse_request_header(request(7, 1, 9, b"broker"))
    assert h1 is not None and h1.client_id == "broker"


def test_cut_short_headers() -> None:
    assert kafka.parse_request_header(b"\x00\x03\x00") is None
    assert kafka.parse_request_header(request(3, 1, 1, b"abcdef")[:12]) is None
    assert kafka.response_correlation_id(b"\x00\x00") is None
    assert kafka.response_correlation_id(b"\x00\x00\x00\x05rest") == 5


def test_produce_acks_in_every_header_layout() -> None:
    # v0-2: acks first.
    h = kafka.parse_request_header(request(0, 2, 1, b"c", struct.pack(">hi", 0, 1000)))
    assert h and kafka.produce_acks(request(0, 2, 1, b"c", struct.pack(">hi", 0, 1000)), h) == 0
    # v3-8: nullable int16-length transactional id, then acks.
    body = struct.pack(">h", 3) + b"txn" + struct.pack(">hi", -1, 1000)
    frame = request(0, 8, 1, b"c", body)
    h = kafka.parse_request_header(frame)
    assert h and kafka.produce_acks(frame, h) == -1
    frame = request(0, 5, 1, b"c", struct.pack(">hhi", -1, 0, 1000))
    h = kafka.parse_request_header(frame)
    assert h and kafka.produce_acks(frame, h) == 0
    # v9+: header tagged fields, compact nullable transactional id (length + 1), then acks.
    tagged = b"\x01" + b"\x00\x02ab"  # one tagged field: tag 0, size 2
    frame = request(0, 11, 1, b"c", tagged + b"\x04txn" + struct.pack(">hi", 0, 1000))
    h = kafka.parse_request_header(frame)
    assert h and kafka.produce_acks(frame, h) == 0
    frame = request(0, 9, 1, b"c", b"\x00" + b"\x00" + struct.pack(">hi", 1, 1000))
    h = kafka.parse_request_header(frame)
    assert h and kafka.produce_acks(frame, h) == 1
    # Too short to tell.
    frame = request(0, 9, 1, b"c", b"\x00")
    h = kafka.parse_request_header(frame)
    assert h and kafka.produce_acks(frame, h) is None


def test_api_names() -> None:
    assert kafka.api_name(68) == "ConsumerGroupHeartbeat"
    assert kafka.api_name(999) == "ApiKey999"
