"""Bad values give an EncodeError naming the message, version and field path; nothing else."""

from __future__ import annotations

import uuid

import pytest

import generated as g
from generated.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from generated.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from generated.join_group_response import JoinGroupResponse
from generated.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)


def commit(**partition: object) -> OffsetCommitRequest:
    part = OffsetCommitRequestPartition(**partition)  # type: ignore[arg-type]
    return OffsetCommitRequest(topics=[OffsetCommitRequestTopic(name="t", partitions=[part])])


@pytest.mark.parametrize(
    ("message", "version", "expected"),
    [
        (
            commit(partition_index=2**31),
            8,
            "v8: Topics[0].Partitions[0].PartitionIndex: 2147483648 is out of range",
        ),
        (
            commit(committed_offset="7"),
            2,
            "v2: Topics[0].Partitions[0].CommittedOffset: expected int, got str",
        ),
        (OffsetCommitRequest(member_id=None), 2, "v2: MemberId: is None, but the field is not nullable"),  # type: ignore[arg-type]
        (
            commit(committed_metadata="é" * 16384),
            8,
            "CommittedMetadata: string of 32768 UTF-8 bytes exceeds the limit of 32767",
        ),
        (OffsetCommitRequest(group_id=5), 8, "v8: GroupId: expected str, got int"),  # type: ignore[arg-type]
        (OffsetCommitRequest(topics=None), 8, "v8: Topics: is None, but the field is not nullable"),  # type: ignore[arg-type]
        (OffsetCommitRequest(topics=[None]), 8, "v8: Topics[0]: expected OffsetCommitRequestTopic, got NoneType"),  # type: ignore[list-item]
        (JoinGroupRequest(protocols=[JoinGroupRequestProtocol("r", metadata="x")]), 5, "v5: Protocols[0].Metadata: expected bytes, got str"),  # type: ignore[arg-type]
        (JoinGroupResponse(skip_assignment="yes"), 9, "v9: SkipAssignment: expected bool, got str"),  # type: ignore[arg-type]
        (
            ConsumerGroupHeartbeatRequest(
                topic_partitions=[TopicPartitions(uuid.uuid4(), [1, 2**40])]
            ),
            0,
            "v0: TopicPartitions[0].Partitions[1]: 1099511627776 is out of range",
        ),
        (ConsumerGroupHeartbeatRequest(subscribed_topic_names=["a", 3]), 0, "v0: SubscribedTopicNames[1]: expected str, got int"),  # type: ignore[list-item]
        (ConsumerGroupHeartbeatRequest(topic_partitions=[TopicPartitions("id", [])]), 0, "v0: TopicPartitions[0].TopicId: expected uuid.UUID, got str"),  # type: ignore[arg-type]
        (
            JoinGroupRequest(group_instance_id="static-1"),
            4,
            "v4: GroupInstanceId: holds a non-default value, but this version does not have GroupInstanceId",
        ),
        (
            JoinGroupRequest(unknown_tags={0: b""}),
            5,
            "v5: unknown tagged fields are set, but this version has no tagged fields",
        ),
    ],
)
def test_encode_errors_name_field_and_version(message: object, version: int, expected: str) -> None:
    with pytest.raises(g.EncodeError) as info:
        message.encode(version)  # type: ignore[attr-defined]
    assert expected in str(info.value)
    assert str(info.value).startswith(f"{type(message).__name__} v{version}: ")


def test_strings_of_exactly_32767_bytes_encode() -> None:
    body = commit(committed_metadata="x" * 32767).encode(8)
    assert (
        OffsetCommitRequest.decode(body, 8).topics[0].partitions[0].committed_metadata
        == "x" * 32767
    )


def test_unsupported_versions() -> None:
    with pytest.raises(
        g.UnsupportedVersionError,
        match=r"JoinGroupRequest: version 10 is not supported \(valid: 0-9\)",
    ):
        JoinGroupRequest().encode(10)
    with pytest.raises(g.UnsupportedVersionError):
        JoinGroupRequest.decode(b"", -1)
