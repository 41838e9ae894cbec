"""Make the TLS test captures: real Kafka clients over TLS, with NSS key logs and ground truth.

    sudo .venv/bin/python scripts/capture/tls_captures.py [--only NAME ...] [--out DIR]

librdkafka's mock cluster speaks plaintext only, so a TLS-terminating proxy of ours
(scripts/capture/tls_proxy.py) stands in front of it: one TLS listener per mock broker, with a
self-signed certificate made at run time; it rewrites the broker addresses in Metadata,
FindCoordinator and DescribeCluster responses to its own TLS ports, so the clients only ever
talk TLS. Each capture runs in a private network namespace (`unshare -n`) and tcpdump records
only the proxy's TLS ports (the proxy's plaintext side to the mock is not in the capture).

The clients (kafka-python, aiokafka, librdkafka, and a small raw Python `ssl` client for session
resumption and KeyUpdate) each run as a process of their own, so that each can be given its own
TLS 1.3 cipher suite through an OPENSSL_CONF file (Python's ssl module cannot set TLS 1.3
suites); TLS 1.2 suites are set with SSLContext.set_ciphers. The Python clients write their
TLS secrets with SSLContext.keylog_filename; NAME.keys joins those of the clients that log.

Ground truth comes from the clients' own APIs (records produced with their delivery reports,
records consumed, group assignments) and from the proxy's server side (TLS version, cipher and
session resumption of every connection), never from kwire. tshark, given NAME.keys, decrypts
the TLS and counts the Kafka frames inside it per api key, version and direction (NAME.json
"counts", as make_captures.py does for the plaintext captures).

Needs: root (for the namespace), tcpdump and tshark, the venv's kafka-python, aiokafka,
confluent-kafka and cryptography.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import make_captures  # noqa: E402
from make_captures import DEFAULT_OUT, tshark_version  # noqa: E402

TLS_PORTS = (9093, 9094)  # one proxy listener per mock broker
LO_TCPDUMP = make_captures.LO_TCPDUMP
LIBRARY = {"kpy": "kafka-python", "aio": "aiokafka", "rdk": "librdkafka", "raw": "python-ssl"}


@dataclass(frozen=True)
class TlsCapture:
    file: str
    scenario: str
    description: str
    clients: tuple[str, ...]
    tls_max: str  # highest version the proxy accepts: "1.2" or "1.3"
    run: str  # name of the orchestration function below


CAPTURES = [
    TlsCapture(
        "tls13_records.pcap",
        "tls13-records",
        "TLS 1.3 through a TLS proxy in front of a two-broker mock cluster: a kafka-python "
        "producer (gzip, TLS_AES_128_GCM_SHA256) and an aiokafka producer (lz4, "
        "TLS_AES_256_GCM_SHA384) write 50 records each to two topics; a kafka-python consumer "
        "group member (TLS_CHACHA20_POLY1305_SHA256) reads them back (join, sync, heartbeat, "
        "commit, leave); a raw Python ssl client sends ApiVersions and Metadata on a connection "
        "and again on one that resumes its session (TLS 1.3 PSK)",
        ("kafka-python", "aiokafka", "python-ssl"),
        "1.3",
        "records13",
    ),
    TlsCapture(
        "tls12_group.pcap",
        "tls12-group",
        "TLS 1.2 only through a TLS proxy in front of a two-broker mock cluster: aiokafka "
        "producers (ECDHE-RSA-AES256-GCM-SHA384); a consumer group of two kafka-python members, "
        "one on ECDHE-RSA-AES128-GCM-SHA256 and one joining later on "
        "ECDHE-RSA-CHACHA20-POLY1305, then the first leaves (two rebalances); a raw Python ssl "
        "client reconnects resuming its TLS 1.2 session",
        ("aiokafka", "kafka-python", "python-ssl"),
        "1.2",
        "group12",
    ),
    TlsCapture(
        "tls_partial_keys.pcap",
        "tls-partial-keys",
        "TLS 1.3 through a TLS proxy in front of a two-broker mock cluster; only some clients' "
        "keys are in the key log: a kafka-python producer and a kafka-python consumer group "
        "member log theirs, a librdkafka producer cannot (librdkafka has no key log setting) "
        "and an aiokafka consumer in another group does not (no keylog_filename)",
        ("kafka-python", "librdkafka", "aiokafka"),
        "1.3",
        "partial",
    ),
    TlsCapture(
        "tls13_keyupdate.pcap",
        "tls13-keyupdate",
        "TLS 1.3 KeyUpdate on Kafka connections: a raw Python ssl client sends ApiVersions and "
        "Metadata, asks for a key update (update_requested, so both sides change keys), sends "
        "again, updates its own keys once more (update_not_requested) and sends again; a "
        "kafka-python producer whose connections the proxy re-keys (update_requested) after "
        "its first response on each",
        ("python-ssl", "kafka-python"),
        "1.3",
        "keyupdate",
    ),
]

TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


# -- clients (each runs as `tls_captures.py --client SPEC.json` in a process of its own) ------


def client_context(spec: dict[str, Any]) -> ssl.SSLContext:
    """The client's SSLContext: trusts the proxy's certificate, logs keys when told to."""
    ctx = ssl.create_default_context(cafile=spec["cafile"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.maximum_version = (
        ssl.TLSVersion.TLSv1_2 if spec["tls_max"] == "1.2" else ssl.TLSVersion.TLSv1_3
    )
    if spec.get("ciphers"):
        ctx.set_ciphers(spec["ciphers"])
    if spec.get("keys"):
        ctx.keylog_filename = spec["keys"]
    return ctx


def value_of(client_id: str, i: int) -> bytes:
    # A repeated letter, so that compression really shrinks the batches.
    return f"{client_id}-{i}:".encode() + bytes([97 + i % 26]) * 30


def records_of(spec: dict[str, Any]) -> list[tuple[str, int, bytes | None, bytes, list]]:
    """n records spread over the spec's topics and partitions 0..3, every third with headers,
    every seventh with a null key."""
    out = []
    topics = spec["topics"]
    for i in range(spec["n"]):
        topic = topics[i % len(topics)]
        key = None if i % 7 == 6 else f"k{i}".encode()
        headers = (
            [("seq", str(i).encode()), ("src", spec["client_id"].encode())] if i % 3 == 0 else []
        )
        out.append((topic, (i // len(topics)) % 4, key, value_of(spec["client_id"], i), headers))
    return out


def kpy_producer(spec: dict[str, Any]) -> None:
    from kafka import KafkaProducer

    import scenarios

    p = KafkaProducer(
        bootstrap_servers=spec["bootstrap"],
        client_id=spec["client_id"],
        api_version=(2, 3),  # see scenarios.group_classic: the mock and ApiVersions v3+
        security_protocol="SSL",
        ssl_context=client_context(spec),
        compression_type=None if spec["codec"] == "none" else spec["codec"],
        linger_ms=50,
        retries=0,
    )
    sent = []
    for topic, part, key, value, headers in records_of(spec):
        e = scenarios.produced(
            "kafka-python", spec["client_id"], spec["codec"], 2, topic, part, key, value, headers
        )
        sent.append(
            (e, p.send(topic, key=key, value=value, headers=headers or None, partition=part))
        )
    p.flush(20)
    for e, fut in sent:
        try:
            md = fut.get(10)
            e.update(delivered=True, offset=md.offset)
        except Exception as ex:  # noqa: BLE001 - the broker's answer is part of the record
            e.update(delivered=False, error=f"{type(ex).__name__}: {ex}")
    time.sleep(spec.get("linger_after", 0))
    p.close(5)


def aio_producer(spec: dict[str, Any]) -> None:
    import asyncio

    import scenarios

    async def run() -> None:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(
            bootstrap_servers=spec["bootstrap"],
            client_id=spec["client_id"],
            security_protocol="SSL",
            ssl_context=client_context(spec),
            compression_type=None if spec["codec"] == "none" else spec["codec"],
            linger_ms=50,
        )
        await p.start()
        futs = []
        for topic, part, key, value, headers in records_of(spec):
            e = scenarios.produced(
                "aiokafka", spec["client_id"], spec["codec"], 2, topic, part, key, value, headers
            )
            futs.append(
                (
                    e,
                    await p.send(
                        topic, value=value, key=key, partition=part, headers=headers or None
                    ),
                )
            )
        await p.flush()
        await scenarios.aio_delivered(futs)
        await p.stop()

    asyncio.run(run())


def rdk_producer(spec: dict[str, Any]) -> None:
    """librdkafka over TLS. It has no key log setting; SSLKEYLOGFILE is set for it anyway (to
    the spec's 'keylog_probe' file) to see whether its bundled OpenSSL writes anything."""
    from confluent_kafka import Producer

    import scenarios

    p = Producer(
        {
            "bootstrap.servers": spec["bootstrap"],
            "client.id": spec["client_id"],
            "security.protocol": "ssl",
            "ssl.ca.location": spec["cafile"],
            "ssl.endpoint.identification.algorithm": "none",
            "compression.type": spec["codec"],
            "linger.ms": 50,
            "acks": "all",
        }
    )
    for topic, part, key, value, headers in records_of(spec):
        e = scenarios.produced(
            "librdkafka", spec["client_id"], spec["codec"], 2, topic, part, key, value, headers
        )
        p.produce(
            topic,
            key=key,
            value=value,
            headers=headers or None,
            partition=part,
            on_delivery=scenarios._rdk_report(e),
        )
    p.flush(20)


class Stopper:
    """A member polls until its stop file appears (the orchestrator creates it) or time runs out."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.stop_file = Path(spec["stop_file"]) if spec.get("stop_file") else None
        self.deadline = time.monotonic() + spec.get("max_seconds", 40)
        self.expect = spec.get("expect")
        self.quiet = spec.get("quiet_seconds", 3.0)
        self.done_at: float | None = None

    def stop(self, got: int) -> bool:
        if time.monotonic() > self.deadline:
            return True
        if self.stop_file is not None:
            return self.stop_file.exists()
        if self.expect is not None and got >= self.expect:
            # Stay a little longer: heartbeats and the last commits go out.
            self.done_at = self.done_at or time.monotonic()
            return time.monotonic() - self.done_at > self.quiet
        return False


def kpy_consumer(spec: dict[str, Any]) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    import scenarios

    c = KafkaConsumer(
        bootstrap_servers=spec["bootstrap"],
        group_id=spec["group"],
        client_id=spec["client_id"],
        api_version=(2, 3),
        security_protocol="SSL",
        ssl_context=client_context(spec),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=300,
    )
    c.subscribe(spec["topics"])
    stopper = Stopper(spec)
    got = 0
    last: list[str] = []
    while not stopper.stop(got):
        try:
            batch = c.poll(timeout_ms=200)
        except KafkaError as e:
            # The mock sometimes answers a SyncGroup during a rebalance with INVALID_REQUEST;
            # kafka-python raises it from poll and joins again on the next one.
            scenarios.GROUND["notes"].append(
                f"{spec['client_id']} poll: {type(e).__name__}: {e} (polled again)"
            )
            continue
        for tp, msgs in batch.items():
            for m in msgs:
                got += 1
                scenarios.consumed(
                    "kafka-python",
                    spec["client_id"],
                    m.topic,
                    m.partition,
                    m.offset,
                    m.key,
                    m.value,
                    m.headers,
                    group=spec["group"],
                )
        if batch:
            try:
                c.commit()
            except Exception as e:  # noqa: BLE001 - e.g. a rebalance began; noted
                scenarios.GROUND["notes"].append(
                    f"{spec['client_id']} commit: {type(e).__name__}: {e}"
                )
        now = sorted(f"{tp.topic}[{tp.partition}]" for tp in c.assignment())
        if now != last:
            ASSIGNMENTS.append({"client_id": spec["client_id"], "t": time.time(), "assigned": now})
            last = now
            if now and spec.get("assigned_file"):
                Path(spec["assigned_file"]).touch()
    c.close()
    ASSIGNMENTS.append({"client_id": spec["client_id"], "t": time.time(), "assigned": "closed"})


def aio_consumer(spec: dict[str, Any]) -> None:
    import asyncio

    import scenarios

    async def run() -> None:
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(
            *spec["topics"],
            bootstrap_servers=spec["bootstrap"],
            group_id=spec["group"],
            client_id=spec["client_id"],
            security_protocol="SSL",
            ssl_context=client_context(spec),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=300,
        )
        await c.start()
        stopper = Stopper(spec)
        got = 0
        while not stopper.stop(got):
            batch = await c.getmany(timeout_ms=200)
            for tp, msgs in batch.items():
                for m in msgs:
                    got += 1
                    scenarios.consumed(
                        "aiokafka",
                        spec["client_id"],
                        m.topic,
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        list(m.headers),
                        group=spec["group"],
                    )
            if batch:
                await c.commit()
        await c.stop()

    asyncio.run(run())


def _request(api_key: int, version: int, corr: int, client_id: str, body: bytes = b"") -> bytes:
    """A request with header v1 (ApiVersions v0-2, Metadata v0-8 use it)."""
    cid = client_id.encode()
    frame = struct.pack(">hhih", api_key, version, corr, len(cid)) + cid + body
    return struct.pack(">i", len(frame)) + frame


def _read_frame(sock: ssl.SSLSocket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the proxy closed the connection")
            buf += chunk
        return buf

    return exactly(struct.unpack(">i", exactly(4))[0])


def raw_exchange(sock: ssl.SSLSocket, client_id: str, corr: int) -> list[dict[str, Any]]:
    """ApiVersions v2 and Metadata v1 (all topics), each answered before the next goes out."""
    done = []
    for key, version, body in ((18, 2, b""), (3, 1, struct.pack(">i", -1))):
        sock.sendall(_request(key, version, corr, client_id, body))
        answer = _read_frame(sock)
        (got,) = struct.unpack_from(">i", answer)
        done.append(
            {
                "api_key": key,
                "api_version": version,
                "correlation_id": corr,
                "answered": got == corr,
                "response_bytes": len(answer),
            }
        )
        corr += 1
    return done


def raw_connect(spec: dict[str, Any], ctx: ssl.SSLContext, session: Any = None) -> ssl.SSLSocket:
    import socket

    host, port = spec["bootstrap"].split(",")[0].rsplit(":", 1)
    raw = socket.create_connection((host, int(port)), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=host, session=session)


def raw_resume(spec: dict[str, Any]) -> None:
    """Two connections, the second resuming the first's TLS session (session=...)."""
    ctx = client_context(spec)
    first = raw_connect(spec, ctx)
    steps = raw_exchange(first, spec["client_id"], 1)
    session = first.session
    CLIENT_TLS.append(_tls_of(first, spec, steps))
    first.close()
    second = raw_connect(spec, ctx, session)
    steps = raw_exchange(second, spec["client_id"], 3)
    CLIENT_TLS.append(_tls_of(second, spec, steps))
    second.close()


def raw_keyupdate(spec: dict[str, Any]) -> None:
    """KeyUpdate from the client: SSL_key_update (libssl through ctypes; Python has no call
    for it) between Kafka exchanges; the next write carries the KeyUpdate message."""
    import tls_proxy

    lib = tls_proxy.libssl()
    ctx = client_context(spec)
    sock = raw_connect(spec, ctx)
    ptr = tls_proxy.ssl_pointer(sock)
    if lib.SSL_version(ptr) != 0x0304:
        raise SystemExit("raw-keyupdate: not a TLS 1.3 connection (or the SSL* lookup failed)")
    steps = raw_exchange(sock, spec["client_id"], 1)
    for corr, kind in ((3, 1), (5, 0)):  # SSL_KEY_UPDATE_REQUESTED, then NOT_REQUESTED
        if lib.SSL_key_update(ptr, kind) != 1:
            raise SystemExit("SSL_key_update failed")
        more = raw_exchange(sock, spec["client_id"], corr)
        more[0]["after_key_update"] = "update_requested" if kind == 1 else "update_not_requested"
        steps += more
    CLIENT_TLS.append(_tls_of(sock, spec, steps))
    sock.close()


def _tls_of(
    sock: ssl.SSLSocket, spec: dict[str, Any], steps: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "client_id": spec["client_id"],
        "client_port": sock.getsockname()[1],
        "version": sock.version(),
        "cipher": (sock.cipher() or ("",))[0],
        "session_reused": sock.session_reused,
        "exchanges": steps,
    }


CLIENTS: dict[str, Callable[[dict[str, Any]], None]] = {
    "kpy-producer": kpy_producer,
    "aio-producer": aio_producer,
    "rdk-producer": rdk_producer,
    "kpy-consumer": kpy_consumer,
    "aio-consumer": aio_consumer,
    "raw-resume": raw_resume,
    "raw-keyupdate": raw_keyupdate,
}
ASSIGNMENTS: list[dict[str, Any]] = []
CLIENT_TLS: list[dict[str, Any]] = []


def client_main(spec_path: str) -> None:
    import scenarios

    spec = json.loads(Path(spec_path).read_text())
    CLIENTS[spec["kind"]](spec)
    result = {k: v for k, v in scenarios.GROUND.items() if v}
    result["assignments"] = ASSIGNMENTS
    result["client_tls"] = CLIENT_TLS
    Path(spec["result"]).write_text(json.dumps(result))


# -- orchestration (inside the namespace) -------------------------------------------------------


class Run:
    """One capture's clients: starts them as processes, each with its own TLS settings."""

    def __init__(self, tmp: Path, cafile: Path, bootstrap: str, tls_max: str) -> None:
        self.tmp = tmp
        self.cafile = cafile
        self.bootstrap = bootstrap
        self.tls_max = tls_max
        self.specs: list[dict[str, Any]] = []
        self.procs: list[subprocess.Popen[bytes]] = []

    def openssl_conf(self, suite: str) -> Path:
        path = self.tmp / f"openssl-{suite}.cnf"
        path.write_text(
            "openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n"
            "[ssl_sect]\nsystem_default = system_default_sect\n"
            f"[system_default_sect]\nCiphersuites = {suite}\n"
        )
        return path

    def start(
        self, kind: str, client_id: str, keys: bool = True, suite13: str | None = None, **extra: Any
    ) -> subprocess.Popen[bytes]:
        spec: dict[str, Any] = {
            "kind": kind,
            "client_id": client_id,
            "library": LIBRARY[client_id.split("-")[0]],
            "bootstrap": self.bootstrap,
            "cafile": str(self.cafile),
            "tls_max": self.tls_max,
            "keys": str(self.tmp / f"{client_id}.keys") if keys else None,
            "suite13": suite13,
            "result": str(self.tmp / f"{client_id}.result.json"),
        }
        spec.update(extra)
        path = self.tmp / f"{client_id}.spec.json"
        path.write_text(json.dumps(spec))
        env = dict(os.environ)
        env.pop("SSLKEYLOGFILE", None)
        if suite13:
            env["OPENSSL_CONF"] = str(self.openssl_conf(suite13))
        if kind == "rdk-producer":
            # librdkafka has no key log setting; see whether its OpenSSL honours SSLKEYLOGFILE.
            spec["keylog_probe"] = str(self.tmp / f"{client_id}.sslkeylogfile")
            env["SSLKEYLOGFILE"] = spec["keylog_probe"]
            path.write_text(json.dumps(spec))
        proc = subprocess.Popen([sys.executable, __file__, "--client", str(path)], env=env)
        self.specs.append(spec)
        self.procs.append(proc)
        return proc

    def run(self, *args: Any, **kw: Any) -> None:
        proc = self.start(*args, **kw)
        if proc.wait(120):
            raise SystemExit(f"client {args[1]} failed (exit {proc.returncode})")

    def wait_all(self) -> None:
        for spec, proc in zip(self.specs, self.procs):
            if proc.wait(120):
                raise SystemExit(f"client {spec['client_id']} failed (exit {proc.returncode})")

    def wait_file(self, path: Path, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {path.name}")
            time.sleep(0.1)


def records13(r: Run) -> None:
    topics = ["tls-orders", "tls-payments"]
    a = r.start(
        "kpy-producer",
        "kpy-producer-gzip",
        suite13="TLS_AES_128_GCM_SHA256",
        codec="gzip",
        topics=topics,
        n=50,
    )
    b = r.start(
        "aio-producer",
        "aio-producer-lz4",
        suite13="TLS_AES_256_GCM_SHA384",
        codec="lz4",
        topics=topics,
        n=50,
    )
    for p in (a, b):
        p.wait(120)
    r.run(
        "kpy-consumer",
        "kpy-consumer",
        suite13="TLS_CHACHA20_POLY1305_SHA256",
        group="g-tls13",
        topics=topics,
        expect=100,
        max_seconds=40,
    )
    r.run("raw-resume", "raw-resume13", suite13="TLS_AES_128_GCM_SHA256")


def group12(r: Run) -> None:
    topics = ["tls-group"]
    r.run(
        "aio-producer",
        "aio-producer-1",
        ciphers="ECDHE-RSA-AES256-GCM-SHA384",
        codec="snappy",
        topics=topics,
        n=24,
    )
    stop_a, stop_b = r.tmp / "stop-a", r.tmp / "stop-b"
    assigned_a, assigned_b = r.tmp / "assigned-a", r.tmp / "assigned-b"
    r.start(
        "kpy-consumer",
        "kpy-member-a",
        ciphers="ECDHE-RSA-AES128-GCM-SHA256",
        group="g-tls12",
        topics=topics,
        stop_file=str(stop_a),
        assigned_file=str(assigned_a),
        max_seconds=60,
    )
    r.wait_file(assigned_a, 30)
    time.sleep(2)
    r.start(
        "kpy-consumer",
        "kpy-member-b",
        ciphers="ECDHE-RSA-CHACHA20-POLY1305",
        group="g-tls12",
        topics=topics,
        stop_file=str(stop_b),
        assigned_file=str(assigned_b),
        max_seconds=60,
    )
    r.wait_file(assigned_b, 30)
    time.sleep(2)
    r.run(
        "aio-producer",
        "aio-producer-2",
        ciphers="ECDHE-RSA-AES256-GCM-SHA384",
        codec="none",
        topics=topics,
        n=12,
    )
    time.sleep(2)
    stop_a.touch()  # member a leaves: the group rebalances onto b
    time.sleep(5)
    r.run(
        "aio-producer",
        "aio-producer-3",
        ciphers="ECDHE-RSA-AES256-GCM-SHA384",
        codec="zstd",
        topics=topics,
        n=8,
    )
    time.sleep(3)
    stop_b.touch()
    r.run("raw-resume", "raw-resume12", ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    r.wait_all()


def partial(r: Run) -> None:
    topics = ["tls-mixed"]
    a = r.start(
        "kpy-producer",
        "kpy-producer-keys",
        suite13="TLS_AES_128_GCM_SHA256",
        codec="gzip",
        topics=topics,
        n=20,
    )
    b = r.start("rdk-producer", "rdk-producer-nokeys", keys=False, codec="lz4", topics=topics, n=20)
    for p in (a, b):
        p.wait(120)
    c = r.start(
        "kpy-consumer",
        "kpy-consumer-keys",
        suite13="TLS_CHACHA20_POLY1305_SHA256",
        group="g-keys",
        topics=topics,
        expect=40,
        max_seconds=40,
    )
    d = r.start(
        "aio-consumer",
        "aio-consumer-nokeys",
        keys=False,
        suite13="TLS_AES_256_GCM_SHA384",
        group="g-nokeys",
        topics=topics,
        expect=40,
        max_seconds=40,
    )
    for p in (c, d):
        p.wait(120)
    r.wait_all()


def keyupdate(r: Run) -> None:
    r.run("raw-keyupdate", "raw-keyupdate", suite13="TLS_AES_128_GCM_SHA256")
    r.run(
        "kpy-producer",
        "kpy-producer-rekeyed",
        suite13="TLS_CHACHA20_POLY1305_SHA256",
        codec="none",
        topics=["tls-rekey"],
        n=12,
    )


RUNS: dict[str, Callable[[Run], None]] = {
    "records13": records13,
    "group12": group12,
    "partial": partial,
    "keyupdate": keyupdate,
}


def _start_capture(raw: Path) -> subprocess.Popen[bytes]:
    bpf = " or ".join(f"tcp port {p}" for p in TLS_PORTS)
    return make_captures._start_tool([*LO_TCPDUMP, "-w", str(raw), bpf])


def mock_bootstrap(n: int) -> tuple[Any, list[int]]:
    import scenarios

    host, bootstrap = scenarios.mock_cluster({"test.mock.num.brokers": n})
    return host, [scenarios.port_of(a) for a in bootstrap.split(",")]


def inside(name: str, out_dir: Path) -> None:
    import tls_proxy

    cap = next(c for c in CAPTURES if c.file == name)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    stem = Path(cap.file).stem
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o777)
        cert, key = tls_proxy.make_certificate(tmp)
        host, mock_ports = mock_bootstrap(len(TLS_PORTS))
        proxy = tls_proxy.Proxy(
            dict(zip(TLS_PORTS, mock_ports)),
            cert,
            key,
            ssl.TLSVersion.TLSv1_2 if cap.tls_max == "1.2" else None,
            keyupdate_after=1 if cap.run == "keyupdate" else None,
            keyupdate_clients="kpy-",
        )
        proxy.start()
        raw = tmp / cap.file
        tool = _start_capture(raw)
        bootstrap = ",".join(f"127.0.0.1:{p}" for p in TLS_PORTS)
        run = Run(tmp, cert, bootstrap, cap.tls_max)
        try:
            RUNS[cap.run](run)
            time.sleep(1.0)
        finally:
            time.sleep(0.3)
            tool.send_signal(signal.SIGINT)
            tool.wait(10)
            proxy.stop()
        host.flush(5)
        # Ground truth of every client, in the order they started.
        truth: dict[str, list[Any]] = {
            "produced": [],
            "consumed": [],
            "notes": [],
            "assignments": [],
            "client_tls": [],
        }
        keys_text = ""
        for spec in run.specs:
            result = json.loads(Path(spec["result"]).read_text())
            for k in truth:
                truth[k] += result.get(k, [])
            if spec["keys"] and Path(spec["keys"]).exists():
                keys_text += Path(spec["keys"]).read_text()
            probe = spec.get("keylog_probe")
            if probe:
                wrote = Path(probe).exists() and Path(probe).stat().st_size > 0
                truth["notes"].append(
                    f"{spec['client_id']}: librdkafka {librdkafka_version()} ran with "
                    f"SSLKEYLOGFILE set; it wrote {'some' if wrote else 'no'} key log lines"
                )
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw, out_dir / cap.file)
        (out_dir / f"{stem}.keys").write_text(keys_text)
    by_id = {s["client_id"]: s for s in run.specs}
    tls = []
    for conn in proxy.connections:
        owner = by_id.get(conn["client_id"] or "")
        tls.append(
            {
                "client": owner["library"] if owner else None,
                **conn,
                "keys_logged": bool(owner and owner["keys"]),
                "tls13_suite_offered": owner.get("suite13") if owner else None,
                "tls12_ciphers_offered": owner.get("ciphers") if owner else None,
            }
        )
    pcap = out_dir / cap.file
    keys = out_dir / f"{stem}.keys"
    counts = make_captures.tshark_counts(pcap, list(TLS_PORTS), keys)
    records = make_captures.tshark_records(pcap, list(TLS_PORTS), keys)
    record: dict[str, Any] = {
        "capture": cap.file,
        "scenario": cap.scenario,
        "description": cap.description,
        "clients": list(cap.clients),
        "broker": "librdkafka mock cluster behind a TLS proxy (scripts/capture/tls_proxy.py)",
        "ip": "IPv4",
        "broker_ports": list(TLS_PORTS),
        "mock_ports_not_captured": mock_ports,
        "librdkafka": librdkafka_version(),
        "tansu": None,
        "keylog": keys.name,
        "keylog_clients": sorted(s["client_id"] for s in run.specs if s["keys"]),
        "no_keylog_clients": sorted(s["client_id"] for s in run.specs if not s["keys"]),
        "tls": tls,
        "tls_method": TLS_NOTE,
        "proxy": {
            "rewritten_responses": proxy.rewritten,
            "errors": proxy.errors,
            "kept_trailing_bytes": sorted(set(proxy.trailing)),
            "key_updates_requested": proxy.key_updates,
        },
        "counted_by": tshark_version(),
        "count_method": COUNT_NOTE,
        "counts": counts,
    }
    record.update({k: v for k, v in truth.items() if v})
    record["checks"] = checks(pcap, keys, counts, tls)
    record["tshark_records"] = records
    (out_dir / f"{stem}.json").write_text(json.dumps(record, indent=2) + "\n")
    total = {d: sum(sum(v.values()) for v in c.values()) for d, c in counts.items()}
    print(f"{cap.file}: {pcap.stat().st_size} bytes, keys {keys.stat().st_size} bytes, {total}")


TLS_NOTE = (
    "one entry per TLS connection the proxy accepted, as its ssl server side saw it: version, "
    "cipher, session_reused; client_id from the connection's first request header; "
    "keys_logged says whether that client's secrets are in the key log"
)
COUNT_NOTE = make_captures.COUNT_NOTE + (
    "; tshark decrypts the TLS with the .keys file (-o tls.keylog_file, -d tcp.port==P,tls, "
    "-d tls.port==P,kafka), so only connections whose keys are logged are counted"
)


def checks(
    pcap: Path, keys: Path, counts: dict[str, Any], tls: list[dict[str, Any]]
) -> dict[str, Any]:
    """What makes the capture honest: every TCP payload on the broker ports is TLS (no plaintext
    Kafka), and tshark decrypts and counts every request the proxy relayed for the clients
    whose keys are logged (and none of the others)."""
    cmd = ["tshark", "-n", "-r", str(pcap)]
    for port in TLS_PORTS:
        cmd += ["-d", f"tcp.port=={port},tls"]
    out = subprocess.run(
        [*cmd, "-Y", "tcp.len > 0 && !tls", "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    seen = sum(sum(v.values()) for v in counts["request"].values())
    keyed = sum(t["requests"] for t in tls if t["keys_logged"])
    result = {
        "tcp_payload_frames_not_tls": len(out.split()),
        "requests_relayed_on_keyed_connections": keyed,
        "requests_relayed_on_unkeyed_connections": sum(
            t["requests"] for t in tls if not t["keys_logged"]
        ),
        "requests_counted_by_tshark": seen,
    }
    if result["tcp_payload_frames_not_tls"] or keyed != seen:
        print(f"{pcap.name}: CHECK FAILED {result}", file=sys.stderr)
    return result


def librdkafka_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.libversion()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="capture file(s) to make")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT / "tls")
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client)
        return
    if args.inside:
        inside(args.inside, args.out)
        return
    for tool in ("unshare", "ip", "tcpdump", "tshark"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install tcpdump tshark)")
    if os.geteuid() != 0:
        raise SystemExit("making captures needs root for a private network namespace (sudo)")
    wanted = [c for c in CAPTURES if not args.only or c.file in args.only]
    if args.only and len(wanted) != len(args.only):
        raise SystemExit(f"unknown capture; known: {', '.join(c.file for c in CAPTURES)}")
    for cap in wanted:
        make_captures.inside_namespace(__file__, cap.file, args.out)


if __name__ == "__main__":
    main()
