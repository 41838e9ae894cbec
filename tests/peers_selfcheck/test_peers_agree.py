"""Self-check of tests/peers.py: kio and kafka-python, driven through the adapter, agree.

For every message of the family and every version both peers support, values
are generated from kafka-python's bundled Kafka JSON schemas (fields present
in that version, nullability, tagged fields, nested structs/arrays).  Each
value is encoded by both peers; the bytes must be identical, and each peer
must decode the other's bytes back to the original dict.  The peers share no
code, so agreement shows that both adapters map the plain-data shape onto the
wire the same way.  Messages only kio has (ConsumerGroupHeartbeat/Describe) get
hand-computed byte checks instead, as do the old OffsetCommit/OffsetFetch
versions only kafka-python offers.
"""

from __future__ import annotations

import functools
import random
import uuid
import warnings

import pytest

from tests.peers import (
    FAMILY,
    KAFKA_PYTHON,
    KIO,
    PEERS,
    Unrepresentable,
    common_versions,
    snake_case,
)


@functools.cache
def load_json(message: str) -> dict:
    """kafka-python's bundled schema (commonStructs resolved); it warns on read_text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.schemas import load_json as kafka_python_load_json

        return kafka_python_load_json(message)


def in_versions(spec: str | None, v: int) -> bool:
    """Kafka version range syntax: "none", "N", "A-B", "A+"."""
    if spec is None:
        return False
    spec = spec.strip()
    if spec == "none" or spec == "":
        return False
    if spec.endswith("+"):
        return int(spec[:-1]) <= v
    lo, _, hi = spec.partition("-")
    return int(lo) <= v <= int(hi or lo)


# Codes kio's ErrorCode enum knows (kio cannot hold any other; see test_kio_quirks).
ERROR_CODES = (0, -1, 3, 14, 15, 16, 22, 25, 27, 35, 69, 79, 110)
STRINGS = ("", "g", "consumer", "grüße-☃-😀", "x" * 40, "ÿ" * 150)  # >127 bytes: 2-byte varint
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


class Gen:
    """Values for one (message, version); mode: rich | sparse | random."""

    def __init__(self, version: int, mode: str, seed: str) -> None:
        self.v = version
        self.mode = mode
        self.rng = random.Random(seed)

    def struct(self, fields: list[dict]) -> dict:
        return {
            snake_case(f["name"]): self.field(f)
            for f in fields
            if in_versions(f["versions"], self.v)
        }

    def field(self, f: dict) -> object:
        rng, mode = self.rng, self.mode
        tagged = "tag" in f and in_versions(f.get("taggedVersions"), self.v)
        nullable = in_versions(f.get("nullableVersions"), self.v)
        if tagged and (mode == "sparse" or mode == "random" and rng.random() < 0.4):
            return self.default(f)
        if nullable and (mode == "sparse" or mode == "random" and rng.random() < 0.3):
            return None
        t = f["type"]
        if t.startswith("[]"):
            n = {"rich": 2, "sparse": 0}.get(mode) or rng.randint(0, 3)
            if "fields" in f:
                return [self.struct(f["fields"]) for _ in range(n)]
            return [self.primitive(t[2:], f) for _ in range(n)]
        if "fields" in f:
            return self.struct(f["fields"])
        return self.primitive(t, f)

    def default(self, f: dict) -> object:
        d = f.get("default", "")
        t = f["type"]
        if d == "null":
            return None
        if t.startswith("[]"):
            return []
        if t == "bool":
            return d == "true"
        if t in INT_RANGES:
            return int(d, 0) if isinstance(d, str) and d else int(d or 0)
        if t == "string":
            return d
        if t == "uuid":
            return uuid.UUID(int=0)
        if t == "float64":
            return float(d or 0)
        if t in ("bytes", "records"):
            return b""
        raise AssertionError(f"no default for {f}")

    def primitive(self, t: str, f: dict) -> object:
        rng, name = self.rng, f["name"]
        if t in INT_RANGES:
            lo, hi = INT_RANGES[t]
            if name.endswith("ErrorCode"):
                return rng.choice(ERROR_CODES)
            if t == "int64" and name.endswith("Ms"):
                lo, hi = -(2**40), 2**40  # kio: timedelta_i64 via float seconds
            if self.mode == "rich":
                return rng.choice((lo, hi, rng.randint(lo, hi)))
            return rng.choice((lo, hi, -1, 0, 1, rng.randint(lo, hi), rng.randint(lo, hi)))
        if t == "bool":
            return self.mode == "rich" or rng.random() < 0.5
        if t == "string":
            return rng.choice(STRINGS[1:] if self.mode == "rich" else STRINGS)
        if t in ("bytes", "records"):
            n = rng.choice((rng.randint(self.mode == "rich", 9), 200))
            return rng.randbytes(n)
        if t == "uuid":
            if self.mode != "rich" and rng.random() < 0.25:
                return uuid.UUID(int=0)
            return uuid.UUID(int=rng.getrandbits(128))
        if t == "float64":
            return rng.uniform(-1e6, 1e6)
        raise AssertionError(f"unhandled type {t} in {f}")


SHARED = [(m, v) for m in FAMILY for v in common_versions(m)]
MODES = ("rich", "sparse", "random", "random")


def values(message: str, version: int) -> list[dict]:
    schema = load_json(message)
    return [
        Gen(version, mode, f"{message}/{version}/{i}").struct(schema["fields"])
        for i, mode in enumerate(MODES)
    ]


def test_family_coverage() -> None:
    for m in FAMILY:
        assert KIO.versions(m), f"kio has no {m}"
    # kafka-python bundles no KIP-848 schemas; everything else is shared.
    kp_missing = {m for m in FAMILY if not KAFKA_PYTHON.versions(m)}
    assert kp_missing == {
        "ConsumerGroupHeartbeatRequest",
        "ConsumerGroupHeartbeatResponse",
        "ConsumerGroupDescribeRequest",
        "ConsumerGroupDescribeResponse",
    }
    assert len(SHARED) > 150
    assert KIO.versions("NoSuchRequest") == KAFKA_PYTHON.versions("NoSuchRequest") == []


@pytest.mark.parametrize("message,version", SHARED, ids=[f"{m}-v{v}" for m, v in SHARED])
def test_peers_agree(message: str, version: int) -> None:
    for value in values(message, version):
        kio_bytes = KIO.encode(message, version, value)
        kp_bytes = KAFKA_PYTHON.encode(message, version, value)
        assert (
            kio_bytes == kp_bytes
        ), f"{message} v{version} {value!r}\n kio: {kio_bytes.hex()}\n  kp: {kp_bytes.hex()}"
        assert KIO.decode(message, version, kp_bytes) == value
        assert KAFKA_PYTHON.decode(message, version, kio_bytes) == value


# ------------------------------------------------------------------ adapter contract


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_contract_strict_keys_and_length(peer) -> None:
    value = {"group_id": "g", "generation_id": 1, "member_id": "m"}  # Heartbeat v0
    data = peer.encode("HeartbeatRequest", 0, value)
    assert data == b"\x00\x01g\x00\x00\x00\x01\x00\x01m"
    with pytest.raises(ValueError, match="missing keys \\['member_id'\\]"):
        peer.encode("HeartbeatRequest", 0, {"group_id": "g", "generation_id": 1})
    with pytest.raises(ValueError, match="group_instance_id"):  # field of v3+
        peer.encode("HeartbeatRequest", 0, {**value, "group_instance_id": None})
    with pytest.raises(ValueError, match="used 10 of 11 bytes"):
        peer.decode("HeartbeatRequest", 0, data + b"\x00")
    with pytest.raises(ValueError, match="cannot decode"):
        peer.decode("HeartbeatRequest", 0, data[:-1])
    with pytest.raises(ValueError, match="does not support"):
        peer.encode("HeartbeatRequest", 99, value)


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_contract_tagged_fields_optional_and_defaulted(peer) -> None:
    value = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    data = peer.encode("ApiVersionsResponse", 3, value)
    assert data == b"\x00\x00\x01\x00\x00\x00\x00\x00"
    assert peer.decode("ApiVersionsResponse", 3, data) == {
        **value,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_contract_api_versions_error_is_decoded_at_requested_version(peer) -> None:
    # kafka-python's own ApiVersionsResponse.decode would switch to v0 here.
    value = {"error_code": 35, "api_keys": [], "throttle_time_ms": 7}
    assert (
        peer.decode("ApiVersionsResponse", 1, peer.encode("ApiVersionsResponse", 1, value)) == value
    )


@pytest.mark.parametrize("peer", PEERS, ids=lambda p: p.name)
def test_contract_zero_uuid_and_bitfield(peer) -> None:
    value = {
        "throttle_time_ms": 0,
        "topics": [{"topic_id": None, "partitions": []}],
    }
    data = peer.encode("OffsetCommitResponse", 10, value)
    assert data == b"\x00\x00\x00\x00\x02" + bytes(16) + b"\x01\x00\x00"
    assert peer.decode("OffsetCommitResponse", 10, data)["topics"][0]["topic_id"] == uuid.UUID(
        int=0
    )
    group = {
        "error_code": 0,
        "error_message": None,
        "group_id": "g",
        "group_state": "Stable",
        "protocol_type": "consumer",
        "protocol_data": "range",
        "members": [],
    }
    for ops in (-(2**31), 0, 0b1010, -(2**31) + 1, 2**31 - 1):
        value = {"throttle_time_ms": 0, "groups": [{**group, "authorized_operations": ops}]}
        data = peer.encode("DescribeGroupsResponse", 6, value)
        assert data[-6:-2] == ops.to_bytes(4, "big", signed=True)
        assert peer.decode("DescribeGroupsResponse", 6, data) == value


def test_kio_quirks_unrepresentable() -> None:
    hb = {"throttle_time_ms": 0, "error_code": 12345}
    data = KAFKA_PYTHON.encode("HeartbeatResponse", 1, hb)
    assert KAFKA_PYTHON.decode("HeartbeatResponse", 1, data) == hb
    with pytest.raises(Unrepresentable):
        KIO.encode("HeartbeatResponse", 1, hb)
    with pytest.raises(Unrepresentable):
        KIO.decode("HeartbeatResponse", 1, data)
    commit = {
        "group_id": "g",
        "generation_id_or_member_epoch": 1,
        "member_id": "m",
        "retention_time_ms": 2**62,
        "topics": [],
    }
    assert (
        KAFKA_PYTHON.decode(
            "OffsetCommitRequest", 2, KAFKA_PYTHON.encode("OffsetCommitRequest", 2, commit)
        )
        == commit
    )
    with pytest.raises(Unrepresentable):
        KIO.encode("OffsetCommitRequest", 2, commit)
    with pytest.raises(Unrepresentable):
        KIO.decode("OffsetCommitRequest", 2, KAFKA_PYTHON.encode("OffsetCommitRequest", 2, commit))
    # Large values within kio's range round-trip exactly (integer ms on decode).
    ok = {**commit, "retention_time_ms": 2**48 + 1}
    assert KIO.decode("OffsetCommitRequest", 2, KIO.encode("OffsetCommitRequest", 2, ok)) == ok


# ----------------------------------------------------------- kio-only (KIP-848) APIs


KIO_ONLY = [
    (
        "ConsumerGroupDescribeRequest",
        0,
        {"group_ids": ["g"], "include_authorized_operations": True},
        "020267" "01" "00",
    ),
    (
        "ConsumerGroupHeartbeatRequest",
        0,
        {
            "group_id": "g",
            "member_id": "m",
            "member_epoch": 5,
            "instance_id": None,
            "rack_id": "r",
            "rebalance_timeout_ms": 300000,
            "subscribed_topic_names": ["t"],
            "server_assignor": None,
            "topic_partitions": None,
        },
        "0267" "026d" "00000005" "00" "0272" "000493e0" "020274" "00" "00" "00",
    ),
    (
        "ConsumerGroupHeartbeatResponse",
        1,
        {
            "throttle_time_ms": 7,
            "error_code": 0,
            "error_message": None,
            "member_id": "m",
            "member_epoch": 5,
            "heartbeat_interval_ms": 3000,
            "assignment": {
                "topic_partitions": [
                    {"topic_id": uuid.UUID(int=1), "partitions": [1, 2]},
                ]
            },
        },
        "00000007"
        "0000"
        "00"
        "026d"
        "00000005"
        "00000bb8"
        "01"
        "02" + "00" * 15 + "01"
        "03"
        "00000001"
        "00000002"
        "00"
        "00"
        "00",
    ),
]


@pytest.mark.parametrize("message,version,value,hexbytes", KIO_ONLY, ids=[c[0] for c in KIO_ONLY])
def test_kio_only_messages(message: str, version: int, value: dict, hexbytes: str) -> None:
    assert KIO.encode(message, version, value).hex() == hexbytes
    assert KIO.decode(message, version, bytes.fromhex(hexbytes)) == value


# ------------------------------------- kafka-python-only versions (below kio's range)

KAFKA_PYTHON_ONLY = [
    (
        "OffsetCommitRequest",
        0,
        {
            "group_id": "g",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 3, "committed_offset": 42, "committed_metadata": None}
                    ],
                }
            ],
        },
        "000167" "00000001" "000174" "00000001" "00000003" "000000000000002a" "ffff",
    ),
    (
        "OffsetCommitRequest",
        1,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": 5,
            "member_id": "m",
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 3,
                            "committed_offset": 42,
                            "commit_timestamp": -1,
                            "committed_metadata": "x",
                        }
                    ],
                }
            ],
        },
        "000167"
        "00000005"
        "00016d"
        "00000001"
        "000174"
        "00000001"
        "00000003"
        "000000000000002a"
        "ffffffffffffffff"
        "000178",
    ),
    (
        "OffsetCommitResponse",
        1,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 3, "error_code": 25}]}]},
        "00000001" "000174" "00000001" "00000003" "0019",
    ),
    (
        "OffsetFetchRequest",
        0,
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 7]}]},
        "000167" "00000001" "000174" "00000002" "00000000" "00000007",
    ),
    (
        "OffsetFetchResponse",
        0,
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 7,
                            "committed_offset": -1,
                            "metadata": "",
                            "error_code": 0,
                        }
                    ],
                }
            ]
        },
        "00000001" "000174" "00000001" "00000007" "ffffffffffffffff" "0000" "0000",
    ),
]


@pytest.mark.parametrize(
    "message,version,value,hexbytes",
    KAFKA_PYTHON_ONLY,
    ids=[f"{c[0]}-v{c[1]}" for c in KAFKA_PYTHON_ONLY],
)
def test_kafka_python_only_versions(message: str, version: int, value: dict, hexbytes: str) -> None:
    assert version not in KIO.versions(message)
    assert KAFKA_PYTHON.encode(message, version, value).hex() == hexbytes
    assert KAFKA_PYTHON.decode(message, version, bytes.fromhex(hexbytes)) == value
