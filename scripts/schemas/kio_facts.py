"""Rebuild Kafka-dialect JSON message schemas from the ``kio`` package, and compare wire layouts.

``kio`` ships one generated module per API version (``kio/schema/<api>/v<N>/request.py`` and
``response.py``): frozen dataclasses whose fields carry ``{"kafka_type": ...}`` and
``{"tag": N}`` metadata.  This module reads those per-version facts back and merges them into one
schema in the JSON dialect of Kafka's ``clients/src/main/resources/common/message/*.json``, so
that kwire can compile messages for which we have no upstream JSON file (the share-group,
streams-group and newer KRaft APIs).

Public API:

- :func:`kio_schema` rebuilds the schema dict for one message name, or returns ``None`` when kio
  does not know the message.
- :func:`layout` flattens any Kafka-dialect schema (rebuilt or upstream, with ``commonStructs``)
  into its wire layout for one version; two schemas encode a version identically when their
  layouts are equal.
- :func:`compare_with_reference` runs :func:`layout` over every message that both kio and a
  directory of upstream JSON files define, for every version both have.
- :func:`main` is the command line: ``python -m scripts.schemas.kio_facts NAME`` prints one
  schema, ``--all-extra OUTDIR`` writes the messages only kio has, ``--verify [DIR]`` prints the
  comparison with the reference schemas.

What cannot be recovered from kio is left out: ``mapKey``, ``ignorable``, ``deprecatedVersions``,
``listeners`` and ``latestVersionUnstable``.  ``about`` comes from the attribute docstrings of
the newest version that has the field.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import datetime
import functools
import importlib
import json
import pathlib
import sys
import types
import typing
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The generator's dialect reader (// and /* */ comments), from the checkout this file is in.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from generator.loader import strip_comments  # noqa: E402

__all__ = [
    "KioSchemaError",
    "EXTRA_MESSAGES",
    "kio_schema",
    "kio_message_names",
    "layout",
    "load_reference",
    "compare_with_reference",
    "main",
]

# ../shared/reference-schemas beside the checkout (the 2024-10 upstream snapshot).
DEFAULT_REFERENCE_DIR = pathlib.Path(__file__).resolve().parents[3] / "shared" / "reference-schemas"

#: APIs that only kio has among kwire's schema sources (Kafka 4.1+).
KIO_ONLY_APIS: tuple[str, ...] = (
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
    "DescribeShareGroupOffsets",
    "StreamsGroupDescribe",
    "StreamsGroupHeartbeat",
)

#: Messages kio has beyond kwire's other schema sources (written by ``--all-extra``).
EXTRA_MESSAGES: tuple[str, ...] = tuple(
    f"{api}{kind}"
    for api in (
        *KIO_ONLY_APIS,
        "ShareFetch",
        "ShareAcknowledge",
        "ShareGroupHeartbeat",
        "ShareGroupDescribe",
        "WriteShareGroupState",
        "ReadShareGroupStateSummary",
        "AddRaftVoter",
        "BrokerHeartbeat",
        "ConsumerGroupDescribe",
        "Vote",
    )
    for kind in ("Request", "Response")
)

#: kio's ``kafka_type`` metadata values that are richer Python types over a plain Kafka type.
_KIO_TYPE_TO_KAFKA: dict[str, str] = {
    "error_code": "int16",
    "timedelta_i32": "int32",
    "timedelta_i64": "int64",
    "datetime_i64": "int64",
}
#: kio strips the ``Ms`` suffix from the names of fields it maps to timedelta/datetime.
_MS_STRIPPED = frozenset({"timedelta_i32", "timedelta_i64", "datetime_i64"})

PRIMITIVE_TYPES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "string",
        "bytes",
        "records",
        "uuid",
    }
)
_INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})

#: Upstream names that do not start with a capital letter, so a snake_case attribute cannot tell
#: them apart from the usual CamelCase spelling.  Keyed by message, then by recovered name.
_NAME_OVERRIDES: dict[str, dict[str, str]] = {
    "CreateTopicsRequest": {"TimeoutMs": "timeoutMs", "ValidateOnly": "validateOnly"},
    "UpdateFeaturesRequest": {"TimeoutMs": "timeoutMs"},
}

_MAX_VERSION = 32767


class KioSchemaError(ValueError):
    """kio's per-version modules disagree in a way one Kafka schema cannot express."""


