"""Ground-truth consumer-group scenarios (run by make_captures.py inside a network namespace).

    python scripts/capture/group_scenarios.py SCENARIO --ports-file FILE
    python scripts/capture/group_scenarios.py --member --bootstrap HOST:PORT --group G ...

The orchestrator hosts librdkafka's mock cluster (one broker) in its own process and starts every
group member as a separate OS process (`--member`), so each member has its own connections and
can be closed, stopped or killed with SIGKILL like a real application. It writes down, never
from kwire:
- what it did and when (time.time()): started a member, waited for its assignment, told it to
  close, to stop polling or committing, to rewind; killed it;
- what each member's client reported: on_assign / on_revoke / on_lost partitions, the full
  assignment after each poll, consumer.memberid(), every commit and its result, poll errors,
  and the generation ids (classic) or member epochs (KIP-848) librdkafka's own cgrp debug log
  names.

The truth goes to the ports file under "group_truth" (make_captures.py stores it in NAME.json).
A rebalance entry is what the script caused (it knows it started member 2 or killed member 3);
its assignment is what the members' callbacks held once the group settled after that action.

A member reads commands on stdin, one per line: close, stop_polling, resume_polling,
stop_committing, rewind OFFSET, stall. It writes its events as JSON lines to --events.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SESSION_MS = 6000
HEARTBEAT_MS = 1000

# -- one member process ---------------------------------------------------------------------------


class _Events:
    def __init__(self, path: str | None) -> None:
        self.out = open(path, "a", buffering=1) if path else sys.stdout
        self.lock = threading.Lock()

    def __call__(self, event: str, **fields: Any) -> None:
        with self.lock:
            self.out.write(json.dumps({"t": time.time(), "event": event, **fields}) + "\n")
            self.out.flush()


class _CgrpLog(logging.Handler):
    """Generation ids and member epochs from librdkafka's cgrp debug log (the client's view),
    and its own words when it leaves a group."""

    JOIN = re.compile(r"JoinGroup response: GenerationId (-?\d+), Protocol (\S*), LeaderId (\S*)")
    EPOCH = re.compile(
        r'ConsumerGroupHeartbeat response received for member id "(\S*)" with epoch (-?\d+)'
    )
    # librdkafka's own words when it leaves, rejoins or rebalances (debug tags).
    LEAVE = ("LEAVE ", "LEAVEGROUP ", "MAXPOLL ", "REJOIN ", "REBALANCE ")

    def __init__(self, emit: _Events) -> None:
        super().__init__()
        self.emit_event = emit
        self.last_epoch: tuple[str, int] | None = None
        self.current: int | None = None  # the generation or member epoch last named

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        m = self.JOIN.search(text)
        if m:
            self.current = int(m.group(1))
            self.emit_event(
                "join_response",
                generation=int(m.group(1)),
                protocol=m.group(2).rstrip(","),
                leader=m.group(3).rstrip(","),
            )
        elif text.startswith(self.LEAVE) or "max.poll" in text:
            self.emit_event("log", text=text[:400])
        elif (m := self.EPOCH.search(text)) is not None:
            now = (m.group(1), int(m.group(2)))
            if now != self.last_epoch:
                self.last_epoch = now
                self.current = now[1]
                self.emit_event("member_epoch", member_id=now[0], epoch=now[1])


def _tps(partitions: list[Any]) -> list[list[Any]]:
    return sorted([p.topic, p.partition] for p in partitions)


def member_main(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    emit = _Events(args.events)
    log = logging.getLogger(f"member-{args.name}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    cgrp = _CgrpLog(emit)
    log.addHandler(cgrp)
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 1000,
        "debug": "cgrp",
        "logger": log,
    }
    conf.update(json.loads(args.conf))
    emit("started", pid=os.getpid(), conf={k: v for k, v in conf.items() if k != "logger"})
    c = Consumer(conf)
    flags = {"poll": True, "commit": args.commit == "each", "close": False, "stall": False}
    rewind: list[int] = []

    # What the member holds after each callback, and the generation (member epoch) its client
    # last named: eager assignments replace, incremental ones (cooperative-sticky, KIP-848) add
    # and remove.
    incremental = (
        conf.get("partition.assignment.strategy") == "cooperative-sticky"
        or conf.get("group.protocol") == "consumer"
    )
    holding: set[tuple[str, int]] = set()

    def on_assign(consumer: Any, partitions: list[Any]) -> None:
        got = {(p.topic, p.partition) for p in partitions}
        if not incremental:
            holding.clear()
        holding.update(got)
        emit(
            "on_assign",
            partitions=_tps(partitions),
            holding=sorted(list(tp) for tp in holding),
            generation=cgrp.current,
        )

    def on_revoke(consumer: Any, partitions: list[Any]) -> None:
        holding.difference_update((p.topic, p.partition) for p in partitions)
        emit("on_revoke", partitions=_tps(partitions), generation=cgrp.current)

    def on_lost(consumer: Any, partitions: list[Any]) -> None:
        holding.difference_update((p.topic, p.partition) for p in partitions)
        emit("on_lost", partitions=_tps(partitions), generation=cgrp.current)

    c.subscribe(args.topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def commands() -> None:
        for line in sys.stdin:
            word, *rest = line.split()
            emit("command", command=line.strip())
            if word == "close":
                flags["close"] = True
            elif word == "stop_polling":
                flags["poll"] = False
            elif word == "resume_polling":
                flags["poll"] = True
            elif word == "stop_committing":
                flags["commit"] = False
            elif word == "rewind":
                rewind.append(int(rest[0]))
            elif word == "stall":
                flags["stall"] = True
        flags["close"] = True

    threading.Thread(target=commands, daemon=True).start()

    def commit(offsets: list[Any]) -> None:
        try:
            done = c.commit(offsets=offsets, asynchronous=False)
            errs = [p for p in done or [] if p.error]
            emit(
                "commit",
                offsets=[[p.topic, p.partition, p.offset] for p in done or []],
                member_id=c.memberid(),
                error=str(errs[0].error) if errs else None,
            )
        except KafkaException as e:
            emit(
                "commit",
                offsets=[[p.topic, p.partition, p.offset] for p in offsets],
                member_id=c.memberid(),
                error=e.args[0].name(),
            )

    member_id = None
    assignment: list[list[Any]] | None = None
    positions: dict[tuple[str, int], int] = {}
    last_stall = 0.0
    while not flags["close"]:
        if not flags["poll"]:
            time.sleep(0.1)
            continue
        msg = c.poll(0.2)
        now_id = c.memberid()
        if now_id != member_id:
            member_id = now_id
            emit("member_id", member_id=member_id)
        now = _tps(c.assignment())
        if now != assignment:
            assignment = now
            emit("assignment", partitions=now)
        err = msg.error() if msg is not None else None
        if err is not None:
            emit("poll_error", code=err.code(), name=err.name(), text=err.str())
            if err.code() == KafkaError._MAX_POLL_EXCEEDED:
                continue
        elif msg is not None and not flags["stall"]:
            topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), msg.offset()
            positions[(topic, partition)] = int(offset or 0) + 1
            if flags["commit"]:
                commit([TopicPartition(topic, partition, positions[(topic, partition)])])
        if rewind:
            to = rewind.pop(0)
            tps = [TopicPartition(t, p, to) for t, p in now]
            for tp in tps:
                c.seek(tp)
            emit("seek", partitions=[[t, p, to] for t, p in now])
            commit(tps)
            # Then it stays there: no more commits, no more consuming, the lag shows.
            flags["commit"] = False
            c.pause(c.assignment())
        if flags["stall"] and time.time() - last_stall > 1.0:
            # Stop consuming but keep committing the same positions while the log grows.
            c.pause(c.assignment())
            last_stall = time.time()
            stalled = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items())]
            if stalled:
                commit(stalled)
    emit("closing", member_id=c.memberid())
    c.close()
    emit("closed")


# -- the orchestrator -----------------------------------------------------------------------------


class Proc:
    """One member process and what its events file says."""

    def __init__(
        self,
        run: Run,
        name: str,
        group: str,
        topics: list[str],
        conf: dict[str, Any],
        commit: str = "each",
    ) -> None:
        self.run, self.name, self.group = run, name, group
        self.client_id = f"gt-{name}"
        self.events_path = run.tmp / f"{group}.{name}.{len(run.procs)}.jsonl"
        cmd = [
            sys.executable,
            __file__,
            "--member",
            "--bootstrap",
            run.bootstrap,
            "--group",
            group,
            "--client-id",
            self.client_id,
            "--name",
            name,
            "--topics",
            ",".join(topics),
            "--conf",
            json.dumps(conf),
            "--commit",
            commit,
            "--events",
            str(self.events_path),
        ]
        self.conf = conf
        self.started_at = time.time()
        self.popen = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True)
        self.pid = self.popen.pid
        self.ending: str | None = None
        self.killed_at: float | None = None
        run.procs.append(self)
        run.did("start", self, pid=self.pid)

    def events(self) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        return [json.loads(line) for line in self.events_path.read_text().splitlines() if line]

    def assignment(self) -> tuple[float, list[list[Any]]] | None:
        last = [e for e in self.events() if e["event"] == "assignment"]
        return (last[-1]["t"], last[-1]["partitions"]) if last else None

    def member_ids(self) -> list[str]:
        ids: list[str] = []
        for e in self.events():
            if e["event"] == "member_id" and e["member_id"] and e["member_id"] not in ids:
                ids.append(e["member_id"])
        return ids

    def tell(self, command: str) -> None:
        assert self.popen.stdin is not None
        self.run.did(command.split()[0], self, command=command)
        self.popen.stdin.write(command + "\n")
        self.popen.stdin.flush()

    def close(self, ending: str | None = "left") -> None:
        """Close the consumer; ending None: the scenario is over and the member was active to
        its end."""
        self.tell("close")
        self.popen.wait(20)
        self.ending = ending

    def kill(self) -> float:
        self.killed_at = at = self.run.did("sigkill", self)
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(5)
        return at


class Run:
    def __init__(self, tmp: Path) -> None:
        from scenarios import mock_cluster

        self.tmp = tmp
        self.host, self.bootstrap = mock_cluster({"client.id": "gt-mock-host"})
        self.timeline: list[dict[str, Any]] = []
        self.procs: list[Proc] = []
        self.groups: list[Group] = []
        self.notes: list[str] = []

    def did(self, action: str, proc: Proc | None = None, **fields: Any) -> float:
        t = time.time()
        entry: dict[str, Any] = {"at": t, "action": action, **fields}
        if proc is not None:
            entry.update(group_id=proc.group, member=proc.name)
        self.timeline.append(entry)
        print(f"{time.strftime('%H:%M:%S')} {action} {proc.name if proc else ''} {fields}")
        return t

    def produce(self, topic: str, n: int, partitions: int, prefix: str = "m") -> None:
        for i in range(n):
            self.host.produce(
                topic,
                key=f"k{i}".encode(),
                value=f"{prefix}-{i}".encode(),
                partition=i % partitions,
            )
        self.host.flush(10)
        self.did("produce", topic=topic, messages=n)

    def topic(self, topic: str) -> int:
        """Auto-create a topic (the mock lacks CreateTopics) and return its partition count."""
        self.host.produce(topic, key=b"k", value=b"first", partition=0)
        self.host.flush(10)
        n = len(self.host.list_topics(topic, timeout=10).topics[topic].partitions)
        self.did("topic", topic=topic, partitions=n)
        return n

    def log_end(self, topic: str, partitions: int) -> dict[str, int]:
        """High watermarks from ListOffsets (a consumer outside any group)."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "gt-observer", "client.id": "gt-obs"}
        )
        ends = {}
        for p in range(partitions):
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[f"{topic}:{p}"] = high
        c.close()
        self.did("watermarks", topic=topic, high=ends)
        return ends


