"""Golden bytes worked out by hand from the wire spec, and the edge cases implementers get wrong.

Each expected byte string below was derived from kafka-wire.md (section numbers in comments), not
from kwire's own output.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import generated as g
from generated.api_versions_request import ApiVersionsRequest
from generated.api_versions_response import ApiVersion, ApiVersionsResponse
from generated.consumer_group_heartbeat_response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from generated.describe_groups_response import DescribeGroupsResponse, DescribedGroup
from generated.find_coordinator_request import FindCoordinatorRequest
from generated.heartbeat_request import HeartbeatRequest
from generated.join_group_response import JoinGroupResponse
from generated.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from generated.request_header import RequestHeader
from generated.response_header import ResponseHeader
from generator.render import compile_schemas, write_package
from tests.checks import check_head
from tests.strategies import Strategies, load_message

FIXTURES = Path(__file__).resolve().parents[1] / "generator" / "fixtures"


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


# -- frames (section 3.6, 4) --------------------------------------------------------------------


def test_api_versions_request_v3_frame() -> None:
    frame = g.encode_request(RequestHeader(18, 3, 7, "cli"), ApiVersionsRequest("kw", "1.0"))
    assert frame == h("00000016 0012 0003 00000007 0003 636c69 00 03 6b77 04 312e30 00")
    header, body = g.decode_request(frame[4:])
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (18, 3, 7)
    assert header.client_id == "cli" and body == ApiVersionsRequest("kw", "1.0")


def test_api_versions_response_v3_uses_header_v0_and_tagged_epoch() -> None:
    body = ApiVersionsResponse(0, [ApiVersion(18, 0, 4)], 0, finalized_features_epoch=5)
    frame = g.encode_response(ResponseHeader(7), body, 3)
    assert frame[4:] == h("00000007 0000 02 0012 0000 0004 00 00000000 01 01 08 0000000000000005")
    assert g.decode_response(frame[4:], 18, 3) == (ResponseHeader(7), body)
    assert body.encode(0) == h("0000 00000001 0012 0000 0004")


def test_api_versions_response_falls_back_to_v0_body() -> None:
    # A broker that does not know the requested version answers with a v0 body (section 4.2).
    v0 = ApiVersionsResponse(35, [ApiVersion(18, 0, 3)])
    frame = g.encode_response(ResponseHeader(9), v0, 0)
    header, body = g.decode_response(frame[4:], 18, 4)
    assert header.correlation_id == 9 and body.error_code == 35


def test_heartbeat_request_frames_v0_and_v4() -> None:
    hb = HeartbeatRequest(group_id="g", generation_id=5, member_id="m")
    v4 = g.encode_request(RequestHeader(12, 4, 1, "c"), hb)
    assert v4 == h("00000016 000c 0004 00000001 0001 63 00 0267 00000005 026d 00 00")
    v0 = g.encode_request(RequestHeader(12, 0, 1, "c"), hb)
    assert v0 == h("00000015 000c 0000 00000001 0001 63 0001 67 00000005 0001 6d")
    assert g.decode_request(v4[4:])[1] == hb == g.decode_request(v0[4:])[1]


def test_request_header_v2_keeps_a_classic_client_id_and_null() -> None:
    frame = g.encode_request(RequestHeader(12, 4, 1, None), HeartbeatRequest())
    assert frame[4:16] == h("000c 0004 00000001 ffff 00 01")  # int16 -1, header tags, empty group
    assert g.decode_request(frame[4:])[0].client_id is None


def test_response_header_versions() -> None:
    assert [g.response_header_version(12, v) for v in range(5)] == [0, 0, 0, 0, 1]
    assert [g.request_header_version(12, v) for v in range(5)] == [1, 1, 1, 1, 2]
    assert {g.response_header_version(18, v) for v in range(5)} == {0}
    assert g.request_header_version(18, 9) == 2  # above the known versions: still flexible
    assert g.request_header_version(47, 0) == 1 and g.response_header_version(69, 0) == 1
    with pytest.raises(g.UnknownApiKeyError):
        g.request_header_version(1234, 0)


# -- bodies -------------------------------------------------------------------------------------


def test_offset_commit_v8_ends_with_three_tagged_sections() -> None:
    part = OffsetCommitRequestPartition(partition_index=0, committed_offset=10)
    topic = OffsetCommitRequestTopic(name="t", partitions=[part])
    msg = OffsetCommitRequest(group_id="g", topics=[topic])
    assert msg.encode(8) == h(
        "0267 ffffffff 01 00 02 0274 02 00000000 000000000000000a ffffffff 01 00 00 00"
    )


def test_nullable_struct_uses_an_int8_marker_in_flexible_versions() -> None:
    null = ConsumerGroupHeartbeatResponse(member_epoch=1).encode(0)
    assert null[-2:] == h("ff 00")  # marker -1, then the body's tagged section
    tp = TopicPartitions(uuid.UUID(int=1), [3])
    given = ConsumerGroupHeartbeatResponse(assignment=Assignment([tp])).encode(0)
    tail = h("01 02 00000000000000000000000000000001 02 00000003 00 00 00")
    assert given.endswith(tail)
    decoded = ConsumerGroupHeartbeatResponse.decode(given, 0)
    assert decoded.assignment is not None and decoded.assignment.topic_partitions == [tp]


def test_nullability_varies_by_version() -> None:
    # JoinGroupResponse.ProtocolName: versions 0+, nullable only from v7 (section 7.6).
    assert JoinGroupResponse(protocol_name=None).encode(7)
    with pytest.raises(g.EncodeError, match=r"JoinGroupResponse v6: ProtocolName: is None"):
        JoinGroupResponse(protocol_name=None).encode(6)
    body = JoinGroupResponse(protocol_name="range").encode(6)
    nulled = body.replace(h("0672616e6765"), h("00"))  # compact "range" -> compact null
    with pytest.raises(g.NullValueError, match=r"v6: ProtocolName at byte \d+: null string"):
        JoinGroupResponse.decode(nulled, 6)


@pytest.mark.parametrize(
    ("message", "version", "field"),
    [
        (FindCoordinatorRequest(key="g"), 4, "Key"),
        (
            OffsetCommitRequest(
                topics=[
                    OffsetCommitRequestTopic(
                        name="t", partitions=[OffsetCommitRequestPartition(commit_timestamp=5)]
                    )
                ]
            ),
            2,
            "Topics[0].Partitions[0].CommitTimestamp",
        ),
        (
            DescribeGroupsResponse(groups=[DescribedGroup(authorized_operations=8)]),
            2,
            "Groups[0].AuthorizedOperations",
        ),
        (HeartbeatRequest(group_instance_id="i"), 0, "GroupInstanceId"),
    ],
)
def test_absent_non_default_non_ignorable_fields_raise(
    message: object, version: int, field: str
) -> None:
    with pytest.raises(g.EncodeError) as info:
        message.encode(version)  # type: ignore[attr-defined]
    assert info.value.path == field
    assert f"v{version}: {field}: holds a non-default value" in str(info.value)


def test_absent_ignorable_fields_are_dropped() -> None:
    msg = OffsetCommitRequest(retention_time_ms=123)  # versions 2-4, ignorable
    assert OffsetCommitRequest.decode(msg.encode(0), 0) == OffsetCommitRequest()
    assert FindCoordinatorRequest(key="", key_type=0).encode(4)  # defaults are fine


def test_unknown_tags_round_trip_in_tag_order() -> None:
    msg = HeartbeatRequest(group_id="g", unknown_tags={9: b"\x01", 4: b""})
    body = msg.encode(4)
    assert body.endswith(h("02 04 00 09 01 01"))
    assert HeartbeatRequest.decode(body, 4) == msg
    with pytest.raises(g.EncodeError, match="no tagged fields"):
        msg.encode(3)


def test_tagged_sections_come_back_byte_for_byte() -> None:
    """Known tags written at their default, unknown tags and a non-ascending order (as some
    brokers write them) survive decode then encode; a new value is added in tag order."""
    from generated.api_versions_response import ApiVersionsResponse

    plain = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
    canonical = plain.encode(3)
    assert canonical.endswith(b"\x00")  # no tagged fields when all hold their defaults
    # Tag 1 (FinalizedFeaturesEpoch = -1, its default), unknown tag 9, tag 0 (empty array).
    section = h("03 01 08 ffffffffffffffff 09 01 07 00 01 01")
    body = canonical[:-1] + section
    decoded = ApiVersionsResponse.decode(body, 3)
    assert decoded == ApiVersionsResponse(
        error_code=0, api_keys=[], throttle_time_ms=0, unknown_tags={9: b"\x07"}
    )
    assert decoded.wire_tags == (1, 9, 0)
    assert decoded.encode(3) == body
    assert decoded.to_dict() == ApiVersionsResponse.decode(body, 3).to_dict()
    # A field set after decoding that was not on the wire goes after the wire's tags.
    decoded.zk_migration_ready = True
    assert decoded.encode(3) == canonical[:-1] + h(
        "04 01 08 ffffffffffffffff 09 01 07 00 01 01 03 01 01"
    )
    # Without the wire order, the canonical form: defaults left out, ascending tags.
    decoded.wire_tags = None
    decoded.zk_migration_ready = False
    assert decoded.encode(3) == canonical[:-1] + h("01 09 01 07")


def test_any_non_zero_byte_reads_as_true() -> None:
    from generated.describe_groups_request import DescribeGroupsRequest

    body = DescribeGroupsRequest(["g"], True).encode(3)
    assert body[-1] == 1
    assert DescribeGroupsRequest.decode(body[:-1] + b"\x02", 3).include_authorized_operations


# -- the kitchen sink: dialect corners outside the family ---------------------------------------


@pytest.fixture(scope="module")
def ks(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    tmp = tmp_path_factory.mktemp("ks")
    write_package(compile_schemas([FIXTURES / "KitchenSinkRequest.json"]), tmp / "kwire_ks")
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module("kwire_ks.kitchen_sink_request")
    finally:
        sys.path.remove(str(tmp))


def test_kitchen_sink_defaults_on_the_wire(ks: ModuleType) -> None:
    k = ks.KitchenSinkRequest()
    head = h("0010 ee6b2800 3ff8000000000000 1f728a3b835344f6825ad1269b7bd6ec 0cafcacafcacafca")
    assert k.id == uuid.UUID(bytes=h("1f728a3b835344f6825ad1269b7bd6ec"))
    # v0: classic nulls (int32 -1), classic empty string, int8 null marker, int32 count, int32.
    assert k.encode(0) == head + h("ffffffff ffffffff 0000 ff 00000000 03 00000007")
    # v1: compact nulls, Legacy stays classic, per-struct tagged sections, Later untagged.
    assert k.encode(1) == head + h("00 00 0000 ff 01 03 00 00 00000007 00")
    # v2: Later is tagged and at its default, so omitted.
    assert k.encode(2) == head + h("00 00 0000 ff 01 03 00 00 00")


def test_kitchen_sink_tagged_null_and_struct_payloads(ks: ModuleType) -> None:
    k = ks.KitchenSinkRequest(cluster=None, label=None, leader=ks.LeaderInfo(5), later=8)
    tags = k.encode(2)[-18:]
    # tag 0 Later (4 bytes), tag 2 Label null written as u(0) because its default is "x",
    # tag 3 Leader: u(1) marker + int32 + struct tagged section; Cluster null is its default.
    assert tags == h("03 00 04 00000008 02 01 00 03 06 01 00000005 00")
    assert ks.KitchenSinkRequest.decode(k.encode(2), 2) == k
    nulled = ks.KitchenSinkRequest(leader=None).encode(1)
    assert nulled.endswith(h("01 03 01 00"))
    assert ks.KitchenSinkRequest.decode(nulled, 1).leader is None


def test_kitchen_sink_known_tag_in_wrong_version(ks: ModuleType) -> None:
    entry = ks.Entry("k", weight=4)
    body = ks.KitchenSinkRequest(entries=[entry]).encode(3)
    assert ks.KitchenSinkRequest.decode(body, 3).entries == [entry]
    # The same element bytes read at v2, where Weight is not a tag yet: a distinct error.
    errors = sys.modules["kwire_ks"]  # the compiled package carries its own runtime
    with pytest.raises(
        errors.UnexpectedTagError, match=r"v2: Entries\[0\] at byte \d+: tag 0 is not valid"
    ):
        ks.KitchenSinkRequest.decode(body, 2)


def test_kitchen_sink_tag_size_mismatch(ks: ModuleType) -> None:
    body = bytearray(ks.KitchenSinkRequest(leader=ks.LeaderInfo(5)).encode(2))
    assert body[-8:] == h("03 06 01 00000005 00")
    body[-7] = 7  # claim one byte more than the struct uses
    body += b"\x00"
    errors = sys.modules["kwire_ks"]
    with pytest.raises(
        errors.TagSizeMismatchError, match="tagged field 3 declares 7 bytes but its value used 6"
    ):
        ks.KitchenSinkRequest.decode(bytes(body), 2)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_kitchen_sink_round_trips_and_reads_its_head(ks: ModuleType, data: st.DataObject) -> None:
    """Every version of the dialect corners: a nullable struct, tagged fields at every level,
    commonStructs, uuids and floats before the first array: both directions, and read_head."""
    model = load_message(FIXTURES / "KitchenSinkRequest.json")
    version = data.draw(st.sampled_from(list(ks.KitchenSinkRequest.VALID_VERSIONS)))
    obj = data.draw(Strategies(model, ks).message_at(version))
    encoded = obj.encode(version)
    assert ks.KitchenSinkRequest.decode(encoded, version) == obj
    check_head(obj, encoded, version)
