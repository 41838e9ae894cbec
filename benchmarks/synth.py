"""Synthetic consumer-group traffic as a frames table, encoded with the generated codecs.

For the tests and the benchmarks, not a product module (the demo decodes real captures). Rows
have the frames table's columns (the `capture` package's SCHEMA): each conversation is a real
client's sequence (ApiVersions, FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
OffsetFetch, LeaveGroup) at a modern (flexible) or legacy (non-flexible) set of versions.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa

import generated as g

TIMESTAMP = pa.timestamp("us", tz="UTC")
FRAMES_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("connection_id", pa.string(), nullable=False),
        pa.field("client_addr", pa.string(), nullable=False),
        pa.field("client_port", pa.int32(), nullable=False),
        pa.field("broker_addr", pa.string(), nullable=False),
        pa.field("broker_port", pa.int32(), nullable=False),
        pa.field("direction", pa.string(), nullable=False),
        pa.field("ts_first", TIMESTAMP, nullable=False),
        pa.field("ts_last", TIMESTAMP, nullable=False),
        pa.field("frame", pa.binary()),
        pa.field("frame_length", pa.int32()),
        pa.field("api_key", pa.int16()),
        pa.field("api_version", pa.int16()),
        pa.field("correlation_id", pa.int32()),
        pa.field("client_id", pa.string()),
        pa.field("latency_us", pa.int64()),
        pa.field("error", pa.string()),
    ]
)

# Versions a Kafka 3.x Java client sends (flexible), and an old client's (non-flexible).
MODERN = {18: 3, 10: 4, 11: 9, 14: 5, 12: 4, 8: 8, 9: 8, 13: 5, 15: 5}
LEGACY = {18: 0, 10: 1, 11: 2, 14: 1, 12: 1, 8: 2, 9: 1, 13: 1, 15: 1}
BROKER = ("10.0.1.1", 9092)


def sub(cls: Any, attr: str) -> Any:
    """The generated class of a struct field, found through the model (no per-module names)."""
    return next(f.struct for f in cls.FIELDS if f.attr == attr)


def subscription(topics: list[str], owned: dict[str, list[int]], version: int) -> bytes:
    tp = sub(g.ConsumerProtocolSubscription, "owned_partitions")
    msg = g.ConsumerProtocolSubscription(
        topics=topics,
        user_data=None,
        owned_partitions=[tp(topic=t, partitions=p) for t, p in owned.items()] if version else [],
    )
    return g.encode_version_prefixed(msg, version)


def assignment(parts: dict[str, list[int]], version: int) -> bytes:
    tp = sub(g.ConsumerProtocolAssignment, "assigned_partitions")
    msg = g.ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic=t, partitions=p) for t, p in parts.items()], user_data=None
    )
    return g.encode_version_prefixed(msg, version)


@dataclass
class Connection:
    """One client connection: numbers correlation ids and timestamps its frames."""

    client_addr: str
    client_port: int
    client_id: str
    versions: dict[int, int]
    clock: list[int]
    rows: list[dict[str, Any]] = field(default_factory=list)
    next_correlation: int = 1

    @property
    def connection_id(self) -> str:
        return f"{self.client_addr}:{self.client_port}-{BROKER[0]}:{BROKER[1]}"

    def _row(
        self,
        direction: str,
        frame: bytes | None,
        key: int,
        version: int,
        corr: int,
        ts: int,
        latency: int | None,
        error: str | None,
        length: int | None = None,
    ) -> None:
        self.rows.append(
            {
                "source_file": "synthetic",
                "connection_id": self.connection_id,
                "client_addr": self.client_addr,
                "client_port": self.client_port,
                "broker_addr": BROKER[0],
                "broker_port": BROKER[1],
                "direction": direction,
                "ts_first": ts,
                "ts_last": ts + 3,
                "frame": frame,
                "frame_length": length if length is not None else len(frame or b""),
                "api_key": key,
                "api_version": version,
                "correlation_id": corr,
                "client_id": self.client_id,
                "latency_us": latency,
                "error": error,
            }
        )

    def exchange(self, request: Any, response: Any) -> None:
        """Encodes a request and its response at this client's version for the api key."""
        key = request.API_KEY
        version = self.versions[key]
        corr = self.next_correlation
        self.next_correlation += 1
        header = g.RequestHeader(
            request_api_key=key,
            request_api_version=version,
            correlation_id=corr,
            client_id=self.client_id,
        )
        req = g.encode_request(header, request)[4:]
        resp = g.encode_response(g.ResponseHeader(correlation_id=corr), response, version)[4:]
        self.clock[0] += 997
        t = self.clock[0]
        latency = 300 + (corr * 37) % 900
        self._row("request", req, key, version, corr, t, None, None)
        self._row("response", resp, key, version, corr, t + latency, latency, None)


