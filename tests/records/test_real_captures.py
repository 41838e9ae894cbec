"""Records in the committed records captures against what the clients themselves reported.

The captures made by the records scenarios (scripts/capture/scenarios.py: librdkafka, kafka-python
and aiokafka against librdkafka's mock cluster, librdkafka and aiokafka against Tansu) store
their ground truth in NAME.json, written by the scenarios from the clients' own APIs, never by
kwire: "produced" (every record handed to a producer, its codec and record format, the delivery
report), "consumed" (every record a consumer returned), "admin" (each admin call's answer). And
"tshark_records": the records of each Produce request and Fetch response as Wireshark's Kafka
dissector read them when the capture was made, so the comparison with Wireshark needs no tshark
here (a live check runs where tshark is installed).

Records are read the way the job does (kwire.spark.explode.explode_batch over the frames table), no
Spark. Peer defects found on the way are pinned in tests/quirks.py.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kwire import capture
import generated as g
from kwire import records
from tests.quirks import is_mock_control_batch_crc
from kwire.capture.tls import KeyLog
from kwire.spark.explode import explode_batch

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
METAS = [
    m for m in (json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))) if "produced" in m
]
IDS = [m["capture"] for m in METAS]
# The same checks on the TLS captures, decrypted with their key logs.
TLS_METAS = [
    m
    for m in (json.loads(p.read_text()) for p in sorted((DATA / "tls").glob("*.json")))
    if m.get("produced") and m.get("consumed")
]
# The newest Produce and Fetch versions tshark's dissector reads (it says so for newer ones).
TSHARK_MAX_VERSION = {0: 8, 1: 11}


def _b(text: str | None) -> bytes | None:
    return None if text is None else bytes.fromhex(text)


def _hdrs(headers: Any) -> tuple[tuple[str, bytes | None], ...]:
    """Headers of a row (dicts) or of the ground truth (pairs with hex values), comparable."""
    out = []
    for h in headers or ():
        if isinstance(h, dict):
            out.append((h["key"], h["value"]))
        else:
            out.append((h[0], _b(h[1])))
    return tuple(out)


class Capture:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta
        keylog = None
        path = DATA / meta["capture"]
        if "keylog" in meta:
            # A TLS capture (tests/data/capture/tls): decrypted with its key log; the ground
            # truth is that of the clients whose keys were logged (the others stay encrypted).
            path = DATA / "tls" / meta["capture"]
            keylog = KeyLog.load([str(DATA / "tls" / meta["keylog"])])
            # What clients without logged keys fetched is not readable; what they produced was
            # still delivered, and fetched by the others.
            keyed = set(meta["keylog_clients"])
            self.meta = meta = dict(meta)
            meta["consumed"] = [r for r in meta["consumed"] if r["client_id"] in keyed]
        self.frames = capture.frames_table(path, meta["broker_ports"], keylog=keylog)
        self.rows: list[dict[str, Any]] = []
        for batch in self.frames.to_batches(max_chunksize=64):
            for rb in explode_batch(batch):
                self.rows.extend(rb.to_pylist())
        self._name_topics()

    def _name_topics(self) -> None:
        """Fetch v13+ names topics by id. Names come from Metadata responses, read as Kafka
        reads them (the mock's v13 answers have a byte after the message: tests/quirks.py), and
        from the consumer's own report of the records it received from a topic id."""
        names: dict[str, set[str]] = {}
        for row in self.frames.to_pylist():
            if row["direction"] == "response" and row["api_key"] == 3:
                _, metadata = g.decode_response(row["frame"], 3, row["api_version"], tolerant=True)
                for t in metadata.topics:
                    names.setdefault(g.kafka_uuid(t.topic_id), set()).add(t.name)
        seen: dict[tuple[Any, ...], set[str]] = {}
        for c in self.meta.get("consumed", []):
            k = (c["partition"], c["offset"], _b(c["key"]), _b(c["value"]))
            seen.setdefault(k, set()).add(c["topic"])
        by_consumer: dict[str, set[str]] = {}
        for r in self.rows:
            if r["topic"] is None and r["topic_id"]:
                t = seen.get((r["partition"], r["offset"], r["key"], r["value"]), set())
                if len(t) == 1:  # a record only one topic has (a tombstone may not be)
                    by_consumer.setdefault(r["topic_id"], set()).update(t)
        # Where both tell, the broker's Metadata and what the consumer says it read agree.
        for topic_id in by_consumer.keys() & names.keys():
            assert by_consumer[topic_id] == names[topic_id], topic_id
        for r in self.rows:
            if r["topic"] is None and r["topic_id"] is not None:
                found = names.get(r["topic_id"]) or by_consumer.get(r["topic_id"])
                assert found and len(found) == 1, (r["topic_id"], found)
                (r["topic"],) = found

    def data_rows(self, direction: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["direction"] == direction and not r["is_control"]]


_CACHE: dict[str, Capture] = {}


def _cached(meta: dict[str, Any]) -> Capture:
    if meta["capture"] not in _CACHE:
        _CACHE[meta["capture"]] = Capture(meta)
    return _CACHE[meta["capture"]]


@pytest.fixture(params=METAS, ids=IDS)
def cap(request: pytest.FixtureRequest) -> Capture:
    return _cached(request.param)


def test_the_records_captures_are_committed() -> None:
    assert {m["scenario"] for m in METAS} >= {
        "records-librdkafka",
        "records-kafka-python",
        "records-aiokafka",
        "tansu-admin-topics",
    }
    for m in METAS:
        assert (DATA / m["capture"]).stat().st_size < 300_000


def test_every_batch_reads_except_the_mocks_zero_crc_markers(cap: Capture) -> None:
    bad = [r for r in cap.rows if r["batch_status"] != records.OK]
    if cap.meta["broker"] == "librdkafka mock cluster":
        # Its transaction markers carry CRC 0 (tests/quirks.py); their records still decode.
        assert all(is_mock_control_batch_crc(r) for r in bad), bad
    else:
        assert not bad, bad


def test_produce_requests_carry_exactly_what_the_producers_sent(cap: Capture) -> None:
    sent = Counter(
        (
            p["client_id"],
            p["topic"],
            p["partition"],
            _b(p["key"]),
            _b(p["value"]),
            _hdrs(p["headers"]),
        )
        for p in cap.meta["produced"]
    )
    on_wire = Counter(
        (r["client_id"], r["topic"], r["partition"], r["key"], r["value"], _hdrs(r["headers"]))
        for r in cap.data_rows("request")
    )
    assert on_wire == sent
    # Each producer's codec and record format are the batch's.
    by_client = {p["client_id"]: (p["codec"], p["magic"]) for p in cap.meta["produced"]}
    for r in cap.data_rows("request"):
        assert (r["compression"], r["magic"]) == by_client[r["client_id"]], r["client_id"]
        assert r["api_key"] == 0 and r["batch_status"] == records.OK


def test_every_codec_and_the_null_cases_are_covered(cap: Capture) -> None:
    rows = cap.data_rows("request")
    clients = {p["client"] for p in cap.meta["produced"]}
    if cap.meta["scenario"] == "tansu-admin-topics":
        assert {r["compression"] for r in rows} == {"none"}
        return
    assert {(r["magic"], r["compression"]) for r in rows if r["magic"] == 2} == {
        (2, c) for c in ("none", "gzip", "snappy", "lz4", "zstd")
    }, clients
    assert any(r["key"] is None for r in rows) and any(r["value"] is None for r in rows)
    assert any(r["headers"] for r in rows)
    if clients != {"kafka-python"}:  # kafka-python refuses null header values (its note)
        assert any(h["value"] is None for r in rows for h in r["headers"])
    else:
        assert any("null value" in n for n in cap.meta["notes"])
    assert len({r["partition"] for r in rows}) == 4


def test_old_message_formats_from_kafka_python() -> None:
    """api_version 0.10 writes magic 1 message sets, 0.9 magic 0, with gzip, snappy and lz4
    (zstd is refused by the client for both); magic 0 LZ4 has the broken frame header checksum
    of Kafka before 0.10; the mock keeps the uncompressed ones and refuses compressed wrappers."""
    (meta,) = [m for m in METAS if m["scenario"] == "records-kafka-python"]
    cap = _cached(meta)
    old = [r for r in cap.data_rows("request") if r["magic"] < 2]
    assert {(r["magic"], r["compression"]) for r in old} == {
        (m, c) for m in (0, 1) for c in ("none", "gzip", "snappy", "lz4")
    }
    assert {r["api_version"] for r in old if r["magic"] == 0} == {1}
    assert {r["api_version"] for r in old if r["magic"] == 1} == {2}
    refused = [n for n in meta["notes"] if "Zstd" in n]
    assert len(refused) == 2
    broken = []
    for row in cap.frames.to_pylist():
        if row["direction"] == "request" and row["api_key"] == 0:
            _, message = g.decode_request(row["frame"])
            for t in message.topic_data:
                for p in t.partition_data:
                    broken += [
                        (b.magic, b.compression)
                        for b in records.decode_records(p.records)
                        if b.lz4_broken_hc
                    ]
    assert broken == [(0, "lz4")]
    for p in meta["produced"]:
        if p["magic"] < 2:
            assert p["delivered"] is (p["codec"] == "none"), p
            if p["codec"] != "none":
                assert "UnsupportedVersionError" in p["error"]


def test_fetched_records_are_what_the_consumers_received(cap: Capture) -> None:
    fetched = {
        (
            r["client_id"],
            r["topic"],
            r["partition"],
            r["offset"],
            r["key"],
            r["value"],
            _hdrs(r["headers"]),
        )
        for r in cap.data_rows("response")
        if r["api_key"] == 1
    }
    received = [
        (
            c["client_id"],
            c["topic"],
            c["partition"],
            c["offset"],
            _b(c["key"]),
            _b(c["value"]),
            _hdrs(c["headers"]),
        )
        for c in cap.meta["consumed"]
    ]
    assert received and len(set(received)) == len(received)
    assert set(received) <= fetched
    # Nothing was fetched that the producers did not write there (offsets from the delivery
    # reports, as the clients gave them).
    delivered = {
        (p["topic"], p["partition"], p["offset"], _b(p["key"]), _b(p["value"]), _hdrs(p["headers"]))
        for p in cap.meta["produced"]
        if p["delivered"]
    }
    assert {f[1:] for f in fetched} <= delivered
    # And the consumers got every delivered record (kafka-python's old formats included).
    assert {r[1:] for r in received} == delivered


TXN = [m for m in METAS if any(p["txn"] for p in m["produced"])]


@pytest.mark.parametrize("meta", TXN, ids=[m["capture"] for m in TXN])
def test_transactions_commit_and_abort_markers(meta: dict[str, Any]) -> None:
    cap = _cached(meta)
    txn = [p for p in cap.meta["produced"] if p["txn"]]
    txn_rows = [r for r in cap.data_rows("request") if r["client_id"] == "rdk-txn"]
    assert txn_rows and all(r["is_transactional"] and r["producer_id"] >= 0 for r in txn_rows)
    # Fetch shows every transaction's marker: one control record per partition and outcome.
    markers = Counter(
        (r["partition"], r["control_type"])
        for r in {
            (r["partition"], r["offset"], r["control_type"]): r
            for r in cap.rows
            if r["direction"] == "response" and r["is_control"]
        }.values()
    )
    outcomes = Counter(p["txn"] for p in txn)
    for part in (0, 1):
        assert markers[(part, "commit")] == outcomes["committed"] // 2
        assert markers[(part, "abort")] == outcomes["aborted"] // 2
    # The aborted records are in the log and fetched, transactional, before their ABORT marker.
    aborted = {(p["partition"], p["offset"]) for p in txn if p["txn"] == "aborted"}
    fetched = {
        (r["partition"], r["offset"]): r
        for r in cap.data_rows("response")
        if r["topic"] == "rdk-txn"
    }
    assert aborted <= set(fetched)
    assert all(fetched[a]["is_transactional"] for a in aborted)
    # Neither broker reports aborted transactions in Fetch (the range a read_committed consumer
    # filters by) and both give a last stable offset equal to the high watermark, so the
    # read_committed consumer did receive the aborted records: the client's own report says so.
    for row in cap.frames.to_pylist():
        if row["direction"] == "response" and row["api_key"] == 1:
            _, message = g.decode_response(row["frame"], 1, row["api_version"])
            for t in message.responses:
                for p in t.partitions:
                    assert not p.aborted_transactions
                    assert p.last_stable_offset == p.high_watermark
    got = {(c["partition"], c["offset"]) for c in cap.meta["consumed"] if c["topic"] == "rdk-txn"}
    assert {c["isolation"] for c in cap.meta["consumed"]} == {"read_committed"}
    assert aborted <= got


def test_tshark_reads_the_same_records(cap: Capture) -> None:
    """Per Produce request and Fetch response, the records tshark showed when the capture was
    made equal kwire's (topic, partition, offset, key, value, headers). tshark 4.0 cannot read
    some frames and says why; each such frame is accounted for: a Produce or Fetch version newer
    than its dissector knows (librdkafka sends Produce v10 and Fetch v16), or magic 0/1 message
    sets, which it misreads (keys <MISSING>, 'Cannot decompress records')."""
    stored = cap.meta["tshark_records"]
    kwire: dict[tuple[int, str, int], Counter[Any]] = {}
    magic: dict[tuple[int, str, int], set[int]] = {}
    ports = {
        r["connection_id"]: int(r["connection_id"].split("->")[0].rsplit(":", 1)[1])
        for r in cap.rows
    }
    for r in cap.rows:
        if r["is_control"]:
            continue
        k = (ports[r["connection_id"]], r["direction"], r["correlation_id"])
        kwire.setdefault(k, Counter())[
            (r["topic"], r["partition"], r["offset"], r["key"], r["value"], _hdrs(r["headers"]))
        ] += 1
        magic.setdefault(k, set()).add(r["magic"])
    compared = unread = 0
    for f in stored["frames"]:
        k = (f["client_port"], f["direction"], f["correlation_id"])
        if f["problems"]:
            unread += 1
            too_new = f["api_version"] > TSHARK_MAX_VERSION[f["api_key"]]
            assert too_new or min(magic.get(k, {2})) < 2, f
            if too_new:
                assert any("Unsupported" in p for p in f["problems"]), f
            continue
        theirs = Counter(
            (
                t["topic"],
                t["partition"],
                t["offset"],
                _b(t["key"]),
                _b(t["value"]),
                _hdrs(t["headers"]),
            )
            for t in f["records"]
        )
        assert theirs == kwire.get(k, Counter()), k
        compared += 1
    if cap.meta["scenario"] in ("records-kafka-python", "records-aiokafka"):
        assert compared > 0
    else:  # librdkafka only speaks Produce v10 / Fetch v16 to these brokers
        assert compared == 0 and unread > 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_stored_tshark_records_are_current(cap: Capture) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "scripts" / "capture"))
    try:
        import make_captures
    finally:
        sys.path.pop(0)
    live = make_captures.tshark_records(DATA / cap.meta["capture"], cap.meta["broker_ports"])
    stored = cap.meta["tshark_records"]
    if live["tshark"] != stored["tshark"]:
        pytest.skip(f"stored by {stored['tshark']}, installed {live['tshark']}")
    assert live["frames"] == stored["frames"]


