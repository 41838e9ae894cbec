"""Mutations of valid frames, and where their length fields are.

Every mutator takes the bytes and a `random.Random` (or hypothesis' `st.randoms()`, which has the
same methods and shrinks), and returns new bytes. `length_fields` finds the offsets of the length
prefixes, counts, tag headers and null markers in a frame by watching which runtime readers a
successful decode calls and at which position (sys.setprofile): no per-message knowledge. It
watches the checked decoders (the fast ones inline most length reads), by pointing each module's
fast table at its checked one for the duration.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# Runtime reader -> how the field at its `pos` argument is encoded.
LENGTH_READERS = {
    "r_string": "int16",
    "r_nullable_string": "int16",
    "r_bytes": "int32",
    "r_nullable_bytes": "int32",
    "r_array": "int32",
    "r_nullable_array": "int32",
    "r_compact_string": "uvarint",
    "r_compact_nullable_string": "uvarint",
    "r_compact_bytes": "uvarint",
    "r_compact_nullable_bytes": "uvarint",
    "r_compact_array": "uvarint",
    "r_compact_nullable_array": "uvarint",
    "r_tag_count": "uvarint",
    "r_tags": "uvarint",
    "r_tagged_nullable_struct": "uvarint",
    "r_tag_header": "tag",  # uvarint tag, then uvarint size
    "r_nullable_struct": "int8",
}

INT16_VALUES = (0x7FFF, 0x7FFE, 0x4000, -1, -2, -0x8000)
INT32_VALUES = (0x7FFFFFFF, 0x7FFFFFFE, 0x10000000, 0x00100000, -1, -2, -0x80000000)
UVARINT_VALUES = (0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x7FFFFFFF, 0x10000000, 0x4000, 0x80, 0)
INTERESTING_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_size(data: bytes, pos: int) -> int:
    """Bytes taken by the (possibly overlong or cut) uvarint at pos."""
    i = pos
    while i < len(data) and data[i] & 0x80:
        i += 1
    return min(i + 1, len(data)) - pos


# -- where the length fields are -----------------------------------------------------------------


@contextlib.contextmanager
def checked_decoders_only() -> Iterator[None]:
    """Every generated module decodes with its checked decoders (one runtime call per length)."""
    saved = []
    for name, module in list(sys.modules.items()):
        if name.startswith("generated.") and hasattr(module, "_READERS"):
            saved.append((module, "_READERS", module._READERS))
            module._READERS = module._DECODERS
        if name == "generated":  # frames: no fast (api key, version) readers either
            for table in ("_REQUEST_READERS", "_RESPONSE_READERS"):
                saved.append((module, table, getattr(module, table)))
                setattr(module, table, {})
            if hasattr(module, "_ROUTES"):  # nor the compiled frame decoders
                saved.append((module, "_ROUTES", module._ROUTES))
                module._ROUTES = [None, None]
    try:
        yield
    finally:
        for module, attr, readers in saved:
            setattr(module, attr, readers)


def length_fields(decode: Callable[[bytes], Any], data: bytes) -> list[tuple[int, str]]:
    """(offset, encoding) of every length/count/tag/marker a decode of `data` reads.

    Offsets are into `data` itself; entry points that copy the input (memoryview, bytearray)
    keep offsets, since every reader gets the whole buffer and an absolute position.
    """
    found: set[tuple[int, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        kind = LENGTH_READERS.get(frame.f_code.co_name)
        if kind is None or not frame.f_code.co_filename.endswith("_runtime.py"):
            return
        pos = frame.f_locals.get("pos")
        if not isinstance(pos, int) or not 0 <= pos < len(data):
            return
        if kind == "tag":
            found.add((pos, "uvarint"))  # the tag number
            found.add((pos + varint_size(data, pos), "uvarint"))  # its size
        else:
            found.add((pos, kind))

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        with checked_decoders_only():
            decode(data)
    except Exception:  # noqa: BLE001 - a partial decode still tells us positions
        pass
    finally:
        sys.setprofile(old)
    return sorted(p for p in found if p[0] < len(data))


def set_field(data: bytes, pos: int, kind: str, value: int) -> bytes:
    """`data` with the field at pos rewritten to value (uvarints may change size)."""
    if kind == "int8":
        return data[:pos] + bytes([value & 0xFF]) + data[pos + 1 :]
    if kind == "int16":
        return data[:pos] + (value & 0xFFFF).to_bytes(2, "big") + data[pos + 2 :]
    if kind == "int32":
        return data[:pos] + (value & 0xFFFFFFFF).to_bytes(4, "big") + data[pos + 4 :]
    return data[:pos] + uvarint(value) + data[pos + varint_size(data, pos) :]


def inflations(data: bytes, fields: Sequence[tuple[int, str]]) -> list[bytes]:
    """Every field set to every huge/negative/null value, and each uvarint made overlong."""
    out = []
    for pos, kind in fields:
        for value in _values(kind, len(data), pos):
            out.append(set_field(data, pos, kind, value))
        if kind == "uvarint":
            size = varint_size(data, pos)
            out.append(data[:pos] + b"\xff" * 5 + b"\x0f" + data[pos + size :])  # 6 bytes
            out.append(data[:pos] + b"\xff\xff\xff\xff\x7f" + data[pos + size :])  # > 32 bits
    return out


def _values(kind: str, n: int, pos: int) -> tuple[int, ...]:
    """Values worth trying in a field at pos of an n-byte input: extremes, null, and exactly the
    bytes that remain after the field (the boundary of the 'fits in what is left' check)."""
    if kind == "int8":
        return (0x80, 0xFF, 0x7F, 0x00, 0x01)
    if kind == "int16":
        left = max(n - pos - 2, 0)
        return INT16_VALUES + (n, left, left + 1)
    if kind == "int32":
        left = max(n - pos - 4, 0)
        return INT32_VALUES + (n, left, left + 1)
    left = max(n - pos - 1, 0)
    return UVARINT_VALUES + (n + 1, left + 1, left + 2)


# -- random mutators ------------------------------------------------------------------------------


def flip_bits(data: bytes, r: Any) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(r.choice((1, 1, 1, 2, 3, 8))):
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    return bytes(b)


def set_bytes(data: bytes, r: Any) -> bytes:
    if not data:
        return data
    b = bytearray(data)
    for _ in range(r.choice((1, 1, 2, 4))):
        i = r.randrange(len(b))
        b[i] = r.choice(INTERESTING_BYTES) if r.random() < 0.7 else r.randrange(256)
    return bytes(b)


def truncate(data: bytes, r: Any) -> bytes:
    return data[: r.randrange(len(data) + 1)]


def insert_bytes(data: bytes, r: Any) -> bytes:
    i = r.randrange(len(data) + 1)
    n = r.choice((1, 1, 2, 4, 8, 16))
    fill = (
        bytes(r.randrange(256) for _ in range(n))
        if r.random() < 0.5
        else bytes([r.choice(INTERESTING_BYTES)]) * n
    )
    return data[:i] + fill + data[i:]


def remove_bytes(data: bytes, r: Any) -> bytes:
    if not data:
        return data
    i = r.randrange(len(data))
    return data[:i] + data[i + r.choice((1, 1, 2, 4, 8)) :]


def duplicate_bytes(data: bytes, r: Any) -> bytes:
    if not data:
        return data
    i = r.randrange(len(data))
    j = min(len(data), i + r.choice((1, 2, 4, 8, 32, 256)))
    k = r.randrange(len(data) + 1)
    return data[:k] + data[i:j] * r.choice((1, 1, 2, 8)) + data[k:]


def overwrite_int(data: bytes, r: Any) -> bytes:
    """A huge or negative int16/int32/uvarint written at any position (length fields blind)."""
    if not data:
        return data
    pos = r.randrange(len(data))
    kind = r.choice(("int16", "int32", "uvarint"))
    value = r.choice(_values(kind, len(data), pos))
    return set_field(data, pos, kind, value)


def splice(data: bytes, other: bytes, r: Any) -> bytes:
    """A prefix of one frame followed by a suffix of another."""
    return data[: r.randrange(len(data) + 1)] + other[r.randrange(len(other) + 1) :]


MUTATORS: dict[str, Callable[[bytes, Any], bytes]] = {
    "flip": flip_bits,
    "set": set_bytes,
    "truncate": truncate,
    "insert": insert_bytes,
    "remove": remove_bytes,
    "duplicate": duplicate_bytes,
    "overwrite_int": overwrite_int,
}


def inflate(data: bytes, fields: Sequence[tuple[int, str]], r: Any) -> bytes:
    """One known length field set to a huge/negative/null value."""
    if not fields:
        return overwrite_int(data, r)
    pos, kind = r.choice(fields)
    if kind == "uvarint" and r.random() < 0.15:
        size = varint_size(data, pos)
        return data[:pos] + b"\xff" * 5 + b"\x0f" + data[pos + size :]
    return set_field(data, pos, kind, r.choice(_values(kind, len(data), pos)))


def mutate(
    data: bytes,
    r: Any,
    fields: Sequence[tuple[int, str]] = (),
    other: bytes | None = None,
    rounds: int | None = None,
) -> tuple[bytes, str]:
    """One to three stacked mutations; returns the bytes and the mutation names joined by '+'."""
    names = []
    for _ in range(rounds if rounds is not None else r.choice((1, 1, 1, 2, 3))):
        pick = r.randrange(10)
        if pick == 0 and other is not None:
            data, name = splice(data, other, r), "splice"
        elif pick <= 2 and fields:
            data, name = inflate(data, fields, r), "inflate"
            fields = ()  # positions are stale once a uvarint changed size
        else:
            name = r.choice(sorted(MUTATORS))
            data = MUTATORS[name](data, r)
        names.append(name)
    return data, "+".join(names)
