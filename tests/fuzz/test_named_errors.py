"""One small crafted input per named error, and the allocation guard for absurd counts.

Each input is the smallest that reaches the error; the assertions pin the error class and the
facts the Reliability contract promises (offset, path, message name, version, str()).
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import generated as g
from generated import (
    ApiVersionsResponse,
    DescribeGroupsRequest,
    HeartbeatRequest,
    HeartbeatResponse,
)
from tests.fuzz.harness import contract_problems


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def raised(fn: Any, *args: Any) -> g.KwireError:
    with pytest.raises(g.KwireError) as info:
        fn(*args)
    return info.value


# (error class, message class, version, input, offset, path, words the problem must contain)
CASES = [
    (g.TruncatedError, HeartbeatRequest, 0, h("00"), 0, "GroupId", "ends"),
    (g.InvalidLengthError, HeartbeatRequest, 0, h("0005 6162"), 0, "GroupId", "length 5"),
    (g.NullValueError, HeartbeatRequest, 0, h("ffff"), 0, "GroupId", "null string"),
    (g.NullValueError, HeartbeatRequest, 4, h("00"), 0, "GroupId", "null string"),  # compact 0
    (g.InvalidUtf8Error, HeartbeatRequest, 0, h("0002 c328 00000000 0000"), 0, "GroupId", "UTF-8"),
    (g.VarintError, HeartbeatRequest, 4, h("8080808080 01"), 0, "GroupId", "varint"),
    # ApiVersionsResponse v3: tag 1 (FinalizedFeaturesEpoch, an int64) declared as 9 bytes.
    (
        g.TagSizeMismatchError,
        ApiVersionsResponse,
        3,
        h("0000 01 00000000 01 01 09 0000000000000001 00"),
        10,
        "FinalizedFeaturesEpoch",
        "declares 9 bytes",
    ),
    (g.TrailingBytesError, HeartbeatResponse, 0, h("0000 00"), 2, "", "1 bytes left"),
    # A nested field: the second group id of DescribeGroups v0 claims more bytes than remain.
    (
        g.InvalidLengthError,
        DescribeGroupsRequest,
        0,
        h("00000002 0001 61 0009 62"),
        7,
        "Groups[1]",
        "length 9",
    ),
]


@pytest.mark.parametrize(
    ("error", "cls", "version", "data", "offset", "path", "words"),
    CASES,
    ids=[f"{c[0].__name__}-{c[1].__name__}-v{c[2]}" for c in CASES],
)
def test_named_error(
    error: type, cls: Any, version: int, data: bytes, offset: int, path: str, words: str
) -> None:
    e = raised(cls.decode, data, version)
    assert type(e) is error, f"{type(e).__name__}: {e}"
    assert isinstance(e, g.DecodeError)
    assert (e.offset, e.path, e.message_name, e.version) == (offset, path, cls.__name__, version)
    assert words in e.problem
    assert contract_problems(e, data) == []
    assert str(e).startswith(f"{cls.__name__} v{version}: ")
    assert f"at byte {offset}" in str(e)


def test_unexpected_tag_error(kitchen_sink: ModuleType) -> None:
    """No shipped schema has a tag that is invalid in a flexible version, so the generator's
    kitchen-sink fixture supplies one: Entries[].Weight is tag 0 only from v3."""
    ks = kitchen_sink
    module = ks.kitchen_sink_request
    body = module.KitchenSinkRequest(entries=[module.Entry("k", weight=4)]).encode(3)
    with pytest.raises(ks.KwireError) as info:  # the compiled package has its own runtime
        module.KitchenSinkRequest.decode(body, 2)
    e = info.value
    assert type(e) is ks.UnexpectedTagError
    assert e.path == "Entries[0]" and e.message_name == "KitchenSinkRequest" and e.version == 2
    assert 0 <= e.offset <= len(body)
    assert "tag 0 is not valid" in str(e)


def test_frame_level_errors() -> None:
    assert type(raised(g.decode_request, h("000c"))) is g.TruncatedError
    e = raised(g.decode_request, h("7fff 0000 00000001 0000"))
    assert type(e) is g.UnknownApiKeyError and e.api_key == 0x7FFF
    e = raised(g.decode_request, h("000c 0063 00000001 0000 00"))  # Heartbeat v99, header v2
    assert type(e) is g.UnsupportedVersionError
    e = raised(g.decode_response, h("00000001 00"), 12, 99)  # response header v1
    assert type(e) is g.UnsupportedVersionError
    assert type(raised(g.decode_response, h("00000001"), 5000, 0)) is g.UnknownApiKeyError
    e = raised(g.decode_version_prefixed, g.ConsumerProtocolAssignment, h("00"))
    assert type(e) is g.TruncatedError and e.message_name == "ConsumerProtocolAssignment"
    e = raised(g.decode_version_prefixed, g.ConsumerProtocolAssignment, h("ffff"))
    assert type(e) is g.UnsupportedVersionError


# -- allocation guard -----------------------------------------------------------------------------

# Each input is at most 20 bytes and claims ~2^31 elements or bytes (or a 2^32 uvarint count).
HUGE = [
    # DescribeGroups v0 request frame: header, then Groups with int32 count 2^31-1.
    ("request", h("000f 0000 00000001 0000 7fffffff 000000000000")),
    # DescribeGroups v5 (flexible) frame: compact Groups count 2^32-2.
    ("request", h("000f 0005 00000001 0000 00 ffffffff0f 00000000")),
    # OffsetCommit v2 body: GroupId "", generation, member "", retention, Topics count 2^31-1.
    ("decode:OffsetCommitRequest:v2", h("0000 00000000 0000 0000000000000000 7fffffff")),
    # JoinGroup v0 body: Protocols count 2^31-1 after the strings and timeout.
    ("decode:JoinGroupRequest:v0", h("0000 00000000 0000 0000 7fffffff")),
    # SyncGroup v0 response body: Assignment bytes of length 2^31-1.
    ("decode:SyncGroupResponse:v0", h("0000 7fffffff 00")),
    # A flexible body whose tagged section claims 2^32-1 fields (Heartbeat v4 response).
    ("decode:HeartbeatResponse:v4", h("00000000 0000 ffffffff0f 00")),
    # A tagged field claiming 2^32-1 bytes.
    ("decode:HeartbeatResponse:v4", h("00000000 0000 01 05 ffffffff0f 00")),
    # OffsetFetch v8 response: Groups compact count 2^32-2.
    ("decode:OffsetFetchResponse:v8", h("00000000 ffffffff0f 0000")),
    # ConsumerProtocolAssignment v1 (version-prefixed): AssignedPartitions count 2^31-1.
    ("prefixed:ConsumerProtocolAssignment", h("0001 7fffffff 0000")),
]


def _call(target: str, data: bytes) -> Any:
    if target == "request":
        return g.decode_request(data)
    if target.startswith("prefixed:"):
        return g.decode_version_prefixed(g.MESSAGES[target.split(":")[1]], data)
    _, name, v = target.split(":")
    cls: Any = g.MESSAGES[name]
    return cls.decode(data, int(v[1:]))


@pytest.mark.parametrize(("target", "data"), HUGE, ids=[f"{t}-{d.hex()}" for t, d in HUGE])
def test_huge_counts_fail_before_allocating(target: str, data: bytes) -> None:
    assert len(data) <= 20
    tracemalloc.start()
    start = time.perf_counter()
    try:
        e = raised(_call, target, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - start
    assert type(e) in (g.InvalidLengthError, g.TruncatedError), f"{type(e).__name__}: {e}"
    assert contract_problems(e, data) == []
    assert peak < 64 * 1024, f"peak {peak} bytes for a {len(data)}-byte input"
    assert elapsed < 0.05


def test_huge_count_fails_through_the_tolerant_inspectors_too() -> None:
    if not hasattr(g, "inspect_request"):
        pytest.skip("this generated package has no inspect_request")
    tracemalloc.start()
    try:
        report = g.inspect_request(HUGE[0][1])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert type(report.error) is g.InvalidLengthError and report.header is not None
    assert peak < 64 * 1024


def test_tests_cover_every_named_error() -> None:
    named = {
        g.TruncatedError,
        g.InvalidLengthError,
        g.NullValueError,
        g.InvalidUtf8Error,
        g.VarintError,
        g.TagSizeMismatchError,
        g.TrailingBytesError,
    }
    assert named <= {c[0] for c in CASES}  # UnexpectedTagError: test_unexpected_tag_error
    assert Path(__file__).read_text().count("UnexpectedTagError") >= 2
