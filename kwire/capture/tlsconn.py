"""TLS inside a connection: between its reassembled TCP halves and its Kafka framers.

Each half of a connection first hands its bytes to a `Gate`. The first bytes decide:
- a TLS ClientHello (or, on a stream whose start was not captured, a TLS record header) makes the
  connection a TLS one: from then on both halves feed one `TlsSession` (kwire.capture.tls), and
  the plaintext it decrypts goes to the halves' Kafka framers as if it had come off the wire;
- anything else hands the half to its framer directly (the gate steps out of the way, so plain
  connections pay nothing after their first segment).

What cannot be decrypted (no key log, no key for this connection, an unsupported suite, lost
bytes, a record that does not authenticate) is never framed as Kafka: each half's undecrypted
application bytes become one row with no frame and the error "encrypted: <reason>" (status
`encrypted` in the decoded tables). A Kafka frame never starts like a TLS record: its length
prefix would be over 300 MB (0x16030000 and up), past the largest frame kwire accepts.
"""

from __future__ import annotations

from typing import Protocol

from .framing import Framer, RawFrame
from .stream import HalfStream
from .tls import KeyLog, TlsSession, looks_like_record, looks_like_tls


class Connection(Protocol):
    """What the gates need of kwire.capture.engine.Connection (which imports this module)."""

    halves: tuple[HalfStream, HalfStream]
    tls: "Tls | None"

    def start_tls(self, client_side: int | None) -> "Tls": ...


E_ENCRYPTED = "encrypted"
NO_KEYLOG = "no key log given (--keylog FILE)"
# Bytes a half's gate waits for before deciding (a record header and the handshake type).
SNIFF_BYTES = 6


class Tls:
    """One connection's TLS: the session, and what each half could not decrypt."""

    __slots__ = ("session", "client_side", "framers", "enc", "no_keylog")

    def __init__(self, client_side: int, keylog: KeyLog | None) -> None:
        self.no_keylog = not keylog
        self.session = TlsSession(keylog if keylog is not None else KeyLog())
        # The connection's side that sent the ClientHello (0 or 1).
        self.client_side = client_side
        self.framers: list[Framer | None] = [None, None]
        # Per connection side: undecrypted bytes, first and last timestamp.
        self.enc = [[0, 0, 0], [0, 0, 0]]

    def data(self, side: int, buf: bytes, ts: int) -> None:
        tls_side = 0 if side == self.client_side else 1
        session = self.session
        out = session.feed(tls_side, buf, ts)
        if out:
            client = self.client_side
            framers = self.framers
            for tside, plain, t in out:
                framer = framers[client if tside == 0 else 1 - client]
                if framer is not None:
                    framer.data(plain, t)
        elif session.stopped(tls_side):
            self._undecrypted(side, len(buf), ts)

    def hole(self, side: int, n: int, ts: int) -> None:
        self.session.hole(0 if side == self.client_side else 1, n, ts)
        self._undecrypted(side, n, ts)

    def _undecrypted(self, side: int, n: int, ts: int) -> None:
        enc = self.enc[side]
        if not enc[0]:
            enc[1] = ts
        enc[0] += n
        enc[2] = ts

    def reason(self) -> str:
        failure = self.session.failure
        if self.no_keylog and not self.session.decrypted:
            return NO_KEYLOG
        return failure or "not decrypted"

    def describe(self) -> str:
        s = self.session
        if s.version is None:
            return "TLS (handshake not seen)"
        return f"{s.version} {s.cipher_suite or '?'}"

    def close(self) -> list[tuple[int, RawFrame]]:
        """The halves' undecrypted bytes as frame-less rows (side, frame)."""
        rows = []
        what = self.describe()
        for side in (0, 1):
            n, first, last = self.enc[side]
            if not n:
                continue
            msg = f"{E_ENCRYPTED}: {self.reason()} ({n} bytes of {what} not decrypted)"
            rows.append((side, RawFrame(0, None, None, b"", first, last, [(E_ENCRYPTED, msg)])))
        return rows

    def outcome(self) -> str:
        """For the summary: 'decrypted' or 'encrypted', with the version and suite."""
        s = self.session
        state = (
            "decrypted"
            if s.decrypted and not any(e[0] for e in self.enc)
            else ("partly decrypted" if s.decrypted else "encrypted")
        )
        return f"{state}: {self.describe()}"


class Gate:
    """Stands for a half's Framer until its first bytes tell whether the connection is TLS."""

    __slots__ = ("conn", "side", "framer", "buf", "ts", "midstream")

    def __init__(self, conn: Connection, side: int, framer: Framer, midstream: bool) -> None:
        self.conn = conn
        self.side = side
        self.framer = framer
        self.midstream = midstream
        self.buf = b""
        self.ts = 0

    def _decide(self) -> None:
        """Sets the half's consumer for good (the TLS half or the framer) and feeds it."""
        conn = self.conn
        buf, self.buf = self.buf, b""
        half = conn.halves[self.side]
        tls = conn.tls
        if tls is None and buf:
            if looks_like_tls(buf) if not self.midstream else looks_like_record(buf):
                tls = conn.start_tls(self.side if not self.midstream else None)
        if tls is not None:
            tls.framers[self.side] = self.framer
            half.framer = _TlsHalf(tls, self.side)
            if buf:
                tls.data(self.side, buf, self.ts)
            return
        half.framer = self.framer
        if buf:
            self.framer.data(buf, self.ts)

    def data(self, buf: bytes, ts: int) -> None:
        self.buf += buf
        self.ts = ts
        if len(self.buf) >= SNIFF_BYTES or self.conn.tls is not None:
            self._decide()

    def hole(self, n: int, kind: str, ts: int) -> None:
        if not self.buf and self.conn.tls is None:
            # A stream that starts with a hole: from here it is read as from mid-stream.
            self.midstream = True
            self.framer.hole(n, kind, ts)
            return
        self._decide()
        sink = self.conn.halves[self.side].framer
        assert sink is not None
        sink.hole(n, kind, ts)

    def flush(self, reason: str) -> None:
        if self.buf:
            self._decide()
            sink = self.conn.halves[self.side].framer
            assert sink is not None
            sink.flush(reason)
        else:
            self.framer.flush(reason)


class _TlsHalf:
    """A half of a TLS connection: its bytes go to the session, its plaintext to its framer."""

    __slots__ = ("tls", "side")

    def __init__(self, tls: Tls, side: int) -> None:
        self.tls = tls
        self.side = side

    def data(self, buf: bytes, ts: int) -> None:
        self.tls.data(self.side, buf, ts)

    def hole(self, n: int, kind: str, ts: int) -> None:
        self.tls.hole(self.side, n, ts)

    def flush(self, reason: str) -> None:
        framer = self.tls.framers[self.side]
        if framer is not None:
            framer.flush(reason)
