"""Frame-level rules that live outside the schemas, and tolerant decoding for capture analysis."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from generated.api_versions_response import ApiVersion
from generated.heartbeat_request import HeartbeatRequest
from generated.metadata_response import MetadataResponseBroker, MetadataResponseTopic
from generated.request_header import RequestHeader
from generator.render import compile_schemas, write_package

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "generator" / "fixtures" / "controlled_shutdown"


def test_controlled_shutdown_v0_uses_request_header_v0(tmp_path: Path) -> None:
    for name in ("RequestHeader.json", "ResponseHeader.json"):
        shutil.copy(ROOT / "schemas" / name, tmp_path / name)
    for path in FIXTURES.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    write_package(compile_schemas([tmp_path], format=False), tmp_path / "out" / "kwire_cs")
    sys.path.insert(0, str(tmp_path / "out"))
    try:
        pkg = importlib.import_module("kwire_cs")
    finally:
        sys.path.remove(str(tmp_path / "out"))
    assert pkg.request_header_version(7, 0) == 0
    assert [pkg.request_header_version(7, v) for v in (1, 2, 3)] == [1, 1, 2]
    request = pkg.ControlledShutdownRequest(broker_id=3)
    v0 = pkg.encode_request(pkg.RequestHeader(7, 0, 5, "ignored"), request)
    assert v0 == bytes.fromhex("0000000c 0007 0000 00000005 00000003")  # no client id
    header, body = pkg.decode_request(v0[4:])
    assert header.correlation_id == 5 and header.client_id == "" and body == request
    v1 = pkg.encode_request(pkg.RequestHeader(7, 1, 5, "c"), request)
    assert v1[12:15] == bytes.fromhex("0001 63")


def _frame(version: int) -> bytes:
    hb = HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    return g.encode_request(RequestHeader(12, 4, 1, "c"), hb)[4:]


def test_newer_version_is_read_as_the_newest_known_and_flagged() -> None:
    newer = bytearray(_frame(4))
    newer[3] = 9  # the header claims Heartbeat v9, which the schema does not know
    report = g.inspect_request(bytes(newer))
    assert report.error is None and report.version == 4
    assert report.message.group_id == "g"
    assert report.warnings == ("version 9 is newer than the schema's 4: read as v4",)
    strict = g.inspect_request(bytes(newer), tolerant=False)
    assert isinstance(strict.error, g.UnsupportedVersionError) and strict.header is not None


def test_failed_body_keeps_the_header() -> None:
    report = g.inspect_request(_frame(4)[:-3])
    assert report.header.correlation_id == 1 and report.message is None
    assert isinstance(report.error, g.InvalidLengthError)  # MemberId's length outruns the frame
    try:
        g.decode_request(_frame(4)[:-3])
    except g.DecodeError as e:
        assert e.header.correlation_id == 1  # type: ignore[attr-defined]
    else:
        raise AssertionError("a cut frame must not decode")


def test_unknown_api_key_keeps_the_v1_header() -> None:
    frame = bytes.fromhex("7d00 0003 00000005 0001 78") + b"\x00" * 8  # api key 32000
    report = g.inspect_request(frame)
    assert isinstance(report.error, g.UnknownApiKeyError)
    assert report.header.correlation_id == 5 and report.header.client_id == "x"


def test_inspect_never_raises_on_garbage() -> None:
    for frame in (b"", b"\x00", b"\x00\x0c\x00\x04", b"\xff" * 40):
        report = g.inspect_request(frame)
        assert report.message is None and isinstance(report.error, g.KwireError)
    strict = g.inspect_request(_frame(4) + b"\x00", tolerant=False)
    assert strict.message is None and isinstance(strict.error, g.TrailingBytesError)
    report = g.inspect_response(b"\x00\x00", 12, 4)
    assert isinstance(report.error, g.TruncatedError)


# -- reading as Kafka's Java readers read (docs/outputs.md, Tolerance) -------------------------

KAFKA_IGNORES = "after the message (from byte {at}) ignored, as Kafka's reader does"


def _trailing(n: int, at: int) -> str:
    return f"{n} byte{'' if n == 1 else 's'} " + KAFKA_IGNORES.format(at=at)


def test_bytes_after_the_message_are_ignored_with_a_warning() -> None:
    frame = _frame(4) + b"\xde\xad"
    with pytest.raises(g.TrailingBytesError, match="2 bytes left after a complete message"):
        g.decode_request(frame)
    warnings: list[str] = []
    header, body = g.decode_request(frame, tolerant=True, warnings=warnings)
    assert (header, body) == g.decode_request(_frame(4))
    assert warnings == [_trailing(2, len(frame) - 2)]
    report = g.inspect_request(frame)
    assert report.error is None and report.version == 4 and report.message == body
    assert report.warnings == (_trailing(2, len(frame) - 2),)
    # Without a list to fill, the warnings are dropped; the frame still decodes.
    assert g.decode_request(frame, tolerant=True)[1] == body
    # Responses too: the Metadata v13 answers of librdkafka's mock carry one byte more.
    md = g.MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=1)
    resp = g.encode_response(g.ResponseHeader(correlation_id=4), md, 13)[4:] + b"\x00"
    with pytest.raises(g.TrailingBytesError):
        g.decode_response(resp, 3, 13)
    warnings = []
    assert g.decode_response(resp, 3, 13, tolerant=True, warnings=warnings)[1] == md
    assert warnings == [_trailing(1, len(resp) - 1)]


def test_invalid_utf8_reads_as_java_does() -> None:
    """Readable.readString is `new String(bytes, UTF_8)`: each bad sequence becomes U+FFFD. In a
    struct inside an array, in the header's client id, classic and compact strings alike."""
    name = "t\u00e9st"
    md = g.MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
        cluster_id="c",
        controller_id=1,
        topics=[MetadataResponseTopic(error_code=0, name=name, partitions=[])],
    )
    for version in (1, 9, 12):  # classic strings, then compact ones
        frame = g.encode_response(g.ResponseHeader(correlation_id=4), md, version)[4:]
        bad = frame.replace(name.encode(), b"t\xff\xfest")
        at = bad.index(b"t\xff") + 1
        with pytest.raises(g.InvalidUtf8Error, match=rf"Topics\[0\]\.Name at byte .*{at}"):
            g.decode_response(bad, 3, version)
        warnings: list[str] = []
        _, body = g.decode_response(bad, 3, version, tolerant=True, warnings=warnings)
        assert body.topics[0].name == b"t\xff\xfest".decode("utf-8", "replace") == "t\ufffd\ufffdst"
        assert warnings == [f"invalid UTF-8 at byte {at} read as U+FFFD, as Kafka's reader does"]
    # The request header's client id, and two bad strings in one frame.
    hb = HeartbeatRequest(group_id="gr\u00fcn", generation_id=3, member_id="m")
    frame = g.encode_request(RequestHeader(12, 4, 1, "cl\u00e9"), hb)[4:]
    bad = frame.replace("cl\u00e9".encode(), b"cl\xff\xfe").replace(
        "gr\u00fcn".encode(), b"gr\xfc\xfcn"
    )
    header, body = g.decode_request(bad, tolerant=True, warnings=(warnings := []))
    assert header.client_id == "cl\ufffd\ufffd" and body.group_id == "gr\ufffd\ufffdn"
    assert warnings == [
        f"invalid UTF-8 at byte {bad.index(b'cl') + 2} (and 1 more string) read as U+FFFD, "
        "as Kafka's reader does"
    ]
    # Strict reading is unchanged by a tolerant read before it.
    with pytest.raises(g.InvalidUtf8Error):
        g.decode_request(bad)


