"""Connections: direction, request/response pairing and row emission.

A connection's client side is known from the broker ports, or inferred from its frames (a request
header on one side whose correlation id starts a later frame on the other side). Until then its
frames wait. Requests wait for their responses (paired by correlation id, latest first) and are
emitted together with them; whatever is still waiting when a connection ends is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import kafka
from .framing import E_CAPTURE_END, E_CLOSED, E_IDLE, Framer, RawFrame
from .packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, Segment
from .stream import HalfStream
from .summary import Summary
from .tls import KeyLog
from .tlsconn import Gate, Tls
from .table import (
    API_KEY,
    FRAME,
    API_VERSION,
    CLIENT_ID,
    CORRELATION_ID,
    DIRECTION,
    ERROR,
    FRAME_LENGTH,
    LATENCY_US,
    TS_FIRST,
    TS_LAST,
    Row,
)

E_UNPAIRED = "unpaired response"
E_NO_RESPONSE = "request without response"
E_BAD_HEADER = "unparseable request header"

# Frames held while a connection's direction is unknown, before guessing or giving up.
MAX_UNDECIDED_FRAMES = 1000
MAX_UNDECIDED_BYTES = 64 * 1024 * 1024
# Requests held per connection waiting for responses; past this the oldest are reported.
MAX_OUTSTANDING = 10000
# acks=0 Produce requests remembered in case a broker answers them anyway.
MAX_ACKS0 = 1024
# Closed connections remembered so that late packets do not open a new one.
MAX_CLOSED = 100_000
# Connections held before they carry a byte (a handshake seen, no payload yet; or ignored ones).
# A Kafka client sends ApiVersions right after connecting, so only a flood of SYNs (or of other
# protocols' connections) reaches this; past it the oldest are dropped: their state is a few kB
# each, and a dropped one that does carry data later is read from there as one whose start was
# not captured.
MAX_QUIET = 20_000

Key = tuple[str, int, str, int]

# How a request still waiting for its response when its connection ends is reported, by the
# framers' reason for ending (E_CLOSED otherwise).
_WHY = {E_CAPTURE_END: "capture ended", E_IDLE: "connection idle"}


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


class Connection:
    def __init__(self, tracker: "Tracker", ends: tuple[tuple[str, int], tuple[str, int]], gen: int):
        self.tracker = tracker
        self.ends = ends
        self.gen = gen
        self.halves = (HalfStream(), HalfStream())
        self.client: int | None = None
        self.ignored: str | None = None
        self.syn_side: int | None = None
        self.fin = [False, False]
        self.closed = False
        self.emitted = False
        self.how = ""
        self.ident = ""
        self.prefix: list[Any] = []
        # While undecided: frames in arrival order, and plausible request ids seen per side.
        self.waiting: list[tuple[int, RawFrame, str]] = []
        self.waiting_bytes = 0
        self.request_ids: tuple[set[int], set[int]] = (set(), set())
        self.sides_framed = [0, 0]
        self.sides_plausible = [0, 0]
        self.outstanding: dict[int, list[Row]] = {}
        self.acks0: dict[int, Row] = {}
        self.n_outstanding = 0
        # Set once either half starts with TLS (kwire.capture.tlsconn).
        self.tls: Tls | None = None
        ports = tracker.broker_ports
        a, b = ends[0][1] in ports, ends[1][1] in ports
        if a != b:
            self._decide(1 if a else 0, "ports")
        elif not tracker.infer:
            self.ignored = "no broker port (inference off)"

    # -- direction ----------------------------------------------------------------------

    def _decide(self, client: int, how: str) -> None:
        self.client = client
        self.how = how
        (caddr, cport), (baddr, bport) = self.ends[client], self.ends[1 - client]
        ident = f"{_endpoint(caddr, cport)}->{_endpoint(baddr, bport)}"
        if self.gen > 1:
            ident += f"#{self.gen}"
        self.ident = ident
        self.prefix = [ident, caddr, cport, baddr, bport]
        waiting, self.waiting = self.waiting, []
        self.waiting_bytes = 0
        for side, frame, src in waiting:
            self._process(side, frame, src)

    def _guess(self) -> bool:
        """Last resort: one side sent only plausible request headers."""
        candidates = [
            s
            for s in (0, 1)
            if self.sides_framed[s] and self.sides_plausible[s] == self.sides_framed[s]
        ]
        if len(candidates) == 2 and self.syn_side is not None:
            candidates = [self.syn_side]
        if len(candidates) == 1:
            self._decide(candidates[0], "guess")
            return True
        return False

    def _give_up(self, reason: str) -> None:
        self.ignored = reason
        self.tracker.summary.connections_ignored[reason] += 1
        self.waiting = []
        self.waiting_bytes = 0

    def accept(self, side: int, length: int, head: bytes) -> bool:
        """Does a segment with this length prefix and head start a frame? (resynchronising)"""
        if self.client is None:
            if kafka.plausible_request(head) is not None and length >= 8:
                return True
            corr = kafka.response_correlation_id(head)
            return corr is not None and corr in self.request_ids[1 - side]
        if side == self.client:
            return length >= 8 and kafka.plausible_request(head) is not None
        corr = kafka.response_correlation_id(head)
        return corr is not None and (corr in self.outstanding or corr in self.acks0)

    def on_frame(self, side: int, frame: RawFrame, src: str) -> None:
        if self.ignored:
            return
        if self.client is not None:
            self._process(side, frame, src)
            return
        self.waiting.append((side, frame, src))
        self.waiting_bytes += frame.length or 0
        if frame.length is None:
            return
        self.sides_framed[side] += 1
        head = frame.head
        # A frame that starts with the correlation id of a request from the other side is its
        # response: that side is the client.
        corr = kafka.response_correlation_id(head)
        if corr is not None and corr in self.request_ids[1 - side]:
            self._decide(1 - side, "frames")
            return
        header = kafka.plausible_request(head)
        if header is not None:
            self.sides_plausible[side] += 1
            self.request_ids[side].add(header.correlation_id)
        if len(self.waiting) > MAX_UNDECIDED_FRAMES or self.waiting_bytes > MAX_UNDECIDED_BYTES:
            if not self._guess():
                self._give_up("direction unknown (not Kafka?)")

    # -- pairing and rows -----------------------------------------------------------------

    def _emit(self, row: Row) -> None:
        if not self.emitted:
            # Counted once it has a row: connections without a frame are not Kafka's yet.
            self.emitted = True
            self.tracker.summary.connections += 1
            self.tracker.summary.direction_decided_by[self.how] += 1
        self.tracker.emit(row)

    def _row(self, src: str, direction: str, frame: RawFrame) -> Row:
        return [
            src,
            *self.prefix,
            direction,
            frame.ts_first,
            frame.ts_last,
            frame.data,
            frame.length,
            None,
            None,
            None,
            None,
            None,
            list(frame.errors),
        ]

    def _process(self, side: int, frame: RawFrame, src: str) -> None:
        emit = self._emit
        if side == self.client:
            row = self._row(src, "request", frame)
            if frame.length is None:
                emit(row)
                return
            header = kafka.parse_request_header(frame.head)
            if header is None:
                if frame.data is not None:
                    row[ERROR].append(
                        (
                            E_BAD_HEADER,
                            f"{E_BAD_HEADER}: cannot read api key, "
                            "version, correlation id and client id",
                        )
                    )
                emit(row)
                return
            row[API_KEY] = header.api_key
            row[API_VERSION] = header.api_version
            row[CORRELATION_ID] = header.correlation_id
            row[CLIENT_ID] = header.client_id
            if header.api_key == kafka.PRODUCE and kafka.produce_acks(frame.head, header) == 0:
                # acks=0: no response is expected, so none is waited for. Some brokers (Tansu)
                # answer anyway; remember enough to label such an answer.
                self.acks0[header.correlation_id] = row
                if len(self.acks0) > MAX_ACKS0:
                    del self.acks0[next(iter(self.acks0))]
                emit(row)
                return
            self.outstanding.setdefault(header.correlation_id, []).append(row)
            self.n_outstanding += 1
            if self.n_outstanding > MAX_OUTSTANDING:
                self._drop_oldest()
            return
        row = self._row(src, "response", frame)
        if frame.length is None:
            emit(row)
            return
        corr = kafka.response_correlation_id(frame.head)
        row[CORRELATION_ID] = corr
        waiting = self.outstanding.get(corr) if corr is not None else None
        if not waiting and corr in self.acks0:
            self._paired(row, self.acks0.pop(corr), frame)
            emit(row)
            return
        if not waiting:
            row[ERROR].append(
                (
                    E_UNPAIRED,
                    f"{E_UNPAIRED}: no outstanding request with "
                    f"correlation id {corr} on this connection",
                )
            )
            emit(row)
            return
        request = waiting.pop()
        if not waiting and corr is not None:
            del self.outstanding[corr]
        self.n_outstanding -= 1
        self._paired(row, request, frame)
        emit(request)
        emit(row)

    @staticmethod
    def _paired(row: Row, request: Row, frame: RawFrame) -> None:
        row[API_KEY] = request[API_KEY]
        row[API_VERSION] = request[API_VERSION]
        row[CLIENT_ID] = request[CLIENT_ID]
        # From the request's last captured byte to the response's first.
        row[LATENCY_US] = frame.ts_first - request[TS_LAST]

    def _drop_oldest(self) -> None:
        corr, rows = min(self.outstanding.items(), key=lambda kv: kv[1][0][TS_FIRST])
        row = rows.pop(0)
        if not rows:
            del self.outstanding[corr]
        self.n_outstanding -= 1
        row[ERROR].append(
            (
                E_NO_RESPONSE,
                f"{E_NO_RESPONSE} (gave up waiting: more than "
                f"{MAX_OUTSTANDING} requests outstanding)",
            )
        )
        self._emit(row)

    # -- packets --------------------------------------------------------------------------

    # The framers' callbacks, one per side: bound methods rather than lambdas so that a
    # connection pickles (kwire.capture.carry); a call costs what the lambda's did.
    def _frame0(self, frame: RawFrame) -> None:
        self.on_frame(0, frame, self.tracker.src)

    def _frame1(self, frame: RawFrame) -> None:
        self.on_frame(1, frame, self.tracker.src)

    def _accept0(self, length: int, head: bytes) -> bool:
        return self.accept(0, length, head)

    def _accept1(self, length: int, head: bytes) -> bool:
        return self.accept(1, length, head)

    def _framer(self, side: int, midstream: bool) -> Framer:
        half = self.halves[side]
        if side:
            framer = Framer(self._frame1, self._accept1, midstream)
        else:
            framer = Framer(self._frame0, self._accept0, midstream)
        # The gate hands the half to the framer after its first bytes, or to TLS.
        half.framer = Gate(self, side, framer, midstream)
        return framer

    def start_tls(self, client_side: int | None) -> Tls:
        """Either half began with TLS (`client_side` sent the ClientHello; None when the
        handshake was not captured)."""
        if client_side is None:
            client_side = self.client if self.client is not None else 0
        self.tls = Tls(client_side, self.tracker.keylog)
        return self.tls

    def segment(self, side: int, seg: Segment, ts: int) -> None:
        flags = seg.flags
        half = self.halves[side]
        if flags & TCP_SYN:
            if not flags & TCP_ACK:
                self.syn_side = side
            if half.framer is None:
                half.syn(seg.seq)
                self._framer(side, midstream=False)
        if flags & TCP_ACK:
            self.halves[1 - side].acked(seg.ack, ts)
        if seg.payload or seg.missing or flags & TCP_FIN:
            if half.framer is None:
                self._framer(side, midstream=True)
            seq = (seg.seq + 1) & 0xFFFFFFFF if flags & TCP_SYN else seg.seq
            half.add(seq, seg.payload, seg.missing, ts, bool(flags & TCP_FIN))
        if flags & TCP_FIN:
            self.fin[side] = True
        if flags & TCP_RST or (self.fin[0] and self.fin[1]):
            self.close(E_CLOSED)

    def close(self, reason: str) -> None:
        """The connection ended (or the capture did): report everything unfinished."""
        if self.closed:
            return
        self.closed = True
        summary = self.tracker.summary
        for half in self.halves:
            half.flush()
            if half.framer is not None:
                half.framer.flush(reason)
            summary.retransmitted_bytes += half.retransmitted
            summary.missing_bytes += half.gap_bytes
            summary.snaplen_bytes += half.snaplen_bytes
            summary.bytes_before_capture_start += half.before_start
        tls = self.tls
        if tls is not None:
            for side, frame in tls.close():
                self.on_frame(side, frame, self.tracker.src)
            summary.tls[tls.outcome()] += 1
            if self.client is None and not self.ignored and self.waiting and not self._guess():
                self._give_up(
                    "TLS not decrypted, not on a broker port "
                    "(give its port with -p to keep it as rows)"
                )
        if self.client is None and not self.ignored and self.waiting:
            if not self._guess():
                self._give_up("direction unknown (not Kafka?)")
        why = _WHY.get(reason, "connection closed")
        left = [row for rows in self.outstanding.values() for row in rows]
        left.sort(key=lambda r: r[TS_FIRST])
        self.outstanding = {}
        for row in left:
            row[ERROR].append((E_NO_RESPONSE, f"{E_NO_RESPONSE} ({why})"))
            self._emit(row)
        self.halves = (HalfStream(), HalfStream())

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its tracker (kwire.capture.carry gives it the one it joins)."""
        state = self.__dict__.copy()
        state["tracker"] = None
        return state


