"""Make the streams-group capture: Kafka Streams 4.4 instances in a streams group (KIP-1071).

    sudo .venv/bin/python scripts/capture/streams_capture.py [--out DIR]

writes tests/data/capture/kafka_streams_group.pcap and kafka_streams_group.json. It runs itself
in a private network namespace (`unshare -n`, then `--inside`): a real Apache Kafka 4.4 broker
(scripts/capture/kafka_broker.py, KRaft, broker and controller in one JVM) and the Java drivers
of scripts/capture/kafka/src/main/java/kwire/capture/StreamsScenario.java: a control process
(admin client and producer) and three Kafka Streams instances, one JVM each, with
group.protocol=streams. tcpdump records the loopback, port 9092 only (the KRaft controller's
port 9093 stays out).

The story: the control process creates the topics and sets the group's
streams.num.standby.replicas to 1 (IncrementalAlterConfigs on a GROUP resource: under the streams
protocol standbys are a group setting, the client's num.standby.replicas is ignored); it produces
keyed records; s1 starts; s2 starts (tasks move); s3 starts (they move again); s2 closes and
leaves the group; s3 is killed with SIGKILL and the broker drops it after its 6 s session; s1
closes and leaves. A few records are produced after each step. After each step the script waits
until the group has settled: the admin client's describeStreamsGroups (StreamsGroupDescribe) shows
every member at the group epoch with its assignment equal to its target, and every instance's own
ThreadMetadata shows those same tasks.

The truth, under "streams_truth" in the JSON, comes from the clients' own APIs (the instances'
KafkaStreams state listener, metadataForLocalThreads, the admin client's describe, the producer's
RecordMetadata) and from what this script did (started, closed, killed), never from the capture.
tshark's counts are the usual make_captures.py ones (tshark may not know api keys 88, 89 and 93:
they are counted from the request header all the same).

Needs: root, unshare, ip, tcpdump, tshark, Java 17 and Maven (the jars come from Maven Central,
fetched before entering the namespace, which has no network).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import kafka_broker  # noqa: E402
from make_captures import (  # noqa: E402
    COUNT_NOTE,
    DEFAULT_OUT,
    _start_tool,
    inside_namespace,
    tshark_counts,
    tshark_version,
)

NAME = "kafka_streams_group.pcap"
SCENARIO = "streams-group"
DESCRIPTION = (
    "real Apache Kafka 4.4 broker (KRaft): three Kafka Streams 4.4 instances with "
    "group.protocol=streams (StreamsGroupHeartbeat) join one by one, one closes and leaves, one "
    "is killed and dropped after its session; an admin client sets the group's standby replicas "
    "(IncrementalAlterConfigs on a GROUP) and describes the group (StreamsGroupDescribe) after "
    "every move; a producer writes keyed records throughout"
)
APP_ID = "kwire-streams-app"
INPUT, INPUT_PARTITIONS = "streams-input", 4
OUTPUT, OUTPUT_PARTITIONS = "streams-output", 2
STANDBY_REPLICAS = 1
MAIN_CLASS = "kwire.capture.StreamsScenario"
SOURCE = (
    kafka_broker.PROJECT / "src" / "main" / "java" / "kwire" / "capture" / "StreamsScenario.java"
)
TCPDUMP = ("tcpdump", "-i", "lo", "-s", "0", "-U", "--immediate-mode")
SETTLE_TIMEOUT = 60.0


def compile_driver(classes: Path) -> None:
    """javac StreamsScenario.java into a directory of this run's own, against the capture
    project's jars (so the run does not depend on when target/kwire-capture.jar was built)."""
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "javac",
            "-nowarn",
            "--release",
            "17",
            "-d",
            str(classes),
            "-cp",
            kafka_broker.classpath(),
            str(SOURCE),
        ],
        check=True,
    )


class Driver:
    """One JVM running StreamsScenario: commands on stdin, JSON events on stdout."""

    def __init__(self, name: str, args: list[str], classes: Path, log: Path, sink: "Events"):
        self.name = name
        self.log = log
        cmd = [
            "java",
            *kafka_broker.JVM_OPTIONS,
            "-cp",
            os.pathsep.join([str(classes), kafka_broker.classpath()]),
            MAIN_CLASS,
            *args,
        ]
        self.stderr = open(log, "wb")
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr
        )
        self.sink = sink
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if not line.startswith("{"):
                continue
            self.sink.add(json.loads(line))
        self.sink.add({"t": _now(), "instance": self.name, "event": "exited", "_exit": True})

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self.reader.join(5)
        self.stderr.close()
        return code


