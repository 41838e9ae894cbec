"""Client scenarios whose traffic becomes the committed test captures (run by make_captures.py).

Each scenario talks to a broker on 127.0.0.1 (librdkafka's in-process mock cluster, or Tansu for
the admin group APIs the mock lacks) and writes the broker port(s) it used to a JSON file.
Run inside a private network namespace while a capture tool listens on the loopback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import threading
import time
from collections.abc import Callable

import confluent_kafka
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

SCENARIOS: dict[str, Callable[[argparse.Namespace], list[int]]] = {}


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=sorted(SCENARIOS))
    parser.add_argument("--ports-file", required=True)
    args = parser.parse_args()
    ports = SCENARIOS[args.name](args)
    with open(args.ports_file, "w") as f:
        json.dump({"broker_ports": ports, "librdkafka": confluent_kafka.libversion()[0]}, f)


if __name__ == "__main__":
    main()
