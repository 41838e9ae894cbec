"""Hypothesis strategies for any compiled message at any version, derived from the model.

Nothing here is written per message: the generator's own model says which fields a version has,
their types, nullability and tags, and the strategy builds instances of the generated classes.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import strategies as st

from generator import loader
from generator.model import FIXED, INT_RANGES, Field, Message, Struct, build_message


def load_message(path: Path) -> Message:
    raw, problems = loader.load(path, str(path))
    assert raw is not None, problems
    message, problems = build_message(raw, str(path))
    assert message is not None, problems
    return message


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind == "bool":
        return st.booleans()
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.one_of(
            st.integers(lo, hi), st.sampled_from([lo, hi, -1, 0]).filter(lambda x: lo <= x <= hi)
        )
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "uuid":
        return st.uuids()
    if kind == "string":
        return st.text(max_size=12)
    if kind in ("bytes", "records"):
        return st.binary(max_size=16)
    raise AssertionError(kind)


class Strategies:
    """Builds strategies for one message against one generated module."""

    def __init__(
        self,
        message: Message,
        module: ModuleType,
        unknown_tags: bool = True,
        overrides: dict[str, st.SearchStrategy[Any]] | None = None,
    ):
        self.message = message
        self.module = module
        self.unknown_tags = unknown_tags
        self.overrides = overrides or {}  # schema field name -> strategy (for peers' limits)

    def value(self, f: Field, v: int) -> st.SearchStrategy[Any]:
        if f.name in self.overrides:
            return self.overrides[f.name]
        t = f.type
        if t.kind == "array":
            assert t.element is not None
            if t.element.kind == "struct":
                assert f.struct is not None
                elem = self.struct(f.struct, v)
            else:
                elem = _scalar(t.element.kind)
            base: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
        elif t.kind == "struct":
            assert f.struct is not None
            base = self.struct(f.struct, v)
        else:
            base = _scalar(t.kind)
        if f.is_nullable(v):
            base = st.one_of(st.none(), base)
        return base

    def struct(self, struct: Struct, v: int) -> st.SearchStrategy[Any]:
        cls = getattr(self.module, struct.name)
        kwargs: dict[str, st.SearchStrategy[Any]] = {
            f.attr: self.value(f, v) for f in struct.fields if f.present(v)
        }
        if self.unknown_tags and self.message.flexible_at(v):
            first_free = len(struct.tagged_fields)
            kwargs["unknown_tags"] = st.dictionaries(
                st.integers(first_free, first_free + 300), st.binary(max_size=6), max_size=2
            )
        return st.builds(cls, **kwargs)

    def message_at(self, v: int) -> st.SearchStrategy[Any]:
        return self.struct(self.message.root, v)


def present_dict(obj: Any, v: int) -> dict[str, Any]:
    """The fields of obj present at version v, as plain data for the peer adapters."""
    out: dict[str, Any] = {}
    for info in type(obj).FIELDS:
        if v not in info.versions:
            continue
        value = getattr(obj, info.attr)
        if info.struct is not None:
            if isinstance(value, list):
                value = [present_dict(x, v) for x in value]
            elif value is not None:
                value = present_dict(value, v)
        out[info.attr] = value
    return out


__all__ = ["FIXED", "Strategies", "load_message", "present_dict"]