# ------------------------------------------------------------------------------------------------
# version ranges


@functools.lru_cache(maxsize=None)
def parse_versions(text: str | int | None) -> range:
    """The versions named by a Kafka version range (``"N"``, ``"A-B"``, ``"A+"``, ``none``).

    Returned as a ``range`` (cheap membership tests); ``"A+"`` ends at 32767 like upstream.
    """
    if text is None:
        return range(0)
    spec = str(text).strip()
    if spec in ("", "none"):
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), _MAX_VERSION + 1)
    if "-" in spec:
        low, high = spec.split("-", 1)
        return range(int(low), int(high) + 1)
    return range(int(spec), int(spec) + 1)


def format_versions(versions: Iterable[int], last: int, what: str) -> str:
    """Write a contiguous set of versions as a Kafka range; ``last`` is the message's top version.

    A set that reaches ``last`` is open-ended (``"A+"``).  Raises :class:`KioSchemaError` when the
    set has a hole, because a single Kafka field cannot express that.
    """
    ordered = sorted(set(versions))
    if not ordered:
        return "none"
    low, high = ordered[0], ordered[-1]
    if ordered != list(range(low, high + 1)):
        raise KioSchemaError(f"{what}: versions {ordered} are not contiguous")
    if high == last:
        return f"{low}+"
    if low == high:
        return str(low)
    return f"{low}-{high}"


# ------------------------------------------------------------------------------------------------
# reading kio


@dataclasses.dataclass(frozen=True)
class _Entry:
    """Where kio keeps one message: api package name, entity kind and the class per version."""

    api: str
    kind: str
    paths: dict[int, str]


@functools.cache
def _kio_index() -> dict[str, _Entry]:
    from kio.schema.index import schema_name_map

    found: dict[str, _Entry] = {}
    for api, version_map in schema_name_map.items():
        for version, kinds in version_map.items():
            for kind, path in kinds.items():
                class_name = path.rsplit(":", 1)[1]
                entry = found.setdefault(class_name, _Entry(api, kind.name, {}))
                entry.paths[int(version)] = path
    return found


def kio_message_names(*, messages_only: bool = True) -> list[str]:
    """Names kio has, sorted: requests and responses, or also headers and data records."""
    return sorted(
        n for n, e in _kio_index().items() if not messages_only or e.kind in ("request", "response")
    )


def _load_class(path: str) -> type:
    module_name, class_name = path.split(":", 1)
    cls = getattr(importlib.import_module(module_name), class_name)
    assert isinstance(cls, type)
    return cls


@functools.cache
def _docstrings(module_file: str) -> dict[tuple[str, str], str]:
    """Attribute docstrings of the dataclasses in one kio module: (class, attribute) -> text."""
    tree = ast.parse(pathlib.Path(module_file).read_text(encoding="utf-8"))
    found: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        body = node.body
        for stmt, following in zip(body, body[1:]):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                found[(node.name, stmt.target.id)] = following.value.value
    return found


def _about(cls: type, attr: str) -> str | None:
    module = sys.modules[cls.__module__]
    module_file = getattr(module, "__file__", None)
    if module_file is None:
        return None
    return _docstrings(module_file).get((cls.__name__, attr))


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (annotation, False)."""
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise KioSchemaError(f"unsupported union annotation {annotation!r}")
        return args[0], True
    return annotation, False


def _entity_type(annotation: Any) -> str | None:
    """kio's nominal types (``BrokerId``, ``TopicName``...) stand for Kafka's ``entityType``."""
    if isinstance(annotation, type) and annotation.__module__ == "kio.schema.types":
        return annotation.__name__[0].lower() + annotation.__name__[1:]
    return None


def _kafka_name(attr: str, kio_type: str | None) -> str:
    """Recover the CamelCase Kafka name from kio's snake_case attribute."""
    base = attr.rstrip("_")  # kio appends "_" to names that shadow Python builtins
    name = "".join(part[:1].upper() + part[1:] for part in base.split("_"))
    if kio_type in _MS_STRIPPED and not name.endswith("Ms"):
        name += "Ms"
    return name