class Group:
    """One group's truth, filled in as the script acts."""

    def __init__(
        self,
        run: Run,
        group_id: str,
        topic: str,
        partitions: int,
        protocol: str = "classic",
        assignor: str | None = "range",
    ) -> None:
        self.run, self.group_id, self.topic, self.partitions = run, group_id, topic, partitions
        self.protocol, self.assignor = protocol, assignor
        self.members: list[Proc] = []
        self.rebalances: list[dict[str, Any]] = []
        self.progress: dict[str, str] = {}
        self.log_end: dict[str, int] = {}
        self.static_rejoins: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.live_override: list[Proc] | None = None
        self.killed: dict[str, float] = {}  # members killed with SIGKILL, when
        run.groups.append(self)

    def conf(self, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {}
        if self.protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update(
                {
                    "session.timeout.ms": SESSION_MS,
                    "heartbeat.interval.ms": HEARTBEAT_MS,
                    "partition.assignment.strategy": self.assignor,
                }
            )
        conf.update(extra)
        return conf

    def start(self, name: str, commit: str = "each", **conf: Any) -> Proc:
        p = Proc(self.run, name, self.group_id, [self.topic], self.conf(**conf), commit)
        self.members.append(p)
        return p

    def live(self) -> list[Proc]:
        if self.live_override is not None:
            return self.live_override
        return [p for p in self.members if p.ending is None]

    def settle(
        self,
        cause: str,
        who: Proc | None,
        since: float,
        timeout: float = 40,
        rebalance: bool = True,
    ) -> None:
        """Wait until the live members' assignments split every partition between them, with at
        least one member's assignment changed after `since`, and stay so for 1.5 s; record it
        (as a rebalance, or with rebalance=False as a static member's rejoin without one)."""
        want = sorted([self.topic, p] for p in range(self.partitions))
        deadline = time.time() + timeout
        stable_since = None
        last: dict[str, Any] | None = None
        while time.time() < deadline:
            now = {p.name: p.assignment() for p in self.live()}
            parts = [tp for a in now.values() if a for tp in a[1]]
            changed = any(a and a[0] >= since for a in now.values())
            everyone = all(a and a[1] for a in now.values())  # more partitions than members
            ok = sorted(parts) == want and changed and everyone
            snap = {n: a[1] if a else [] for n, a in now.items()}
            if ok and snap == last:
                if stable_since and time.time() - stable_since >= 1.5:
                    break
            else:
                stable_since = time.time() if ok else None
            last = snap if ok else None
            time.sleep(0.1)
        else:
            raise SystemExit(f"{self.group_id}: no settled assignment after {cause}")
        assignment: dict[str, dict[str, list[int]]] = {}
        for n, tps in snap.items():
            for t, p in tps:
                assignment.setdefault(n, {}).setdefault(t, []).append(p)
        (self.rebalances if rebalance else self.static_rejoins).append(
            {
                "at": since,
                "settled_at": time.time(),
                "cause": cause,
                "cause_member": who.name if who else None,
                "members": sorted(snap),
                "assignment": assignment,
            }
        )
        self.run.did("settled", group_id=self.group_id, cause=cause, assignment=assignment)

    def generations(self) -> list[dict[str, Any]]:
        """Every generation (classic) or member epoch (KIP-848) the members' clients reported,
        with the script action it happened under: its cause and cause member. A rebalance may
        take more than one round (cooperative-sticky's second round; a member's rejoin after
        an error): a later round carries the cause of the round before it, with its round
        number, except the round where a killed static member's old id timed out (the mock
        keeps it beside its replacement): that one is its eviction."""
        seen: dict[int, dict[str, Any]] = {}
        for p in self.members:
            for e in p.events():
                if e["event"] == "join_response":
                    gen = e["generation"]
                elif e["event"] == "member_epoch" and e["epoch"] > 0:
                    gen = e["epoch"]
                else:
                    continue
                g = seen.setdefault(gen, {"generation": gen, "first_seen": e["t"], "members": []})
                g["first_seen"] = min(g["first_seen"], e["t"])
                if p.name not in g["members"]:
                    g["members"].append(p.name)
        actions = sorted(self.rebalances + self.static_rejoins, key=lambda r: r["at"])
        rounds: dict[int, int] = {}
        evicted: set[str] = set()
        out: list[dict[str, Any]] = []
        for gen in sorted(seen):
            g = seen[gen]
            under = [i for i, a in enumerate(actions) if a["at"] <= g["first_seen"]]
            if not under:
                raise SystemExit(f"{self.group_id}: generation {gen} before any action")
            i = under[-1]
            rounds[i] = rounds.get(i, 0) + 1
            cause, who = actions[i]["cause"], actions[i]["cause_member"]
            if rounds[i] > 1:
                # A later round finishes the one before it (the rebalance in progress).
                cause, who = out[-1]["cause"], out[-1]["cause_member"]
            for name, killed in self.killed.items():
                # A killed member the coordinator still held (the mock keeps a static member's
                # old id) drops out when its session times out: that round is its eviction.
                late = g["first_seen"] >= killed + SESSION_MS / 1000
                if rounds[i] > 1 and late and name not in evicted:
                    cause, who = "member_evicted", name
                    evicted.add(name)
            if cause == "static_rejoin":
                cause = "member_joined"  # the mock rebalances where a broker would not (notes)
            # The clients' own reasons for the round (librdkafka's REJOIN/REBALANCE log lines
            # since the previous generation).
            before = out[-1]["first_seen"] if out else 0.0
            reasons = sorted(
                {
                    e["text"].split("]: ", 1)[-1]
                    for p in self.members
                    for e in p.events()
                    if e["event"] == "log"
                    and before <= e["t"] <= g["first_seen"]
                    and e["text"].startswith(("REJOIN", "MAXPOLL", "LEAVE "))
                }
            )
            out.append(
                {
                    **g,
                    "cause": cause,
                    "cause_member": who,
                    "round": rounds[i],
                    "client_reasons": reasons,
                }
            )
        return out

    def commits(self) -> list[dict[str, Any]]:
        """Every commit a member's client reported done without error, in time order."""
        out = []
        for p in self.members:
            for e in p.events():
                if e["event"] == "commit" and e["error"] is None:
                    for t, part, off in e["offsets"]:
                        out.append(
                            {
                                "member": p.name,
                                "member_id": e["member_id"],
                                "topic": t,
                                "partition": part,
                                "offset": off,
                                "at": e["t"],
                            }
                        )
        return sorted(out, key=lambda c: c["at"])

    def last_commits(self) -> dict[str, int]:
        return {f"{c['topic']}:{c['partition']}": c["offset"] for c in self.commits()}

    def truth(self) -> dict[str, Any]:
        members = []
        for p in self.members:
            events = p.events()
            gens = sorted(
                {e["generation"] for e in events if e["event"] == "join_response"}
                | {e["epoch"] for e in events if e["event"] == "member_epoch" and e["epoch"] > 0}
            )
            ids = p.member_ids()
            # How each member id's time ended: an id the client dropped after a poll timeout
            # (its poll returned _MAX_POLL_EXCEEDED) left for that; the last id ends as the
            # script ended the process.
            timed_out = any(
                e["event"] == "poll_error" and e["name"] == "_MAX_POLL_EXCEEDED" for e in events
            )
            endings = {}
            for i, mid in enumerate(ids):
                last_id = i + 1 == len(ids)
                endings[mid] = (
                    (p.ending or "active_at_end")
                    if last_id
                    else ("left_poll_timeout" if timed_out else "unknown")
                )
            members.append(
                {
                    "name": p.name,
                    "client_id": p.client_id,
                    "group_instance_id": p.conf.get("group.instance.id"),
                    "member_ids": ids,
                    "ending": p.ending or "active_at_end",
                    "endings": endings,
                    "pid": p.pid,
                    "generations": gens,
                    "killed_at": p.killed_at,
                    # Commits are listed once, under the group's "commits".
                    "events": [e for e in events if e["event"] != "commit"],
                }
            )
        return {
            "group_id": self.group_id,
            "protocol": self.protocol,
            "assignor": self.assignor,
            "topic": self.topic,
            "partitions": self.partitions,
            "members": members,
            "rebalances": self.rebalances,
            "generations": self.generations(),
            "last_commits": self.last_commits(),
            "commits": self.commits(),
            "static_rejoins": self.static_rejoins,
            "progress": self.progress,
            "log_end_offsets": self.log_end,
            "notes": self.notes,
        }


def _assigned(p: Proc, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        a = p.assignment()
        if a and a[1]:
            return
        time.sleep(0.1)
    raise SystemExit(f"{p.name}: no assignment")


SCENARIOS: dict[str, Callable[[Run], None]] = {}


def scenario(fn: Callable[[Run], None]) -> Callable[[Run], None]:
    SCENARIOS[fn.__name__.replace("_", "-")] = fn
    return fn


def join_one_by_one(g: Group, names: list[str], **conf: Any) -> list[Proc]:
    procs = []
    for i, name in enumerate(names):
        t = time.time()
        p = g.start(name, **conf)
        g.settle("first_join" if i == 0 else "member_joined", p, t)
        procs.append(p)
    return procs


@scenario
def eager_and_kill(run: Run) -> None:
    """1. classic eager (range): a, b, c join one by one, b closes (LeaveGroup), a and c stay
    to the end. 2. a second range group: a, b, c join, c is killed with SIGKILL; the coordinator
    evicts it after session.timeout.ms and a and b rebalance."""
    n = run.topic("gt-eager")
    run.produce("gt-eager", 12, n)
    g = Group(run, "g-gt-eager", "gt-eager", n)
    a, b, c = join_one_by_one(g, ["eager-a", "eager-b", "eager-c"])
    t = time.time()
    b.close("left")
    g.settle("member_left", b, t)
    run.produce("gt-eager", 6, n, prefix="late")
    time.sleep(2)

    n = run.topic("gt-kill")
    run.produce("gt-kill", 8, n)
    k = Group(run, "g-gt-kill", "gt-kill", n)
    ka, kb, kc = join_one_by_one(k, ["kill-a", "kill-b", "kill-c"])
    t = time.time()
    kc.kill()
    kc.ending = "evicted"
    k.settle("member_evicted", kc, t, timeout=SESSION_MS / 1000 + 30)
    run.produce("gt-kill", 4, n, prefix="late")
    time.sleep(2)
    finish(run, a, c, ka, kb)


def finish(run: Run, *procs: Proc) -> None:
    """The scenario is over: the remaining members are killed at once, so that the capture
    (which stops right after) ends with them in their group, never having left."""
    for g in run.groups:
        g.log_end = run.log_end(g.topic, g.partitions)
        last = g.last_commits()
        for tp, end in g.log_end.items():
            if tp in g.progress or tp not in last:
                continue
            if last[tp] == end:
                g.progress[tp] = "OK"  # committed up to the log end: no lag, nothing to flag
            else:
                g.notes.append(f"{tp}: committed {last[tp]}, log end {end}: no verdict set")
    run.did("end", note="remaining members SIGKILLed at the end of the capture: active_at_end")
    for p in procs:
        p.popen.send_signal(signal.SIGKILL)
    for p in procs:
        p.popen.wait(5)


@scenario
def poll_timeout_and_static(run: Run) -> None:
    """3. poll timeout: a and b (max.poll.interval.ms 6000) join a range group; b stops calling
    poll; librdkafka leaves the group for it and a takes every partition; b polls again and
    rejoins under a new member id. 4. static membership: inst-a and inst-b join; the inst-b
    process is killed and restarted at once (within its session timeout: no rebalance expected),
    then killed again and restarted only after its session timeout (eviction, then rejoin)."""
    n = run.topic("gt-poll")
    run.produce("gt-poll", 8, n)
    g = Group(run, "g-gt-poll", "gt-poll", n)
    a, b = join_one_by_one(g, ["poll-a", "poll-b"], **{"max.poll.interval.ms": SESSION_MS})
    t = time.time()
    b.tell("stop_polling")
    g.notes.append(
        "poll-b's client leaves on its poll timeout (its log: 'Application maximum poll interval "
        "(6000ms) exceeded ...: leaving group'); librdkafka sends LeaveGroup v1, which has no "
        "reason field (reasons came with v5, KIP-800), so the wire shows a plain leave"
    )
    g.live_override = [a]  # b is still a process, but out of the group once the timeout hits
    g.settle("poll_timeout", b, t, timeout=SESSION_MS / 1000 + 30)
    t = time.time()
    b.tell("resume_polling")
    g.live_override = None
    g.settle("member_joined", b, t)
    run.produce("gt-poll", 4, n, prefix="late")
    time.sleep(1)

    n = run.topic("gt-static")
    run.produce("gt-static", 8, n)
    s = Group(run, "g-gt-static", "gt-static", n)
    sa = s.start("static-a", **{"group.instance.id": "inst-a"})
    s.settle("first_join", sa, time.time())
    t = time.time()
    sb = s.start("static-b", **{"group.instance.id": "inst-b"})
    s.settle("member_joined", sb, t)
    time.sleep(1)
    killed = sb.kill()
    sb.ending = "static_restart"
    s.killed[sb.name] = killed
    t = time.time()
    sb2 = s.start("static-b2", **{"group.instance.id": "inst-b"})
    _assigned(sb2)
    s.settle("static_rejoin", sb2, t, rebalance=False)
    # Past the killed process's session timeout: whatever the coordinator does about its old
    # member id happens before the next step.
    time.sleep(max(0.0, killed + SESSION_MS / 1000 + 6 - time.time()))
    gens = [g for g in s.generations() if g["first_seen"] >= t]
    if gens:
        s.notes.append(
            f"the mock cluster rebalanced when inst-b's process restarted (generations "
            f"{[g['generation'] for g in gens]}): a broker would hand the static member its "
            "assignment back without a rebalance; the mock gives the restarted process a new "
            "member id, rebalances, and evicts the old member id when its session times out"
        )
    sb2.kill()
    sb2.ending = "evicted"
    t = time.time()
    s.settle("member_evicted", sb2, t, timeout=SESSION_MS / 1000 + 30)
    time.sleep(1)
    t = time.time()
    sb3 = s.start("static-b3", **{"group.instance.id": "inst-b"})
    s.settle("member_joined", sb3, t)
    run.produce("gt-static", 4, n, prefix="late")
    time.sleep(1)
    finish(run, a, b, sa, sb3)


@scenario
def cooperative_and_848(run: Run) -> None:
    """5. cooperative-sticky: a, b, c join one by one (incremental rounds), b closes.
    6. KIP-848 (group.protocol=consumer): a, b, c join one by one, b closes (leave, epoch -1),
    c is killed with SIGKILL (the coordinator fences it after its session timeout)."""
    n = run.topic("gt-coop")
    run.produce("gt-coop", 8, n)
    g = Group(run, "g-gt-coop", "gt-coop", n, assignor="cooperative-sticky")
    a, b, c = join_one_by_one(g, ["coop-a", "coop-b", "coop-c"])
    t = time.time()
    b.close("left")
    g.settle("member_left", b, t)
    run.produce("gt-coop", 4, n, prefix="late")
    time.sleep(1)

    n = run.topic("gt-848")
    run.produce("gt-848", 8, n)
    k = Group(run, "g-gt-848", "gt-848", n, protocol="consumer", assignor=None)
    ka, kb, kc = join_one_by_one(k, ["848-a", "848-b", "848-c"])
    t = time.time()
    kb.close("left")
    k.settle("member_left", kb, t)
    t = time.time()
    kc.kill()
    kc.ending = "evicted"
    k.settle("member_evicted", kc, t, timeout=90)
    k.notes.append(
        f"the mock fenced the killed KIP-848 member after {time.time() - t:.0f} s (its own "
        "consumer-group session timeout, not the classic session.timeout.ms)"
    )
    run.produce("gt-848", 4, n, prefix="late")
    time.sleep(1)
    finish(run, a, c, ka)


@scenario
def progress(run: Run) -> None:
    """7. progress on one topic, four single-member range groups, a producer writing all along:
    g-gt-ok commits every message (OK); g-gt-stop stops committing early while it keeps polling
    (STOP); g-gt-rewind seeks back and commits a lower offset, then goes on (REWIND);
    g-gt-stall pauses and keeps committing the same offsets while the log grows (STALL)."""
    n = run.topic("gt-flow")
    run.produce("gt-flow", 4 * n, n)
    groups = {
        status: Group(run, f"g-gt-{status.lower()}", "gt-flow", n)
        for status in ("OK", "STOP", "REWIND", "STALL")
    }
    procs = {}
    for status, g in groups.items():
        # One at a time: four clients bootstrapping at once made a burst that tcpdump's ring
        # (frames of snaplen 262144) dropped packets of.
        procs[status] = g.start(f"flow-{status.lower()}")
        g.settle("first_join", procs[status], procs[status].started_at)
        if status == "STOP":
            # It stops right after its first commits: by Burrow's rule a partition is STOPped
            # when the silence since its last commit outlasts the span it committed over.
            procs[status].tell("stop_committing")
            g.progress = {f"gt-flow:{p}": "STOP" for p in range(n)}
    stop = threading.Event()

    def producing() -> None:
        i = 0
        while not stop.is_set():
            run.host.produce("gt-flow", value=f"flow-{i}".encode(), partition=i % n)
            run.host.poll(0)
            i += 1
            time.sleep(0.25)
        run.host.flush(10)

    writer = threading.Thread(target=producing)
    run.did("produce_start", topic="gt-flow", rate_per_s=4)
    writer.start()
    time.sleep(3)
    procs["STALL"].tell("stall")
    groups["STALL"].progress = {f"gt-flow:{p}": "STALL" for p in range(n)}
    time.sleep(11)
    procs["REWIND"].tell("rewind 2")
    groups["REWIND"].progress = {f"gt-flow:{p}": "REWIND" for p in range(n)}
    time.sleep(2)
    stop.set()
    writer.join()
    run.did("produce_stop", topic="gt-flow")
    time.sleep(1.5)
    finish(run, *procs.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS))
    parser.add_argument("--ports-file")
    parser.add_argument("--member", action="store_true")
    parser.add_argument("--bootstrap")
    parser.add_argument("--group")
    parser.add_argument("--client-id")
    parser.add_argument("--name")
    parser.add_argument("--topics")
    parser.add_argument("--conf", default="{}")
    parser.add_argument("--commit", choices=("each", "none"), default="each")
    parser.add_argument("--events")
    args = parser.parse_args()
    if args.member:
        member_main(args)
        return
    import tempfile

    import confluent_kafka

    from scenarios import port_of

    with tempfile.TemporaryDirectory() as tmp:
        run = Run(Path(tmp))
        try:
            SCENARIOS[args.scenario](run)
        finally:
            for p in run.procs:
                if p.popen.poll() is None:
                    p.popen.kill()
        truth = {
            "scenario": args.scenario,
            "librdkafka": confluent_kafka.libversion()[0],
            "groups": [g.truth() for g in run.groups],
            "timeline": run.timeline,
            "notes": run.notes,
        }
    meta = {
        "broker_ports": [port_of(run.bootstrap)],
        "librdkafka": confluent_kafka.libversion()[0],
        "group_truth": truth,
    }
    out = args.ports_file or "/dev/stdout"
    with open(out, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