def consumer_group(
    group: str,
    members: int,
    topics: dict[str, int],
    heartbeats: int,
    commits: int,
    legacy: bool = False,
    clock: list[int] | None = None,
    first_ip: int = 2,
) -> list[Connection]:
    """One group's life: every member joins, the leader assigns round-robin, then heartbeats and
    offset commits, and everyone leaves. Returns the members' connections."""
    clock = clock if clock is not None else [1_760_000_000_000_000]
    versions = LEGACY if legacy else MODERN
    sub_version = 0 if legacy else 1
    conns = [
        Connection(f"10.0.0.{first_ip + i}", 50000 + i, f"{group}-client-{i}", versions, clock)
        for i in range(members)
    ]
    member_ids = [f"{c.client_id}-{i:04x}" for i, c in enumerate(conns)]
    names = sorted(topics)
    all_parts = [(t, p) for t in names for p in range(topics[t])]
    owned: list[dict[str, list[int]]] = [{} for _ in conns]
    for j, (t, p) in enumerate(all_parts):
        owned[j % members].setdefault(t, []).append(p)
    meta = subscription(names, {}, sub_version)

    jg_member = sub(g.JoinGroupResponse, "members")
    sg_assign = sub(g.SyncGroupRequest, "assignments")
    for i, c in enumerate(conns):
        api = sub(g.ApiVersionsResponse, "api_keys")
        c.exchange(
            (
                g.ApiVersionsRequest(
                    client_software_name="kwire-synth", client_software_version="1"
                )
                if c.versions[18] >= 3
                else g.ApiVersionsRequest()
            ),
            g.ApiVersionsResponse(
                api_keys=[api(api_key=k, min_version=0, max_version=9) for k in sorted(g.REGISTRY)]
            ),
        )
        fc_version = c.versions[10]
        if fc_version >= 4:
            coord = sub(g.FindCoordinatorResponse, "coordinators")
            c.exchange(
                g.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]),
                g.FindCoordinatorResponse(
                    coordinators=[coord(key=group, node_id=1, host=BROKER[0], port=BROKER[1])]
                ),
            )
        else:
            c.exchange(
                g.FindCoordinatorRequest(key=group),
                g.FindCoordinatorResponse(node_id=1, host=BROKER[0], port=BROKER[1]),
            )
    protocol = sub(g.JoinGroupRequest, "protocols")
    for i, c in enumerate(conns):
        leader = i == 0
        c.exchange(
            g.JoinGroupRequest(
                group_id=group,
                session_timeout_ms=45000,
                rebalance_timeout_ms=300000,
                member_id="",
                protocol_type="consumer",
                protocols=[protocol(name="range", metadata=meta)],
            ),
            g.JoinGroupResponse(
                generation_id=1,
                protocol_type="consumer" if c.versions[11] >= 7 else None,
                protocol_name="range",
                leader=member_ids[0],
                member_id=member_ids[i],
                members=(
                    [jg_member(member_id=m, metadata=meta) for m in member_ids] if leader else []
                ),
            ),
        )
    sync_v = conns[0].versions[14]
    for i, c in enumerate(conns):
        leader = i == 0
        c.exchange(
            g.SyncGroupRequest(
                group_id=group,
                generation_id=1,
                member_id=member_ids[i],
                protocol_type="consumer" if sync_v >= 5 else None,
                protocol_name="range" if sync_v >= 5 else None,
                assignments=(
                    [
                        sg_assign(member_id=m, assignment=assignment(owned[j], sub_version))
                        for j, m in enumerate(member_ids)
                    ]
                    if leader
                    else []
                ),
            ),
            g.SyncGroupResponse(
                protocol_type="consumer" if sync_v >= 5 else None,
                protocol_name="range" if sync_v >= 5 else None,
                assignment=assignment(owned[i], sub_version),
            ),
        )
    oc_topic = sub(g.OffsetCommitRequest, "topics")
    oc_part = sub(oc_topic, "partitions")
    ocr_topic = sub(g.OffsetCommitResponse, "topics")
    ocr_part = sub(ocr_topic, "partitions")
    for round_ in range(max(heartbeats, commits)):
        for i, c in enumerate(conns):
            if round_ < heartbeats:
                c.exchange(
                    g.HeartbeatRequest(group_id=group, generation_id=1, member_id=member_ids[i]),
                    g.HeartbeatResponse(),
                )
            if round_ < commits and owned[i]:
                c.exchange(
                    g.OffsetCommitRequest(
                        group_id=group,
                        generation_id_or_member_epoch=1,
                        member_id=member_ids[i],
                        topics=[
                            oc_topic(
                                name=t,
                                partitions=[
                                    oc_part(partition_index=p, committed_offset=100 * round_ + p)
                                    for p in ps
                                ],
                            )
                            for t, ps in owned[i].items()
                        ],
                    ),
                    g.OffsetCommitResponse(
                        topics=[
                            ocr_topic(name=t, partitions=[ocr_part(partition_index=p) for p in ps])
                            for t, ps in owned[i].items()
                        ]
                    ),
                )
    for i, c in enumerate(conns):
        if c.versions[13] >= 3:
            ident = sub(g.LeaveGroupRequest, "members")
            leave = g.LeaveGroupRequest(group_id=group, members=[ident(member_id=member_ids[i])])
        else:
            leave = g.LeaveGroupRequest(group_id=group, member_id=member_ids[i])
        c.exchange(leave, g.LeaveGroupResponse())
    return conns