class Events:
    """Every event the drivers and this script write, in arrival order."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.cond = threading.Condition()

    def add(self, event: dict[str, Any]) -> None:
        with self.cond:
            self.items.append(event)
            self.cond.notify_all()

    def wait_for(
        self, pred: Callable[[dict[str, Any]], bool], start: int, timeout: float, what: str
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.items[start:]:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SystemExit(f"timed out waiting for {what}")
                self.cond.wait(left)

    def last(self, instance: str, kind: str) -> dict[str, Any] | None:
        with self.cond:
            for e in reversed(self.items):
                if e.get("instance") == instance and e.get("event") == kind:
                    return e
        return None

    def mark(self) -> int:
        with self.cond:
            return len(self.items)


def _now() -> int:
    return int(time.time() * 1000)


class Scenario:
    def __init__(self, tmp: Path, bootstrap: str, classes: Path, broker_settings: dict[str, str]):
        self.tmp = tmp
        self.bootstrap = bootstrap
        self.classes = classes
        self.events = Events()
        self.instances: dict[str, Driver] = {}
        self.control = Driver(
            "control", ["control", bootstrap, APP_ID], classes, tmp / "control.log", self.events
        )
        self.moves: list[dict[str, Any]] = []
        self.produced: list[dict[str, Any]] = []
        self.describes = 0
        self.broker_settings = {
            k: v for k, v in broker_settings.items() if k.startswith("group.streams.")
        }

    def note(self, instance: str, event: str, **extra: Any) -> None:
        self.events.add({"t": _now(), "instance": instance, "event": event, **extra})

    def command(self, line: str, timeout: float = 60.0) -> dict[str, Any]:
        mark = self.events.mark()
        word = line.split()[0]
        self.control.send(line)
        reply = self.events.wait_for(
            lambda e: e.get("instance") == "control" and e.get("event") in (word, "exited"),
            mark,
            timeout,
            f"control: {line}",
        )
        if reply.get("event") == "exited":
            raise SystemExit(f"the control process exited; see {self.control.log}")
        return reply

    def produce(self, n: int) -> None:
        reply = self.command(f"produce {n}")
        if "error" in reply:
            raise SystemExit(f"produce failed: {reply['error']}")
        for r in reply["records"]:
            self.produced.append({"t": reply["t"], **r})

    def start(self, name: str) -> None:
        state_dir = self.tmp / f"state-{name}"
        state_dir.mkdir()
        self.note(name, "launch")
        mark = self.events.mark()
        self.instances[name] = Driver(
            name,
            ["instance", name, self.bootstrap, APP_ID, str(state_dir), INPUT, OUTPUT],
            self.classes,
            self.tmp / f"{name}.log",
            self.events,
        )
        self.events.wait_for(
            lambda e: e.get("instance") == name and e.get("event") in ("identity", "exited"),
            mark,
            60,
            f"{name} to start",
        )

    def close(self, name: str) -> None:
        mark = self.events.mark()
        self.note(name, "close_requested")
        self.instances[name].send("close")
        self.events.wait_for(
            lambda e: e.get("instance") == name and e.get("event") in ("closed", "exited"),
            mark,
            60,
            f"{name} to close",
        )
        self.instances[name].wait(30)

    def kill(self, name: str) -> None:
        driver = self.instances[name]
        driver.proc.send_signal(signal.SIGKILL)
        self.note(name, "killed", pid=driver.proc.pid, signal="SIGKILL")
        driver.wait(10)

    def identity(self, name: str) -> dict[str, Any]:
        e = self.events.last(name, "identity")
        assert e is not None
        return e

    def settle(self, step: str, live: list[str]) -> dict[str, Any]:
        """Describe the group every second until it has settled on `live` (see the module doc);
        returns the move's record."""
        t0 = _now()
        deadline = time.monotonic() + SETTLE_TIMEOUT
        why = "not described yet"
        while time.monotonic() < deadline:
            time.sleep(1.0)
            reply = self.command("describe")
            self.describes += 1
            if "error" in reply:
                why = reply["error"]
                continue
            group = reply["group"]
            ok, why, tasks = self._settled(group, live)
            if ok:
                move = {
                    "step": step,
                    "t_step": t0,
                    "t_settled": reply["t"],
                    "group_state": group["state"],
                    "group_epoch": group["group_epoch"],
                    "target_assignment_epoch": group["target_assignment_epoch"],
                    "tasks": tasks,
                    "members": {
                        self._instance_of(m): {
                            "member_id": m["member_id"],
                            "member_epoch": m["member_epoch"],
                            "client_id": m["client_id"],
                            "process_id": m["process_id"],
                        }
                        for m in group["members"]
                    },
                    "describe": group,
                }
                self.moves.append(move)
                print(
                    f"  {step}: settled at epoch {group['group_epoch']} "
                    f"in {(reply['t'] - t0) / 1000:.1f} s: "
                    + "; ".join(f"{k} {v['active']} sb {v['standby']}" for k, v in tasks.items()),
                    flush=True,
                )
                return move
        raise SystemExit(f"{step}: the group did not settle in {SETTLE_TIMEOUT:.0f} s ({why})")

    def _instance_of(self, member: dict[str, Any]) -> str:
        for name in self.instances:
            ident = self.events.last(name, "identity")
            if ident is None:
                continue
            if member["process_id"] == ident["process_id"] or member["client_id"] in {
                t["consumer_client_id"] for t in ident["threads"]
            }:
                return name
        return f"unknown:{member['client_id']}"

    def _settled(
        self, group: dict[str, Any], live: list[str]
    ) -> tuple[bool, str, dict[str, dict[str, list[str]]]]:
        members = group["members"]
        if group["state"] not in ("STABLE", "Stable") and live:
            return False, f"group state {group['state']}", {}
        names = [self._instance_of(m) for m in members]
        if sorted(names) != sorted(live):
            return False, f"members {names}, want {live}", {}
        tasks: dict[str, dict[str, list[str]]] = {}
        for name, m in zip(names, members):
            if m["member_epoch"] != group["group_epoch"]:
                return False, f"{name} at epoch {m['member_epoch']}", {}
            if m["assignment"] != m["target_assignment"]:
                return False, f"{name} assignment differs from its target", {}
            if m["assignment"]["warmup"]:
                return False, f"{name} has warm-up tasks", {}
            own = self.events.last(name, "tasks")
            if (
                own is None
                or own["active"] != m["assignment"]["active"]
                or (own["standby"] != m["assignment"]["standby"])
            ):
                return False, f"{name}'s own tasks differ from the group's", {}
            tasks[name] = {"active": own["active"], "standby": own["standby"]}
        if live:
            active = sorted(t for v in tasks.values() for t in v["active"])
            if len(active) != 2 * INPUT_PARTITIONS or len(set(active)) != len(active):
                return False, f"active tasks {active}", {}
        return True, "", dict(sorted(tasks.items()))

    def run(self) -> None:
        reply = self.command(
            f"setup {INPUT} {INPUT_PARTITIONS} {OUTPUT} {OUTPUT_PARTITIONS} {STANDBY_REPLICAS}"
        )
        if "error" in reply:
            raise SystemExit(f"setup failed: {reply['error']}")
        self.produce(12)
        self.start("s1")
        self.settle("s1 started", ["s1"])
        self.produce(6)
        self.start("s2")
        self.settle("s2 started", ["s1", "s2"])
        self.produce(6)
        self.start("s3")
        self.settle("s3 started", ["s1", "s2", "s3"])
        self.produce(6)
        self.close("s2")
        self.settle("s2 closed (left the group)", ["s1", "s3"])
        self.produce(6)
        self.kill("s3")
        self.settle("s3 killed (dropped after its session timeout)", ["s1"])
        self.produce(4)
        time.sleep(3)
        self.close("s1")
        final = self.command("describe")
        self.final_describe = final.get("group", final.get("error"))
        self.command("quit")
        self.control.wait(30)

    def stop_all(self) -> None:
        for driver in [*self.instances.values(), self.control]:
            if driver.proc.poll() is None:
                driver.proc.kill()
                driver.proc.wait()

    def truth(self) -> dict[str, Any]:
        instances: dict[str, Any] = {}
        for name in self.instances:
            started = self.events.last(name, "started") or {}
            ident = self.identity(name)
            member_ids = sorted(
                {m["member_id"] for mv in self.moves for n, m in mv["members"].items() if n == name}
            )
            thread = ident["threads"][0]
            instances[name] = {
                "client_id_prefix": started.get("client_id"),
                "process_id": ident["process_id"],
                "process_id_source": "KafkaStreams' private field processId, read by reflection",
                "consumer_client_id": thread["consumer_client_id"],
                "restore_consumer_client_id": thread["restore_consumer_client_id"],
                "producer_client_ids": thread["producer_client_ids"],
                "admin_client_id": thread["admin_client_id"],
                "member_ids": member_ids,
                "member_ids_source": "admin describeStreamsGroups after each move",
                "pid": started.get("pid"),
            }
        events = [
            {k: v for k, v in e.items() if not k.startswith("_")}
            for e in self.events.items
            if e.get("instance") in self.instances
        ]
        setup = next(e for e in self.events.items if e.get("event") == "setup")
        topology = (self.events.last("s1", "started") or {}).get("topology")
        internal: dict[str, Any] = {}
        for sub in self.moves[0]["describe"]["subtopologies"] if self.moves else []:
            internal.update(sub["state_changelog_topics"])
            internal.update(sub["repartition_source_topics"])
        last = self.moves[-1]
        return {
            "application_id": APP_ID,
            "group_protocol": "streams",
            "topics": {
                INPUT: {"partitions": INPUT_PARTITIONS, "created_by": "control admin"},
                OUTPUT: {"partitions": OUTPUT_PARTITIONS, "created_by": "control admin"},
                **{
                    k: {"partitions": v["partitions"], "created_by": "broker (internal topic)"}
                    for k, v in internal.items()
                },
            },
            "group_configs": setup["group_configs"],
            "broker_streams_settings": self.broker_settings,
            "topology": topology,
            "task_ids": "SUBTOPOLOGY_PARTITION as Kafka Streams' TaskId prints it; subtopology "
            "ids on the wire are the strings '0' and '1'",
            "control_clients": {
                "admin": "kwire-streams-admin",
                "producer": "kwire-streams-producer",
            },
            "instances": instances,
            "events": events,
            "moves": [{k: v for k, v in mv.items() if k != "describe"} for mv in self.moves],
            "describes": [mv["describe"] for mv in self.moves],
            "final_describe": self.final_describe,
            "describe_requests": self.describes + 1,
            "produced": self.produced,
            "expected": {
                "final_tasks": last["tasks"],
                "final_step": last["step"],
                "tasks_after_each_move": {mv["step"]: mv["tasks"] for mv in self.moves},
            },
        }


