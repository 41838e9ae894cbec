"""Reads dialect files the way Kafka's Jackson reader does, then applies the meta-schema.

Leniencies kept on purpose (kafka-wire.md sections 1 and 7.13): // and /* */ comments, a lone value
where a list is expected, scalars coerced to text (defaults) or numbers (tags) by the model later.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from .errors import SchemaProblem, json_path

_LIST_KEYS = ("fields", "commonStructs", "listeners")
_META_SCHEMA = Path(__file__).with_name("dialect.schema.json")


def strip_comments(text: str) -> str:
    """Removes // and /* */ comments outside string literals, keeping line numbers."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise ValueError("unterminated /* comment")
            out.append("\n" * text.count("\n", i, j))
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _single_as_list(node: Any) -> Any:
    """Jackson's ACCEPT_SINGLE_VALUE_AS_ARRAY for the keys that hold lists."""
    if isinstance(node, dict):
        for key in _LIST_KEYS:
            if key in node and isinstance(node[key], (dict, str)):
                node[key] = [node[key]]
        for value in node.values():
            _single_as_list(value)
    elif isinstance(node, list):
        for item in node:
            _single_as_list(item)
    return node


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    schema = json.loads(_META_SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _describe(error: jsonschema.ValidationError) -> tuple[str, str]:
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return json_path(path + [missing]), "is required"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return json_path(path), f"unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}"
    if error.validator in ("oneOf", "anyOf"):
        expected = error.schema.get("description") or "a value of the right type"
        return json_path(path), f"{json.dumps(error.instance)} is not {expected}"
    return json_path(path), error.message


def load(path: Path, display: str) -> tuple[dict[str, Any] | None, list[SchemaProblem]]:
    """Parses one file and checks its structure; returns the raw spec or the problems."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return None, [SchemaProblem(display, "", f"cannot read: {e}")]
    try:
        raw = json.loads(strip_comments(text))
    except (ValueError, RecursionError) as e:
        return None, [SchemaProblem(display, "", f"malformed JSON: {e}")]
    raw = _single_as_list(raw)
    errors = sorted(_validator().iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    problems = []
    for error in errors:
        where, what = _describe(error)
        problems.append(SchemaProblem(display, where, what))
    return (None if problems else raw), problems
