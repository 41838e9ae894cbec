"""Start and stop a real Apache Kafka 4.4 broker (KRaft, broker and controller in one JVM).

    from kafka_broker import build, java_cmd, start_broker, stop_broker

    build()                                # mvn, when target/ is missing or older than src/
    handle = start_broker(Path(tmpdir))    # formats storage, starts, waits for the port
    ...                                    # clients on 127.0.0.1:9092
    stop_broker(handle)

The jars come from Maven Central through scripts/capture/kafka/pom.xml (target/ holds them and
the compiled drivers of scripts/capture/kafka/src). The broker listens for clients on
PLAINTEXT 127.0.0.1:9092 (also its own inter-broker listener: in one JVM the share-group state
persister still talks to the share coordinator over it), and for KRaft on CONTROLLER
127.0.0.1:9093. Share groups (feature share.version) and streams groups (streams.version) are on,
and the share-group bounds are lowered so that scenarios can use short record locks, fast
heartbeats and short sessions.

    python scripts/capture/kafka_broker.py [--seconds N]   # a broker to try things against
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "kafka"
TARGET = PROJECT / "target"
JAR = TARGET / "kwire-capture.jar"
DEPENDENCIES = TARGET / "dependency"
KAFKA_VERSION = "4.4.0"
HOST = "127.0.0.1"
PORT = 9092
CONTROLLER_PORT = 9093
# Feature levels set at format time: share.version 2 is 4.4's newest (share groups, and the
# dead-letter queue of KIP-1191); streams.version 1 enables streams groups (KIP-1071).
FEATURES = {"share.version": 2, "streams.version": 1}

# Broker settings. The share-group bounds are lowered from their defaults (lock minimum 15 s,
# heartbeat minimum 5 s, session minimum 45 s) so that a scenario can set, per group, a lock of a
# few seconds, a heartbeat interval of 1 s and a session of 6 s. The delivery count limit is per
# group in 4.4 (share.delivery.count.limit, bounded by group.share.min/max.delivery.count.limit,
# 2..10 by default); the broker default stays 5.
BROKER_CONFIG: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": f"1@{HOST}:{CONTROLLER_PORT}",
    "listeners": f"PLAINTEXT://{HOST}:{PORT},CONTROLLER://{HOST}:{CONTROLLER_PORT}",
    "advertised.listeners": f"PLAINTEXT://{HOST}:{PORT}",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "15000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.assignment.interval.ms": "0",
    "group.share.assignment.interval.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "500",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.initial.rebalance.delay.ms": "0",
    "log.segment.bytes": "1048576",
    "log.retention.check.interval.ms": "600000",
}

JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)


@dataclass
class Broker:
    process: subprocess.Popen[bytes]
    directory: Path
    config: Path
    log: Path
    cluster_id: str
    bootstrap: str = f"{HOST}:{PORT}"
    settings: dict[str, str] = field(default_factory=dict)


def present() -> bool:
    """target/ holds the drivers' jar and Kafka's jars (maybe older than the sources)."""
    return JAR.exists() and (DEPENDENCIES / f"kafka-clients-{KAFKA_VERSION}.jar").exists()


def built() -> bool:
    """target/ holds the drivers' jar, newer than every source and the pom, and Kafka's jars."""
    if not present():
        return False
    sources = [PROJECT / "pom.xml", *(PROJECT / "src").rglob("*.java")]
    return max(p.stat().st_mtime for p in sources) <= JAR.stat().st_mtime


def build(force: bool = False) -> None:
    """Compile the drivers and copy Kafka's jars into scripts/capture/kafka/target (mvn); does
    nothing when target/ is up to date."""
    if built() and not force:
        return
    for tool in ("mvn", "java"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed for the real-broker captures (Java 17 + Maven)")
    pom = str(PROJECT / "pom.xml")
    subprocess.run(
        ["mvn", "-B", "-q", "-f", pom, "package", "dependency:copy-dependencies"], check=True
    )


def log_tail(handle: Broker, lines: int = 30) -> str:
    """The end of the broker's log (format and run), for error messages."""
    try:
        return "\n".join(handle.log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def classpath() -> str:
    jars = sorted(str(p) for p in DEPENDENCIES.glob("*.jar"))
    return os.pathsep.join([str(JAR), *jars])


def java_cmd(main_class: str, *args: str, jvm: tuple[str, ...] = JVM_OPTIONS) -> list[str]:
    """A java command line running main_class with the capture project's classpath."""
    return ["java", *jvm, "-cp", classpath(), main_class, *args]


def _write_properties(path: Path, settings: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))


def _wait_port(host: str, port: int, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the broker exited (code {process.returncode}) before listening")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {host}:{port} after {timeout:.0f} s")


def start_broker(
    tmpdir: Path, overrides: dict[str, str] | None = None, timeout: float = 90.0
) -> Broker:
    """Format fresh KRaft storage under tmpdir and start the broker; returns once 9092 accepts
    connections (the broker registers with its controller before it opens the port)."""
    if not present():
        raise SystemExit("the Kafka jars are missing: call kafka_broker.build() first")
    tmpdir.mkdir(parents=True, exist_ok=True)
    settings = dict(BROKER_CONFIG)
    settings["log.dirs"] = str(tmpdir / "kraft-logs")
    settings.update(overrides or {})
    config = tmpdir / "server.properties"
    _write_properties(config, settings)
    # Kafka's text form of a Uuid: url-safe base64 of its 16 bytes, unpadded.
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    log = tmpdir / "broker.log"
    features = [arg for k, v in FEATURES.items() for arg in ("--feature", f"{k}={v}")]
    with open(log, "ab") as out:
        subprocess.run(
            java_cmd(
                "kafka.tools.StorageTool",
                "format",
                "--cluster-id",
                cluster_id,
                "--config",
                str(config),
                *features,
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
        )
        process = subprocess.Popen(
            java_cmd("kafka.Kafka", str(config)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_port(HOST, PORT, timeout, process)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return Broker(process, tmpdir, config, log, cluster_id, settings=settings)


def stop_broker(handle: Broker, timeout: float = 30.0) -> None:
    """SIGTERM (a controlled shutdown), then SIGKILL if it lingers."""
    if handle.process.poll() is None:
        handle.process.send_signal(signal.SIGTERM)
        try:
            handle.process.wait(timeout)
        except subprocess.TimeoutExpired:
            handle.process.kill()
            handle.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to keep it up")
    parser.add_argument("--dir", type=Path, help="storage directory (default: a temporary one)")
    args = parser.parse_args()
    build()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        handle = start_broker(args.dir or Path(tmp))
        print(f"broker up on {handle.bootstrap} in {time.monotonic() - started:.1f} s")
        try:
            time.sleep(args.seconds)
        finally:
            stop_broker(handle)
            print(f"stopped; log in {handle.log}")


if __name__ == "__main__":
    main()