def inside(out_dir: Path) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory() as tmpname:
        tmp = Path(tmpname)
        os.chmod(tmp, 0o777)
        classes = tmp / "classes"
        compile_driver(classes)
        broker = kafka_broker.start_broker(tmp / "broker")
        raw = tmp / NAME
        tool = None
        scenario = None
        try:
            tool = _start_tool([*TCPDUMP, "-w", str(raw), "tcp", "port", str(kafka_broker.PORT)])
            scenario = Scenario(tmp, broker.bootstrap, classes, broker.settings)
            scenario.run()
            time.sleep(0.5)
        except BaseException:
            for log in sorted(tmp.glob("*.log")):
                print(f"--- {log.name} (tail)", file=sys.stderr)
                print(
                    "\n".join(log.read_text(errors="replace").splitlines()[-30:]), file=sys.stderr
                )
            raise
        finally:
            if scenario is not None:
                scenario.stop_all()
            if tool is not None:
                tool.send_signal(signal.SIGINT)
                tool.wait(10)
            kafka_broker.stop_broker(broker)
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw, out_dir / NAME)
    assert scenario is not None
    ports = [kafka_broker.PORT]
    counts = tshark_counts(out_dir / NAME, ports)
    record = {
        "capture": NAME,
        "scenario": SCENARIO,
        "description": DESCRIPTION,
        "clients": [
            f"kafka-streams {kafka_broker.KAFKA_VERSION}",
            f"kafka-clients {kafka_broker.KAFKA_VERSION}",
        ],
        "broker": f"Apache Kafka {kafka_broker.KAFKA_VERSION} "
        "(KRaft, broker and controller in one JVM)",
        "ip": "IPv4",
        "broker_ports": ports,
        "counted_by": tshark_version(),
        "count_method": COUNT_NOTE,
        "counts": counts,
        "streams_truth": scenario.truth(),
    }
    # The instances' state directories lived in a temporary directory: no machine's path is kept.
    text = json.dumps(record, indent=1).replace(str(tmp) + "/", "<tmp>/")
    (out_dir / (Path(NAME).stem + ".json")).write_text(text + "\n")
    total = {d: sum(sum(v.values()) for v in c.values()) for d, c in counts.items()}
    size = (out_dir / NAME).stat().st_size
    print(f"{NAME}: {size} bytes, {total}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.out)
        return
    for tool in ("unshare", "ip", "tcpdump", "tshark", "java", "javac", "mvn"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install tcpdump tshark; Java 17, Maven)")
    if os.geteuid() != 0:
        raise SystemExit("making captures needs root for a private network namespace (sudo)")
    # Maven Central is out of reach inside the namespace: fetch the jars first.
    kafka_broker.build()
    inside_namespace(__file__, NAME, args.out)


if __name__ == "__main__":
    main()
