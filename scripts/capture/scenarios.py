"""Client scenarios whose traffic becomes the committed test captures (run by make_captures.py).

Each scenario talks to a broker on 127.0.0.1 (librdkafka's in-process mock cluster, or Tansu for
the admin group APIs the mock lacks) and writes the broker port(s) it used to a JSON file.
Run inside a private network namespace while a capture tool listens on the loopback.

The records scenarios also write down their ground truth, from the clients' own APIs and never
from kwire: every record a producer handed to its client (with the client's delivery report),
every record a consumer received, and what each admin call answered. make_captures.py stores
it beside the capture (NAME.json: "produced", "consumed", "admin", "notes").
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

SCENARIOS: dict[str, Callable[[argparse.Namespace], list[int]]] = {}
# Ground truth of the records scenarios (bytes as hex; None stays null).
GROUND: dict[str, list[Any]] = {"produced": [], "consumed": [], "admin": [], "notes": []}


def scenario(
    fn: Callable[[argparse.Namespace], list[int]],
) -> Callable[[argparse.Namespace], list[int]]:
    SCENARIOS[fn.__name__.replace("_", "-")] = fn
    return fn


class _Bootstrap(logging.Handler):
    """Picks the mock cluster's address out of librdkafka's debug log."""

    def __init__(self) -> None:
        super().__init__()
        self.address: str | None = None
        self.ready = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        m = re.search(r"Mock cluster \S+ bootstrap\.servers=(\S+)", record.getMessage())
        if m and not self.ready.is_set():
            self.address = m.group(1)
            self.ready.set()


def mock_cluster(extra: dict[str, object] | None = None) -> tuple[Producer, str]:
    """A producer that hosts a one-broker mock cluster; returns it and the bootstrap address."""
    handler = _Bootstrap()
    log = logging.getLogger("mock-bootstrap")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    conf: dict[str, object] = {
        "test.mock.num.brokers": 1,
        "debug": "mock",
        "logger": log,
        "client.id": "mock-host-producer",
    }
    conf.update(extra or {})
    producer = Producer(conf)
    producer.poll(0)
    if not handler.ready.wait(10):
        raise SystemExit("mock cluster did not report its bootstrap address")
    # Stop the debug chatter now that we know the address.
    log.removeHandler(handler)
    assert handler.address is not None
    return producer, handler.address


def produce(producer: Producer, topic: str, n: int, prefix: str = "m") -> None:
    for i in range(n):
        producer.produce(topic, key=f"k{i}".encode(), value=f"{prefix}-{i}".encode())
    producer.flush(10)


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


class Member(threading.Thread):
    """A librdkafka consumer that polls until told to stop, committing what it consumed."""

    def __init__(self, conf: dict[str, object], topics: list[str], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.conf = conf
        self.topics = topics
        self.stop = threading.Event()
        self.consumed = 0
        self.assigned = threading.Event()

    def run(self) -> None:
        c = Consumer(self.conf)

        def on_assign(consumer: Consumer, partitions: list) -> None:
            if partitions:
                self.assigned.set()

        c.subscribe(self.topics, on_assign=on_assign)
        while not self.stop.is_set():
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                self.consumed += 1
                try:
                    c.commit(message=msg, asynchronous=False)
                except confluent_kafka.KafkaException:
                    pass  # e.g. a rebalance started: the next message's commit covers it
        c.close()


def wait_for(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def consumer_conf(bootstrap: str, group: str, client_id: str, **extra: object) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 500,
    }
    conf.update(extra)
    return conf


@scenario
def group_classic(args: argparse.Namespace) -> list[int]:
    """Producer, two librdkafka consumers in a classic group, a kafka-python one in another.

    (kafka-python's SyncGroup in a group led by librdkafka gets INVALID_REQUEST from the mock,
    so it has a group of its own.)
    """
    from kafka import KafkaConsumer

    host, bootstrap = mock_cluster()
    produce(host, "orders", 12)
    a = Member(
        consumer_conf(
            bootstrap, "g-classic", "rdk-a", **{"partition.assignment.strategy": "range"}
        ),
        ["orders"],
        "a",
    )
    a.start()
    wait_for(a.assigned.is_set, 20, "first member assignment")
    b = Member(
        consumer_conf(
            bootstrap, "g-classic", "rdk-b", **{"partition.assignment.strategy": "range"}
        ),
        ["orders"],
        "b",
    )
    b.start()
    wait_for(b.assigned.is_set, 20, "second member assignment")
    kp = KafkaConsumer(
        "orders",
        bootstrap_servers=bootstrap,
        group_id="g-kpy",
        client_id="kpy-c",
        # The mock answers ApiVersions v3+ with UNSUPPORTED_VERSION, which kafka-python cannot
        # fall back from; pinning 2.3 makes it start with ApiVersions v2.
        api_version=(2, 3),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=500,
    )
    deadline = time.monotonic() + 20
    while not kp.assignment() and time.monotonic() < deadline:
        kp.poll(timeout_ms=200)
    produce(host, "orders", 6, prefix="late")
    for _ in range(5):
        kp.poll(timeout_ms=200)
    kp.commit()
    kp.close()
    time.sleep(1)
    for m in (b, a):
        m.stop.set()
        m.join(15)
    host.flush(5)
    return [port_of(bootstrap)]


def kpy_consumer(bootstrap: str, group: str, client_id: str, **extra: object):  # type: ignore[no-untyped-def]
    from kafka import KafkaConsumer

    conf: dict[str, object] = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=client_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=500,
    )
    conf.update(extra)
    return KafkaConsumer(**conf)


def kpy_poll_until_assigned(consumer, polls: int = 100) -> int:  # type: ignore[no-untyped-def]
    n = 0
    for _ in range(polls):
        n += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
        if consumer.assignment() and n:
            break
    return n


@scenario
def static_members(args: argparse.Namespace) -> list[int]:
    """Static membership (group.instance.id): two librdkafka members, one restarts and rejoins
    under the same instance id without a rebalance; a kafka-python static member in its own
    group."""
    host, bootstrap = mock_cluster()
    produce(host, "events", 8)
    static = {"partition.assignment.strategy": "roundrobin"}
    a = Member(
        consumer_conf(
            bootstrap, "g-static", "rdk-static-a", **{"group.instance.id": "inst-a"}, **static
        ),
        ["events"],
        "a",
    )
    b = Member(
        consumer_conf(
            bootstrap, "g-static", "rdk-static-b", **{"group.instance.id": "inst-b"}, **static
        ),
        ["events"],
        "b",
    )
    a.start()
    wait_for(a.assigned.is_set, 20, "member a assignment")
    b.start()
    wait_for(b.assigned.is_set, 20, "member b assignment")
    time.sleep(1)
    b.stop.set()
    b.join(15)
    # Same instance id again: the coordinator hands back the old assignment.
    b2 = Member(
        consumer_conf(
            bootstrap, "g-static", "rdk-static-b", **{"group.instance.id": "inst-b"}, **static
        ),
        ["events"],
        "b2",
    )
    b2.start()
    wait_for(b2.assigned.is_set, 20, "member b rejoin")
    produce(host, "events", 4, prefix="more")
    kp = kpy_consumer(
        bootstrap, "g-static-kpy", "kpy-static", api_version=(2, 3), group_instance_id="kpy-inst"
    )
    kp.subscribe(["events"])
    kpy_poll_until_assigned(kp)
    kp.commit()
    kp.close()
    time.sleep(1)
    for m in (b2, a):
        m.stop.set()
        m.join(15)
    return [port_of(bootstrap)]


@scenario
def cooperative_sticky(args: argparse.Namespace) -> list[int]:
    """Incremental rebalancing: librdkafka members with cooperative-sticky join one by one and
    leave one by one, committing as they go."""
    host, bootstrap = mock_cluster()
    produce(host, "clicks", 10)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    members = []
    for name in ("a", "b", "c"):
        m = Member(consumer_conf(bootstrap, "g-coop", f"rdk-coop-{name}", **coop), ["clicks"], name)
        m.start()
        wait_for(m.assigned.is_set, 20, f"member {name} assignment")
        members.append(m)
        time.sleep(1)
    produce(host, "clicks", 5, prefix="late")
    time.sleep(1)
    for m in reversed(members):
        m.stop.set()
        m.join(15)
        time.sleep(0.5)
    return [port_of(bootstrap)]


@scenario
def consumer_protocol(args: argparse.Namespace) -> list[int]:
    """KIP-848: librdkafka members with group.protocol=consumer (ConsumerGroupHeartbeat), two
    joining and leaving."""
    host, bootstrap = mock_cluster()
    produce(host, "metrics", 8)
    new = {"group.protocol": "consumer"}
    a = Member(
        _without_classic(consumer_conf(bootstrap, "g-848", "rdk-848-a", **new)), ["metrics"], "a"
    )
    a.start()
    wait_for(a.assigned.is_set, 30, "member a assignment")
    b = Member(
        _without_classic(consumer_conf(bootstrap, "g-848", "rdk-848-b", **new)), ["metrics"], "b"
    )
    b.start()
    time.sleep(3)
    produce(host, "metrics", 4, prefix="late")
    time.sleep(1)
    for m in (b, a):
        m.stop.set()
        m.join(15)
    return [port_of(bootstrap)]


def _without_classic(conf: dict[str, object]) -> dict[str, object]:
    # These belong to the classic protocol; the broker decides them under KIP-848.
    for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
        conf.pop(key, None)
    return conf


def attempt(what: str, fn: Callable[..., object], *args: object) -> None:
    try:
        print(f"{what}: {fn(*args)}")
    except Exception as e:  # noqa: BLE001 - a scenario step may fail; the traffic is the point
        print(f"{what}: client error {type(e).__name__}: {e}")


@scenario
def admin_groups(args: argparse.Namespace) -> list[int]:
    """Against Tansu on 127.0.0.1:9092: producers (one with acks=1, two with acks=0), kafka-python
    consumer groups that commit and leave, then group administration from kafka-python and librdkafka: list, describe,
    fetch and delete offsets (OffsetDelete), delete groups."""
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import NewTopic

    bootstrap = "127.0.0.1:9092"
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kpy-admin")
    kadmin.create_topics([NewTopic("ledger", num_partitions=2, replication_factor=1)])
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-producer"})
    produce(p, "ledger", 6)
    # Fire-and-forget producers: acks=0 Produce requests get no response by design.
    p0 = Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-acks0", "acks": 0})
    produce(p0, "ledger", 3, prefix="acks0")
    from kafka import KafkaProducer

    kp0 = KafkaProducer(bootstrap_servers=bootstrap, client_id="kpy-acks0", acks=0)
    for i in range(3):
        kp0.send("ledger", key=f"k{i}".encode(), value=f"kpy-acks0-{i}".encode())
    kp0.flush(10)
    kp0.close()
    for group in ("g-admin-1", "g-admin-2"):
        c = kpy_consumer(bootstrap, group, f"kpy-{group}")
        c.subscribe(["ledger"])
        kpy_poll_until_assigned(c)
        c.commit()
        c.close()
    # The exchanges on the wire are what the capture is for; a client that cannot digest an
    # answer (kafka-python rejects Tansu's authorized_operations bits) only gets a note.
    attempt("kafka-python list_groups", kadmin.list_groups)
    attempt("kafka-python describe_groups", kadmin.describe_groups, ["g-admin-1", "g-admin-2"])
    attempt("kafka-python list_group_offsets", kadmin.list_group_offsets, "g-admin-1")
    attempt(
        "kafka-python delete_group_offsets",
        kadmin.delete_group_offsets,
        "g-admin-1",
        [TopicPartition("ledger", 0)],
    )
    # Tansu does not list OffsetDelete in its ApiVersions, so kafka-python refuses to send it.
    # Claim v0 support and send it anyway, to capture how Tansu answers an api it lacks.
    versions = kadmin._manager.broker_version_data
    if versions is not None and versions.api_versions is not None:
        versions.api_versions[47] = (0, 0)
        attempt(
            "kafka-python delete_group_offsets (forced v0)",
            kadmin.delete_group_offsets,
            "g-admin-2",
            [TopicPartition("ledger", 1)],
        )
    attempt("kafka-python delete_groups", kadmin.delete_groups, ["g-admin-1"])
    kadmin.close()
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "rdk-admin"})
    attempt(
        "librdkafka list_consumer_groups", lambda: admin.list_consumer_groups().result(10).valid
    )
    attempt(
        "librdkafka describe_consumer_groups",
        lambda: {
            g: f.result(10).state for g, f in admin.describe_consumer_groups(["g-admin-2"]).items()
        },
    )
    attempt(
        "librdkafka list_consumer_group_offsets",
        lambda: {
            g: f.result(10)
            for g, f in admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions("g-admin-2")]
            ).items()
        },
    )
    attempt(
        "librdkafka delete_consumer_groups",
        lambda: {g: f.result(10) for g, f in admin.delete_consumer_groups(["g-admin-2"]).items()},
    )
    return [9092]


@scenario
def ipv6_produce_consume(args: argparse.Namespace) -> list[int]:
    """Against Tansu on [::1]:9092: a librdkafka producer and a kafka-python consumer group
    over IPv6."""
    bootstrap = "[::1]:9092"
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-v6-producer"})
    produce(p, "sensor", 5)
    c = kpy_consumer(bootstrap, "g-v6-kpy", "kpy-v6-consumer")
    c.subscribe(["sensor"])
    kpy_poll_until_assigned(c)
    c.commit()
    c.close()
    return [9092]


# -- records scenarios: what every client sends and receives, with ground truth -------------


def _hex(b: bytes | None) -> str | None:
    return None if b is None else bytes(b).hex()


def _headers(hs: Any) -> list[list[str | None]]:
    return [[k, _hex(v)] for k, v in (hs or [])]


def produced(
    client: str,
    client_id: str,
    codec: str,
    magic: int,
    topic: str,
    partition: int,
    key: bytes | None,
    value: bytes | None,
    headers: Any = (),
    **extra: Any,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "client": client,
        "client_id": client_id,
        "codec": codec,
        "magic": magic,
        "topic": topic,
        "partition": partition,
        "key": _hex(key),
        "value": _hex(value),
        "headers": _headers(headers),
        "txn": None,
        "delivered": None,
        "offset": None,
        "error": None,
    }
    entry.update(extra)
    GROUND["produced"].append(entry)
    return entry


def consumed(
    client: str,
    client_id: str,
    topic: str | None,
    partition: int | None,
    offset: int | None,
    key: bytes | None,
    value: bytes | None,
    headers: Any,
    **extra: Any,
) -> None:
    entry = {
        "client": client,
        "client_id": client_id,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "key": _hex(key),
        "value": _hex(value),
        "headers": _headers(headers),
    }
    entry.update(extra)
    GROUND["consumed"].append(entry)


async def aio_delivered(futs: list[tuple[dict[str, Any], Any]]) -> None:
    """Each produced entry's delivery report, as aiokafka's send futures give it."""
    for e, fut in futs:
        try:
            md = await fut
            e.update(delivered=True, offset=md.offset)
        except Exception as ex:  # noqa: BLE001
            e.update(delivered=False, error=f"{type(ex).__name__}: {ex}")


def admin_step(client: str, what: str, fn: Callable[[], object]) -> object:
    """Run one admin call; its answer (or the client's error) goes into the ground truth."""
    try:
        result = fn()
        GROUND["admin"].append({"client": client, "call": what, "ok": True, "result": repr(result)})
        print(f"{client} {what}: {result!r}")
        return result
    except Exception as e:  # noqa: BLE001 - a broker may lack the api; that is worth recording
        text = f"{type(e).__name__}: {e}"
        GROUND["admin"].append({"client": client, "call": what, "ok": False, "result": text})
        print(f"{client} {what}: client error {text}")
        return None


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def sample_records(
    label: str, headers: bool = True, null_header: bool = True
) -> list[tuple[bytes | None, bytes | None, list]]:
    """Three short records: keyed with headers, null key (a null header value), tombstone.

    Values repeat a letter so that every codec really shrinks them (a client may send a batch
    uncompressed when compression does not pay)."""
    return [
        (b"k1", f"{label}:".encode() + b"a" * 40, [("h1", b"x"), ("h2", b"")] if headers else []),
        (
            None,
            f"{label}:".encode() + b"b" * 40,
            [("n", None if null_header else b"-")] if headers else [],
        ),
        (b"k3", None, []),
    ]


def _rdk_report(entry: dict[str, Any]) -> Callable[[Any, Any], None]:
    def report(err: Any, msg: Any) -> None:
        entry["delivered"] = err is None
        entry["offset"] = msg.offset() if err is None else None
        entry["error"] = None if err is None else str(err)

    return report


def rdk_send(
    p: Producer,
    client_id: str,
    codec: str,
    topic: str,
    partition: int,
    recs: list[tuple[bytes | None, bytes | None, list]],
    txn: str | None = None,
) -> None:
    for key, value, headers in recs:
        e = produced(
            "librdkafka", client_id, codec, 2, topic, partition, key, value, headers, txn=txn
        )
        p.produce(
            topic,
            key=key,
            value=value,
            headers=headers or None,
            partition=partition,
            on_delivery=_rdk_report(e),
        )
    p.flush(10)


def rdk_transactions(bootstrap: str) -> None:
    """A transactional producer: commit, abort (records flushed first, so they reach the log),
    commit."""
    t = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "rdk-txn",
            "transactional.id": "txn-rdk",
            "linger.ms": 20,
        }
    )
    t.init_transactions(10)
    for n, outcome in enumerate(("committed", "aborted", "committed")):
        t.begin_transaction()
        for part in (0, 1):
            rdk_send(
                t,
                "rdk-txn",
                "none",
                "rdk-txn",
                part,
                [(f"t{n}".encode(), f"{outcome}-{n}-{part}".encode(), [("txn", outcome.encode())])],
                txn=outcome,
            )
        if outcome == "committed":
            t.commit_transaction(10)
        else:
            t.abort_transaction(10)


