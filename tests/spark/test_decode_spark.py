"""The UDF pack on Spark: row counts, errors, typed columns, consumer payloads, SQL functions."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import generated as g
from kwire import spark as udfs
from tests.spark.test_model import expected, without_payloads
from benchmarks import synth

SUB = synth.sub


@pytest.fixture(scope="module")
def frames(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    """Synthetic traffic (3 groups, modern and legacy clients) with damaged frames mixed in,
    read from Parquet as the job reads a capture's frames table."""
    path = tmp_path_factory.mktemp("frames") / "frames.parquet"
    pq.write_table(synth.frames_table(), path)
    return spark.read.parquet(str(path))


def plain(row: Any) -> Any:
    """Spark rows -> plain data, binary as bytes, maps as sorted pairs (as test_model expects)."""
    if hasattr(row, "asDict"):
        return {k: plain(v) for k, v in row.asDict().items()}
    if isinstance(row, dict):
        return sorted((k, plain(v)) for k, v in row.items()) or None
    if isinstance(row, list):
        return [plain(x) for x in row]
    if isinstance(row, bytearray):
        return bytes(row)
    return row


@pytest.mark.parametrize("tolerant", [True, False], ids=["tolerant", "strict"])
def test_rows_in_equal_rows_out_with_damaged_frames(frames: DataFrame, tolerant: bool) -> None:
    requests = frames.where("direction = 'request'")
    decoded = udfs.decode_requests(requests, tolerant=tolerant)
    rows = decoded.orderBy("ts_first").collect()
    assert len(rows) == requests.count()
    errors = sorted(r["error"] for r in rows if r["error"])
    trailing = "HeartbeatRequest v4: at byte 43: 2 bytes left after a complete message"
    assert errors == [
        "HeartbeatRequest v4: MemberId at byte 39: data ends here (0 bytes left)",
        *([] if tolerant else [trailing]),
        "HeartbeatRequest: version 77 is not supported (valid: 0-4)",
        "incomplete: missing segments (bytes 10-20 of 31 not captured)",
        "unknown api key 1000",
    ]
    # Each row's status says why (the design's vocabulary, kwire.spark.decode.STATUSES), apart from
    # the error text.
    statuses = sorted((r["status"], r["error"] or "") for r in rows if r["status"] != "ok")
    assert [st for st, _ in statuses] == [
        "incomplete",
        "malformed",
        *([] if tolerant else ["malformed"]),
        "unsupported",
        "unsupported",
    ]
    assert {r["status"] for r in rows if not r["error"]} == {"ok"}
    # Bytes after a complete message: Kafka's readers ignore them, so tolerant decoding reads
    # the frame (status ok) and says so; strict decoding refuses it. No other row warns.
    warned = [r for r in rows if r["warnings"] is not None]
    if tolerant:
        assert [(r["status"], r["warnings"]) for r in warned] == [
            ("ok", ["2 bytes after the message (from byte 43) ignored, as Kafka's reader does"])
        ]
        assert warned[0]["heartbeat"]["group_id"] == "damaged"
        assert warned[0]["correlation_id"] == 9001
    else:
        assert warned == []
    truncated = [r for r in rows if r["error"] and "data ends here" in r["error"]][0]
    assert truncated["error"].startswith("HeartbeatRequest v4: MemberId at byte ")
    assert truncated["frame"] is not None and truncated["heartbeat"] is None
    assert truncated["correlation_id"] == 9001 and truncated["client_id"] == "group-0-client-0"
    unknown = [r for r in rows if r["error"] == "unknown api key 1000"][0]
    assert (unknown["api_key"], unknown["api_version"], unknown["correlation_id"]) == (
        1000,
        3,
        9001,
    )
    # A frame the capture could not complete passes through with the capture's error.
    missing = [r for r in rows if r["frame"] is None][0]
    assert missing["error"].startswith("incomplete: missing segments")
    assert (missing["api_key"], missing["correlation_id"]) == (12, 9002)
    # Every good frame decoded into exactly its family's column.
    families = list(udfs.FAMILIES)
    for r in rows:
        present = [f for f in families if r[f] is not None]
        assert present == ([] if r["error"] else [synth_family(r["api_key"])])


