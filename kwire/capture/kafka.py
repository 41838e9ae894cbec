"""Just enough of the Kafka protocol to frame, label and pair captured traffic.

Capture must handle every api key, including ones kwire has no codecs for, so it reads only the
request and response headers (and Produce's acks) with the small functions here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# A length prefix outside this range means the stream is not Kafka or we lost our place in it.
MAX_FRAME_LENGTH = 100 * 1024 * 1024
# Plausibility bounds used when guessing whether bytes start a request (direction inference,
# resynchronisation after a gap). Real api keys are below 100 today and versions below 20.
MAX_PLAUSIBLE_API_KEY = 127
MAX_PLAUSIBLE_API_VERSION = 31

PRODUCE = 0
CONTROLLED_SHUTDOWN = 7
# Produce became flexible (compact strings, header v2) at version 9.
PRODUCE_FIRST_FLEXIBLE = 9

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    52: "Vote",
    53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch",
    55: "DescribeQuorum",
    56: "AlterPartition",
    57: "UpdateFeatures",
    58: "Envelope",
    59: "FetchSnapshot",
    60: "DescribeCluster",
    61: "DescribeProducers",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    64: "UnregisterBroker",
    65: "DescribeTransactions",
    66: "ListTransactions",
    67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    73: "AssignReplicasToDirs",
    74: "ListClientMetricsResources",
    75: "DescribeTopicPartitions",
    76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe",
    78: "ShareFetch",
    79: "ShareAcknowledge",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
    83: "InitializeShareGroupState",
    84: "ReadShareGroupState",
    85: "WriteShareGroupState",
    86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
}

_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def api_name(api_key: int | None) -> str:
    if api_key is None:
        return "unknown"
    return API_NAMES.get(api_key, f"ApiKey{api_key}")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    # Offset of the first byte after client_id (the tagged section in header v2, else the body).
    end: int


def parse_request_header(frame: bytes | memoryview) -> RequestHeader | None:
    """Read a request header from a frame without its length prefix; None if it cannot be one.

    `frame` may be just the first bytes of a longer frame: a client_id cut short gives None.
    """
    if len(frame) < 8:
        return None
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    if api_key < 0 or api_version < 0:
        return None
    if api_key == CONTROLLED_SHUTDOWN and api_version == 0:
        return RequestHeader(api_key, api_version, correlation_id, None, 8)
    if len(frame) < 10:
        return None
    (n,) = _I16.unpack_from(frame, 8)
    if n == -1:
        return RequestHeader(api_key, api_version, correlation_id, None, 10)
    if n < 0 or 10 + n > len(frame):
        return None
    client_id = bytes(frame[10 : 10 + n]).decode("utf-8", errors="replace")
    return RequestHeader(api_key, api_version, correlation_id, client_id, 10 + n)


def plausible_request(frame: bytes | memoryview) -> RequestHeader | None:
    """The header, if these bytes look like the start of a request (used when guessing)."""
    header = parse_request_header(frame)
    if header is None:
        return None
    if header.api_key > MAX_PLAUSIBLE_API_KEY or header.api_version > MAX_PLAUSIBLE_API_VERSION:
        return None
    if header.client_id is not None and "\ufffd" in header.client_id:
        return None
    return header


def response_correlation_id(frame: bytes | memoryview) -> int | None:
    if len(frame) < 4:
        return None
    return int(_I32.unpack_from(frame, 0)[0])


def _uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int] | None:
    value = 0
    shift = 0
    while pos < len(buf) and shift <= 28:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    return None


def produce_acks(frame: bytes | memoryview, header: RequestHeader) -> int | None:
    """The Acks field of a ProduceRequest, or None when the bytes do not reach it."""
    pos = header.end
    version = header.api_version
    if version >= PRODUCE_FIRST_FLEXIBLE:
        # Header v2 ends with a tagged-field section: count, then (tag, size, payload) each.
        got = _uvarint(frame, pos)
        if got is None:
            return None
        count, pos = got
        for _ in range(count):
            tag = _uvarint(frame, pos)
            if tag is None:
                return None
            size = _uvarint(frame, tag[1])
            if size is None:
                return None
            pos = size[1] + size[0]
        # TransactionalId: compact nullable string, uvarint length + 1 (0 means null).
        got = _uvarint(frame, pos)
        if got is None:
            return None
        n, pos = got
        pos += max(n - 1, 0)
    elif version >= 3:
        # TransactionalId: int16-length nullable string.
        if pos + 2 > len(frame):
            return None
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2 + max(n, 0)
    if pos + 2 > len(frame):
        return None
    return int(_I16.unpack_from(frame, pos)[0])