def rdk_consume(conf: dict[str, object], topics: list[str], expected: int, isolation: str) -> None:
    c = Consumer(conf)
    c.subscribe(topics)
    got = 0
    deadline = time.monotonic() + 30
    quiet_until = None
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None or msg.error():
            if got >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.5
                if time.monotonic() > quiet_until:
                    break
            continue
        got += 1
        consumed(
            "librdkafka",
            str(conf["client.id"]),
            msg.topic(),
            msg.partition(),
            msg.offset(),
            msg.key(),
            msg.value(),
            msg.headers(),
            isolation=isolation,
        )
    c.commit(asynchronous=False)
    c.close()


@scenario
def records_librdkafka(args: argparse.Namespace) -> list[int]:
    """librdkafka producers with every codec (keys, null keys, tombstones, headers with a null
    value, several partitions), an idempotent producer, a transactional producer that commits,
    aborts and commits again, a read_committed consumer that reads it all back; then the admin
    calls, to see which the mock cluster answers."""
    host, bootstrap = mock_cluster()
    for i, codec in enumerate(CODECS):
        cid = f"rdk-{codec}"
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": cid,
                "compression.type": codec,
                "linger.ms": 20,
                "enable.idempotence": False,
                "acks": "all",
            }
        )
        rdk_send(p, cid, codec, "rdk-codecs", i % 4, sample_records(codec))
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "rdk-idem",
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
        }
    )
    rdk_send(p, "rdk-idem", "lz4", "rdk-idem", 1, sample_records("idem"))
    rdk_send(p, "rdk-idem", "lz4", "rdk-idem", 2, sample_records("idem2", headers=False))
    rdk_transactions(bootstrap)
    topics = ["rdk-codecs", "rdk-idem", "rdk-txn"]
    expected = sum(1 for e in GROUND["produced"] if e["delivered"] and e["txn"] != "aborted")
    rdk_consume(
        consumer_conf(
            bootstrap, "g-rc", "rdk-read-committed", **{"isolation.level": "read_committed"}
        ),
        topics,
        expected,
        "read_committed",
    )
    # The mock has none of the topic or config admin apis: librdkafka waits for a broker that
    # has them until the request times out, so only ListOffsets and OffsetFetch go out.
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "rdk-admin"})
    rdk_admin_calls(admin, "rdk-admin-topic", "rdk-codecs", 2)
    return [port_of(bootstrap)]