def test_admin_calls_on_the_wire() -> None:
    """Tansu answers librdkafka's and aiokafka's topic and config admin calls except
    CreatePartitions and AlterConfigs (it does not list them: librdkafka refuses locally); the
    mock cluster has none of them, so only ListOffsets and OffsetFetch go out there."""
    by = {m["scenario"]: m for m in METAS}
    tansu, mock = by["tansu-admin-topics"], by["records-librdkafka"]
    ok = {(a["client"], a["call"]) for a in tansu["admin"] if a["ok"]}
    assert {c for _, c in ok} >= {
        "create_topics", "describe_cluster", "describe_topics", "describe_configs",
        "incremental_alter_configs", "list_offsets", "list_consumer_group_offsets",
        "delete_topics", "list_topics",
    }  # fmt: skip
    refused = {a["call"] for a in tansu["admin"] if not a["ok"]}
    assert refused == {"create_partitions", "alter_configs"}
    assert set(tansu["counts"]["request"]) >= {"19", "20", "32", "44", "2", "9"}
    assert set(tansu["counts"]["request"]) & {"37", "33"} == set()
    assert {a["call"] for a in mock["admin"] if a["ok"]} == {
        "list_offsets",
        "list_consumer_group_offsets",
    }
    assert set(mock["counts"]["request"]) & {"19", "20", "32", "33", "37", "44", "60"} == set()


@pytest.fixture(params=TLS_METAS, ids=[m["capture"] for m in TLS_METAS])
def tls_cap(request: pytest.FixtureRequest) -> Capture:
    return _cached(request.param)


def test_tls_captures_are_committed() -> None:
    assert {m["scenario"] for m in TLS_METAS} >= {
        "tls13-records",
        "tls12-group",
        "tls-partial-keys",
    }


def test_tls_produce_requests_carry_exactly_what_the_producers_sent(tls_cap: Capture) -> None:
    keyed = set(tls_cap.meta["keylog_clients"])
    mine = [p for p in tls_cap.meta["produced"] if p["client_id"] in keyed]
    assert mine
    view = Capture.__new__(Capture)
    view.__dict__.update(tls_cap.__dict__)
    view.meta = {**tls_cap.meta, "produced": mine}
    test_produce_requests_carry_exactly_what_the_producers_sent(view)


def test_tls_fetched_records_are_what_the_consumers_received(tls_cap: Capture) -> None:
    test_fetched_records_are_what_the_consumers_received(tls_cap)


def test_tls_records_all_read(tls_cap: Capture) -> None:
    assert tls_cap.rows and all(r["batch_status"] == records.OK for r in tls_cap.rows)