def damaged_rows(conn: Connection) -> None:
    """Appends frames that must fail to decode, each in its own way, plus an incomplete one and
    one that only Kafka's own readers accept (bytes after the message: ok with a warning unless
    the decoding is strict)."""
    hb = g.HeartbeatRequest(group_id="damaged", generation_id=1, member_id="m")
    good = g.encode_request(
        g.RequestHeader(
            request_api_key=12, request_api_version=4, correlation_id=9001, client_id=conn.client_id
        ),
        hb,
    )[4:]
    t = conn.clock[0] + 5
    # Truncated inside the body.
    conn._row("request", good[:-4], 12, 4, 9001, t, None, None)
    # An api key no Kafka release has (1000), with a plausible v1 header.
    unknown = b"\x03\xe8\x00\x03\x00\x00\x23\x29" + b"\x00\x04" + conn.client_id[:4].encode()
    conn._row("request", unknown + b"\x00" * 6, 1000, 3, 9001, t + 1, None, None)
    # A version beyond the schema's range.
    bad_version = bytearray(good)
    bad_version[2:4] = (77).to_bytes(2, "big")
    conn._row("request", bytes(bad_version), 12, 77, 9001, t + 2, None, None)
    # Trailing garbage after a complete message (Kafka's readers ignore it).
    conn._row("request", good + b"\xde\xad", 12, 4, 9001, t + 3, None, None)
    # A frame the capture could not complete: no bytes, capture's error kept.
    conn._row(
        "request",
        None,
        12,
        4,
        9002,
        t + 4,
        None,
        "incomplete: missing segments (bytes 10-20 of 31 not captured)",
        length=31,
    )


def synthetic_rows(
    groups: int = 3,
    members: int = 3,
    heartbeats: int = 4,
    commits: int = 2,
    damaged: bool = True,
    seed: int = 7,
) -> list[dict[str, Any]]:
    """A small capture's worth of frames: several groups, modern and legacy clients."""
    rng = random.Random(seed)
    clock = [1_760_000_000_000_000]
    rows: list[dict[str, Any]] = []
    for n in range(groups):
        topics = {f"topic-{chr(97 + k)}": rng.randint(2, 4) for k in range(1 + n % 3)}
        conns = consumer_group(
            f"group-{n}",
            members,
            topics,
            heartbeats,
            commits,
            legacy=n % 2 == 1,
            clock=clock,
            first_ip=2 + 10 * n,
        )
        if damaged and n == 0:
            damaged_rows(conns[0])
        for c in conns:
            rows.extend(c.rows)
    rows.sort(key=lambda r: (r["ts_first"], r["direction"] == "response"))
    return rows


def frames_table(rows: list[dict[str, Any]] | None = None) -> pa.Table:
    """Rows (default: synthetic_rows()) as a frames table with the capture schema."""
    rows = synthetic_rows() if rows is None else rows
    return pa.Table.from_pylist(rows, schema=FRAMES_SCHEMA)


# The benchmark mix: api key -> (share of frames, versions). Every version of each api is
# represented (OffsetCommit from v2: v0 and v1 are gone from Kafka 4 and from kio's schemas).
MIX: dict[int, tuple[float, range]] = {
    12: (0.6, range(0, 5)),  # Heartbeat
    8: (0.2, range(2, 11)),  # OffsetCommit, 5 topics x 10 partitions
    11: (0.1, range(0, 10)),  # JoinGroup
    14: (0.1, range(0, 6)),  # SyncGroup
}
MIX_TOPICS = {f"topic-{k}": 10 for k in range(5)}


def _at(cls: Any, version: int, **values: Any) -> Any:
    """An instance with the given values, keeping only the fields the version has."""
    present = {f.attr for f in cls.FIELDS if version in f.versions}
    return cls(**{k: v for k, v in values.items() if k in present})