def synth_family(key: int) -> str:
    return [name for name, k in udfs.FAMILIES.items() if k == key][0]


def test_typed_columns_equal_to_dict(frames: DataFrame) -> None:
    for direction in ("request", "response"):
        df = frames.where(F.col("direction") == direction).where("frame is not null")
        if direction == "request":
            decoded = udfs.decode_requests(df)
        else:
            decoded = udfs.decode_responses(df)
        for r in decoded.where("error is null").collect():
            frame = bytes(r["frame"])
            if direction == "request":
                _, msg = g.decode_request(frame, tolerant=True)
            else:
                _, msg = g.decode_response(frame, r["api_key"], r["api_version"], tolerant=True)
            cls = type(msg)
            flexible = any(v in cls.FLEXIBLE_VERSIONS for v in cls.VALID_VERSIONS)
            want = expected(cls, msg.to_dict(), r["api_version"], flexible)
            got = without_payloads(plain(r[synth_family(r["api_key"])]))
            assert got == want, (direction, r["api_key"], r["api_version"])


def test_responses_take_key_and_version_from_the_paired_request(
    spark: SparkSession, frames: DataFrame
) -> None:
    responses = frames.where("direction = 'response'")
    decoded = udfs.decode_responses(responses)
    assert decoded.count() == responses.count()
    assert decoded.where("error is not null").count() == 0
    assert "client_id" in decoded.columns
    hb = decoded.where("api_key = 12").select("heartbeat.error_code", "correlation_id").collect()
    assert hb and all(r["error_code"] == 0 for r in hb)
    # Unpaired responses and keys without a schema are errors in the column, not failures.
    odd = spark.createDataFrame(
        [(b"\x00\x00\x00\x05\x00\x00", None, None), (b"\x00\x00\x00\x06", 1000, 3)],
        "frame binary, api_key smallint, api_version smallint",
    )
    rows = udfs.decode_responses(odd).orderBy("correlation_id").collect()
    assert [r["correlation_id"] for r in rows] == [5, 6]
    assert rows[0]["error"] == "no api key and version: the response was not paired with a request"
    assert rows[1]["error"] == "unknown api key 1000"
    assert [r["status"] for r in rows] == ["unpaired", "unsupported"]


def test_consumer_protocol_columns(frames: DataFrame) -> None:
    requests = udfs.decode_requests(
        frames.where("direction = 'request'"),
        fields=[
            "join_group.group_id",
            "join_group.protocols.consumer_subscription",
            "sync_group.group_id",
            "sync_group.assignments.member_id",
            "sync_group.assignments.consumer_assignment",
        ],
    )
    assert requests.columns[-2:] == ["join_group", "sync_group"]
    subs = (
        requests.where("join_group is not null")
        .select(
            "api_version",
            F.col("join_group.group_id").alias("group"),
            F.explode("join_group.protocols.consumer_subscription").alias("s"),
        )
        .collect()
    )
    assert len(subs) == 9
    for r in subs:
        assert r["s"]["error"] is None
        assert r["s"]["version"] == (0 if r["api_version"] == 2 else 1)
        assert r["s"]["topics"][0] == "topic-a"
        assert r["s"]["owned_partitions"] == ([] if r["s"]["version"] else None)
    group2 = [r for r in subs if r["group"] == "group-2"][0]
    assert group2["s"]["topics"] == ["topic-a", "topic-b", "topic-c"]
    assigned = (
        requests.where("sync_group is not null")
        .select("sync_group.group_id", F.explode("sync_group.assignments").alias("a"))
        .select(
            "group_id",
            "a.member_id",
            F.explode("a.consumer_assignment.assigned_partitions").alias("tp"),
        )
        .select("group_id", "tp.topic", F.explode("tp.partitions").alias("p"))
        .collect()
    )
    by_group: dict[str, set[tuple[str, int]]] = {}
    for r in assigned:
        by_group.setdefault(r["group_id"], set()).add((r["topic"], r["p"]))
    # The leader hands out every partition exactly once.
    assert len(assigned) == sum(len(v) for v in by_group.values())
    assert {t for t, _ in by_group["group-2"]} == {"topic-a", "topic-b", "topic-c"}

    responses = udfs.decode_responses(
        frames.where("direction = 'response'"), families=["join_group", "sync_group"]
    )
    legacy_members = (
        responses.where("api_key = 11 and api_version = 2")
        .select(F.explode("join_group.members").alias("m"))
        .select("m.consumer_subscription.*")
        .collect()
    )
    # JoinGroup v2 responses do not state the protocol type: the payloads still decode.
    assert len(legacy_members) == 3 and all(
        m["topics"] == ["topic-a", "topic-b"] for m in legacy_members
    )
    synced = responses.where("api_key = 14").select("sync_group.consumer_assignment").collect()
    assert len(synced) == 9 and all(r[0]["error"] is None for r in synced)