def rdk_admin_calls(admin: AdminClient, topic: str, offsets_topic: str, timeout: float) -> None:
    """Every topic and config admin call of librdkafka's AdminClient, each recorded: create
    `topic`, describe it and the cluster, add partitions, read and change its config, delete
    it; offsets of `offsets_topic` and of group g-rc."""
    from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
    )

    def each(futures: dict[Any, Any]) -> dict[str, object]:
        return {str(k): f.result(timeout) for k, f in futures.items()}

    c = "librdkafka"
    t = {"request_timeout": timeout}
    compact = {"cleanup.policy": "compact"}
    admin_step(
        c,
        "create_topics",
        lambda: each(
            admin.create_topics(
                [NewTopic(topic, num_partitions=2, replication_factor=1, config=compact)], **t
            )
        ),
    )

    def cluster() -> object:
        d = admin.describe_cluster(**t).result(timeout)
        return (d.cluster_id, sorted(n.id for n in d.nodes))

    admin_step(c, "describe_cluster", cluster)
    admin_step(
        c,
        "describe_topics",
        lambda: {
            d.name: (str(d.topic_id), len(d.partitions))
            for d in [
                f.result(timeout)
                for f in admin.describe_topics(
                    confluent_kafka.TopicCollection([topic]), **t
                ).values()
            ]
        },
    )
    admin_step(
        c,
        "create_partitions",
        lambda: each(admin.create_partitions([NewPartitions(topic, 3)], **t)),
    )
    res = ConfigResource("topic", topic)
    admin_step(
        c,
        "describe_configs",
        lambda: {
            str(k): {n: e.value for n, e in sorted(v.result(timeout).items())}
            for k, v in admin.describe_configs([res], **t).items()
        },
    )
    admin_step(
        c,
        "incremental_alter_configs",
        lambda: each(
            admin.incremental_alter_configs(
                [
                    ConfigResource(
                        "topic",
                        topic,
                        incremental_configs=[
                            ConfigEntry(
                                "retention.ms", "60000", incremental_operation=AlterConfigOpType.SET
                            )
                        ],
                    )
                ],
                **t,
            )
        ),
    )
    admin_step(
        c,
        "alter_configs",
        lambda: each(
            admin.alter_configs(
                [ConfigResource("topic", topic, set_config={"retention.ms": "120000"})], **t
            )
        ),
    )
    admin_step(
        c,
        "list_offsets",
        lambda: {
            f"{k.topic}[{k.partition}]": v.result(timeout).offset
            for k, v in admin.list_offsets(
                {
                    TopicPartition(offsets_topic, 0): OffsetSpec.latest(),
                    TopicPartition(offsets_topic, 1): OffsetSpec.earliest(),
                },
                isolation_level=IsolationLevel.READ_COMMITTED,
                **t,
            ).items()
        },
    )
    admin_step(
        c,
        "list_consumer_group_offsets",
        lambda: {
            g: [(tp.topic, tp.partition, tp.offset) for tp in f.result(timeout).topic_partitions]
            for g, f in admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions("g-rc")], **t
            ).items()
        },
    )
    admin_step(c, "delete_topics", lambda: each(admin.delete_topics([topic], **t)))


