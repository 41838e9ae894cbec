"""Make the real-broker share-group captures: Apache Kafka 4.4 and its Java clients on the loopback.

    sudo .venv/bin/python scripts/capture/kafka_captures.py [--only NAME ...] [--out DIR]

Like make_captures.py, each capture runs in a private network namespace (`unshare -n`): inside
it tcpdump records the loopback (only `tcp port 9092`, the broker's client and inter-broker
listener; its KRaft controller listener 9093 stays out), a single-JVM KRaft broker starts from
the jars Maven fetched (kafka_broker.py), and a Java driver (scripts/capture/kafka/src,
kwire.capture.ShareScenario) plays the scenario. Afterwards tshark counts the frames per api
key, version and direction (make_captures.tshark_counts) and NAME.json keeps the counts beside
the ground truth.

Ground truth (NAME.json "share_truth") comes from the clients' own APIs, never from the capture:
records received with their delivery counts, acknowledgements made, the acknowledgement commit
callback's results, the admin client's answers, kill times. "expected" is derived here from those
events (what the scenario did to each record) and cross-checked with the admin's last
listShareGroupOffsets (start offset and lag) of each group.

Needs: root (for the namespace), tcpdump and tshark, Java 17 and Maven (the first run fetches
Kafka 4.4.0 from Maven Central into scripts/capture/kafka/target).
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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kafka_broker import (  # noqa: E402
    KAFKA_VERSION,
    PORT,
    build,
    java_cmd,
    log_tail,
    start_broker,
    stop_broker,
)
from make_captures import (  # noqa: E402
    COUNT_NOTE,
    _start_tool,
    tshark_counts,
    tshark_records,
    tshark_version,
)

REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "tests" / "data" / "capture"
BROKER = f"Apache Kafka {KAFKA_VERSION} (KRaft, one JVM)"
# A 16 MiB kernel buffer: with two cores busy starting JVMs, the default 2 MiB overflowed once.
TOOL = ("tcpdump", "-i", "lo", "-s", "0", "-B", "16384", "-U", "--immediate-mode")
CAPTURE_FILTER = f"tcp port {PORT}"
TERMINAL = ("acknowledged", "archived")


@dataclass(frozen=True)
class Capture:
    file: str
    scenario: str
    description: str


CAPTURES = [
    Capture(
        "kafka_share_implicit.pcap",
        "implicit",
        "Kafka 4.4 share group, implicit acknowledgement: three KafkaShareConsumers share the one "
        "partition of a topic (the broker's simple assignor gives it to all three) while a "
        "producer writes 30 records; ACCEPTs ride on each next ShareFetch and on the closing "
        "ShareAcknowledge",
    ),
    Capture(
        "kafka_share_explicit.pcap",
        "explicit",
        "Kafka 4.4 share group, explicit acknowledgement with group configs set by "
        "IncrementalAlterConfigs (lock 2 s, delivery limit 3, earliest): ACCEPT, a REJECT, a "
        "RELEASE then ACCEPT, a poison record released until archived at the limit, a RENEW "
        "(ShareAcknowledge v2) keeping a record past its first lock; commitSync, commitAsync "
        "and acknowledgements riding on ShareFetch",
    ),
    Capture(
        "kafka_share_stall_kill.pcap",
        "stall-kill",
        "Kafka 4.4 share group, explicit: a member stalls past the 3 s lock, another gets the "
        "records again (delivery count 2) and the staller's late ACCEPT is refused "
        "(INVALID_RECORD_STATE); a member in its own JVM holding three records is killed with "
        "SIGKILL and they are delivered again to the remaining member",
    ),
    Capture(
        "kafka_share_mixed.pcap",
        "mixed",
        "Kafka 4.4: a share group (two members, implicit) and a classic consumer group read one "
        "two-partition topic; the admin client describes the share group, lists its offsets "
        "and, once it is empty, alters and deletes them (ShareGroupDescribe, "
        "DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets)",
    ),
]


# -- expected record states, from the scenario's own events -----------------------------------


def _acks_with_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each ack event, with the error the acknowledgement commit callback reported for it (the
    first ack_result of the same client covering its offset after it; "missing" when none)."""
    acks: list[dict[str, Any]] = []
    pending: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for e in events:
        if e["event"] == "ack":
            a = dict(e, result="missing")
            acks.append(a)
            key = (e["client_id"], e["topic"], e["partition"], e["offset"])
            pending.setdefault(key, []).append(a)
        elif e["event"] == "ack_result":
            for off in e["offsets"]:
                for a in pending.pop((e["client_id"], e["topic"], e["partition"], off), []):
                    a["result"] = e["error"]
    return acks


