"""Kafka framing of one reassembled TCP byte stream: 4-byte big-endian length, then the frame.

The framer is fed in stream order with captured bytes and with holes (bytes the capture lacks).
It emits every frame it can see, complete or damaged, and when a hole swallows a frame boundary
it skips ahead to the next segment that plausibly starts a frame, reporting what it skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .kafka import MAX_FRAME_LENGTH

# How much of a damaged frame's start is kept for reading its header.
HEAD_MAX = 1024
# The smallest frame either side can send: a response header is a 4-byte correlation id.
MIN_FRAME_LENGTH = 4

MISSING = "missing"
SNAPLEN = "snaplen"

# Error categories: the summary counts rows by these; the error column adds details after them.
E_MIDSTREAM = "incomplete: capture started mid-stream"
E_MISSING = "incomplete: missing segments"
E_SNAPLEN = "truncated by snaplen"
E_BAD_LENGTH = "bad length prefix"
E_CAPTURE_END = "incomplete: capture ended mid-frame"
E_CLOSED = "incomplete: connection closed mid-frame"
# A connection ended because no packet came for a long capture time (kwire.capture.carry).
E_IDLE = "incomplete: connection idle mid-frame"


@dataclass(slots=True)
class RawFrame:
    # Stream offset of the length prefix (of the first skipped byte, for a skipped run).
    offset: int
    # Declared length; None for a run of bytes skipped while looking for a frame boundary.
    length: int | None
    # The frame without its prefix; None unless every byte was captured.
    data: bytes | None
    # The frame's first captured bytes (all of it when complete), for reading the header.
    head: bytes
    ts_first: int
    ts_last: int
    errors: list[tuple[str, str]] = field(default_factory=list)


Accept = Callable[[int, bytes], bool]


class StreamSink(Protocol):
    """What a reassembled half-stream feeds: a Framer, or TLS in front of one."""

    def data(self, buf: bytes, ts: int) -> None: ...

    def hole(self, n: int, kind: str, ts: int) -> None: ...

    def flush(self, reason: str) -> None: ...


@dataclass(slots=True)
class _Skip:
    """Bytes being passed over while looking for the next frame boundary."""

    category: str
    message: str
    start: int
    ts_first: int
    ts_last: int
    skipped: int


def _hole_error(kind: str, a: int, b: int) -> tuple[str, str]:
    if kind == SNAPLEN:
        return E_SNAPLEN, f"{E_SNAPLEN}: stream bytes {a}-{b} not captured"
    return E_MISSING, f"{E_MISSING} {a}-{b}"


class Framer:
    """Turns one direction's byte stream into RawFrames, handed to `emit`.

    `accept(length, head)` is asked, while resynchronising, whether a segment that starts with
    this length prefix and these bytes is a frame start (the caller knows the direction).
    """

    def __init__(self, emit: Callable[[RawFrame], None], accept: Accept, midstream: bool) -> None:
        self.emit = emit
        self.accept = accept
        self.pos = 0
        self._reset()
        self.lost: _Skip | None = None
        if midstream:
            self.lost = _Skip(E_MIDSTREAM, "", 0, 0, 0, 0)

    def _reset(self) -> None:
        self.length = -1
        self.prefix = b""
        self.start = 0
        self.chunks: list[bytes] | None = []
        self.got = 0
        self.head = b""
        self.errors: list[tuple[str, str]] = []
        self.ts_first = 0
        self.ts_last = 0

    # -- feeding -------------------------------------------------------------------------

    def data(self, buf: bytes, ts: int) -> None:
        n = len(buf)
        if self.lost is not None:
            if not self._resync(buf, ts):
                lost = self.lost
                if not lost.skipped:
                    lost.ts_first = ts
                lost.ts_last = ts
                lost.skipped += n
                self.pos += n
                return
        i = 0
        pos = self.pos
        emit = self.emit
        while i < n:
            if self.length < 0:
                if not self.prefix and n - i >= 4:
                    start = pos + i
                    length = int.from_bytes(buf[i : i + 4], "big", signed=True)
                    i += 4
                    if length < MIN_FRAME_LENGTH or length > MAX_FRAME_LENGTH:
                        self._bad_length(length, start, ts, n - i)
                        self.pos = pos + n
                        return
                    if n - i >= length:
                        # The common case: the whole frame is inside this segment.
                        body = buf[i : i + length]
                        emit(RawFrame(start, length, body, body, ts, ts))
                        i += length
                        continue
                    self.length = length
                    self.start = start
                    self.ts_first = ts
                else:
                    if not self.prefix:
                        self.start = pos + i
                        self.ts_first = ts
                    take = min(4 - len(self.prefix), n - i)
                    self.prefix += buf[i : i + take]
                    i += take
                    if len(self.prefix) < 4:
                        continue
                    length = int.from_bytes(self.prefix, "big", signed=True)
                    self.prefix = b""
                    if length < MIN_FRAME_LENGTH or length > MAX_FRAME_LENGTH:
                        self._bad_length(length, self.start, ts, n - i)
                        self.pos = pos + n
                        return
                    self.length = length
            take = min(self.length - self.got, n - i)
            chunks = self.chunks
            if chunks is not None:
                chunks.append(buf[i : i + take])
            self.got += take
            i += take
            self.ts_last = ts
            if self.got == self.length:
                self._finish(ts)
        self.pos = pos + n

    def hole(self, n: int, kind: str, ts: int) -> None:
        a, b = self.pos, self.pos + n
        self.pos = b
        if self.lost is not None:
            lost = self.lost
            if not lost.skipped:
                lost.ts_first = ts
                lost.start = a
            lost.ts_last = ts
            lost.skipped += n
            return
        if self.length >= 0:
            remaining = self.length - self.got
            self._damage(_hole_error(kind, a, min(b, a + remaining)))
            self.ts_last = ts
            if n <= remaining:
                self.got += n
                if self.got == self.length:
                    self._finish(ts)
                return
            self.got = self.length
            self._finish(ts)
            self._lose(kind, a + remaining, b, n - remaining, ts)
            return
        if self.prefix:
            # The hole swallowed the rest of a length prefix.
            start, got = self.start, len(self.prefix)
            self.prefix = b""
            self._lose(kind, start, b, n + got, ts)
            return
        self._lose(kind, a, b, n, ts)

    def flush(self, reason: str) -> None:
        """End of the stream: report whatever is unfinished."""
        if self.length >= 0:
            self.errors.append((reason, f"{reason} ({self.got} of {self.length} bytes seen)"))
            self._damage(None)
            self._finish(self.ts_last)
        elif self.prefix:
            got = len(self.prefix)
            self.emit(
                RawFrame(
                    self.start,
                    None,
                    None,
                    b"",
                    self.ts_first,
                    self.ts_first,
                    [(reason, f"{reason} ({got} bytes of a length prefix)")],
                )
            )
            self.prefix = b""
        self._emit_lost()

    # -- internals -----------------------------------------------------------------------

    def _finish(self, ts: int) -> None:
        if self.chunks is not None:
            data = b"".join(self.chunks)
            frame = RawFrame(self.start, self.length, data, data, self.ts_first, ts, self.errors)
        else:
            frame = RawFrame(
                self.start, self.length, None, self.head, self.ts_first, ts, self.errors
            )
        self._reset()
        self.emit(frame)

    def _damage(self, error: tuple[str, str] | None) -> None:
        if self.chunks is not None:
            self.head = b"".join(self.chunks)[:HEAD_MAX]
            self.chunks = None
        if error is not None:
            self.errors.append(error)

    def _bad_length(self, length: int, start: int, ts: int, rest: int) -> None:
        msg = f"{E_BAD_LENGTH} {length} at stream offset {start}: not Kafka or desynchronised"
        self._reset()
        self.lost = _Skip(E_BAD_LENGTH, msg, start, ts, ts, 4 + rest)

    def _lose(self, kind: str, a: int, b: int, n: int, ts: int) -> None:
        category, msg = _hole_error(kind, a, b)
        self.lost = _Skip(category, msg, a, ts, ts, n)

    def _resync(self, buf: bytes, ts: int) -> bool:
        if len(buf) < 8:
            return False
        length = int.from_bytes(buf[:4], "big", signed=True)
        if length < MIN_FRAME_LENGTH or length > MAX_FRAME_LENGTH:
            return False
        if not self.accept(length, buf[4 : 4 + HEAD_MAX]):
            return False
        self._emit_lost()
        return True

    def _emit_lost(self) -> None:
        lost = self.lost
        self.lost = None
        if lost is None or not lost.skipped:
            return
        if lost.category == E_MIDSTREAM:
            msg = f"{E_MIDSTREAM} ({lost.skipped} bytes before the first frame boundary)"
        else:
            msg = f"{lost.message}; {lost.skipped} bytes skipped to the next frame boundary"
        self.emit(
            RawFrame(
                lost.start, None, None, b"", lost.ts_first, lost.ts_last, [(lost.category, msg)]
            )
        )
