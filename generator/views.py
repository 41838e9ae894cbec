"""What the templates are handed: the presentation strings added to a wire plan's codecs, and the
Jinja environment both targets (Python and the compiled Cython) render with."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

from .plan import Codec, default_source, local_name, type_hint

TEMPLATES = Path(__file__).with_name("templates")


def tail(arg: str) -> str:
    return f", {arg}" if arg else ""


def fast(name: str) -> str:
    """The fast twin of a generated codec function; runtime helpers keep their names."""
    return name.replace("_decode_", "_read_", 1).replace("_encode_", "_write_", 1)


def decorate(codec: Codec, names: dict[str, str]) -> None:
    """Adds the presentation strings the template prints."""
    codec.read_name = fast(codec.decode_name)  # type: ignore[attr-defined]
    codec.write_name = fast(codec.encode_name)  # type: ignore[attr-defined]
    for s in codec.steps:
        s.local = local_name(s.field)  # type: ignore[attr-defined]
        s.read_tail = tail(s.read_arg)  # type: ignore[attr-defined]
        s.write_tail = tail(s.write_arg)  # type: ignore[attr-defined]
        s.fast_reader = fast(s.reader)  # type: ignore[attr-defined]
        s.fast_writer = fast(s.writer)  # type: ignore[attr-defined]
        s.fast_read_tail = tail(fast(s.read_arg))  # type: ignore[attr-defined]
        s.fast_write_tail = tail(fast(s.write_arg))  # type: ignore[attr-defined]
        s.attr = s.field.attr  # type: ignore[attr-defined]
        if s.kind == "absent":
            s.default = (  # type: ignore[attr-defined]
                "[]" if isinstance(s.field.default, list) else default_source(s.field, names)
            )
        if s.kind == "fixed":
            parts = ", ".join(f'("{f.name}", "{f.attr}", "{c}")' for f, c in zip(s.fields, s.fmt))
            s.label = f"({parts},)"  # type: ignore[attr-defined]
            targets = ", ".join(local_name(f) for f in s.fields)
            s.targets = f"({targets},)" if len(s.fields) == 1 else targets  # type: ignore[attr-defined]
            s.sources = ", ".join(f"o.{f.attr}" for f in s.fields)  # type: ignore[attr-defined]
            attrs = ", ".join(f"o.{f.attr}" for f in s.fields)
            s.attr_targets = f"({attrs},)" if len(s.fields) == 1 else attrs  # type: ignore[attr-defined]
    for t in codec.tagged:
        t.local = local_name(t.field)  # type: ignore[attr-defined]
        t.hint = type_hint(t.field, names)  # type: ignore[attr-defined]
        t.default = default_source(t.field, names)  # type: ignore[attr-defined]
        t.read_tail = tail(t.read_arg)  # type: ignore[attr-defined]
        t.write_tail = tail(t.write_arg)  # type: ignore[attr-defined]
        t.fast_reader = fast(t.reader)  # type: ignore[attr-defined]
        t.fast_writer = fast(t.writer)  # type: ignore[attr-defined]
        t.fast_read_tail = tail(fast(t.read_arg))  # type: ignore[attr-defined]
        t.fast_write_tail = tail(fast(t.write_arg))  # type: ignore[attr-defined]
    if codec.head is not None:
        names_read = ", ".join(f.name for f in codec.head_fields if f.present(codec.versions[0]))
        codec.head_summary = (  # type: ignore[attr-defined]
            f"Reads {names_read or 'nothing'} on the fast path; every later field keeps its default, "
            f"unread. On any failure the caller reads the whole body with the checked decoder: "
            f"{codec.decode_name}."
        )
        codec.head_defaults = [  # type: ignore[attr-defined]
            (f.attr, "[]" if isinstance(f.default, list) else default_source(f, names))
            for f in codec.head_skipped
        ]
    invalid = tuple(codec.invalid_tags)
    codec.invalid_tags_text = repr(invalid)  # type: ignore[attr-defined]
    codec.invalid_tail = tail(repr(invalid) if invalid else "")  # type: ignore[attr-defined]
    known = tuple(codec.known_tags)
    codec.known_tags_text = repr(known)  # type: ignore[attr-defined]
    read = {id(f) for s in codec.steps if s.kind != "absent" for f in s.fields}
    read |= {id(t.field) for t in codec.tagged}
    args = []
    for f in codec.struct.fields:
        args.append(local_name(f) if id(f) in read else default_source(f, names))
    args.append("unknown_tags" if codec.flexible else "{}")
    if codec.flexible:
        # Tags in wire order, kept only when the section held any (see the class's wire_tags).
        args.append(
            "(tuple(seen) if seen else None)" if codec.tagged else "wire_order(unknown_tags)"
        )
    codec.ctor_args = args  # type: ignore[attr-defined]
    codec.decode_empty = not codec.flexible and all(  # type: ignore[attr-defined]
        s.kind == "absent" for s in codec.steps
    )


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    """One environment per process: an Environment caches the templates it has compiled, and a
    new one per module compiled the templates again for each (34 of the 35 s that compiling
    Kafka's 188 schemas took under a profiler)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


class Obj:
    def __init__(self, d: dict[str, Any]):
        self.__dict__.update(d)