def expected_records(truth: dict[str, Any]) -> list[dict[str, Any]]:
    """Final state of every record delivered to a share group, from what the scenario did."""
    share_clients = {
        cid: c["group"] for cid, c in truth["clients"].items() if c.get("kind") == "share"
    }
    events = truth["events"]
    acks = _acks_with_results(events)
    killed = {e["client_id"]: e for e in events if e["event"] == "killed"}
    rows: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for e in events:
        if e["event"] == "received" and e["client_id"] in share_clients:
            key = (share_clients[e["client_id"]], e["topic"], e["partition"], e["offset"])
            rows.setdefault(key, {"deliveries": [], "acks": []})["deliveries"].append(e)
    for a in acks:
        if a["client_id"] not in share_clients:
            continue
        key = (share_clients[a["client_id"]], a["topic"], a["partition"], a["offset"])
        if key in rows:
            rows[key]["acks"].append(a)
    out = []
    for (group, topic, partition, offset), row in sorted(rows.items()):
        limit = truth["groups"][group]["delivery_limit"]
        deliveries = row["deliveries"]
        # The record's story in time order: deliveries, acknowledgements (with the callback's
        # verdict), kills of its holder.
        items: list[tuple[float, str]] = []
        for d in deliveries:
            how = ", again after RENEW" if d.get("after_renew") else ""
            items.append((d["t"], f"{d['client_id']} got it (delivery {d['delivery_count']}{how})"))
        for name, k in killed.items():
            if any(d["client_id"] == name and d["t"] < k["t"] for d in deliveries):
                items.append((k["t"], f"{name} killed (SIGKILL) holding it"))
        final, reason = "in_flight", None
        for a in row["acks"]:
            how = "implicit ACCEPT" if a.get("implicit") else a["type"]
            res = a["result"]
            verdict = "ok" if res is None else "no callback" if res == "missing" else res
            items.append((a["t"], f"{how} by {a['client_id']}: {verdict}"))
            if res is not None:
                continue
            if a["type"] == "ACCEPT":
                final, reason = "acknowledged", None
            elif a["type"] == "REJECT":
                final, reason = "archived", "rejected"
        story = [text for _, text in sorted(items, key=lambda i: i[0])]
        last = deliveries[-1]
        if final == "in_flight":
            released = [
                a
                for a in row["acks"]
                if a["type"] == "RELEASE" and a["result"] is None and a["t"] > last["t"]
            ]
            holder_killed = last["client_id"] in killed
            if last["delivery_count"] >= limit and (released or holder_killed):
                final, reason = "archived", "delivery_limit"
                story.append(f"delivery {last['delivery_count']} was the last allowed ({limit})")
            elif released or holder_killed:
                final = "available"
                story.append("released and not delivered again before the end")
        out.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "final_state": final,
                "archived_reason": reason,
                "deliveries": len(deliveries),
                "max_delivery_count": max(d["delivery_count"] for d in deliveries),
                "members": sorted({d["client_id"] for d in deliveries}),
                "why": "; ".join(story),
            }
        )
    return out