def kpy_send(
    client_id: str,
    codec: str,
    api: tuple[int, int],
    magic: int,
    topic: str,
    recs: list[tuple[bytes | None, bytes | None, list]],
    bootstrap: str,
    partition: int,
) -> None:
    from kafka import KafkaProducer

    kw: dict[str, Any] = {}
    if codec != "none":
        kw["compression_type"] = codec
    try:
        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            api_version=api,
            retries=0,
            linger_ms=20,
            **kw,
        )
    except Exception as e:  # noqa: BLE001 - the client refuses a codec for this api version
        GROUND["notes"].append(
            f"kafka-python {api} {codec}: client refuses: {type(e).__name__}: {e}"
        )
        return
    sent = []
    for key, value, headers in recs:
        try:
            fut = p.send(topic, key=key, value=value, headers=headers or None, partition=partition)
        except Exception as e:  # noqa: BLE001
            GROUND["notes"].append(
                f"kafka-python {api} {codec}: send refused: {type(e).__name__}: {e}"
            )
            continue
        sent.append(
            (
                produced(
                    "kafka-python", client_id, codec, magic, topic, partition, key, value, headers
                ),
                fut,
            )
        )
    p.flush(10)
    for entry, fut in sent:
        try:
            md = fut.get(10)
            entry.update(delivered=True, offset=md.offset)
        except Exception as e:  # noqa: BLE001 - the broker's answer is part of the record
            entry.update(delivered=False, error=f"{type(e).__name__}: {e}")
    p.close(5)