def test_what_kafka_refuses_stays_refused() -> None:
    # A null in a field that is not nullable (the mock's SyncGroup v3 assignment).
    sg = g.encode_response(
        g.ResponseHeader(correlation_id=2),
        g.SyncGroupResponse(throttle_time_ms=0, error_code=0, assignment=b"xy"),
        3,
    )[4:]
    null = sg[:-6] + b"\xff\xff\xff\xff"
    for tolerant in (False, True):
        with pytest.raises(g.NullValueError):
            g.decode_response(null, 14, 3, tolerant=tolerant)
    # A length past the end, and a version newer than any known (not ApiVersions).
    for frame in (_frame(4)[:-3], bytes(bytearray(_frame(4))[:3]) + b"\x09" + _frame(4)[4:]):
        report = g.inspect_request(frame, newer_versions=False)
        assert report.message is None and report.error is not None
        with pytest.raises(g.KwireError):
            g.decode_request(frame, tolerant=True)


def test_a_known_tag_whose_size_disagrees_stays_malformed() -> None:
    """Kafka reads a known tagged field by its type and ignores its declared size; what follows
    is then read from elsewhere than the frame says, so kwire refuses it, tolerant or not."""
    body = g.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
        cluster_id="x",
    )
    encoded = bytearray(body.encode(12))
    # cluster_id is tag 0 of FetchRequest v12+: ... 01 (one tag) 00 (tag 0) 03 (size) 02 'x'
    at = encoded.rindex(bytes([0x01, 0x00, 0x02, 0x02]) + b"x")
    encoded[at + 2] = 0x03  # declares 3 bytes, the value uses 2
    encoded += b"\x00"
    frame = g.encode_request(RequestHeader(1, 12, 1, "c"), body)[4:]
    head = len(frame) - len(body.encode(12))
    bad = frame[:head] + bytes(encoded)
    for tolerant in (False, True):
        with pytest.raises(g.TagSizeMismatchError):
            g.decode_request(bad, tolerant=tolerant)


