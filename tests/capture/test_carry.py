"""kwire.capture.carry: a capture cut into pieces, every flow saved at each cut and loaded into a
brand-new Tracker, gives exactly the rows and counters of one uninterrupted Tracker."""

from __future__ import annotations

import functools
import json
import pickle
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from kwire.capture import carry
from kwire.capture.engine import E_NO_RESPONSE, Key, Tracker
from kwire.capture.framing import E_IDLE, Framer
from kwire.capture.packets import TCP_ACK, TCP_FIN, TCP_SYN, Segment, Skip, decode
from kwire.capture.pcapfile import FileStats, iter_packets
from kwire.capture.summary import Summary
from kwire.capture.table import CONNECTION_ID, ERROR, FRAME, SOURCE_FILE
from kwire.capture.tls import KeyLog
from kwire.capture.tlsconn import Gate, _TlsHalf

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"
Feed = list[tuple[Segment, int]]


def _captures() -> list[dict[str, Any]]:
    out = []
    for meta_path in sorted(DATA.glob("*.json")) + sorted((DATA / "tls").glob("*.json")):
        meta = json.loads(meta_path.read_text())
        meta["path"] = meta_path.parent / meta["capture"]
        if meta.get("keylog"):
            meta["keylog_path"] = meta_path.parent / meta["keylog"]
        out.append(meta)
    return out


CAPTURES = _captures()
IDS = [m["capture"] for m in CAPTURES]


@functools.lru_cache(maxsize=None)
def _segments(path: Path) -> Feed:
    """The capture's TCP segments, as kwire.capture.read_frames hands them to its Tracker."""
    feed = []
    with open(path, "rb") as f:
        for packet in iter_packets(f, FileStats(str(path))):
            try:
                feed.append((decode(packet.linktype, packet.data, packet.orig_len), packet.ts_us))
            except Skip:
                pass
    return feed


@functools.lru_cache(maxsize=None)
def _keylog(path: Path | None) -> KeyLog | None:
    return KeyLog.load([str(path)]) if path is not None else None


def _resegmented(feed: Feed, size: int, seed: int, lose: float = 0.005) -> Feed:
    """Every payload in pieces of `size` bytes (frames and TLS records over many segments), the
    pieces of some segments in reverse order (held out of order) and a few pieces lost."""
    rng = random.Random(seed)
    out: Feed = []
    for seg, ts in feed:
        payload = seg.payload
        if len(payload) <= size:
            out.append((seg, ts))
            continue
        pieces = []
        for start in range(0, len(payload), size):
            last = start + size >= len(payload)
            flags = seg.flags if last else seg.flags & ~TCP_FIN
            seq = (seg.seq + start) & 0xFFFFFFFF
            piece = payload[start : start + size]
            pieces.append(
                Segment(seg.src, seg.sport, seg.dst, seg.dport, seq, seg.ack, flags, piece, 0)
            )
        if rng.random() < 0.1:
            pieces.reverse()
        out.extend((p, ts) for p in pieces if rng.random() >= lose)
    return out


class _Sink:
    """A piece's rows; closed once its flows are saved (a restored connection must not emit
    to the tracker it came from)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.open = True

    def __call__(self, row: list[Any]) -> None:
        assert self.open, "a row went to a tracker whose flows were saved"
        self.rows.append(tuple(row))


def _tracker(meta: dict[str, Any], sink: _Sink, summary: Summary) -> Tracker:
    return Tracker(
        meta["broker_ports"], True, sink, summary, keylog=_keylog(meta.get("keylog_path"))
    )


def _run(meta: dict[str, Any], feed: Feed, cuts: list[int]) -> tuple[list[Any], dict[str, Any]]:
    """Rows and summed counters of the feed cut at `cuts`, every flow carried over each cut."""
    rows: list[tuple[Any, ...]] = []
    total = Summary()
    blobs: dict[Key, bytes] = {}
    secrets = _secrets(meta)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(feed))), len(feed)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        sink, summary = _Sink(), Summary()
        tracker = _tracker(meta, sink, summary)
        tracker.src = str(meta["path"])
        for key, saved in blobs.items():
            carry.load_flow(tracker, key, saved)
        for seg, ts in feed[a:b]:
            tracker.segment(seg, ts)
        if b == len(feed):
            tracker.finish()
        blobs = {}
        for key in carry.flow_keys(tracker):
            blob = carry.save_flow(tracker, key)
            assert blob is not None
            assert not any(s in blob for s in secrets)
            blobs[key] = blob
        sink.open = False
        rows.extend(sink.rows)
        total.merge(Summary.from_state(summary.state()))
    return rows, total.state()


def _secrets(meta: dict[str, Any]) -> list[bytes]:
    keylog = _keylog(meta.get("keylog_path"))
    if keylog is None:
        return []
    return [s for labels in keylog._by_random.values() for s in labels.values()]


def _by_connection(rows: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        out.setdefault(row[CONNECTION_ID], []).append(row)
    return out


def _mid_frame(tracker: Tracker, seg: Segment) -> bool:
    """Whether the segment's connection is inside a Kafka frame or a TLS record."""
    a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
    key = (*a, *b) if a <= b else (*b, *a)
    conn = tracker.conns.get(key)
    if conn is None:
        return False
    for side, half in enumerate(conn.halves):
        sink = half.framer
        framers: list[Any] = [sink.framer] if isinstance(sink, Gate) else [sink]
        if isinstance(sink, _TlsHalf):
            if sink.tls.session._sides[0 if side == sink.tls.client_side else 1].buf:
                return True
            framers = [sink.tls.framers[side]]
        if any(isinstance(f, Framer) and (f.length >= 0 or f.prefix) for f in framers):
            return True
    return False