@scenario
def records_kafka_python(args: argparse.Namespace) -> list[int]:
    """kafka-python producers on three record formats with every codec it offers: record
    batches v2 (api_version 2.3), message sets magic 1 (0.10) and magic 0 (0.9); then a
    kafka-python consumer reads back what the broker kept. The mock keeps only v2 batches (it
    answers magic 0/1 Produce requests with UNSUPPORTED_VERSION), so the old formats are on the
    wire in Produce requests only."""
    host, bootstrap = mock_cluster()
    GROUND["notes"].append(
        "kafka-python refuses a header with a null value (TypeError: All headers items must be "
        "(str, bytes) tuples), so its records carry only non-null header values"
    )
    for api, magic, topic in (((2, 3), 2, "kpy-v2"), ((0, 10), 1, "kpy-v1"), ((0, 9), 0, "kpy-v0")):
        for i, codec in enumerate(CODECS):
            label = f"kpy{magic}-{codec}"
            kpy_send(
                f"kpy-m{magic}-{codec}",
                codec,
                api,
                magic,
                topic,
                sample_records(label, headers=magic == 2, null_header=False),
                bootstrap,
                i % 4,
            )
    from kafka import KafkaConsumer

    topics = ["kpy-v2", "kpy-v1", "kpy-v0"]
    expected = sum(1 for e in GROUND["produced"] if e["delivered"])
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="g-kpy-records",
        client_id="kpy-reader",
        api_version=(2, 3),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=300,
    )
    c.subscribe(topics)
    deadline = time.monotonic() + 30
    got = 0
    while got < expected and time.monotonic() < deadline:
        for tp, msgs in c.poll(timeout_ms=300).items():
            for m in msgs:
                got += 1
                consumed(
                    "kafka-python",
                    "kpy-reader",
                    m.topic,
                    m.partition,
                    m.offset,
                    m.key,
                    m.value,
                    m.headers,
                )
    c.commit()
    c.close()
    return [port_of(bootstrap)]


