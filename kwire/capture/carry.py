"""One TCP flow's capture state as bytes, to carry it from one Tracker to a fresh one.

A live decode reads a rotating capture ring in micro-batches, each with its own Tracker (maybe
in another process). Between batches every flow's state is saved (`save_flow`) and loaded into
the next batch's Tracker (`load_flow`), so that the rows are exactly those of one uninterrupted
Tracker; `end_flow` and `drop_flow` bound the state carried.

A blob is a header (magic, format VERSION, CRC-32 of the rest) and a pickle (protocol 5) read
back by an unpickler that builds nothing but the capture engine's own classes. It holds the
flow's connection (both reassembled halves, framers, requests waiting for responses, TLS
state), whether the flow is among the tracker's closed ones, its generation number and whether
it is still quiet. It never holds the tracker, its sink, summary or key log, nor any secret:
a TLS session keeps which key log secret its keys came from (label, KeyUpdates, sequence
number) and `load_flow` derives them again from the loading tracker's key log. It does hold
captured bytes: partial frames (decrypted plaintext for TLS), out-of-order segments, frames of
connections whose direction is not known yet, and requests waiting for responses (SASL ones
without their bytes unless the tracker keeps them: see `save_flow`).
"""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from typing import Any

from .engine import AUTH_API_KEYS, Connection, Key, Tracker
from .framing import E_CAPTURE_END, E_CLOSED, E_IDLE
from .table import API_KEY, FRAME
from .tls import KeyLog

__all__ = [
    "VERSION",
    "CarryError",
    "Key",
    "drop_flow",
    "end_flow",
    "flow_keys",
    "load_flow",
    "save_flow",
]

VERSION = 1
MAGIC = b"kwflow\r\n"
_HEADER = struct.Struct(">8sHI")  # magic, version, CRC-32 of the pickle

# end_flow's reasons -> what the framers and the requests left waiting report.
END_REASONS = {"idle": E_IDLE, "closed": E_CLOSED, "capture end": E_CAPTURE_END}


class CarryError(ValueError):
    """A blob that cannot be loaded: not a flow blob, another format version, corrupt, another
    flow's, saved under other tracker settings, or needing secrets the key log lacks."""


def flow_keys(tracker: Tracker) -> set[Key]:
    """Every key the tracker holds anything for."""
    return set(tracker.conns).union(tracker.closed, tracker.generation, tracker.quiet)


def _settings(tracker: Tracker) -> tuple[list[int], bool, bool]:
    return sorted(tracker.broker_ports), tracker.infer, tracker.keep_auth_bytes


def save_flow(tracker: Tracker, key: Key) -> bytes | None:
    """The flow's whole state as bytes; None when the tracker holds nothing for it.

    Requests waiting for a response that are SASL ones (credentials) lose their bytes here
    unless the tracker keeps them (keep_auth_bytes): their frame becomes b"", which
    Tracker.emit redacts exactly as it would have the bytes, so the rows do not change."""
    conn = tracker.conns.get(key)
    closed = key in tracker.closed
    generation = tracker.generation.get(key)
    quiet = key in tracker.quiet
    if conn is None and not closed and generation is None and not quiet:
        return None
    if conn is not None and not tracker.keep_auth_bytes:
        for rows in conn.outstanding.values():
            for row in rows:
                if row[API_KEY] in AUTH_API_KEYS and row[FRAME]:
                    row[FRAME] = b""
    state = {
        "key": key,
        "settings": _settings(tracker),
        "conn": conn,
        "closed": closed,
        "generation": generation,
        "quiet": quiet,
    }
    payload = pickle.dumps(state, protocol=5)
    return _HEADER.pack(MAGIC, VERSION, zlib.crc32(payload)) + payload