def test_consumer_payload_errors_stay_in_the_payload_column(spark: SparkSession) -> None:
    protocol = SUB(g.JoinGroupRequest, "protocols")

    def join(protocol_type: str, metadata: bytes) -> bytes:
        msg = g.JoinGroupRequest(
            group_id="x",
            protocol_type=protocol_type,
            protocols=[protocol(name="range", metadata=metadata)],
        )
        header = g.RequestHeader(
            request_api_key=11, request_api_version=9, correlation_id=1, client_id="c"
        )
        return g.encode_request(header, msg)[4:]

    garbage = b"\x00\x01\x00\x00\x7f\xff"
    df = spark.createDataFrame(
        [(1, join("consumer", garbage)), (2, join("connect", garbage)), (3, join("consumer", b""))],
        "n int, frame binary",
    )
    rows = (
        udfs.decode_requests(df, families=["join_group"])
        .orderBy("n")
        .select("error", F.col("join_group.protocols")[0]["consumer_subscription"].alias("s"))
        .collect()
    )
    assert [r["error"] for r in rows] == [None, None, None]
    assert rows[0]["s"]["version"] == 1 and rows[0]["s"]["topics"] is None
    assert rows[0]["s"]["error"].startswith("ConsumerProtocolSubscription v1: Topics at byte 2: ")
    assert rows[1]["s"] is None  # another protocol's bytes are left alone
    assert rows[2]["s"] is None  # no payload


def test_register_sql_functions(spark: SparkSession, frames: DataFrame) -> None:
    assert udfs.register(spark) == [
        "kafka_decode_request",
        "kafka_decode_response",
        "kafka_api_name",
    ]
    frames.createOrReplaceTempView("frames")
    rows = spark.sql("""
        SELECT kafka_api_name(d.api_key) AS api, count(*) AS n, count(d.error) AS errors
        FROM (SELECT kafka_decode_request(frame) AS d FROM frames WHERE direction = 'request')
        GROUP BY 1 ORDER BY 1
        """).collect()
    counts = {r["api"]: (r["n"], r["errors"]) for r in rows}
    # 40 Heartbeat frames, one of them missing: the bare SQL function has no bytes to read there
    # (decode_requests falls back to the capture's api_key column). Of the 39, the truncated
    # one and the one of version 77 are errors; the one with bytes after its message is read.
    assert counts["Heartbeat"] == (39, 2)
    assert counts["JoinGroup"] == (9, 0)
    groups = spark.sql("""
        SELECT DISTINCT d.join_group.group_id AS g,
               d.join_group.protocols[0].consumer_subscription.topics AS topics
        FROM (SELECT kafka_decode_request(frame) AS d FROM frames WHERE direction = 'request')
        WHERE d.join_group IS NOT NULL ORDER BY g
        """).collect()
    assert [r["g"] for r in groups] == ["group-0", "group-1", "group-2"]
    errs = spark.sql("""
        SELECT r.heartbeat.error_code AS code, r.correlation_id
        FROM (SELECT kafka_decode_response(frame, api_key, api_version) AS r
              FROM frames WHERE direction = 'response') WHERE r.api_key = 12
        """).collect()
    assert len(errs) == 36 and {r["code"] for r in errs} == {0}
