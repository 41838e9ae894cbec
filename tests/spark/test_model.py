"""Spark types and Arrow columns derived from the model, checked without starting Spark.

Random messages of every family (every version of the hand-written family, a sample of the other
versions in `make test`, all of them in `make sweep`), drawn from the compiler's model, are
framed, decoded into Arrow by the UDF pack and compared with the codecs' own to_dict().
"""

from __future__ import annotations

import base64
import importlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

import generated as g
from tests.sampling import IMPORTED, sample_versions
from tests.strategies import Strategies, load_message
from kwire.spark.decode import Plan, decode_request_array, decode_response_array
from kwire.spark.families import message_type
from kwire.spark.model import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
SPEC = {
    "int8": ByteType(),
    "int16": ShortType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "uint16": IntegerType(),
    "uint32": LongType(),
    "float64": DoubleType(),
    "bool": BooleanType(),
    "string": StringType(),
    "uuid": StringType(),
    "bytes": BinaryType(),
    "records": BinaryType(),
}
PAYLOAD_COLUMNS = {"consumer_subscription", "consumer_assignment"}
ALL_REQUESTS = Plan("request")
ALL_RESPONSES = Plan("response")


def _flexible(cls: Any) -> bool:
    return any(v in cls.FLEXIBLE_VERSIONS for v in cls.VALID_VERSIONS)


def _check_struct(cls: Any, st_type: StructType, flexible: bool) -> None:
    names = [f.name for f in st_type.fields if f.name not in PAYLOAD_COLUMNS]
    expected = [f.attr for f in cls.FIELDS] + (["unknown_tags"] if flexible else [])
    assert names == expected, cls.__name__
    for info in cls.FIELDS:
        t = st_type[info.attr].dataType
        elem = info.type[2:] if info.type.startswith("[]") else None
        if elem is not None:
            assert isinstance(t, ArrayType)
            t = t.elementType
        if info.struct is not None:
            assert isinstance(t, StructType)
            _check_struct(info.struct, t, flexible)
        else:
            assert t == SPEC[elem or info.type], (cls.__name__, info.attr)
    if flexible:
        assert st_type["unknown_tags"].dataType == MapType(IntegerType(), BinaryType())


@pytest.mark.parametrize("name", sorted(g.MESSAGES))
def test_spark_types_follow_the_model(name: str) -> None:
    cls = g.MESSAGES[name]
    _check_struct(cls, message_type(cls), _flexible(cls))


def test_one_column_per_family_in_the_decoded_struct() -> None:
    for plan in (ALL_REQUESTS, ALL_RESPONSES):
        names = plan.spark_type.fieldNames()
        assert names[:3] == ["api_key", "api_version", "correlation_id"]
        assert names[-len(FAMILIES) :] == sorted(FAMILIES, key=FAMILIES.__getitem__)
        assert "error" in names
    assert FAMILIES["join_group"] == 11 and FAMILIES["consumer_group_heartbeat"] == 68


def test_payload_columns_sit_next_to_their_bytes() -> None:
    t = ALL_REQUESTS.spark_type
    protocol = t["join_group"].dataType["protocols"].dataType.elementType
    assert protocol.fieldNames()[:3] == ["name", "metadata", "consumer_subscription"]
    sub = protocol["consumer_subscription"].dataType
    assert sub.fieldNames() == [
        "version",
        "topics",
        "user_data",
        "owned_partitions",
        "generation_id",
        "rack_id",
        "error",
    ]
    member = (
        ALL_RESPONSES.spark_type["describe_groups"]
        .dataType["groups"]
        .dataType.elementType["members"]
        .dataType.elementType
    )
    names = member.fieldNames()
    assert names.index("consumer_subscription") == names.index("member_metadata") + 1
    assert names.index("consumer_assignment") == names.index("member_assignment") + 1


def test_field_selection_prunes_columns() -> None:
    plan = Plan(
        "request",
        fields=[
            "join_group.group_id",
            "join_group.protocols.consumer_subscription.topics",
            "heartbeat",
        ],
    )
    assert plan.family_names == ["join_group", "heartbeat"]
    jg = plan.spark_type["join_group"].dataType
    assert jg.simpleString() == (
        "struct<group_id:string,protocols:array<struct<consumer_subscription:"
        "struct<topics:array<string>>>>>"
    )
    assert plan.spark_type["heartbeat"].dataType == message_type(g.HeartbeatRequest)
    with pytest.raises(ValueError, match="no column \\['nope'\\]; available: .*group_id"):
        Plan("request", fields=["join_group.nope"])
    with pytest.raises(ValueError, match="unknown message families"):
        Plan("request", families=["no_such_api"])


# -- decoded columns equal the codecs' to_dict --------------------------------------------------