def _default_text(value: Any, kio_type: str | None, is_array: bool) -> str | None:
    """kio's dataclass default as a Kafka ``default`` string; None when there is none to state."""
    if value is dataclasses.MISSING:
        return None
    if value is None and is_array:
        return "null"
    if value is None:
        if kio_type == "datetime_i64":
            return "-1"  # kio maps the -1 sentinel to None
        if kio_type == "uuid":
            return None  # kio maps the zero uuid to None; that is uuid's natural default
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.timedelta):
        return str(round(value.total_seconds() * 1000))
    if isinstance(value, datetime.datetime):
        return str(round(value.timestamp() * 1000))
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, uuid.UUID):
        return None if value.int == 0 else str(value)
    # () for arrays, an entity instance for structs, b"" for bytes: no Kafka default to state.
    return None


def _zero_text(kafka_type: str) -> str | None:
    if kafka_type in _INT_TYPES:
        return "0"
    if kafka_type == "bool":
        return "false"
    if kafka_type == "float64":
        return "0.0"
    if kafka_type == "string":
        return ""
    return None


@dataclasses.dataclass(frozen=True)
class _VersionField:
    """One dataclass field of one kio version, translated to Kafka terms."""

    attr: str
    name: str
    kafka_type: str  # "int32", "[]int32", "Struct", "[]Struct"
    struct: type | None  # the nested dataclass for struct types
    nullable: bool
    tag: int | None
    default: str | None  # Kafka default text, None when kio has none to state
    entity_type: str | None
    about: str | None


@functools.cache
def _version_fields(cls: type, message: str, top_level: bool) -> tuple[_VersionField, ...]:
    result: list[_VersionField] = []
    for f in dataclasses.fields(cls):
        annotation, optional = _strip_optional(f.type)
        kio_type = f.metadata.get("kafka_type")
        tag = f.metadata.get("tag")
        struct: type | None = None
        if typing.get_origin(annotation) is tuple:
            args = typing.get_args(annotation)
            if len(args) != 2 or args[1] is not Ellipsis:
                raise KioSchemaError(f"{cls.__name__}.{f.name}: unsupported tuple {annotation!r}")
            element, _ = _strip_optional(args[0])  # tuple[uuid.UUID | None, ...]
            if dataclasses.is_dataclass(element):
                assert isinstance(element, type)
                struct = element
                kafka_type = f"[]{element.__name__}"
            elif kio_type is None:
                raise KioSchemaError(f"{cls.__name__}.{f.name}: no kafka_type metadata")
            else:
                kafka_type = "[]" + _KIO_TYPE_TO_KAFKA.get(kio_type, kio_type)
            entity = _entity_type(element)
        elif dataclasses.is_dataclass(annotation):
            assert isinstance(annotation, type)
            struct = annotation
            kafka_type = annotation.__name__
            entity = None
        else:
            if kio_type is None:
                raise KioSchemaError(f"{cls.__name__}.{f.name}: no kafka_type metadata")
            kafka_type = _KIO_TYPE_TO_KAFKA.get(kio_type, kio_type)
            entity = _entity_type(annotation)
        if kafka_type.removeprefix("[]") not in PRIMITIVE_TYPES and struct is None:
            raise KioSchemaError(f"{cls.__name__}.{f.name}: unknown kafka_type {kio_type!r}")
        # A scalar uuid / datetime_i64 is optional in kio only to model the zero uuid / the -1
        # sentinel; an optional tuple is a real nullable array whatever its element type.
        sentinel = kio_type in ("uuid", "datetime_i64") and not kafka_type.startswith("[]")
        nullable = optional and not sentinel
        name = _kafka_name(f.name, kio_type)
        if top_level:
            name = _NAME_OVERRIDES.get(message, {}).get(name, name)
        result.append(
            _VersionField(
                attr=f.name,
                name=name,
                kafka_type=kafka_type,
                struct=struct,
                nullable=nullable,
                tag=None if tag is None else int(tag),
                default=_default_text(f.default, kio_type, kafka_type.startswith("[]")),
                entity_type=entity,
                about=_about(cls, f.name),
            )
        )
    return tuple(result)


