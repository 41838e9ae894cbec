"""Every frame in the committed real captures decodes with the generated codecs, losslessly.

Every request and response (all api keys have schemas now) must decode strictly, header and
body, with no trailing bytes, and encode back to the captured bytes (Tansu writes tagged fields
that hold their defaults, e.g. ApiVersions' SupportedFeatures: the decoded object remembers its
wire tags and writes them again). The exceptions are four things the librdkafka mock broker
really sends that are not valid Kafka, each pinned in tests/quirks.py by exact error so any other
failure is a bug:

* its ApiVersions v3 rejection (error 35, "unsupported version") has a body that is neither v3
  nor the v0 that real brokers fall back to: a one-byte entry count, one entry without tagged
  fields, the throttle time and no tagged fields;
* it answers some SyncGroup v3 requests with a null assignment (bytes length -1), which the
  schema does not allow in any version;
* its MetadataResponse v13 (librdkafka 2.16.0) ends with one byte more than v13 defines: after the
  topics it writes four zero bytes where v13 has ErrorCode (int16) and an empty tagged section.
  Neither kio nor kafka-python reads it either.
* it answers an OffsetFetch v6 for all of a group's partitions (topics null, as librdkafka's
  AdminClient list_consumer_group_offsets asks) with a null Topics array, which no version of
  the response allows.

(Its transaction markers also carry a zero CRC; that is in the records, not the frame:
tests/records/test_real_captures.py.)

The tolerant reader (inspect_response) must keep the header of those and never raise. Kafka's
own Java readers accept the first and third (nothing checks for bytes after a complete body:
AbstractResponse.parseResponse, the generated *Data readers), so kwire's tolerant decoding reads
them with status ok and a warning; the nulls Kafka refuses too, so they stay errors there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import generated as g
from tests.quirks import MOCK_QUIRKS, kafka_reads, tolerant_warning

from capture_helpers import capture_path, expectations, rows

RECORDS = expectations()

# The peer quirks described above, by exact error (shared with the job test).


def _decode(row: dict[str, Any]) -> tuple[Any, Any]:
    if row["direction"] == "request":
        return g.decode_request(row["frame"])
    return g.decode_response(row["frame"], row["api_key"], row["api_version"])


@pytest.mark.parametrize("record", RECORDS, ids=[r["capture"] for r in RECORDS])
def test_every_captured_frame_of_our_apis_decodes(record: dict[str, Any]) -> None:
    seen: Counter[str] = Counter()
    failures = []
    for row in rows(capture_path(record), record.get("broker_ports", (9092,))):
        if row["frame"] is None or row["api_key"] not in g.REGISTRY:
            continue
        if row["direction"] == "response" and row["api_version"] is None:
            continue  # unpaired: no version to read it with (capture's tests count these)
        try:
            header, message = _decode(row)
        except g.KwireError as e:
            quirk = (row["api_key"], row["api_version"], type(e).__name__, str(e))
            if record["capture"].startswith("mock_") and quirk in MOCK_QUIRKS:
                seen["quirk"] += 1
                report = g.inspect_response(row["frame"], row["api_key"], row["api_version"])
                assert report.header is not None
                assert report.header.correlation_id == row["correlation_id"]
                warnings: list[str] = []
                if kafka_reads(type(e).__name__):
                    assert report.error is None and report.message is not None
                    assert report.warnings == (tolerant_warning(str(e)),)
                    again = g.decode_response(
                        row["frame"],
                        row["api_key"],
                        row["api_version"],
                        tolerant=True,
                        warnings=warnings,
                    )
                    assert again[1] == report.message and warnings == [tolerant_warning(str(e))]
                else:
                    assert report.error is not None and str(report.error) == str(e)
                    with pytest.raises(type(e), match="not nullable"):
                        g.decode_response(
                            row["frame"],
                            row["api_key"],
                            row["api_version"],
                            tolerant=True,
                            warnings=warnings,
                        )
                    assert warnings == []
                continue
            failures.append(f"{row['direction']} {row['api_key']} v{row['api_version']}: {e}")
            continue
        seen[row["direction"]] += 1
        if row["direction"] == "request":
            assert header.request_api_key == row["api_key"]
            assert header.request_api_version == row["api_version"]
            assert header.correlation_id == row["correlation_id"]
            assert header.client_id == row["client_id"]
            # What we decode we write back byte for byte (unknown tags included).
            assert g.encode_request(header, message)[4:] == row["frame"]
        else:
            assert header.correlation_id == row["correlation_id"]
            assert type(message).API_KEY == row["api_key"]
            again = g.encode_response(header, message, row["api_version"])
            assert again[4:] == row["frame"], (row["api_key"], row["api_version"])
    assert not failures, "\n".join(failures)
    assert seen["request"] > 0 and seen["response"] > 0, seen


@pytest.mark.parametrize("record", RECORDS, ids=[r["capture"] for r in RECORDS])
def test_captured_bodies_read_the_same_by_kio_and_kafka_python(record: dict[str, Any]) -> None:
    """Real traffic, three independent readers: each peer that knows a message and version
    decodes the captured body to the same values as kwire (the peers cannot read the mock's two
    out-of-spec answers either, so those are left out)."""
    from tests.peers import PEERS
    from tests.strategies import present_dict

    compared: Counter[str] = Counter()
    for row in rows(capture_path(record), record.get("broker_ports", (9092,))):
        if row["frame"] is None or row["api_key"] not in g.REGISTRY:
            continue
        if row["direction"] == "response" and row["api_version"] is None:
            continue
        try:
            _, message = _decode(row)
        except g.KwireError:
            continue  # the pinned quirks (the test above fails on anything else)
        version = row["api_version"]
        key = row["api_key"]
        if row["direction"] == "request":
            _, start = g.RequestHeader.read(row["frame"], 0, g.request_header_version(key, version))
        else:
            _, start = g.ResponseHeader.read(
                row["frame"], 0, g.response_header_version(key, version)
            )
        body = row["frame"][start:]
        name = type(message).__name__
        for peer in PEERS:
            if version not in peer.versions(name):
                continue
            assert peer.decode(name, version, body) == present_dict(
                message, version
            ), f"{peer.name} reads {name} v{version} differently"
            compared[peer.name] += 1
    assert compared["kafka-python"] > 0 and compared["kio"] > 0, compared