def expected(cls: Any, plain: dict[str, Any] | None, version: int, flexible: bool) -> Any:
    """What the Arrow row must hold: to_dict's data, with fields the version lacks as null,
    bytes as bytes and unknown tags as a map (list of pairs), or null when there are none."""
    if plain is None:
        return None
    out: dict[str, Any] = {}
    for info in cls.FIELDS:
        value = plain[info.attr] if version in info.versions else None
        if value is not None and info.struct is not None:
            if isinstance(value, list):
                value = [expected(info.struct, x, version, flexible) for x in value]
            else:
                value = expected(info.struct, value, version, flexible)
        elif value is not None and info.type in ("bytes", "records"):
            value = base64.b64decode(value)
        out[info.attr] = value
    if flexible:
        tags = plain.get("unknown_tags")
        out["unknown_tags"] = (
            sorted((int(k), base64.b64decode(v)) for k, v in tags.items()) if tags else None
        )
    return out


def without_payloads(row: Any) -> Any:
    if isinstance(row, dict):
        return {k: without_payloads(v) for k, v in row.items() if k not in PAYLOAD_COLUMNS}
    if isinstance(row, list):
        return [without_payloads(x) for x in row]
    return row


def _versions(cls: Any) -> list[int]:
    versions = list(cls.VALID_VERSIONS)
    if cls.MESSAGE_NAME not in IMPORTED:
        return versions
    return sample_versions(versions, set(cls.FLEXIBLE_VERSIONS))


# Every version of the hand-written family; the oldest, first flexible and newest of the rest of
# the protocol (all of them under KWIRE_SWEEP=1).
CASES = [
    (key, direction, v)
    for key, info in sorted(g.REGISTRY.items())
    for direction in ("request", "response")
    for v in _versions(info.request if direction == "request" else info.response)
]
MODELS: dict[str, Any] = {}


def _strategies(cls: Any) -> Strategies:
    name = cls.MESSAGE_NAME
    if name not in MODELS:
        MODELS[name] = load_message(ROOT / "schemas" / f"{name}.json")
    module = importlib.import_module(cls.__module__)
    return Strategies(MODELS[name], module)


@pytest.mark.parametrize(
    ("key", "direction", "version"), CASES, ids=[f"{k}-{d}-v{v}" for k, d, v in CASES]
)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_decoded_columns_equal_to_dict(
    key: int, direction: str, version: int, data: st.DataObject
) -> None:
    info = g.REGISTRY[key]
    cls = info.request if direction == "request" else info.response
    messages = data.draw(st.lists(_strategies(cls).message_at(version), min_size=1, max_size=4))
    frames = []
    for i, msg in enumerate(messages):
        if direction == "request":
            header = g.RequestHeader(
                request_api_key=key, request_api_version=version, correlation_id=i, client_id="t"
            )
            frames.append(g.encode_request(header, msg)[4:])
        else:
            frames.append(g.encode_response(g.ResponseHeader(correlation_id=i), msg, version)[4:])
    column = pa.array(frames, pa.binary())
    if direction == "request":
        out = decode_request_array(column, ALL_REQUESTS)
        assert out.type == ALL_REQUESTS.arrow_type
    else:
        n = len(frames)
        keys, versions = pa.array([key] * n, pa.int16()), pa.array([version] * n, pa.int16())
        out = decode_response_array(column, keys, versions, ALL_RESPONSES)
        assert out.type == ALL_RESPONSES.arrow_type
    family = [name for name, k in FAMILIES.items() if k == key][0]
    for i, (row, msg) in enumerate(zip(out.to_pylist(), messages)):
        assert row["error"] is None
        assert (row["api_key"], row["api_version"], row["correlation_id"]) == (key, version, i)
        others = [name for name in FAMILIES if name != family and row[name] is not None]
        assert others == []
        assert without_payloads(row[family]) == expected(
            cls, msg.to_dict(), version, _flexible(cls)
        )


def test_errors_name_field_and_offset_and_keep_headers() -> None:
    hb = g.HeartbeatRequest(group_id="g", generation_id=1, member_id="member")
    header = g.RequestHeader(
        request_api_key=12, request_api_version=4, correlation_id=42, client_id="cli"
    )
    good = g.encode_request(header, hb)[4:]
    wrong_version = bytearray(good)
    wrong_version[2:4] = (9).to_bytes(2, "big")
    unknown = b"\x00\x63\x00\x01\x00\x00\x00\x07\x00\x02hi"
    frames = pa.array([good, good[:-5], bytes(wrong_version), unknown, None, b"\x00"], pa.binary())
    rows = decode_request_array(frames, ALL_REQUESTS).to_pylist()
    assert rows[0]["error"] is None and rows[0]["heartbeat"]["member_id"] == "member"
    assert rows[1]["error"].startswith("HeartbeatRequest v4: MemberId at byte ")
    assert rows[1]["correlation_id"] == 42 and rows[1]["client_id"] == "cli"
    assert rows[1]["heartbeat"] is None
    assert rows[2]["error"] == "HeartbeatRequest: version 9 is not supported (valid: 0-4)"
    assert (rows[2]["api_key"], rows[2]["api_version"], rows[2]["client_id"]) == (12, 9, "cli")
    assert rows[3]["error"] == "unknown api key 99"
    assert (rows[3]["api_key"], rows[3]["correlation_id"], rows[3]["client_id"]) == (99, 7, "hi")
    assert rows[4] == {**{k: None for k in rows[4]}}
    assert rows[5]["error"].startswith("RequestHeader v1: at byte 0: a request needs at least 4")