# SaslHandshake (17) and SaslAuthenticate (36): their frames never leave capture with payloads
# unless the caller asks for them.
AUTH_API_KEYS = frozenset({17, 36})
REDACTED = "redacted: SASL frame bytes dropped (credentials); --keep-auth-bytes keeps them"


class Tracker:
    """Routes TCP segments to connections and collects the rows they produce."""

    def __init__(
        self,
        broker_ports: Iterable[int],
        infer: bool,
        sink: Callable[[Row], None],
        summary: Summary,
        keep_auth_bytes: bool = False,
        keylog: KeyLog | None = None,
    ) -> None:
        self.keep_auth_bytes = keep_auth_bytes
        # TLS secrets by client random (kwire.capture.tls); None: TLS stays encrypted.
        self.keylog = keylog
        self.broker_ports = frozenset(broker_ports)
        self.infer = infer
        self.sink = sink
        self.summary = summary
        self.conns: dict[Key, Connection] = {}
        self.closed: dict[Key, int] = {}
        self.generation: dict[Key, int] = {}
        # Connections that have carried no payload yet, oldest first (see MAX_QUIET).
        self.quiet: dict[Key, None] = {}
        # The file being read: a frame's source_file is the file its last byte came from.
        self.src = ""

    def emit(self, row: Row) -> None:
        s = self.summary
        direction = row[DIRECTION]
        if row[API_KEY] in AUTH_API_KEYS and row[FRAME] is not None and not self.keep_auth_bytes:
            # SASL payloads carry credentials: keep the row (nothing lost), drop the bytes.
            row[FRAME] = None
            reason = ("redacted", REDACTED)
            row[ERROR] = [*(row[ERROR] or []), reason]
        s.frames[direction] += 1
        if row[FRAME_LENGTH] is not None:
            s.frame_bytes[direction] += row[FRAME_LENGTH]
        if row[API_KEY] is not None:
            s.api[(direction, row[API_KEY], row[API_VERSION])] += 1
        errors = row[ERROR]
        if errors:
            for category, _ in errors:
                s.errors[category] += 1
            row[ERROR] = "; ".join(msg for _, msg in errors)
        else:
            row[ERROR] = None
        self.sink(row)

    def segment(self, seg: Segment, ts: int) -> None:
        a, b = (seg.src, seg.sport), (seg.dst, seg.dport)
        if a <= b:
            key: Key = (a[0], a[1], b[0], b[1])
            side = 0
        else:
            key = (b[0], b[1], a[0], a[1])
            side = 1
        conn = self.conns.get(key)
        flags = seg.flags
        new_syn = flags & TCP_SYN and not flags & TCP_ACK
        if conn is not None and new_syn:
            half = conn.halves[side]
            if half.base is not None and half.base != (seg.seq + 1) & 0xFFFFFFFF:
                # A fresh SYN with a new sequence number: the ports were reused.
                self._retire(key, conn, E_CLOSED)
                conn = None
        if conn is None:
            if key in self.closed and not new_syn:
                if seg.payload or seg.missing:
                    self.summary.late_packets += 1
                return
            if not new_syn and not seg.payload and not seg.missing:
                return  # a bare ACK/FIN/RST of a connection we never saw carrying data
            gen = self.generation.get(key, 0) + 1
            self.generation[key] = gen
            ends = ((key[0], key[1]), (key[2], key[3]))
            conn = Connection(self, ends, gen)
            self.closed.pop(key, None)
            self.conns[key] = conn
            if conn.ignored:
                self.summary.connections_ignored[conn.ignored] += 1
            self.quiet[key] = None
            if len(self.quiet) > MAX_QUIET:
                self._drop_quiet()
        if conn.ignored:
            if flags & TCP_RST or (flags & TCP_FIN and conn.fin[1 - side]):
                self._retire(key, conn, E_CLOSED)
            elif flags & TCP_FIN:
                conn.fin[side] = True
            return
        if seg.payload or seg.missing:
            self.quiet.pop(key, None)
        conn.segment(side, seg, ts)
        if conn.closed:
            self._retire(key, conn, E_CLOSED)

    def _retire(self, key: Key, conn: Connection, reason: str) -> None:
        conn.close(reason)
        del self.conns[key]
        self._forget(key, conn)
        self.closed[key] = 1
        if len(self.closed) > MAX_CLOSED:
            del self.closed[next(iter(self.closed))]

    def _forget(self, key: Key, conn: Connection) -> None:
        """A connection that leaves: out of the quiet list, and, if it never had a row, its
        generation number given back (no row names it), so that a flood of connections to
        ever new ports does not grow the generations without bound."""
        self.quiet.pop(key, None)
        if not conn.emitted and self.generation.get(key) == conn.gen:
            if conn.gen > 1:
                self.generation[key] = conn.gen - 1
            else:
                del self.generation[key]

    def _drop_quiet(self) -> None:
        """Drops the oldest connection that has carried no payload (see MAX_QUIET)."""
        key = next(iter(self.quiet))
        conn = self.conns.pop(key)
        self._forget(key, conn)
        self.summary.quiet_connections_dropped += 1

    def finish(self) -> None:
        for key, conn in list(self.conns.items()):
            self._retire(key, conn, E_CAPTURE_END)