# ------------------------------------------------------------------------------------------------
# merging versions


def _merge_order(per_version: Mapping[int, Sequence[_VersionField]], where: str) -> list[str]:
    """One field order that agrees with the order of every version (tagged fields excepted)."""
    merged: list[str] = []
    for version in sorted(per_version):
        previous: str | None = None
        for vf in per_version[version]:
            if vf.attr not in merged:
                at = merged.index(previous) + 1 if previous is not None else 0
                merged.insert(at, vf.attr)
            previous = vf.attr
    position = {attr: i for i, attr in enumerate(merged)}
    for version, fields in per_version.items():
        order = [position[vf.attr] for vf in fields if vf.tag is None]
        if order != sorted(order):
            names = [vf.attr for vf in fields]
            raise KioSchemaError(
                f"{where}: field order of v{version} {names} conflicts with other versions"
            )
    return merged


def _one(values: dict[int, Any], what: str) -> Any:
    distinct = set(values.values())
    if len(distinct) != 1:
        detail = ", ".join(f"v{v}: {values[v]!r}" for v in sorted(values))
        raise KioSchemaError(f"{what} changes across versions ({detail})")
    return distinct.pop()


class _Builder:
    def __init__(self, message: str, last: int, flexible: frozenset[int]) -> None:
        self.message = message
        self.last = last
        self.flexible = flexible
        self.common: dict[str, dict[str, Any]] = {}
        self.common_names: set[str] = set()
        self._uses: dict[str, dict[int, type]] = {}  # struct name -> version -> class

    def fields(
        self, per_version: Mapping[int, Sequence[_VersionField]], where: str
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for attr in _merge_order(per_version, where):
            present = {
                v: vf for v, fields in per_version.items() for vf in fields if vf.attr == attr
            }
            out.append(self.field(present, f"{where}.{attr}"))
        return out

    def field(self, present: dict[int, _VersionField], where: str) -> dict[str, Any]:
        versions = sorted(present)
        newest = present[versions[-1]]
        name = _one({v: vf.name for v, vf in present.items()}, f"{where}: name")
        kafka_type = _one({v: vf.kafka_type for v, vf in present.items()}, f"{where}: type")
        spec: dict[str, Any] = {
            "name": name,
            "type": kafka_type,
            "versions": format_versions(versions, self.last, f"{where} versions"),
        }
        if self.message == "RequestHeader" and name == "ClientId":
            # kio's writer special-cases this attribute: always a non-compact string.
            spec["flexibleVersions"] = "none"
        nullable = [v for v, vf in present.items() if vf.nullable]
        if nullable:
            spec["nullableVersions"] = format_versions(nullable, self.last, f"{where} nullable")
        tagged = {v: vf.tag for v, vf in present.items() if vf.tag is not None}
        if tagged:
            spec["taggedVersions"] = format_versions(tagged, self.last, f"{where} tagged")
            spec["tag"] = _one(tagged, f"{where}: tag")
            if not set(tagged) <= self.flexible:
                raise KioSchemaError(f"{where}: tagged in a non-flexible version")
        entity = {vf.entity_type for vf in present.values()} - {None}
        if len(entity) == 1:
            spec["entityType"] = entity.pop()
        defaults = {v: vf.default for v, vf in present.items()}
        default = _one(defaults, f"{where}: default")
        element = kafka_type.removeprefix("[]")
        if default is not None:
            if element in PRIMITIVE_TYPES and not kafka_type.startswith("[]"):
                # A tagged field states its default even when it is the natural one.
                if tagged or default != _zero_text(kafka_type):
                    spec["default"] = default
            elif default == "null":
                spec["default"] = default
        if newest.about:
            spec["about"] = newest.about
        if newest.struct is not None:
            structs = {v: vf.struct for v, vf in present.items()}
            if element in self.common_names:
                self.common_struct(element)
            else:
                sub = {v: _version_fields(s, self.message, False) for v, s in structs.items()}
                spec["fields"] = self.fields(sub, where)
        return spec

    def common_struct(self, name: str) -> None:
        if name in self.common:
            return
        self.common[name] = {}  # placeholder against recursion
        per_version = {
            v: _version_fields(cls, self.message, False) for v, cls in self._uses[name].items()
        }
        self.common[name] = {
            "name": name,
            "versions": format_versions(per_version, self.last, f"struct {name}"),
            "fields": self.fields(per_version, name),
        }

    def find_shared_structs(self, roots: dict[int, type]) -> None:
        """Struct classes reached through more than one field become ``commonStructs``."""
        paths: dict[str, set[str]] = {}

        def visit(cls: type, version: int, prefix: str) -> None:
            for vf in _version_fields(cls, self.message, False):
                if vf.struct is None:
                    continue
                struct_name = vf.struct.__name__
                paths.setdefault(struct_name, set()).add(prefix + vf.attr)
                known = self._uses.setdefault(struct_name, {}).setdefault(version, vf.struct)
                if known is not vf.struct:
                    raise KioSchemaError(f"two different classes named {struct_name} in v{version}")
                visit(vf.struct, version, f"{prefix}{vf.attr}.")

        for version, cls in roots.items():
            visit(cls, version, "")
        self.common_names = {n for n, p in paths.items() if len(p) > 1}


def kio_schema(name: str) -> dict[str, Any] | None:
    """Rebuild the Kafka-dialect schema of message ``name`` from every version kio has.

    Returns None when kio does not know ``name``.  Raises :class:`KioSchemaError` when a field's
    type, tag, name or default changes between versions, when a field's versions have a hole, or
    when the field orders of two versions cannot be reconciled.
    """
    entry = _kio_index().get(name)
    if entry is None:
        return None
    roots = {v: _load_class(p) for v, p in sorted(entry.paths.items())}
    all_versions = sorted(roots)
    last = all_versions[-1]
    flexible = frozenset(v for v, cls in roots.items() if getattr(cls, "__flexible__", False))
    if flexible and sorted(flexible) != list(range(min(flexible), last + 1)):
        raise KioSchemaError(f"{name}: flexible versions {sorted(flexible)} are not a suffix")
    valid = format_versions(all_versions, last, f"{name} validVersions")
    if valid.endswith("+"):
        low = valid[:-1]
        valid = low if int(low) == last else f"{low}-{last}"

    schema: dict[str, Any] = {}
    api_keys = {v: int(getattr(cls, "__api_key__", -1)) for v, cls in roots.items()}
    api_key = _one(api_keys, f"{name}: apiKey")
    if api_key >= 0:
        schema["apiKey"] = api_key
    schema["type"] = entry.kind
    schema["name"] = name
    schema["validVersions"] = valid
    schema["flexibleVersions"] = f"{min(flexible)}+" if flexible else "none"

    builder = _Builder(name, last, flexible)
    builder.find_shared_structs(roots)
    per_version = {v: _version_fields(cls, name, True) for v, cls in roots.items()}
    fields = builder.fields(per_version, name)
    if builder.common:
        schema["commonStructs"] = [builder.common[n] for n in sorted(builder.common)]
    schema["fields"] = fields
    return schema


# ------------------------------------------------------------------------------------------------
# wire layout


def load_reference(path: str | pathlib.Path) -> dict[str, Any]:
    """Parse one upstream schema file (which carries comments)."""
    loaded = json.loads(strip_comments(pathlib.Path(path).read_text(encoding="utf-8")))
    assert isinstance(loaded, dict)
    return loaded


def _field_versions(field: dict[str, Any]) -> range:
    if "versions" in field:
        return parse_versions(field["versions"])
    return parse_versions(field.get("taggedVersions"))


def layout(
    schema: dict[str, Any], version: int, *, struct_names: bool = False
) -> list[tuple[str, str, bool, int | None]]:
    """The wire layout of ``schema`` at ``version``, flattened depth first.

    One row ``(path, type, nullable, tag)`` per field present in ``version``: ``path`` joins field
    names with dots from the message root; ``type`` is the Kafka type, with struct types written
    ``"struct"`` / ``"[]struct"`` unless ``struct_names`` (struct names are not on the wire);
    ``nullable`` is whether ``version`` is in ``nullableVersions``; ``tag`` is the tag when the
    field is sent tagged in this version, else None.  Rows follow wire order: within every
    struct, the untagged fields in declaration order, then the tagged ones by tag (that is the
    order of the tagged-field section).  A struct's rows are followed by its own fields' rows.
    ``commonStructs`` are resolved by name.  Raises KeyError for an unresolvable struct type.
    """
    flexible = version in parse_versions(schema.get("flexibleVersions"))
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    rows: list[tuple[str, str, bool, int | None]] = []

    def walk(fields: Sequence[dict[str, Any]], prefix: str) -> None:
        present = [f for f in fields if version in _field_versions(f)]

        def tag_of(f: dict[str, Any]) -> int | None:
            if flexible and version in parse_versions(f.get("taggedVersions")):
                return int(f["tag"])
            return None

        untagged = [f for f in present if tag_of(f) is None]
        tagged = sorted((f for f in present if tag_of(f) is not None), key=lambda f: int(f["tag"]))
        for f in untagged + tagged:
            path = prefix + f["name"]
            kafka_type = str(f["type"])
            is_array = kafka_type.startswith("[]")
            element = kafka_type.removeprefix("[]")
            is_struct = element not in PRIMITIVE_TYPES
            shown = kafka_type
            if is_struct and not struct_names:
                shown = "[]struct" if is_array else "struct"
            nullable = version in parse_versions(f.get("nullableVersions"))
            rows.append((path, shown, nullable, tag_of(f)))
            if is_struct:
                sub = f.get("fields") or common[element]["fields"]
                walk(sub, path + ".")

    walk(schema.get("fields", []), "")
    return rows


# ------------------------------------------------------------------------------------------------
# verification against upstream files


@dataclasses.dataclass
class Comparison:
    """Outcome of :func:`compare_with_reference`.

    ``agree`` and ``disagree`` count message-versions whose :func:`layout` is equal / differs;
    ``disagree`` entries carry a reason, prefixed ``names only:`` when the two layouts match once
    field names are dropped (same bytes on the wire).  ``notes`` lists differences that are not
    part of the layout: struct names and field defaults.
    """

    agree: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    disagree: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    notes: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    skipped: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"message-versions compared: {len(self.agree) + len(self.disagree)}",
            f"agree: {len(self.agree)}",
            f"disagree: {len(self.disagree)}",
        ]
        lines += [f"  {m} v{v}: {why}" for m, v, why in self.disagree]
        lines.append(f"other differences (struct names, defaults): {len(self.notes)}")
        lines += [f"  {m} v{v}: {why}" for m, v, why in self.notes]
        lines.append(f"messages with no shared version or not rebuildable: {len(self.skipped)}")
        lines += [f"  {m}: {why}" for m, why in self.skipped]
        return "\n".join(lines)


