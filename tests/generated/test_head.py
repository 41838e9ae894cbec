"""read_head: the leading fields of a message, for filters and column pruning over many frames."""

from __future__ import annotations

import pytest

import generated as g
from generated.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from generated.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

COMMIT = OffsetCommitRequest(
    group_id="billing",
    generation_id_or_member_epoch=7,
    member_id="m-1",
    topics=[
        OffsetCommitRequestTopic(
            name="orders", partitions=[OffsetCommitRequestPartition(p, 100 + p) for p in range(3)]
        )
    ],
)


def test_head_fields_stop_at_the_first_array() -> None:
    assert OffsetCommitRequest.HEAD_FIELDS[8] == (
        "group_id",
        "generation_id_or_member_epoch",
        "member_id",
        "group_instance_id",
        "retention_time_ms",
    )
    assert "protocols" not in JoinGroupRequest.HEAD_FIELDS[5]
    assert JoinGroupRequest.HEAD_FIELDS[5][-1] == "protocol_type"
    # No array or struct at all: no head, read_head reads the body whole.
    assert g.HeartbeatRequest.HEAD_FIELDS == {}


def test_damage_after_the_head_is_not_read() -> None:
    body = bytearray(COMMIT.encode(8))
    topics_at = 1 + len("billing") + 4 + 1 + len("m-1") + 1  # after GroupInstanceId (null)
    assert body[topics_at] == 2  # one topic, as a compact count
    body[topics_at] = 0x7F  # 126 topics in a 60-byte body
    with pytest.raises(g.InvalidLengthError, match="Topics"):
        OffsetCommitRequest.decode(bytes(body), 8)
    head = OffsetCommitRequest.read_head(bytes(body), 0, 8)
    assert (head.group_id, head.generation_id_or_member_epoch, head.member_id) == (
        "billing",
        7,
        "m-1",
    )
    assert head.topics == []


def test_a_damaged_head_raises_the_checked_decoders_error() -> None:
    body = COMMIT.encode(5)
    cut = body[:5]  # inside GroupId
    with pytest.raises(g.DecodeError) as whole:
        OffsetCommitRequest.decode(cut, 5)
    with pytest.raises(g.DecodeError) as head:
        OffsetCommitRequest.read_head(cut, 0, 5)
    assert str(head.value) == str(whole.value)
    assert "GroupId at byte 0" in str(head.value)


def test_unsupported_versions_are_refused() -> None:
    with pytest.raises(g.UnsupportedVersionError):
        JoinGroupRequest.read_head(
            JoinGroupRequest(protocols=[JoinGroupRequestProtocol("range")]).encode(9), 0, 99
        )