def test_apiversions_versions_newer_than_known() -> None:
    """A client probes a broker with its newest ApiVersions; the broker reads an unknown
    version as v0 without reading the body (RequestContext.parseRequest); the answer it cannot
    read at the request's version is read again as v0 (ApiVersionsResponse.parse)."""
    req = g.ApiVersionsRequest(client_software_name="librdkafka", client_software_version="9")
    frame = bytearray(g.encode_request(RequestHeader(18, 4, 7, "c"), req)[4:])
    frame[2:4] = (9).to_bytes(2, "big")
    with pytest.raises(g.UnsupportedVersionError):
        g.decode_request(bytes(frame))
    warnings: list[str] = []
    header, body = g.decode_request(bytes(frame), tolerant=True, warnings=warnings)
    assert header.request_api_version == 9 and header.client_id == "c"
    assert body == g.ApiVersionsRequest()
    assert warnings == [
        "v9 is newer than any known: read as v0 with its body unread, as Kafka's broker does"
    ]
    report = g.inspect_request(bytes(frame))
    assert report.version == 0 and report.error is None
    # The broker's v0 answer (UNSUPPORTED_VERSION, its versions of ApiVersions) to a v3 request.
    v0 = g.ApiVersionsResponse(
        error_code=35,
        api_keys=[ApiVersion(api_key=18, min_version=0, max_version=2)],
    )
    answer = g.encode_response(g.ResponseHeader(correlation_id=7), v0, 0)[4:]
    header, body = g.decode_response(answer, 18, 3)  # the protocol: strict reads it too
    assert body.error_code == 35 and body.api_keys[0].max_version == 2
    report = g.inspect_response(answer, 18, 3)
    assert report.version == 0 and report.message == body
    assert report.warnings[0].startswith("read as v0, as Kafka's client does when v3 does not read")


REQUESTS = sorted((k, i.request) for k, i in g.REGISTRY.items() if i.request is not None)
RESPONSES = sorted((k, i.response) for k, i in g.REGISTRY.items() if i.response is not None)


def _strategies(cls):  # type: ignore[no-untyped-def]
    import importlib

    from tests.strategies import Strategies, load_message

    schema = ROOT / "schemas" / f"{cls.__name__}.json"
    return Strategies(load_message(schema), importlib.import_module(cls.__module__))


@pytest.mark.parametrize(
    ("key", "cls"), REQUESTS + RESPONSES, ids=lambda x: str(getattr(x, "__name__", x))
)
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_message_reads_with_bytes_after_it(key: int, cls, data: st.DataObject) -> None:  # type: ignore[no-untyped-def]
    """Every API, both directions, a version drawn from all of its: the frame with bytes after
    it reads as the frame without them, strict decoding refuses it, tolerant decoding warns."""
    version = data.draw(st.sampled_from(list(cls.VALID_VERSIONS)), label="version")
    if key == 18 and cls is g.ApiVersionsResponse:
        return  # read again as v0 when it does not read (covered above)
    message = data.draw(_strategies(cls).message_at(version), label="message")
    extra = data.draw(st.binary(min_size=1, max_size=6), label="extra")
    if cls.__name__.endswith("Request"):
        frame = g.encode_request(RequestHeader(key, version, 5, "c"), message)[4:]
        decode = lambda f, **kw: g.decode_request(f, **kw)  # noqa: E731
    else:
        frame = g.encode_response(g.ResponseHeader(correlation_id=5), message, version)[4:]
        decode = lambda f, **kw: g.decode_response(f, key, version, **kw)  # noqa: E731
    want = decode(frame)
    with pytest.raises(g.TrailingBytesError):
        decode(frame + extra)
    warnings: list[str] = []
    assert decode(frame + extra, tolerant=True, warnings=warnings) == want
    assert warnings == [_trailing(len(extra), len(frame))]