def _first_difference(ours: Sequence[Any], theirs: Sequence[Any]) -> str:
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"row {i}: kio {a} vs reference {b}"
    if len(ours) > len(theirs):
        return f"kio has extra rows {list(ours[len(theirs):])}"
    return f"reference has extra rows {list(theirs[len(ours):])}"


def _normal_default(field: dict[str, Any]) -> str | None:
    """A field's default as comparable text; None when it is the type's natural default."""
    if "default" not in field or field["default"] is None:
        return None
    raw = field["default"]
    text = ("true" if raw else "false") if isinstance(raw, bool) else str(raw)
    kafka_type = str(field["type"])
    if kafka_type in _INT_TYPES and text.strip().lower().startswith(("0x", "-0x")):
        text = str(int(text, 16))
    if kafka_type == "float64" and text != "null":
        text = repr(float(text))
    if kafka_type == "bool":
        text = text.lower()
    return None if text == _zero_text(kafka_type) else text


def _defaults(schema: dict[str, Any], version: int) -> dict[str, str | None]:
    """Path -> normalised default of every field present in ``version``."""
    common = {s["name"]: s for s in schema.get("commonStructs", [])}
    found: dict[str, str | None] = {}

    def walk(fields: Sequence[dict[str, Any]], prefix: str) -> None:
        for f in fields:
            if version not in _field_versions(f):
                continue
            path = prefix + f["name"]
            found[path] = _normal_default(f)
            element = str(f["type"]).removeprefix("[]")
            if element not in PRIMITIVE_TYPES:
                walk(f.get("fields") or common[element]["fields"], path + ".")

    walk(schema.get("fields", []), "")
    return found


