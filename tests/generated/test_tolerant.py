"""Frame-level rules that live outside the schemas, and tolerant decoding for capture analysis."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import generated as g
from generated.heartbeat_request import HeartbeatRequest
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
    for frame in (b"", b"\x00", b"\x00\x0c\x00\x04", b"\xff" * 40, _frame(4) + b"\x00"):
        report = g.inspect_request(frame)
        assert report.message is None and isinstance(report.error, g.KwireError)
    report = g.inspect_response(b"\x00\x00", 12, 4)
    assert isinstance(report.error, g.TruncatedError)