def cross_check(truth: dict[str, Any], records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compare the expected states with each group's last listShareGroupOffsets taken before
    any admin alteration: offsets below the start offset must be terminal, and the lag must
    count the offsets from the start offset to the partition's end that are not terminal."""
    ends: dict[tuple[str, int], int] = {}
    for e in truth["events"]:
        if e["event"] == "produced":
            k = (e["topic"], e["partition"])
            ends[k] = max(ends.get(k, 0), e["offset"] + 1)
    state = {(r["group"], r["topic"], r["partition"], r["offset"]): r for r in records}
    last: dict[str, dict[str, Any]] = {}
    altered: set[str] = set()
    for e in truth["events"]:
        if e["event"] != "admin":
            continue
        group = str((e.get("request") or {}).get("group"))
        if e["call"] in ("alterShareGroupOffsets", "deleteShareGroupOffsets"):
            altered.add(group)
        elif e["call"] == "listShareGroupOffsets" and group not in altered and e["answer"]:
            last[group] = e
    checks = []
    for group, e in sorted(last.items()):
        for topic, parts in sorted(e["answer"].items()):
            for p, info in sorted(parts.items()):
                if info is None:
                    continue
                partition, start = int(p), info["start_offset"]
                end = ends.get((topic, partition), 0)

                def terminal(o: int) -> bool:
                    r = state.get((group, topic, partition, o))
                    return r is not None and r["final_state"] in TERMINAL

                below_ok = all(terminal(o) for o in range(0, min(start, end)))
                open_count = sum(1 for o in range(start, end) if not terminal(o))
                lag = info.get("lag")
                checks.append(
                    {
                        "group": group,
                        "topic": topic,
                        "partition": partition,
                        "at": e["t"],
                        "start_offset": start,
                        "lag": lag,
                        "end_offset": end,
                        "expected_open": open_count,
                        "consistent": below_ok and (lag is None or lag == open_count),
                    }
                )
    return checks


def lost_segments(path: Path) -> int:
    """TCP segments tshark finds missing (a gap in a stream's sequence numbers)."""
    cmd = ["tshark", "-n", "-r", str(path), "-Y", "tcp.analysis.lost_segment"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


# -- one capture --------------------------------------------------------------------------------


def inside(name: str, out_dir: Path) -> None:
    """Runs inside the network namespace: capture one scenario."""
    cap = next(c for c in CAPTURES if c.file == name)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        raw = work / cap.file
        tool = _start_tool([*TOOL, "-w", str(raw), CAPTURE_FILTER])
        broker = None
        try:
            broker = start_broker(work / "broker")
            truth_file = work / "truth.json"
            scenario = subprocess.run(
                java_cmd(
                    "kwire.capture.ShareScenario",
                    cap.scenario,
                    broker.bootstrap,
                    str(truth_file),
                    str(work / "scenario"),
                ),
                timeout=300,
            )
            if scenario.returncode:
                print(log_tail(broker), file=sys.stderr)
                raise SystemExit(f"scenario {cap.scenario} failed (exit {scenario.returncode})")
            time.sleep(0.5)
        finally:
            if broker is not None:
                stop_broker(broker)
            time.sleep(0.3)
            tool.send_signal(signal.SIGINT)
            _, err = tool.communicate(timeout=10)
        stats = [ln for ln in err.decode(errors="replace").splitlines() if "packets" in ln]
        dropped = sum(int(ln.split()[0]) for ln in stats if "dropped" in ln)
        if dropped:
            raise SystemExit(f"{cap.file}: tcpdump lost packets: {'; '.join(stats)}")
        lost = lost_segments(raw)
        if lost:
            raise SystemExit(f"{cap.file}: {lost} TCP segments missing from the capture")
        truth = json.loads(truth_file.read_text())
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw, out_dir / cap.file)
    ports = [PORT]
    counts = tshark_counts(out_dir / cap.file, ports)
    records = expected_records(truth)
    truth["expected"] = {
        "records": records,
        "admin_check": cross_check(truth, records),
        "method": (
            "derived from the scenario's own events: ACCEPT (or implicit ACCEPT) whose callback "
            "reported no error -> acknowledged; REJECT without error -> archived/rejected; "
            "RELEASE (or the holder killed) on the last allowed delivery and never delivered "
            "again -> archived/delivery_limit; otherwise in_flight (or available once released). "
            "admin_check compares with the group's last listShareGroupOffsets before any admin "
            "alteration: offsets below start_offset terminal, lag = offsets from start_offset "
            "to the end not terminal. Kafka 4.4 persists the start offset lazily, so it may "
            "trail the last acknowledged offset while the lag is already 0."
        ),
    }
    if cap.scenario == "mixed":
        truth["expected"]["note"] = (
            "states when the share members closed; afterwards the admin client altered the "
            "group's start offsets and then deleted them (events 'admin')"
        )
    record = {
        "capture": cap.file,
        "scenario": cap.scenario,
        "description": cap.description,
        "clients": [f"Apache Kafka Java clients {KAFKA_VERSION}"],
        "broker": BROKER,
        "ip": "IPv4",
        "broker_ports": ports,
        "capture_filter": CAPTURE_FILTER,
        "tcpdump_stats": stats,
        "kafka": KAFKA_VERSION,
        "counted_by": tshark_version(),
        "count_method": COUNT_NOTE,
        "counts": counts,
        "share_truth": truth,
        "tshark_records": tshark_records(out_dir / cap.file, ports),
    }
    (out_dir / (Path(cap.file).stem + ".json")).write_text(json.dumps(record, indent=2) + "\n")
    total = {d: sum(sum(v.values()) for v in c.values()) for d, c in counts.items()}
    size = (out_dir / cap.file).stat().st_size
    bad = [c for c in truth["expected"]["admin_check"] if not c["consistent"]]
    print(
        f"{cap.file}: {size} bytes, {total}, {time.monotonic() - started:.1f} s"
        + (f", admin check FAILED: {bad}" if bad else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="capture file(s) to make")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--inside", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.inside, args.out)
        return
    for tool in ("unshare", "ip", "tcpdump", "tshark", "java", "mvn"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"{tool} is needed (apt-get install tcpdump tshark; Java 17 and Maven)"
            )
    if os.geteuid() != 0:
        raise SystemExit("making captures needs root for a private network namespace (sudo)")
    wanted = [c for c in CAPTURES if not args.only or c.file in args.only]
    if args.only and len(wanted) != len(args.only):
        raise SystemExit(f"unknown capture; known: {', '.join(c.file for c in CAPTURES)}")
    build()  # outside the namespace: Maven Central is not reachable from inside
    for cap in wanted:
        for attempt in (1, 2):
            done = subprocess.run(
                [
                    "unshare",
                    "-n",
                    sys.executable,
                    __file__,
                    "--inside",
                    cap.file,
                    "--out",
                    str(args.out),
                ]
            )
            if done.returncode == 0:
                break
            print(f"{cap.file}: attempt {attempt} failed (exit {done.returncode})", file=sys.stderr)
        else:
            raise SystemExit(f"{cap.file}: scenario failed twice")


if __name__ == "__main__":
    main()