def compare_with_reference(reference_dir: str | pathlib.Path = DEFAULT_REFERENCE_DIR) -> Comparison:
    """Compare :func:`layout` of every message kio and ``reference_dir`` both have, per version."""
    result = Comparison()
    known = set(kio_message_names(messages_only=False))
    for path in sorted(pathlib.Path(reference_dir).glob("*.json")):
        reference = load_reference(path)
        name = reference.get("name")
        if name not in known:
            continue
        try:
            ours = kio_schema(name)
        except KioSchemaError as exc:
            result.skipped.append((name, f"kio_schema raised: {exc}"))
            continue
        assert ours is not None
        theirs_valid = parse_versions(reference["validVersions"])
        shared = [v for v in parse_versions(ours["validVersions"]) if v in theirs_valid]
        if not shared:
            result.skipped.append(
                (
                    name,
                    f"no shared version (kio {ours['validVersions']}, "
                    f"reference {reference['validVersions']})",
                )
            )
            continue
        for version in shared:
            mine, theirs = layout(ours, version), layout(reference, version)
            if mine == theirs:
                result.agree.append((name, version))
            else:
                why = _first_difference(mine, theirs)
                if [r[1:] for r in mine] == [r[1:] for r in theirs]:
                    why = f"names only: {why}"
                result.disagree.append((name, version, why))
                continue
            named_mine = layout(ours, version, struct_names=True)
            named_theirs = layout(reference, version, struct_names=True)
            if named_mine != named_theirs:
                why = _first_difference(named_mine, named_theirs)
                result.notes.append((name, version, f"struct name: {why}"))
            default_mine, default_theirs = _defaults(ours, version), _defaults(reference, version)
            for field_path, value in default_theirs.items():
                if default_mine.get(field_path) != value:
                    result.notes.append(
                        (
                            name,
                            version,
                            f"default of {field_path}: kio {default_mine.get(field_path)!r} "
                            f"vs reference {value!r}",
                        )
                    )
    return result