def _check(meta: dict[str, Any], feed: Feed, every: int, seed: int) -> int:
    """The uninterrupted run against the feed cut every `every` segments, at random points and
    inside frames; returns how many cuts fell inside a frame or record."""
    sink, summary = _Sink(), Summary()
    tracker = _tracker(meta, sink, summary)
    tracker.src = str(meta["path"])
    inside = []
    for i, (seg, ts) in enumerate(feed):
        tracker.segment(seg, ts)
        if _mid_frame(tracker, seg):
            inside.append(i + 1)
    tracker.finish()
    assert sink.rows
    rng = random.Random(seed)
    cuts = list(range(every, len(feed), every))
    cuts += rng.sample(range(1, len(feed)), min(15, len(feed) - 1))
    cuts += rng.sample(inside, min(15, len(inside)))
    rows, state = _run(meta, feed, cuts)
    assert _by_connection(rows) == _by_connection(sink.rows)
    assert sorted(map(repr, rows)) == sorted(map(repr, sink.rows))
    assert state == summary.state()
    return len(inside)


@pytest.mark.parametrize("meta", CAPTURES, ids=IDS)
def test_every_capture_cut_anywhere_gives_the_uninterrupted_rows(meta: dict[str, Any]) -> None:
    feed = _segments(meta["path"])
    _check(meta, feed, 50, seed=len(feed))


@pytest.mark.parametrize(
    "name", ["mock_records_librdkafka.pcapng", "tls12_group.pcap", "tls13_keyupdate.pcap"]
)
def test_frames_over_many_segments_out_of_order_and_lost(name: str) -> None:
    meta = CAPTURES[IDS.index(name)]
    feed = _resegmented(_segments(meta["path"]), 16, seed=7)
    assert _check(meta, feed, 97, seed=3) > 100


def test_a_cut_after_every_segment() -> None:
    """TLS 1.3 with KeyUpdates, records over several segments, some out of order."""
    meta = CAPTURES[IDS.index("tls13_keyupdate.pcap")]
    feed = _resegmented(_segments(meta["path"]), 200, seed=1, lose=0)
    _check(meta, feed, 1, seed=1)
    tracker = _tracker(meta, _Sink(), Summary())
    updated = 0
    for seg, ts in feed:
        tracker.segment(seg, ts)
        sessions = [c.tls.session for c in tracker.conns.values() if c.tls is not None]
        updated += any(getattr(st.keys, "updates", 0) for s in sessions for st in s._sides)
    assert updated > 10


def test_the_feed_is_what_read_frames_reads() -> None:
    from kwire import capture

    meta = CAPTURES[IDS.index("tls13_records.pcap")]
    sink = _Sink()
    tracker = _tracker(meta, sink, Summary())
    tracker.src = str(meta["path"])
    for seg, ts in _segments(meta["path"]):
        tracker.segment(seg, ts)
    tracker.finish()
    table = capture.frames_table(
        meta["path"], meta["broker_ports"], keylog=_keylog(meta["keylog_path"])
    )
    assert table.column("frame").to_pylist() == [r[FRAME] for r in sink.rows]
    assert table.column("error").to_pylist() == [r[ERROR] for r in sink.rows]
    assert {r[SOURCE_FILE] for r in sink.rows} == {str(meta["path"])}


# -- one hand-made connection -------------------------------------------------------------------

CLIENT, BROKER = ("10.0.0.1", 40000), ("10.0.0.2", 9092)
KEY = (*CLIENT, *BROKER)
PSH_ACK = 0x18


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    return _frame(struct.pack(">hhih", api_key, version, corr, 1) + b"c" + body)


