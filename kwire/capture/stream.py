"""TCP reassembly of one direction of a connection, in sequence order.

Segments are placed by sequence number (unwrapped to 64-bit stream offsets, so wraparound and
streams over 4 GiB work), retransmitted and overlapping bytes are dropped, and out-of-order
segments wait until the bytes before them arrive. Bytes that never arrive become holes: when the
peer acknowledges past them, when too much waits behind them, or when the stream ends.
"""

from __future__ import annotations

from .framing import MISSING, SNAPLEN, StreamSink

# Out-of-order data held per direction before the bytes in front of it are declared lost.
MAX_PENDING_BYTES = 16 * 1024 * 1024
MAX_PENDING_SEGMENTS = 4096


class HalfStream:
    __slots__ = (
        "framer",
        "base",
        "next",
        "pending",
        "pending_bytes",
        "fin_at",
        "retransmitted",
        "gap_bytes",
        "snaplen_bytes",
        "before_start",
    )

    def __init__(self) -> None:
        self.framer: StreamSink | None = None
        # Absolute sequence number of stream offset 0 (the byte after the SYN when seen).
        self.base: int | None = None
        self.next = 0
        self.pending: dict[int, tuple[bytes, int, int]] = {}
        self.pending_bytes = 0
        self.fin_at: int | None = None
        self.retransmitted = 0
        self.gap_bytes = 0
        self.snaplen_bytes = 0
        # Bytes that arrived with sequence numbers before offset 0 (only possible mid-stream).
        self.before_start = 0

    def _offset(self, seq: int) -> int:
        assert self.base is not None
        diff = (seq - self.base - self.next) & 0xFFFFFFFF
        if diff >= 0x80000000:
            diff -= 0x100000000
        return self.next + diff

    def syn(self, seq: int) -> None:
        if self.base is None:
            self.base = (seq + 1) & 0xFFFFFFFF

    def add(self, seq: int, payload: bytes, missing: int, ts: int, fin: bool) -> None:
        if self.base is None:
            self.base = seq
        off = self._offset(seq)
        size = len(payload) + missing
        if fin and self.fin_at is None:
            self.fin_at = off + size
        if not size:
            return
        end = off + size
        if off < 0:
            # Sent before the first segment we saw: only when the capture began mid-stream.
            self.before_start += min(size, -off)
            if end <= 0:
                return
        if end <= self.next:
            self.retransmitted += size
            return
        if off > self.next:
            old = self.pending.get(off)
            if old is None or len(old[0]) + old[1] < size:
                if old is not None:
                    self.pending_bytes -= len(old[0])
                self.pending[off] = (payload, missing, ts)
                self.pending_bytes += len(payload)
            else:
                self.retransmitted += size
            if self.pending_bytes > MAX_PENDING_BYTES or len(self.pending) > MAX_PENDING_SEGMENTS:
                self.give_up_waiting()
            return
        self._deliver(off, payload, missing, ts)
        if self.pending:
            self._drain()

    def _deliver(self, off: int, payload: bytes, missing: int, ts: int) -> None:
        framer = self.framer
        assert framer is not None
        cut = self.next - off
        if cut:
            self.retransmitted += cut
        if cut < len(payload):
            data = payload[cut:] if cut else payload
            framer.data(data, ts)
            self.next += len(data)
            cut = 0
        else:
            cut -= len(payload)
        rest = missing - cut
        if rest > 0:
            framer.hole(rest, SNAPLEN, ts)
            self.snaplen_bytes += rest
            self.next += rest

    def _drain(self) -> None:
        pending = self.pending
        while pending:
            off = min(pending)
            if off > self.next:
                return
            payload, missing, ts = pending.pop(off)
            self.pending_bytes -= len(payload)
            if off + len(payload) + missing <= self.next:
                self.retransmitted += len(payload) + missing
                continue
            self._deliver(off, payload, missing, ts)

    def lost_until(self, upto: int, ts: int) -> None:
        """Declare the bytes from the next expected one up to stream offset `upto` lost."""
        if upto > self.next and self.framer is not None:
            n = upto - self.next
            self.framer.hole(n, MISSING, ts)
            self.gap_bytes += n
            self.next = upto
            self._drain()

    def give_up_waiting(self) -> None:
        """Stop waiting for the bytes in front of the first out-of-order segment."""
        if self.pending:
            off = min(self.pending)
            self.lost_until(off, self.pending[off][2])

    def acked(self, ack: int, ts: int) -> None:
        """The peer acknowledged up to sequence `ack`: anything before it that we lack is lost."""
        if self.base is None or self.framer is None:
            return
        upto = self._offset(ack)
        if self.fin_at is not None and upto > self.fin_at:
            upto = self.fin_at  # the FIN takes one sequence number but carries no byte
        while upto > self.next:
            # Bytes waiting out of order are not lost: stop each hole at the next one we hold.
            stop = min(upto, min(self.pending)) if self.pending else upto
            self.lost_until(stop, ts)

    def flush(self) -> None:
        while self.pending:
            self.give_up_waiting()