@scenario
def records_aiokafka(args: argparse.Namespace) -> list[int]:
    """aiokafka producers with every codec (keys, null keys, tombstones, headers), then an
    aiokafka consumer group member reads them back."""
    import asyncio

    host, bootstrap = mock_cluster()

    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        for i, codec in enumerate(CODECS):
            cid = f"aio-{codec}"
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                client_id=cid,
                linger_ms=20,
                compression_type=None if codec == "none" else codec,
            )
            await p.start()
            futs = []
            for key, value, headers in sample_records(f"aio-{codec}"):
                e = produced("aiokafka", cid, codec, 2, "aio-codecs", i % 4, key, value, headers)
                futs.append(
                    (
                        e,
                        await p.send(
                            "aio-codecs",
                            value=value,
                            key=key,
                            partition=i % 4,
                            headers=headers or None,
                        ),
                    )
                )
            await p.flush()
            await aio_delivered(futs)
            await p.stop()
        expected = sum(1 for e in GROUND["produced"] if e["delivered"])
        c = AIOKafkaConsumer(
            "aio-codecs",
            bootstrap_servers=bootstrap,
            group_id="g-aio",
            client_id="aio-reader",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=300,
        )
        await c.start()
        got = 0
        deadline = time.monotonic() + 30
        while got < expected and time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=300)).items():
                for m in msgs:
                    got += 1
                    consumed(
                        "aiokafka",
                        "aio-reader",
                        m.topic,
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        list(m.headers),
                    )
        await c.commit()
        await c.stop()

    asyncio.run(run())
    return [port_of(bootstrap)]


