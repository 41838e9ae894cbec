"""Ground-truth share-group scenario (KIP-932; run by make_captures.py inside a network namespace).

    python scripts/capture/share_scenarios.py share-locks --ports-file FILE

librdkafka's mock cluster runs in this process, made through ctypes calls into the bundled
librdkafka of the confluent-kafka wheel (the Python API has no handle for the mock's share-group
knobs): one broker, topic `q` with one partition, share auto offset reset earliest, an
acquisition lock of LOCK_MS, DELIVERY_LIMIT delivery attempts, a 500 ms heartbeat interval. The
clients are confluent-kafka Producer and ShareConsumer objects in this process, driven from one
thread in a fixed order (see `share_locks`).

The truth goes to the ports file under "share_truth" (make_captures.py stores it in NAME.json).
It is written from the clients' own APIs only: Message.offset()/delivery_count() of what poll()
returned, what the script acknowledged, the acknowledgement commit callback and commit_sync
results, delivery reports, the member ids and topic id the clients print in their debug logs, and
time.time() around each call. "expected.records" is what these imply for each record (see
`expected_records`), not something read from the mock or the wire.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

TOPIC = "q"
LOCK_MS = 1500
DELIVERY_LIMIT = 3
HEARTBEAT_MS = 500
POISON = 7  # released by A every time it sees it: deliveries 1, 2, 3, then archived
REJECTED = 5  # rejected by A: archived at once
# Produce plan: offsets 0-2 one record per batch, 3-6 one batch, 7 and 8 alone, 9-11 one batch;
# offsets 12-13 (one batch) come at the end, for the closing phase.
FIRST_BATCHES = [[0], [1], [2], [3, 4, 5, 6], [7], [8], [9, 10, 11]]
LAST_BATCH = [12, 13]

# -- the mock cluster through ctypes ---------------------------------------------------------------


# The mock's share-group settings, each set by rd_kafka_mock_sharegroup_set_<knob>(mock, value).
SHARE_KNOBS = ("auto_offset_reset", "record_lock_duration", "max_delivery_attempts",
               "heartbeat_interval")  # fmt: skip


def mock_library() -> tuple[Any, str]:
    """The confluent-kafka wheel's bundled librdkafka through ctypes, with the mock cluster's C
    API typed (a handle, the cluster, its bootstraps, topics, the share-group knobs), and its
    file name. (The Python API has no handle for the share-group knobs.)
    scripts/scale/make_ring.py uses it too."""
    import confluent_kafka

    libs = os.path.dirname(confluent_kafka.__file__) + ".libs"
    found = glob.glob(os.path.join(libs, "librdkafka-*.so*"))
    if not found:
        raise SystemExit(f"no bundled librdkafka in {libs}")
    lib = ctypes.CDLL(found[0])
    vp = ctypes.c_void_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.argtypes = [vp, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    for knob in SHARE_KNOBS:
        getattr(lib, f"rd_kafka_mock_sharegroup_set_{knob}").argtypes = [vp, ctypes.c_int]
    return lib, os.path.basename(found[0])


class Mock:
    """A one-broker librdkafka mock cluster with the share-group settings of this scenario."""

    def __init__(self) -> None:
        lib, library = mock_library()
        vp = ctypes.c_void_p
        lib.rd_kafka_mock_sharegroup_get_member_ids.argtypes = [
            vp,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        lib.rd_kafka_mock_sharegroup_target_assignment.argtypes = [
            vp,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(vp),
            ctypes.c_size_t,
        ]
        lib.rd_kafka_topic_partition_list_new.restype = vp
        lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
        lib.rd_kafka_topic_partition_list_add.restype = vp
        lib.rd_kafka_topic_partition_list_add.argtypes = [vp, ctypes.c_char_p, ctypes.c_int32]
        self.lib = lib
        self.library = library
        errstr = ctypes.create_string_buffer(512)
        # A handle with no bootstrap servers: it hosts the mock and never connects to it.
        self.rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, len(errstr))
        if not self.rk:
            raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, 1)
        if not self.mc:
            raise SystemExit("rd_kafka_mock_cluster_new failed")
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def create_topic(self, topic: str, partitions: int) -> None:
        err = self.lib.rd_kafka_mock_topic_create(self.mc, topic.encode(), partitions, 1)
        if err:
            raise SystemExit(f"rd_kafka_mock_topic_create({topic}): error {err}")

    def share_settings(self) -> dict[str, Any]:
        self.lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(self.mc, 1)
        self.lib.rd_kafka_mock_sharegroup_set_record_lock_duration(self.mc, LOCK_MS)
        self.lib.rd_kafka_mock_sharegroup_set_max_delivery_attempts(self.mc, DELIVERY_LIMIT)
        self.lib.rd_kafka_mock_sharegroup_set_heartbeat_interval(self.mc, HEARTBEAT_MS)
        return {
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": LOCK_MS,
            "share.delivery.count.limit": DELIVERY_LIMIT,
            "share.heartbeat.interval.ms": HEARTBEAT_MS,
        }

    def member_ids(self, group: str) -> list[str]:
        ids = ctypes.POINTER(ctypes.c_char_p)()
        n = ctypes.c_size_t()
        err = self.lib.rd_kafka_mock_sharegroup_get_member_ids(
            self.mc, group.encode(), ctypes.byref(ids), ctypes.byref(n)
        )
        if err:
            return []
        return [str(ids[i].decode()) for i in range(n.value)]

    def wait_members(self, group: str, count: int, timeout: float = 20) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ids = self.member_ids(group)
            if len(ids) >= count:
                return ids
            time.sleep(0.05)
        raise SystemExit(f"share group {group}: fewer than {count} members after {timeout} s")

    def assign_all(self, group: str, member_ids: list[str], topic: str, partition: int) -> None:
        """Target assignment: every member gets topic/partition (the mock's own assignor gives a
        partition to one member only)."""
        vp = ctypes.c_void_p
        lists = (vp * len(member_ids))()
        for i in range(len(member_ids)):
            lists[i] = self.lib.rd_kafka_topic_partition_list_new(1)
            self.lib.rd_kafka_topic_partition_list_add(lists[i], topic.encode(), partition)
        ids = (ctypes.c_char_p * len(member_ids))(*[m.encode() for m in member_ids])
        self.lib.rd_kafka_mock_sharegroup_target_assignment(
            self.mc, group.encode(), ids, lists, len(member_ids)
        )


# -- the truth ------------------------------------------------------------------------------------


def _now_ms() -> float:
    return time.time() * 1000.0


def _error_text(err: Any) -> str | None:
    """'NAME (code): text' of a KafkaException or KafkaError; None for no error."""
    if err is None:
        return None
    kerr = (
        err.args[0] if hasattr(err, "args") and err.args and hasattr(err.args[0], "code") else err
    )
    if hasattr(kerr, "code"):
        return f"{kerr.name()} ({kerr.code()}): {kerr.str()}"
    return str(err)


class Truth:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.clients: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []
        self.commit_sync: list[dict[str, Any]] = []
        self.poll_errors: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []

    def event(self, client_id: str, event: str, **fields: Any) -> dict[str, Any]:
        entry = {"t": _now_ms(), "client_id": client_id, "event": event, **fields}
        self.events.append(entry)
        return entry

    def did(self, action: str, **fields: Any) -> None:
        """What the script did that is not a client event (mock settings, target assignment)."""
        self.actions.append({"t": _now_ms(), "action": action, **fields})
        print(f"{time.strftime('%H:%M:%S')} {action} {fields if fields else ''}", flush=True)


class _ClientLog(logging.Handler):
    """The member id and topic id a client names in its own debug log."""

    MEMBER = re.compile(r'updating member id "[^"]*" -> "([^"]+)"')
    TOPIC_ID = re.compile(r"Topic (\S+) changed id from \S+ to (\S+)")

    def __init__(self) -> None:
        super().__init__()
        self.member_id: str | None = None
        self.topic_ids: dict[str, str] = {}
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if (m := self.MEMBER.search(text)) is not None:
            self.member_id = m.group(1)
        elif (m := self.TOPIC_ID.search(text)) is not None:
            self.topic_ids[m.group(1)] = m.group(2)
        elif "rror" in text or "FENCED" in text or "SESSION_NOT_FOUND" in text:
            self.lines.append(text[:300])


def _logger(name: str) -> tuple[logging.Logger, _ClientLog]:
    handler = _ClientLog()
    log = logging.getLogger(f"share-scenario-{name}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    log.addHandler(handler)
    return log, handler


class Share:
    """One ShareConsumer and the truth of what it received, acknowledged and was told."""

    def __init__(
        self,
        truth: Truth,
        bootstrap: str,
        client_id: str,
        group: str,
        mode: str,
        max_poll_records: int,
    ) -> None:
        from confluent_kafka import ShareConsumer

        self.truth = truth
        self.client_id = client_id
        self.group = group
        self.mode = mode
        self.log, self.clog = _logger(client_id)
        self.conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "share.acknowledgement.mode": mode,
            "max.poll.records": max_poll_records,
        }
        self.consumer = ShareConsumer({**self.conf, "debug": "cgrp", "logger": self.log})
        self.consumer.set_acknowledgement_commit_callback(self._on_commit)
        self.via = "poll"  # which client call serves the callback right now
        self.batch: list[Any] = []  # the last poll's records
        self.unacked: set[Any] = set()
        self.closed = False
        truth.clients[client_id] = {
            "group": group,
            "kind": "share",
            "process": f"share_scenarios.py pid {os.getpid()} (one thread drives every client)",
            "mode": mode,
            "conf": dict(self.conf),
            "member_id": None,
        }

    def _on_commit(self, offsets: dict[Any, set[int]], exc: Any) -> None:
        for tp, offs in sorted(offsets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            self.truth.event(
                self.client_id,
                "ack_result",
                topic=tp.topic,
                partition=tp.partition,
                offsets=sorted(offs),
                error=_error_text(exc),
                via=self.via,
            )

    def subscribe(self) -> None:
        self.consumer.subscribe([TOPIC])
        self.truth.event(self.client_id, "subscribed", group=self.group, topics=[TOPIC])

    def _implicit_acks(self) -> None:
        """In implicit mode the client accepts the previous batch on the next poll or close."""
        if self.mode == "implicit":
            for m in self.batch:
                self._ack_event(m.topic(), m.partition(), m.offset(), "ACCEPT", implicit=True)
            self.batch = []

    def _ack_event(self, topic: str, partition: int, offset: int, kind: str, **extra: Any) -> None:
        self.truth.event(
            self.client_id,
            "ack",
            type=kind,
            topic=topic,
            partition=partition,
            offset=offset,
            **extra,
        )

    def poll(self, timeout: float) -> list[Any]:
        self._implicit_acks()
        self.via = "poll"
        t = _now_ms()
        got = list(self.consumer.poll(timeout))
        records = []
        for m in got:
            if m.error() is not None:
                self.truth.poll_errors.append(
                    {
                        "t": t,
                        "client_id": self.client_id,
                        "topic": m.topic(),
                        "partition": m.partition(),
                        "offset": m.offset(),
                        "error": _error_text(m.error()),
                    }
                )
                continue
            self.truth.event(
                self.client_id,
                "received",
                topic=m.topic(),
                partition=m.partition(),
                offset=m.offset(),
                delivery_count=m.delivery_count(),
                poll_started=t,
            )
            records.append(m)
        self.batch = records
        if self.mode == "explicit":
            self.unacked = {m.offset() for m in records}
        self._member_id()
        return records

    def acknowledge(self, m: Any, kind: str) -> None:
        from confluent_kafka import AcknowledgeType

        self.consumer.acknowledge(m, getattr(AcknowledgeType, kind))
        self.unacked.discard(m.offset())
        self._ack_event(m.topic(), m.partition(), m.offset(), kind)

    def commit_sync(self) -> dict[str, str | None]:
        self._implicit_acks()
        self.via = "commit_sync"
        t = _now_ms()
        done = self.consumer.commit_sync(10)
        result = {f"{tp.topic}/{tp.partition}": _error_text(err) for tp, err in done.items()}
        self.truth.commit_sync.append(
            {"t": t, "returned": _now_ms(), "client_id": self.client_id, "result": result}
        )
        self.via = "poll"
        return result

    def close(self) -> None:
        self._implicit_acks()
        self.via = "close"
        t = _now_ms()
        self.consumer.close()
        self.closed = True
        self._member_id()
        self.truth.event(
            self.client_id,
            "closed",
            close_started=t,
            unacknowledged=sorted(self.unacked) if self.mode == "explicit" else [],
        )

    def _member_id(self) -> None:
        if self.clog.member_id:
            self.truth.clients[self.client_id]["member_id"] = self.clog.member_id


# -- the scenario ---------------------------------------------------------------------------------


def _poll_until(
    c: Share, handle: Callable[[list[Any]], None], done: Callable[[], bool], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"{c.client_id}: gave up waiting after {timeout} s")
        handle(c.poll(0.3))


def share_locks(truth: Truth) -> dict[str, Any]:
    from confluent_kafka import Producer

    mock = Mock()
    mock.create_topic(TOPIC, 1)
    group_conf = mock.share_settings()
    truth.did("mock", bootstrap=mock.bootstrap, library=mock.library, **group_conf)
    for group, mode in (("sg-locks", "explicit"), ("sg-implicit", "implicit")):
        truth.groups[group] = {
            "mode": mode,
            "lock_ms": LOCK_MS,
            "delivery_limit": DELIVERY_LIMIT,
            "configs": dict(group_conf),
            "configs_source": "mock cluster settings made by this script "
            "(rd_kafka_mock_sharegroup_set_*), not on the wire",
        }

    # The producer. Its debug log names the topic id it learns from Metadata.
    plog, pclog = _logger("producer")
    pconf = {"bootstrap.servers": mock.bootstrap, "client.id": "producer-p", "linger.ms": 100}
    producer = Producer({**pconf, "debug": "metadata", "logger": plog})
    truth.clients["producer-p"] = {
        "group": None,
        "kind": "producer",
        "process": f"share_scenarios.py pid {os.getpid()}",
        "conf": pconf,
    }

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            raise SystemExit(f"produce failed: {err}")
        truth.event(
            "producer-p",
            "produced",
            topic=msg.topic(),
            partition=msg.partition(),
            offset=msg.offset(),
            key=msg.key().decode(),
        )

    def produce(batches: list[list[int]]) -> None:
        for batch in batches:
            for i in batch:
                producer.produce(
                    TOPIC,
                    key=f"k{i}".encode(),
                    value=f"v{i}".encode(),
                    partition=0,
                    on_delivery=delivered,
                )
            producer.flush(10)  # one flush per planned batch: one record batch each

    produce(FIRST_BATCHES)

    # Every client exists and has connected before any share session opens: the mock closes all
    # share sessions of a broker whenever any connection to it closes (librdkafka closes its
    # bootstrap connections once it knows the brokers).
    a = Share(truth, mock.bootstrap, "share-a", "sg-locks", "explicit", 3)
    b = Share(truth, mock.bootstrap, "share-b", "sg-locks", "explicit", 3)
    c = Share(truth, mock.bootstrap, "share-c", "sg-implicit", "implicit", 4)
    a.subscribe()
    mock.wait_members("sg-locks", 1)
    b.subscribe()
    ids = mock.wait_members("sg-locks", 2)
    c.subscribe()
    mock.wait_members("sg-implicit", 1)
    mock.assign_all("sg-locks", ids, TOPIC, 0)
    truth.did("target_assignment", group="sg-locks", members=ids, topic=TOPIC, partition=0)
    time.sleep(2.0)  # fencing and rejoin after the target assignment; bootstrap connections close
    producer.poll(0)

    # B polls once and keeps its records past the lock.
    b_records: list[Any] = []
    _poll_until(b, b_records.extend, lambda: bool(b_records), 10)
    truth.event("share-b", "stall_begin", holding=[m.offset() for m in b_records])
    b_offsets = {m.offset() for m in b_records}
    if POISON in b_offsets or REJECTED in b_offsets:
        raise SystemExit(f"B got {sorted(b_offsets)}: the plan wants the poison offset for A")

    # C reads the whole topic in its own group (implicit acks), then A works through sg-locks.
    c_seen: set[int] = set()
    c_idle = [0]

    def c_handle(records: list[Any]) -> None:
        c_seen.update(m.offset() for m in records)
        c_idle[0] = 0 if records else c_idle[0] + 1

    first = {o for batch in FIRST_BATCHES for o in batch}
    _poll_until(c, c_handle, lambda: c_seen >= first and c_idle[0] >= 1, 15)

    state: dict[str, Any] = {"poison_releases": 0, "b_back": 0, "late": None, "idle": 0}

    def a_handle(records: list[Any]) -> None:
        state["idle"] = 0 if records else state["idle"] + 1
        returned = [m for m in records if m.offset() in b_offsets and m.delivery_count() >= 2]
        if returned and state["late"] is None:
            # B's records came back to A after B's lock: B now acknowledges late, while A holds
            # them.
            truth.event("share-b", "stall_end", late_by_ms=_now_ms() - stall_t)
            for m in b_records:
                b.acknowledge(m, "ACCEPT")
            state["late"] = b.commit_sync()
        for m in records:
            if m.offset() == POISON:
                a.acknowledge(m, "RELEASE")
                state["poison_releases"] += 1
            elif m.offset() == REJECTED:
                a.acknowledge(m, "REJECT")
            else:
                a.acknowledge(m, "ACCEPT")
        if returned:
            state["b_back"] += len(returned)
            a.commit_sync()

    stall_t = [e for e in truth.events if e["event"] == "stall_begin"][-1]["t"]
    _poll_until(
        a,
        a_handle,
        lambda: state["poison_releases"] >= DELIVERY_LIMIT
        and state["b_back"] >= len(b_records)
        and state["idle"] >= 2,
        30,
    )
    a.commit_sync()  # nothing pending: an empty commit, for symmetry with B
    poison = [
        e["delivery_count"]
        for e in truth.events
        if e["event"] == "received" and e["client_id"] == "share-a" and e["offset"] == POISON
    ]
    if poison != list(range(1, DELIVERY_LIMIT + 1)):
        raise SystemExit(f"the poison offset {POISON} reached A with counts {poison}")

    # The end. A closes (it holds nothing). Two more records; C takes them, accepts them with
    # commit_sync and closes; then B takes them and closes without acknowledging them. A pause
    # after each close: the mock drops every share session of the broker when a connection
    # closes, so the next member starts a new session (and may first be told 122).
    a.close()
    time.sleep(0.5)
    produce([LAST_BATCH])
    c_last: set[int] = set()
    _poll_until(c, lambda rs: c_last.update(m.offset() for m in rs), lambda: c_last >= {12, 13}, 15)
    c.commit_sync()  # the implicit ACCEPT of 12-13, with a result the client reports
    c.close()
    time.sleep(0.5)
    b_last: list[Any] = []
    _poll_until(b, b_last.extend, lambda: {m.offset() for m in b_last} >= {12, 13}, 15)
    b.close()
    producer.flush(10)
    producer.poll(0.2)

    # librdkafka prints ids in standard base64; Kafka's own text form (Uuid.toString) is the
    # URL-safe alphabet without padding.
    logged_id = pclog.topic_ids.get(TOPIC)
    topic_id = logged_id.replace("+", "-").replace("/", "_").rstrip("=") if logged_id else None
    truth.notes += [
        f"B's late acknowledgement of offsets {sorted(b_offsets)}: commit_sync returned "
        f"{state['late']} (A held them again, with delivery count 2)",
        "share-c's last batch (offsets 12-13) was accepted implicitly by its commit_sync "
        "(ShareAcknowledge) just before its close",
        "share-b closed while holding offsets 12-13 unacknowledged (explicit mode): its close "
        "(ShareAcknowledge, session epoch -1) released them; nobody received them again in "
        "sg-locks",
        "the mock closes every share session of the broker when any client connection closes: "
        "share-a's close ended share-b's and share-c's sessions, share-c's close ended "
        "share-b's; their next share request may be answered SHARE_SESSION_NOT_FOUND (122) and "
        "they open a new session (epoch 0). Nobody held records at those moments.",
        "Produce responses of the mock carry LogAppendTime 1234; 'produced' t is the delivery "
        "report's arrival time",
    ]
    for cid in ("share-a", "share-b", "share-c"):
        share = {"share-a": a, "share-b": b, "share-c": c}[cid]
        if share.clog.lines:
            truth.clients[cid]["log_errors"] = share.clog.lines[:20]
    return {
        "bootstrap": mock.bootstrap,
        "topic_id": topic_id,
        "topic_id_logged": logged_id,
        "mock": mock,
    }


def expected_records(truth: Truth) -> list[dict[str, Any]]:
    """Each record's fate per group, from what the clients received and acknowledged and what
    the acknowledgement results said."""
    produced = sorted(
        (e["partition"], e["offset"]) for e in truth.events if e["event"] == "produced"
    )
    group_of = {cid: c["group"] for cid, c in truth.clients.items()}
    out = []
    for group in truth.groups:
        for partition, offset in produced:
            story = [
                e
                for e in truth.events
                if group_of.get(e["client_id"]) == group
                and e.get("partition") == partition
                and (e.get("offset") == offset or offset in e.get("offsets", []))
                and e["event"] in ("received", "ack", "ack_result")
            ]
            out.append({"group": group, "topic": TOPIC, "partition": partition, "offset": offset})
            out[-1].update(_fate(story, offset))
    return out


def _fate(story: list[dict[str, Any]], offset: int) -> dict[str, Any]:
    received = [e for e in story if e["event"] == "received"]
    if not received:
        return {"final_state": "available", "archived_reason": None, "why": "never delivered"}
    last = received[-1]
    who, count = last["client_id"], last["delivery_count"]
    acks = [e for e in story if e["event"] == "ack" and e["t"] >= last["t"]]
    acks = [e for e in acks if e["client_id"] == who]
    results = [e for e in story if e["event"] == "ack_result" and e["client_id"] == who]
    results = [e for e in results if e["t"] >= last["t"]]
    counts = [e["delivery_count"] for e in received]
    path = ", ".join(f"{e['client_id']}#{e['delivery_count']}" for e in received)
    if not acks:
        # Held at the end: the holder's close (ShareAcknowledge with session epoch -1) releases
        # it, so it is available again (not terminal), not in flight.
        return {
            "final_state": "available",
            "archived_reason": None,
            "held_at_end": True,
            "why": f"deliveries {path}; {who} held delivery {count} unacknowledged until its "
            "close, which released it: available again, not terminal",
        }
    kind = acks[-1]["type"]
    errors = [e["error"] for e in results if e["error"]]
    if errors or not results:
        return {
            "final_state": "unknown",
            "archived_reason": None,
            "why": f"deliveries {path}; last ack {kind} by {who}: "
            f"{errors[0] if errors else 'no result reported'}",
        }
    late = [e for e in story if e["event"] == "ack_result" and e["error"]]
    late_note = "".join(f"; late ack by {e['client_id']} refused: {e['error']}" for e in late)
    if kind == "ACCEPT":
        state, reason = "acknowledged", None
        why = f"deliveries {path}; {who} accepted delivery {count}"
    elif kind == "REJECT":
        state, reason = "archived", "rejected"
        why = f"deliveries {path}; {who} rejected delivery {count}"
    elif count >= DELIVERY_LIMIT:
        state, reason = "archived", "delivery_limit"
        why = (
            f"deliveries {path}; {who} released delivery {count} = the limit "
            f"({DELIVERY_LIMIT}), never delivered again"
        )
    else:
        state, reason = "available", None
        why = f"deliveries {path}; released by {who} at delivery {count}, not delivered again"
    assert counts == sorted(counts), counts
    return {"final_state": state, "archived_reason": reason, "why": why + late_note}


SCENARIOS = {"share-locks": share_locks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--ports-file")
    args = parser.parse_args()

    import confluent_kafka

    truth = Truth()
    run = SCENARIOS[args.scenario](truth)
    truth.events.sort(key=lambda e: e["t"])
    share_truth = {
        "scenario": args.scenario,
        "librdkafka": confluent_kafka.libversion()[0],
        "confluent_kafka": confluent_kafka.version()[0],
        "groups": truth.groups,
        "topics": {
            TOPIC: {
                "partitions": 1,
                "topic_id": run["topic_id"],
                "topic_id_source": "producer-p's metadata debug log "
                f"({run['topic_id_logged']}), in Kafka's URL-safe base64 form",
            }
        },
        "clients": truth.clients,
        "events": truth.events,
        "expected": {
            "records": expected_records(truth),
            "final_states": "acknowledged (accepted, result without error), archived "
            "(rejected, or released at the delivery limit and never delivered again), available "
            "(released or held unacknowledged until the holder's close, not terminal), "
            "in_flight (held when the capture ended: none here, every client closes)",
        },
        "commit_sync": truth.commit_sync,
        "poll_errors": truth.poll_errors,
        "actions": truth.actions,
        "notes": truth.notes,
        "time_unit": "t and other times: epoch milliseconds (time.time() * 1000) in the scenario",
    }
    meta = {
        "broker_ports": [int(run["bootstrap"].rsplit(":", 1)[1])],
        "librdkafka": confluent_kafka.libversion()[0],
        "share_truth": share_truth,
    }
    out = args.ports_file or "/dev/stdout"
    with open(out, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