def _mix_message(key: int, version: int, k: int) -> Any:
    """The k-th distinct request of an api at a version, shaped like a Java consumer's."""
    group, member = f"bench-group-{k % 7}", f"bench-client-{k}-{k * 7919:08x}"
    instance = f"instance-{k}" if k % 2 else None
    sub_version = 1 if version % 2 else 0
    if key == 12:
        return _at(
            g.HeartbeatRequest, version, group_id=group, generation_id=3 + k % 5,
            member_id=member, group_instance_id=instance,
        )  # fmt: skip
    if key == 8:
        t_cls = sub(g.OffsetCommitRequest, "topics")
        p_cls = sub(t_cls, "partitions")
        topics = [
            t_cls(
                name=t,
                partitions=[
                    _at(
                        p_cls, version, partition_index=p,
                        committed_offset=1_000_000 + 17 * k + p, committed_leader_epoch=5,
                        committed_metadata="" if p % 3 else None,
                    )  # fmt: skip
                    for p in range(n)
                ],
            )
            for t, n in MIX_TOPICS.items()
        ]
        return _at(
            g.OffsetCommitRequest, version, group_id=group, generation_id_or_member_epoch=3,
            member_id=member, group_instance_id=instance, retention_time_ms=-1, topics=topics,
        )  # fmt: skip
    names = sorted(MIX_TOPICS)
    if key == 11:
        proto = sub(g.JoinGroupRequest, "protocols")
        meta = subscription(names[: 1 + k % 5], {names[0]: [0, 1]}, sub_version)
        return _at(
            g.JoinGroupRequest, version, group_id=group, session_timeout_ms=45000,
            rebalance_timeout_ms=300000, member_id="" if k % 3 == 0 else member,
            group_instance_id=instance, protocol_type="consumer",
            protocols=[proto(name="range", metadata=meta), proto(name="cooperative-sticky", metadata=meta)],
            reason="rebalance" if k % 2 else None,
        )  # fmt: skip
    assign = sub(g.SyncGroupRequest, "assignments")
    leader = k % 2 == 0
    parts = {t: list(range(k % 2, 10, 2)) for t in names[: 1 + k % 5]}
    return _at(
        g.SyncGroupRequest, version, group_id=group, generation_id=3, member_id=member,
        group_instance_id=instance, protocol_type="consumer", protocol_name="range",
        assignments=(
            [assign(member_id=f"{member}-{j}", assignment=assignment(parts, sub_version)) for j in range(3)]
            if leader
            else []
        ),
    )  # fmt: skip


def mix_pool(per_version: int = 8) -> dict[int, dict[bool, list[tuple[bytes, int, int]]]]:
    """api key -> flexible? -> distinct encoded request frames (frame, api key, version)."""
    pool: dict[int, dict[bool, list[tuple[bytes, int, int]]]] = {}
    for key, (_share, versions) in MIX.items():
        cls = g.REGISTRY[key].request
        by_flex: dict[bool, list[tuple[bytes, int, int]]] = {False: [], True: []}
        for v in versions:
            for k in range(per_version):
                header = g.RequestHeader(
                    request_api_key=key,
                    request_api_version=v,
                    correlation_id=1000 * k + v,
                    client_id=f"bench-client-{k}",
                )
                frame = g.encode_request(header, _mix_message(key, v, k))[4:]
                by_flex[v in cls.FLEXIBLE_VERSIONS].append((frame, key, v))
        pool[key] = by_flex
    return pool


def mixed_requests(n: int, seed: int = 1, batch: int = 65536) -> Iterator[pa.RecordBatch]:
    """The benchmark's mix of request frames: 60% Heartbeat, 20% OffsetCommit (5 topics x 10
    partitions), 10% JoinGroup, 10% SyncGroup; within each api half the frames are at its
    flexible versions and half at its non-flexible ones, every version represented. Frames are
    drawn from a pool of encoded frames (`mix_pool`), each with its own correlation id (the
    row number), so no two frames are alike, as in real traffic."""
    rng = random.Random(seed)
    corr = struct.Struct(">i")
    pool = mix_pool()
    keys = list(MIX)
    weights = [MIX[k][0] for k in keys]
    done = 0
    while done < n:
        m = min(batch, n - done)
        picks = [
            rng.choice(pool[key][rng.random() < 0.5]) for key in rng.choices(keys, weights, k=m)
        ]
        frames = [p[0][:4] + corr.pack(done + j) + p[0][8:] for j, p in enumerate(picks)]
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(frames, pa.binary()),
                pa.array([p[1] for p in picks], pa.int16()),
                pa.array([p[2] for p in picks], pa.int16()),
                pa.array(["request"] * m, pa.string()),
            ],
            names=["frame", "api_key", "api_version", "direction"],
        )
        done += m