# ------------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("names", nargs="*", help="message names to print as JSON")
    parser.add_argument("--all-extra", metavar="OUTDIR", help="write EXTRA_MESSAGES as files")
    parser.add_argument(
        "--verify",
        metavar="DIR",
        nargs="?",
        const=str(DEFAULT_REFERENCE_DIR),
        help="compare wire layouts with the upstream schemas in DIR",
    )
    args = parser.parse_args(argv)
    if not (args.names or args.all_extra or args.verify):
        parser.error("give a message name, --all-extra OUTDIR or --verify")
    status = 0
    for name in args.names:
        schema = kio_schema(name)
        if schema is None:
            print(f"kio has no message {name!r}", file=sys.stderr)
            status = 1
            continue
        print(json.dumps(schema, indent=2))
    if args.all_extra:
        outdir = pathlib.Path(args.all_extra)
        outdir.mkdir(parents=True, exist_ok=True)
        for name in EXTRA_MESSAGES:
            schema = kio_schema(name)
            if schema is None:
                print(f"kio has no message {name!r}", file=sys.stderr)
                status = 1
                continue
            (outdir / f"{name}.json").write_text(json.dumps(schema, indent=2) + "\n")
            print(f"wrote {outdir / f'{name}.json'} (versions {schema['validVersions']})")
    if args.verify:
        comparison = compare_with_reference(args.verify)
        print(comparison.summary())
        if comparison.disagree:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