def load_flow(tracker: Tracker, key: Key, blob: bytes) -> None:
    """Restores a flow saved by `save_flow` into `tracker` (made with the same broker ports,
    inference and keep_auth_bytes; TLS keys are derived again from its key log). From here the
    connection emits to this tracker's sink and counts in its summary."""
    state = _decode(blob)
    where = f"the flow blob of {_name(state.get('key'))}"
    if tuple(state.get("key") or ()) != tuple(key):
        raise CarryError(f"{where} was loaded for {_name(key)}")
    if tuple(state["settings"]) != _settings(tracker):
        ports, infer, keep = state["settings"]
        raise CarryError(
            f"{where} was saved by a tracker with broker ports {ports}, inference "
            f"{'on' if infer else 'off'}, keep_auth_bytes {keep}; this one has "
            f"{sorted(tracker.broker_ports)}, {'on' if tracker.infer else 'off'}, "
            f"{tracker.keep_auth_bytes}"
        )
    if key in tracker.conns or key in tracker.closed or key in tracker.generation:
        raise ValueError(f"the tracker already holds the flow {_name(key)}")
    conn = state["conn"]
    if conn is not None:
        conn.tracker = tracker
        if conn.tls is not None:
            try:
                conn.tls.session.attach(tracker.keylog if tracker.keylog is not None else KeyLog())
            except ValueError as e:
                raise CarryError(f"{where} is a TLS connection: {e}") from None
        tracker.conns[key] = conn
    if state["closed"]:
        tracker.closed[key] = 1
    if state["generation"] is not None:
        tracker.generation[key] = state["generation"]
    if state["quiet"]:
        tracker.quiet[key] = None


def drop_flow(tracker: Tracker, key: Key) -> None:
    """Forgets the flow entirely, emitting nothing."""
    tracker.conns.pop(key, None)
    tracker.closed.pop(key, None)
    tracker.generation.pop(key, None)
    tracker.quiet.pop(key, None)


def end_flow(tracker: Tracker, key: Key, reason: str) -> None:
    """Retires the flow's connection now, reporting everything unfinished as the capture's end
    does (partial frames, out-of-order bytes, requests waiting for responses, undecrypted
    TLS), worded for `reason` ("idle": "... (connection idle)"; also "closed" and "capture
    end"), then forgets the flow. A later packet of it starts a new connection, read as one
    whose start was not captured, under the same connection id (the generation is forgotten
    too)."""
    why = END_REASONS.get(reason)
    if why is None:
        raise ValueError(f"unknown reason {reason!r} (one of {', '.join(END_REASONS)})")
    conn = tracker.conns.get(key)
    if conn is not None:
        conn.close(why)
    drop_flow(tracker, key)


# -- reading blobs ------------------------------------------------------------------------------


def _name(key: Any) -> str:
    try:
        a, ap, b, bp = key
        return f"{a}:{ap}<->{b}:{bp}"
    except (TypeError, ValueError):
        return repr(key)


def _decode(blob: bytes) -> dict[str, Any]:
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise CarryError(f"a flow blob is bytes, not {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < _HEADER.size or not blob.startswith(MAGIC):
        raise CarryError("not a kwire flow blob (no kwire.capture.carry header)")
    _, version, crc = _HEADER.unpack_from(blob)
    if version != VERSION:
        raise CarryError(
            f"flow blob format version {version}; this kwire reads version {VERSION} only"
        )
    payload = memoryview(blob)[_HEADER.size :]
    if zlib.crc32(payload) != crc:
        raise CarryError("corrupt flow blob: its checksum does not match its contents")
    try:
        state = _Unpickler(io.BytesIO(payload)).load()
    except CarryError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a damaged pickle raises
        raise CarryError(f"corrupt flow blob: cannot be read ({type(e).__name__})") from None
    if not isinstance(state, dict) or not {"key", "settings", "conn"} <= state.keys():
        raise CarryError("corrupt flow blob: not a flow's state")
    if state["conn"] is not None and not isinstance(state["conn"], Connection):
        raise CarryError("corrupt flow blob: not a flow's state")
    return state


# The classes a flow's state is made of; nothing else is built when a blob is read.
_CLASSES = {
    "kwire.capture.engine": {"Connection"},
    "kwire.capture.stream": {"HalfStream"},
    "kwire.capture.framing": {"Framer", "RawFrame", "_Skip"},
    "kwire.capture.tlsconn": {"Gate", "Tls", "_TlsHalf"},
    "kwire.capture.tls": {"TlsSession", "_Side", "Suite"},
}
# A connection's framers call it back through these bound methods (pickled as getattr).
_CALLBACKS = frozenset({"_frame0", "_frame1", "_accept0", "_accept1"})


def _callback(conn: object, name: str) -> Any:
    if not isinstance(conn, Connection) or name not in _CALLBACKS:
        raise CarryError("corrupt flow blob: an unexpected callback")
    return getattr(conn, name)


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name == "getattr":
            return _callback
        if name in _CLASSES.get(module, ()):
            return super().find_class(module, name)
        raise CarryError(f"corrupt flow blob: it names {module}.{name}")
