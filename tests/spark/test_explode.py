"""OUT/records from real captures: the records read back equal what the scenarios produced.

Ground truth is scripts/capture/scenarios.py, not kwire: every scenario's producers send
key=k{i}, value={prefix}-{i} (its `produce` helper, and kafka-python's `send` with the same
shape in admin-groups); the expectations below restate those calls. The records scenarios write
what their producers sent into the capture's NAME.json ("produced"), which is used instead
(tests/records/test_real_captures.py holds those captures to it in detail).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kwire import capture
import generated as g
from tests.quirks import is_mock_control_batch_crc
from kwire.spark.explode import RECORD_FIELDS, SCHEMA, explode_batch

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"


def _series(topic: str, n: int, prefix: str = "m") -> set[tuple[str, bytes, bytes]]:
    return {(topic, f"k{i}".encode(), f"{prefix}-{i}".encode()) for i in range(n)}


# scenario -> the records its producers sent (scripts/capture/scenarios.py).
PRODUCED: dict[str, set[tuple[str, bytes, bytes]]] = {
    "group-classic": _series("orders", 12) | _series("orders", 6, "late"),
    "static-members": _series("events", 8) | _series("events", 4, "more"),
    "cooperative-sticky": _series("clicks", 10) | _series("clicks", 5, "late"),
    "consumer-protocol": _series("metrics", 8) | _series("metrics", 4, "late"),
    "admin-groups": _series("ledger", 6)
    | _series("ledger", 3, "acks0")
    | _series("ledger", 3, "kpy-acks0"),
    "ipv6-produce-consume": _series("sensor", 5),
}

# The captures that say what their producers wrote (the streams capture's truth is its tasks).
CAPTURES = [
    p
    for p in sorted(DATA.glob("*.json"))
    if (meta := json.loads(p.read_text())).keys() & {"produced", "group_truth", "share_truth"}
    or meta["scenario"] in PRODUCED
]


def _rows(record_file: Path, tmp_path: Path) -> list[dict[str, Any]]:
    meta = json.loads(record_file.read_text())
    frames = tmp_path / "frames.parquet"
    capture.write_parquet([str(DATA / meta["capture"])], str(frames), meta["broker_ports"])
    import pyarrow.parquet as pq

    table = pq.read_table(frames)
    out: list[dict[str, Any]] = []
    for batch in table.to_batches(max_chunksize=64):
        for rb in explode_batch(batch):
            assert rb.schema == SCHEMA
            out.extend(rb.to_pylist())
    # Fetch v13+ names topics by id: resolve them from the capture's Metadata responses, as the
    # job does with a join (tested in test_job.py).
    names: dict[str, str] = {}
    for row in table.to_pylist():
        if row["direction"] == "response" and row["api_key"] == 3 and row["frame"]:
            # Read as Kafka reads them, as the job does: the mock's v13 answers have a byte
            # after the message (tests/capture/test_capture_decode.py).
            _, metadata = g.decode_response(row["frame"], 3, row["api_version"], tolerant=True)
            names.update({g.kafka_uuid(t.topic_id): t.name for t in metadata.topics})
    for r in out:
        if r["topic"] is None:
            assert r["topic_id"] is not None
            r["topic"] = names.get(r["topic_id"])
    return out


def test_record_fields_are_every_records_field_of_the_protocol() -> None:
    found = set()

    def walk(cls: Any) -> bool:
        return any(f.type == "records" or (f.struct and walk(f.struct)) for f in cls.FIELDS)

    for cls in g.MESSAGES.values():
        kind = getattr(cls, "MESSAGE_TYPE", "")
        if kind in ("request", "response") and walk(cls):
            found.add((kind, cls.API_KEY))
    assert found == set(RECORD_FIELDS)


@pytest.mark.parametrize("record_file", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_produced_records_read_back_as_sent(record_file: Path, tmp_path: Path) -> None:
    meta = json.loads(record_file.read_text())
    rows = _rows(record_file, tmp_path)
    # The mock's transaction markers carry a zero CRC (tests/quirks.py).
    bad = [r for r in rows if r["batch_status"] != "ok" and not is_mock_control_batch_crc(r)]
    assert not bad, Counter(r["batch_status"] for r in bad)
    expected = _expected(meta)
    produced = [r for r in rows if r["direction"] == "request"]
    if "share_truth" in meta:
        # The share scenarios' script logs each record's topic, offset and key as the producer's
        # delivery report gave them.
        sent = [e for e in meta["share_truth"]["events"] if e["event"] == "produced"]

        def raw(text: str | None) -> bytes | None:
            return None if text is None else text.encode()

        # The Java scenarios log the values too; librdkafka's, the keys alone.
        if all("value" in e for e in sent):
            expected = {(e["topic"], raw(e["key"]), raw(e["value"])) for e in sent}
            assert {(r["topic"], r["key"], r["value"]) for r in produced} == expected
        else:
            assert {(r["topic"], r["key"]) for r in produced} == {
                (e["topic"], raw(e["key"])) for e in sent
            }
            expected = {(r["topic"], r["key"], r["value"]) for r in produced}
    elif "group_truth" in meta:
        # The group scenarios' script logs each produce (topic and count; values are
        # "<prefix>-<i>" for key "k<i>") and each topic it made (one record k/first); between
        # produce_start and produce_stop a steady flow of keyless "flow-<i>" records.
        flowing = {
            step["topic"]
            for step in meta["group_truth"]["timeline"]
            if step["action"] == "produce_start"
        }
        sent = produced
        flow = [r for r in produced if r["key"] is None]
        assert all(r["topic"] in flowing and re.fullmatch(rb"flow-\d+", r["value"]) for r in flow)
        assert bool(flow) == bool(flowing)
        produced = [r for r in produced if r["key"] is not None]
        assert {(r["topic"], r["key"]) for r in produced} == {(t, k) for t, k, _ in expected}
        for r in produced:
            want = b"first" if r["key"] == b"k" else r["key"][1:]
            assert r["value"] == want or r["value"].endswith(b"-" + want), r
        expected = {(r["topic"], r["key"], r["value"]) for r in sent}
        produced = sent
    else:
        assert {(r["topic"], r["key"], r["value"]) for r in produced} == expected
    magics = {p["magic"] for p in meta.get("produced", [])} or {2}
    assert all(r["api_key"] == 0 and r["magic"] in magics for r in produced)
    # Fetched records name the consumer (the paired request's client id).
    assert all(r["client_id"] for r in rows)
    # Consumers fetched only what was produced, and fetched something. Fetch v13+ names topics
    # by id; where the capture's only Metadata answers are the mock's undecodable v13 ones
    # (tests/capture/test_capture_decode.py), the topic stays unknown (null), never guessed.
    fetched = [r for r in rows if r["api_key"] in (1, 78) and not r["is_control"]]
    assert fetched
    # Only ShareFetch rows say whether their member acquired them.
    assert all((r["acquired"] is not None) == (r["api_key"] == 78) for r in rows)
    assert all(r["delivery_count"] is None or r["acquired"] for r in rows)
    assert {(r["topic"], r["key"], r["value"]) for r in fetched if r["topic"]} <= expected
    assert {(r["key"], r["value"]) for r in fetched} <= {(k, v) for _, k, v in expected}
    if any(r["topic"] is None for r in fetched):
        assert meta["broker"] == "librdkafka mock cluster"
    # Offsets within a partition's batches run on from the batch's base offset.
    for r in rows:
        assert r["offset"] >= r["batch_offset"] >= 0
        if "produced" not in meta:
            assert r["headers"] == [] and r["control_type"] is None
        else:
            assert (r["control_type"] is not None) == r["is_control"]


def _expected(meta: dict[str, Any]) -> set[tuple[str, bytes | None, bytes | None]]:
    if "share_truth" in meta:
        return set()  # the keys are checked from the truth's log, the values as read back
    if "group_truth" in meta:
        out: set[tuple[str, bytes | None, bytes | None]] = set()
        for step in meta["group_truth"]["timeline"]:
            if step["action"] == "produce":
                out |= {(step["topic"], f"k{i}".encode(), None) for i in range(step["messages"])}
            elif step["action"] == "topic":
                out.add((step["topic"], b"k", b"first"))
        return out
    if "produced" not in meta:
        return PRODUCED[meta["scenario"]]
    return {
        (
            p["topic"],
            None if p["key"] is None else bytes.fromhex(p["key"]),
            None if p["value"] is None else bytes.fromhex(p["value"]),
        )
        for p in meta["produced"]
    }


def test_a_frame_that_does_not_decode_gives_no_rows() -> None:
    batch = pa.RecordBatch.from_pylist(
        [
            {
                "connection_id": "c",
                "direction": "request",
                "api_key": 0,
                "api_version": 9,
                "client_id": None,
                "ts_first": None,
                "frame": b"\x00\x00\x00\x09\x00\x00\x00\x01",  # a header and no body
            }
        ]
    )
    assert list(explode_batch(batch)) == []


def _struct(cls: Any, attr: str) -> Any:
    return next(f.struct for f in cls.FIELDS if f.attr == attr)


def test_topic_ids_are_named_from_metadata_responses(spark: Any, tmp_path: Path) -> None:
    """Fetch v13 names topics by id; the job names them from a Metadata response of the same
    capture: records_table with a Spark join, write_records with the names collected."""
    import uuid

    from pyspark.sql import functions as F

    from kwire import records
    from kwire.spark.api import decode_responses
    from kwire.spark.explode import records_table, write_records

    topic_id = uuid.UUID(int=0x1234)
    batch = records.make_batch([records.Record(offset=0, timestamp=1, key=b"k", value=b"v")])
    topic_cls = _struct(g.FetchResponse, "responses")
    partition_cls = _struct(topic_cls, "partitions")
    fetch = g.FetchResponse(
        responses=[
            topic_cls(
                topic_id=topic_id,
                partitions=[
                    partition_cls(partition_index=3, records=records.encode_records([batch]))
                ],
            )
        ]
    )
    metadata_cls = g.MESSAGES["MetadataResponse"]
    metadata = metadata_cls(
        topics=[_struct(metadata_cls, "topics")(name="payments", topic_id=topic_id)]
    )
    rows = [
        ("c1", "response", 1, 13, g.encode_response(g.ResponseHeader(7), fetch, 13)[4:]),
        ("c1", "response", 3, 12, g.encode_response(g.ResponseHeader(8), metadata, 12)[4:]),
    ]
    frames = spark.createDataFrame(
        rows,
        "connection_id string, direction string, api_key smallint, api_version smallint, "
        "frame binary",
    ).withColumn("ts_first", F.current_timestamp())
    out = records_table(frames, decode_responses(frames)).collect()
    want = [("payments", g.kafka_uuid(topic_id), 3, b"k", b"v")]
    assert [(r["topic"], r["topic_id"], r["partition"], r["key"], r["value"]) for r in out] == want
    # Written by the exploding tasks (the job's way), the names collected on the driver.
    assert write_records(frames, str(tmp_path / "records"), decode_responses(frames)) == 1
    out = spark.read.parquet(str(tmp_path / "records")).collect()
    assert [(r["topic"], r["topic_id"], r["partition"], r["key"], r["value"]) for r in out] == want


def test_trace_ids_come_from_each_records_headers() -> None:
    """trace_id and span_id are cut from each record's own headers (kwire.records.trace holds
    the formats), in the rows explode_batch gives, beside the headers themselves."""
    from kwire import records

    trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    heads = [
        [("traceparent", f"00-{trace}-{span}-01".encode())],
        [],
        [("b3", f"{trace[16:]}-{span}-1".encode()), ("app", b"x")],
        [("app", None)],
    ]
    batch = records.make_batch(
        [
            records.Record(offset=i, timestamp=1, key=None, value=b"v", headers=h)
            for i, h in enumerate(heads)
        ]
    )
    topic_cls = _struct(g.ProduceRequest, "topic_data")
    partition_cls = _struct(topic_cls, "partition_data")
    produce = g.ProduceRequest(
        acks=1,
        timeout_ms=100,
        topic_data=[
            topic_cls(
                name="t",
                partition_data=[partition_cls(index=0, records=records.encode_records([batch]))],
            )
        ],
    )
    frame = g.encode_request(g.RequestHeader(0, 9, 5, "c"), produce)[4:]
    row = {
        "connection_id": "c",
        "direction": "request",
        "api_key": 0,
        "api_version": 9,
        "client_id": "c",
        "ts_first": None,
        "frame": frame,
    }
    (out,) = list(explode_batch(pa.RecordBatch.from_pylist([row])))
    assert out.schema == SCHEMA
    got = out.select(["offset", "trace_id", "span_id"]).to_pylist()
    assert [(r["trace_id"], r["span_id"]) for r in got] == [
        (trace, span),
        (None, None),
        (trace[16:], span),
        (None, None),
    ]
    assert [len(h) for h in out.column("headers").to_pylist()] == [1, 0, 2, 1]