class _Conn:
    """Segments of one connection, with sequence numbers kept."""

    def __init__(self) -> None:
        self.seq = [1000, 5000]
        self.ts = 1_700_000_000_000_000

    def handshake(self) -> list[tuple[Segment, int]]:
        return [
            self._seg(0, TCP_SYN, b"", syn=True),
            self._seg(1, TCP_SYN | TCP_ACK, b"", syn=True),
            self._seg(0, TCP_ACK, b""),
        ]

    def send(self, side: int, payload: bytes) -> tuple[Segment, int]:
        return self._seg(side, PSH_ACK, payload)

    def _seg(self, side: int, flags: int, payload: bytes, syn: bool = False) -> tuple[Segment, int]:
        (src, sport), (dst, dport) = (CLIENT, BROKER) if side == 0 else (BROKER, CLIENT)
        self.ts += 100
        seg = Segment(src, sport, dst, dport, self.seq[side], self.seq[1 - side], flags, payload, 0)
        self.seq[side] = (self.seq[side] + len(payload) + (1 if syn else 0)) & 0xFFFFFFFF
        return seg, self.ts


def _idle_tracker(**options: Any) -> tuple[Tracker, _Sink, Summary]:
    sink, summary = _Sink(), Summary()
    tracker = Tracker([9092], True, sink, summary, **options)
    conn = _Conn()
    metadata = _request(3, 1, 7, b"\xff\xff\xff\xff")
    second = _request(3, 1, 8, b"\xff\xff\xff\xff" + bytes(40))
    feed = [*conn.handshake(), conn.send(0, metadata), conn.send(0, second[:6])]
    for seg, ts in feed:
        tracker.segment(seg, ts)
    assert not sink.rows and carry.flow_keys(tracker) == {KEY}
    return tracker, sink, summary


def test_end_flow_reports_what_is_unfinished_as_idle() -> None:
    tracker, sink, summary = _idle_tracker()
    carry.end_flow(tracker, KEY, "idle")
    errors = [r[ERROR] for r in sink.rows]
    assert errors == [
        f"{E_IDLE} (2 of {len(_request(3, 1, 8, bytes(44))) - 4} bytes seen)",
        f"{E_NO_RESPONSE} (connection idle)",
    ]
    assert summary.errors == {E_IDLE: 1, E_NO_RESPONSE: 1}
    assert summary.connections == 1
    assert carry.flow_keys(tracker) == set()
    assert carry.save_flow(tracker, KEY) is None
    tracker.finish()
    assert len(sink.rows) == 2
    with pytest.raises(ValueError, match="unknown reason"):
        carry.end_flow(tracker, KEY, "bored")


def test_drop_flow_emits_nothing() -> None:
    tracker, sink, summary = _idle_tracker()
    before = summary.state()
    carry.drop_flow(tracker, KEY)
    tracker.finish()
    assert sink.rows == [] and summary.state() == before
    assert carry.flow_keys(tracker) == set()


def test_closed_generation_and_quiet_cross_a_cut() -> None:
    conn = _Conn()
    request = _request(3, 1, 7, b"\xff\xff\xff\xff")
    response = _frame(struct.pack(">i", 7) + bytes(8))
    first = [*conn.handshake(), conn.send(0, request), conn.send(1, response)]
    fins = [conn._seg(0, TCP_FIN | TCP_ACK, b"", syn=True), conn._seg(1, TCP_FIN | TCP_ACK, b"")]
    late = [(first[-1][0], first[-1][1] + 10_000)]  # the response again, after the close
    again = _Conn()
    again.seq = [77_000, 88_000]  # the same ports, new sequence numbers: a new connection
    reuse = [*again.handshake(), again.send(0, request), again.send(1, response)]
    feed = first + fins + late + reuse
    sink, summary = _Sink(), Summary()
    whole = Tracker([9092], True, sink, summary)
    for seg, ts in feed:
        whole.segment(seg, ts)
    whole.finish()
    assert summary.late_packets == 1
    assert [r[CONNECTION_ID] for r in sink.rows][-1].endswith("#2")
    for cut in (2, len(first + fins), len(first + fins + late) + 1):
        rows: list[Any] = []
        total = Summary()
        a_sink, a_summary = _Sink(), Summary()
        a = Tracker([9092], True, a_sink, a_summary)
        for seg, ts in feed[:cut]:
            a.segment(seg, ts)
        blob = carry.save_flow(a, KEY)
        assert blob is not None
        b_sink, b_summary = _Sink(), Summary()
        b = Tracker([9092], True, b_sink, b_summary)
        carry.load_flow(b, KEY, blob)
        assert (KEY in b.quiet, KEY in b.closed) == (KEY in a.quiet, KEY in a.closed)
        assert b.generation == a.generation
        for seg, ts in feed[cut:]:
            b.segment(seg, ts)
        b.finish()
        rows = a_sink.rows + b_sink.rows
        total.merge(a_summary)
        total.merge(b_summary)
        assert rows == sink.rows and total.state() == summary.state()