@scenario
def tansu_admin_topics(args: argparse.Namespace) -> list[int]:
    """Against Tansu (the mock lacks the topic and config admin apis): librdkafka's and
    aiokafka's admin clients create, describe, configure and delete topics; a transactional
    librdkafka producer commits, aborts and commits, and a read_committed consumer reads back."""
    import asyncio

    bootstrap = "127.0.0.1:9092"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "rdk-admin"})
    from confluent_kafka.admin import NewTopic

    admin_step(
        "librdkafka",
        "create_topics",
        lambda: {
            k: f.result(10)
            for k, f in admin.create_topics(
                [NewTopic("rdk-txn", num_partitions=2, replication_factor=1)]
            ).items()
        },
    )
    rdk_transactions(bootstrap)
    expected = sum(1 for e in GROUND["produced"] if e["delivered"] and e["txn"] != "aborted")
    rdk_consume(
        consumer_conf(
            bootstrap, "g-rc", "rdk-read-committed", **{"isolation.level": "read_committed"}
        ),
        ["rdk-txn"],
        expected,
        "read_committed",
    )
    rdk_admin_calls(admin, "rdk-admin-topic", "rdk-txn", 10)

    async def aio_admin() -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="aio-admin")
        await a.start()
        c = "aiokafka"
        steps = [
            (
                "create_topics",
                lambda: a.create_topics(
                    [NewTopic("aio-admin-topic", num_partitions=2, replication_factor=1)]
                ),
            ),
            ("describe_cluster", a.describe_cluster),
            ("list_topics", a.list_topics),
            (
                "describe_configs",
                lambda: a.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, "aio-admin-topic")]
                ),
            ),
            ("delete_topics", lambda: a.delete_topics(["aio-admin-topic"])),
        ]
        for what, make in steps:
            try:
                result = await make()
                GROUND["admin"].append(
                    {"client": c, "call": what, "ok": True, "result": repr(result)[:300]}
                )
            except Exception as e:  # noqa: BLE001
                GROUND["admin"].append(
                    {"client": c, "call": what, "ok": False, "result": f"{type(e).__name__}: {e}"}
                )
        await a.close()

    asyncio.run(aio_admin())
    return [9092]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(SCENARIOS))
    parser.add_argument("--ports-file", required=True)
    args = parser.parse_args()
    ports = SCENARIOS[args.name](args)
    with open(args.ports_file, "w") as f:
        meta: dict[str, Any] = {
            "broker_ports": ports,
            "librdkafka": confluent_kafka.libversion()[0],
        }
        meta.update({k: v for k, v in GROUND.items() if v})
        json.dump(meta, f)


if __name__ == "__main__":
    main()