def test_sasl_bytes_do_not_reach_a_blob() -> None:
    conn = _Conn()
    secret = b"\0user\0hunter2-secret"
    auth = _request(36, 1, 9, struct.pack(">i", len(secret)) + secret)
    answer = _frame(struct.pack(">ihhi", 9, 0, -1, 0) + struct.pack(">q", 0))
    feed = [*conn.handshake(), conn.send(0, auth), conn.send(1, answer)]
    for keep in (False, True):
        meta = {"broker_ports": [9092], "path": "x"}
        sink, summary = _Sink(), Summary()
        whole = Tracker([9092], True, sink, summary, keep_auth_bytes=keep)
        for seg, ts in feed:
            whole.segment(seg, ts)
        whole.finish()
        first, second = _Sink(), _Sink()
        a = Tracker([9092], True, first, Summary(), keep_auth_bytes=keep)
        for seg, ts in feed[:4]:
            a.segment(seg, ts)
        blob = carry.save_flow(a, KEY)
        assert blob is not None and (b"hunter2" in blob) == keep
        b = Tracker([9092], True, second, Summary(), keep_auth_bytes=keep)
        carry.load_flow(b, KEY, blob)
        for seg, ts in feed[4:]:
            b.segment(seg, ts)
        b.finish()
        assert first.rows + second.rows == sink.rows, meta
        assert [r[FRAME] is None for r in sink.rows] == [not keep, not keep]


# -- blobs that cannot be loaded ----------------------------------------------------------------


def _blob() -> bytes:
    tracker, _, _ = _idle_tracker()
    blob = carry.save_flow(tracker, KEY)
    assert blob is not None
    return blob


def _fresh(**options: Any) -> Tracker:
    return Tracker(options.pop("ports", [9092]), True, _Sink(), Summary(), **options)


def _with_payload(payload: bytes, version: int = carry.VERSION) -> bytes:
    return struct.pack(">8sHI", carry.MAGIC, version, zlib.crc32(payload)) + payload


def test_a_blob_round_trips() -> None:
    tracker = _fresh()
    carry.load_flow(tracker, KEY, _blob())
    assert carry.flow_keys(tracker) == {KEY}
    with pytest.raises(ValueError, match="already holds"):
        carry.load_flow(tracker, KEY, _blob())


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda b: b"", "not a kwire flow blob"),
        (lambda b: b"PK\x03\x04" + b[4:], "not a kwire flow blob"),
        (lambda b: b[: len(b) // 2], "checksum does not match"),
        (lambda b: b[:-20] + bytes(1) + b[-19:], "checksum does not match"),
        (lambda b: _with_payload(b[14:], version=2), "version 2; this kwire reads version 1"),
        (lambda b: _with_payload(b[14:-30]), "corrupt flow blob: cannot be read"),
        (lambda b: _with_payload(pickle.dumps({"key": KEY, "conn": Summary()})), "summary"),
        (lambda b: _with_payload(pickle.dumps([1, 2])), "not a flow's state"),
        (lambda b: "text", "bytes, not str"),
    ],
)
def test_a_bad_blob_is_a_clear_error(damage: Any, message: str) -> None:
    with pytest.raises(carry.CarryError, match=message):
        carry.load_flow(_fresh(), KEY, damage(_blob()))


def test_a_blob_loads_only_as_its_flow_and_under_its_settings() -> None:
    with pytest.raises(carry.CarryError, match="was loaded for"):
        carry.load_flow(_fresh(), ("10.0.0.9", 1, "10.0.0.2", 9092), _blob())
    with pytest.raises(carry.CarryError, match=r"broker ports \[9092\].*this one has \[9093\]"):
        carry.load_flow(_fresh(ports=[9093]), KEY, _blob())
    with pytest.raises(carry.CarryError, match="keep_auth_bytes"):
        carry.load_flow(_fresh(keep_auth_bytes=True), KEY, _blob())


def test_a_tls_flow_needs_its_secrets_in_the_key_log() -> None:
    meta = CAPTURES[IDS.index("tls13_records.pcap")]
    tracker = _tracker(meta, _Sink(), Summary())
    for seg, ts in _segments(meta["path"])[:150]:
        tracker.segment(seg, ts)
    decrypting = [
        k for k, c in tracker.conns.items() if c.tls is not None and c.tls.session.decrypted
    ]
    assert decrypting
    blob = carry.save_flow(tracker, decrypting[0])
    assert blob is not None
    with pytest.raises(carry.CarryError, match="no secrets for client random"):
        carry.load_flow(_fresh(ports=meta["broker_ports"]), decrypting[0], blob)
    other = KeyLog.load([str(DATA / "tls" / "tls12_group.keys")])
    with pytest.raises(carry.CarryError, match="TLS connection"):
        carry.load_flow(_fresh(ports=meta["broker_ports"], keylog=other), decrypting[0], blob)
