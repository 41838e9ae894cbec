"""The model: the truth about a schema file, with every dialect rule checked once at load time.

Messages hold structs; structs hold fields; every field knows its effective versions (already
intersected with its struct and the message), nullability, tagging and parsed default. Problems are
collected, never raised one by one, so a run reports all of them.
"""

from __future__ import annotations

import base64
import keyword
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from .errors import SchemaProblem, json_path
from .versions import ALL, NONE, VersionSyntaxError, Versions

# schema type -> (struct format char, width)
FIXED = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
PRIMITIVES = set(FIXED) | {"uuid", "string", "bytes", "records"}
NULLABLE_KINDS = {"string", "bytes", "records", "array", "struct"}
ENTITY_TYPES = {
    "transactionalId": "string",
    "producerId": "int64",
    "groupId": "string",
    "topicName": "string",
    "brokerId": "int32",
}
FIELD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")

# Header-version exceptions that live in Kafka's ApiKeys, not in any schema (kafka-wire.md 4.2).
REQUEST_HEADER_V0 = frozenset({(7, 0)})  # ControlledShutdown v0 has no client id
RESPONSE_HEADER_ALWAYS_V0 = frozenset({18})  # ApiVersions responses (KIP-511)
RESPONSE_V0_FALLBACK = frozenset({18})  # brokers answer unknown ApiVersions versions with v0
REQUEST_V0_FALLBACK = frozenset({18})  # brokers read unknown ApiVersions versions as v0, unparsed


def snake_case(name: str) -> str:
    """GroupInstanceId -> group_instance_id; keywords get a trailing underscore."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) or out in ("unknown_tags",) else out


@dataclass(frozen=True)
class FieldType:
    kind: str  # a primitive name, "struct" or "array"
    struct_name: str | None = None
    element: "FieldType | None" = None

    @property
    def is_array(self) -> bool:
        return self.kind == "array"

    @property
    def is_struct(self) -> bool:
        return self.kind == "struct"

    @property
    def struct_of(self) -> str | None:
        """The struct name of a struct or an array of structs."""
        if self.kind == "array":
            assert self.element is not None
            return self.element.struct_name
        return self.struct_name

    def __str__(self) -> str:
        if self.kind == "array":
            return f"[]{self.element}"
        return self.struct_name if self.kind == "struct" else self.kind  # type: ignore[return-value]


class StructDefault:
    """Marker: the default of a struct field is a fresh all-defaults instance."""

    def __repr__(self) -> str:
        return "StructDefault"

    def __reduce__(self) -> str:
        return "STRUCT_DEFAULT"  # one marker per process: compared by identity


STRUCT_DEFAULT = StructDefault()


@dataclass(eq=False)
class Field:
    name: str
    attr: str
    type: FieldType
    versions: Versions  # effective: declared & struct & message
    declared: Versions
    nullable: Versions  # within versions
    tagged: Versions
    tag: int | None
    default: Any  # Python value; None for null; STRUCT_DEFAULT; [] for arrays
    default_is_null_text: bool  # the schema said "null"
    ignorable: bool
    map_key: bool
    flexible: Versions | None  # field-level override of compact encoding (string/bytes)
    zero_copy: bool
    entity_type: str
    about: str
    struct: "Struct | None" = None  # resolved for struct and []struct types
    json_path: str = ""

    def present(self, v: int) -> bool:
        return v in self.versions

    def is_tagged(self, v: int) -> bool:
        return v in self.versions and v in self.tagged

    def is_nullable(self, v: int) -> bool:
        return v in self.nullable

    @property
    def ever_nullable(self) -> bool:
        return not self.nullable.empty


@dataclass(eq=False)
class Struct:
    name: str
    versions: Versions
    fields: list[Field]
    common: bool = False
    json_path: str = ""

    @property
    def tagged_fields(self) -> list[Field]:
        return sorted((f for f in self.fields if f.tag is not None), key=lambda f: f.tag or 0)


@dataclass(eq=False)
class Message:
    name: str
    kind: str  # request, response, header, data, metadata, ...
    api_key: int | None
    valid: Versions
    flexible: Versions
    deprecated: Versions
    latest_unstable: bool
    root: Struct
    structs: list[Struct]  # every struct but the root, dependencies first
    file: str
    module: str
    listeners: list[str] = field(default_factory=list)

    def flexible_at(self, v: int) -> bool:
        return v in self.flexible


def module_name(message_name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", message_name).lower()


def _boolish(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


class _Builder:
    """Builds one Message from a raw spec, collecting problems instead of raising."""

    def __init__(self, raw: dict[str, Any], file: str):
        self.raw = raw
        self.file = file
        self.problems: list[SchemaProblem] = []
        self.structs: dict[str, Struct] = {}
        self.common: dict[str, dict[str, Any]] = {}
        self.order: list[Struct] = []
        self.flexible = NONE
        self.valid = NONE

    def bad(self, path: list[Any], problem: str) -> None:
        self.problems.append(SchemaProblem(self.file, json_path(path), problem))

    def versions(self, text: Any, path: list[Any], default: Versions | None = None) -> Versions:
        if text is None or (isinstance(text, str) and not text.strip()):
            return default if default is not None else NONE
        try:
            return Versions.parse(str(text))
        except VersionSyntaxError as e:
            self.bad(path, str(e))
            return NONE

    # -- message ------------------------------------------------------------------------------

    def build(self) -> Message | None:
        raw = self.raw
        name: str = raw["name"]
        kind: str = raw["type"]
        if not name[:1].isupper():
            self.bad(["name"], f"message name {name!r} must start with a capital letter")
        self.valid = self.versions(raw["validVersions"], ["validVersions"])
        if self.valid.empty:
            self.bad(["validVersions"], "validVersions must name at least one version")
        elif self.valid.open_ended:
            self.bad(["validVersions"], f"message {name} does not specify a maximum version")
        self.flexible = self.versions(raw["flexibleVersions"], ["flexibleVersions"])
        if not self.flexible.empty and not self.flexible.open_ended:
            self.bad(
                ["flexibleVersions"],
                f"flexibleVersions {raw['flexibleVersions']!r} must be either none, or an open-ended range",
            )
        deprecated = self.versions(raw.get("deprecatedVersions"), ["deprecatedVersions"])
        api_key = None
        if "apiKey" in raw:
            api_key = int(str(raw["apiKey"]).strip())
            if not 0 <= api_key <= 32767:
                self.bad(["apiKey"], f"apiKey {api_key} is not a valid int16 api key")
        if kind in ("request", "response"):
            suffix = kind.capitalize()
            if api_key is None:
                self.bad(["apiKey"], f"a {kind} needs an apiKey")
            if not name.endswith(suffix) or name == suffix:
                self.bad(["name"], f"the name of a {kind} must end in {suffix!r}")
        if kind != "request":
            if "listeners" in raw:
                self.bad(["listeners"], "listeners is only valid for messages of type request")
            if _boolish(raw.get("latestVersionUnstable", False)):
                self.bad(
                    ["latestVersionUnstable"],
                    "latestVersionUnstable is only valid for messages of type request",
                )

        for i, common in enumerate(raw.get("commonStructs", [])):
            cname = common["name"]
            if cname in self.common:
                self.bad(["commonStructs", i, "name"], f"common struct {cname} was specified twice")
            elif not cname[:1].isupper():
                self.bad(
                    ["commonStructs", i, "name"],
                    f"struct name {cname!r} must start with a capital letter",
                )
            self.common[cname] = dict(common, _path=["commonStructs", i])
        for cname, common in self.common.items():
            path = common["_path"]
            cversions = self.versions(common["versions"], path + ["versions"]) & self.valid
            self.struct(cname, cversions, common["fields"], path + ["fields"], common=True)

        root = Struct(name, self.valid, [], json_path="")
        root.fields = self.fields(raw["fields"], self.valid, ["fields"], top=True, owner=name)
        if name in self.structs:
            self.bad(["name"], f"struct {name} has the same name as its message")
        if self.problems:
            return None
        self.resolve(root)
        return Message(
            name=name,
            kind=kind,
            api_key=api_key,
            valid=self.valid,
            flexible=self.flexible,
            deprecated=deprecated,
            latest_unstable=_boolish(raw.get("latestVersionUnstable", False)),
            root=root,
            structs=self.order,
            file=self.file,
            module=module_name(name),
            listeners=list(raw.get("listeners", [])),
        )

    def resolve(self, root: Struct) -> None:
        """Links fields to their structs, then orders structs so dependencies come first."""
        structs = list(self.structs.values())
        for struct in [*structs, root]:
            for f in struct.fields:
                if f.type.struct_of is not None:
                    f.struct = self.structs[f.type.struct_of]
        ordered: list[Struct] = []
        seen: set[int] = set()

        def visit(struct: Struct) -> None:
            if id(struct) in seen:
                return
            seen.add(id(struct))
            for f in struct.fields:
                if f.struct is not None:
                    visit(f.struct)
            if struct is not root:
                ordered.append(struct)

        for struct in [*structs, root]:
            visit(struct)
        self.order = ordered

    # -- structs and fields -------------------------------------------------------------------

    def struct(
        self, name: str, versions: Versions, raw_fields: list[Any], path: list[Any], common: bool
    ) -> Struct:
        struct = Struct(name, versions, [], common=common, json_path=json_path(path))
        self.structs[name] = struct
        struct.fields = self.fields(raw_fields, versions, path, top=False, owner=name)
        return struct

    def fields(
        self, raw_fields: list[Any], parent: Versions, path: list[Any], top: bool, owner: str
    ) -> list[Field]:
        out: list[Field] = []
        names: set[str] = set()
        attrs: dict[str, str] = {}
        for i, raw in enumerate(raw_fields):
            f = self.field(raw, parent, path + [i], top)
            if f is None:
                continue
            if f.name in names:
                self.bad(path + [i, "name"], f"in {owner}, field {f.name} has a duplicate name")
            elif f.attr in attrs:
                self.bad(
                    path + [i, "name"],
                    f"in {owner}, field {f.name} maps to the same Python name {f.attr!r} as {attrs[f.attr]}",
                )
            names.add(f.name)
            attrs[f.attr] = f.name
            out.append(f)
        # Tags: unique and contiguous from 0, per struct.
        tags: dict[int, str] = {}
        for i, f in enumerate(out):
            if f.tag is None or f.tag < 0:  # negative tags are reported on their own
                continue
            if f.tag in tags:
                self.bad(
                    path + [i, "tag"],
                    f"in {owner}, field {f.name} has tag {f.tag}, already used by {tags[f.tag]} (duplicate tag ID)",
                )
            tags[f.tag] = f.name
        for expected in range(len(tags)):
            if expected not in tags:
                self.bad(
                    path,
                    f"in {owner}, the tag IDs are not contiguous: make use of tag {expected} "
                    f"before using any higher tag IDs",
                )
                break
        return out

    def parse_type(self, text: str, path: list[Any]) -> FieldType | None:
        text = text.strip()
        if text.startswith("[]"):
            inner = text[2:].strip()
            if not inner:
                self.bad(path, f"can't parse array type {text!r}: no element type found")
                return None
            if inner.startswith("[]"):
                self.bad(
                    path,
                    "can't have an array of arrays: use an array of structs containing an array instead",
                )
                return None
            element = self.parse_type(inner, path)
            return FieldType("array", element=element) if element else None
        if text in PRIMITIVES:
            return FieldType(text)
        if text[:1].isupper():
            if not FIELD_NAME.match(text):
                self.bad(path, f"struct name {text!r} is not a valid name")
                return None
            return FieldType("struct", struct_name=text)
        self.bad(path, f"can't parse type {text!r}")
        return None

    def field(
        self, raw: dict[str, Any], parent: Versions, path: list[Any], top: bool
    ) -> Field | None:
        name: str = raw["name"]
        if not FIELD_NAME.match(name):
            self.bad(path + ["name"], f"invalid field name {name!r}")
            return None
        ftype = self.parse_type(raw["type"], path + ["type"])
        tagged = self.versions(raw.get("taggedVersions"), path + ["taggedVersions"])
        if "versions" not in raw and tagged.empty:
            self.bad(path + ["versions"], f"you must specify the versions of field {name}")
            return None
        declared = self.versions(raw.get("versions"), path + ["versions"], default=tagged)
        nullable_declared = self.versions(raw.get("nullableVersions"), path + ["nullableVersions"])
        if ftype is None:
            return None
        versions = declared & parent
        kind = ftype.kind

        if not nullable_declared.empty and kind not in NULLABLE_KINDS:
            self.bad(path + ["nullableVersions"], f"type {ftype} cannot be nullable")

        # Tags (kafka-wire.md 2.7)
        tag: int | None = None
        if "tag" in raw:
            try:
                tag = int(str(raw["tag"]).strip())
            except ValueError:
                self.bad(path + ["tag"], f"tag {raw['tag']!r} is not an integer")
            if tag is not None and tag < 0:
                self.bad(path + ["tag"], "tags cannot be negative")
        if tag is not None and tagged.empty:
            self.bad(
                path + ["tag"], "if a tag is specified, taggedVersions must be specified as well"
            )
        if tag is None and not tagged.empty and "tag" not in raw:
            self.bad(
                path + ["taggedVersions"], "please specify a tag, or remove the taggedVersions"
            )
        if not tagged.empty:
            if not tagged.open_ended:
                self.bad(
                    path + ["taggedVersions"],
                    f"taggedVersions {tagged} must be either none, or an open-ended range",
                )
            if tagged not in declared:
                self.bad(
                    path + ["taggedVersions"],
                    f"taggedVersions {tagged} must be a subset of versions {declared}",
                )
            tagged_nullable = tagged & nullable_declared
            if not tagged_nullable.empty and tagged_nullable != tagged:
                self.bad(
                    path + ["nullableVersions"],
                    "either all tagged versions must be nullable, or none must be",
                )
            if kind == "records":
                self.bad(path + ["taggedVersions"], "records fields cannot be tagged")

        # Field-level flexibleVersions (string and bytes only)
        flexible_override: Versions | None = None
        if "flexibleVersions" in raw and str(raw["flexibleVersions"]).strip():
            flexible_override = self.versions(raw["flexibleVersions"], path + ["flexibleVersions"])
            if kind not in ("string", "bytes"):
                self.bad(
                    path + ["flexibleVersions"],
                    f"invalid flexibleVersions override for {name}: only fields of type string or "
                    f"bytes can specify a flexibleVersions override",
                )
            elif not flexible_override.empty and not flexible_override.open_ended:
                self.bad(
                    path + ["flexibleVersions"],
                    "flexibleVersions must be either none, or an open-ended range",
                )
            elif flexible_override not in self.flexible:
                self.bad(
                    path + ["flexibleVersions"],
                    f"flexibleVersions {flexible_override} is not a subset of the message's "
                    f"flexible versions {self.flexible}",
                )
        flex_for_tags = flexible_override if flexible_override is not None else self.flexible
        if not tagged.empty and tagged not in flex_for_tags:
            self.bad(
                path + ["taggedVersions"],
                f"field {name} specifies tagged versions {tagged} that are not a subset of the "
                f"flexible versions {flex_for_tags}",
            )

        zero_copy = _boolish(raw.get("zeroCopy", False))
        if zero_copy and kind != "bytes":
            self.bad(
                path + ["zeroCopy"], f"invalid zeroCopy for {name}: only bytes fields can use it"
            )
        map_key = _boolish(raw.get("mapKey", False))
        if map_key and not tagged.empty:
            self.bad(path + ["mapKey"], "tagged fields cannot be used as map keys")
        if map_key and top:
            self.bad(path + ["mapKey"], "cannot set mapKey on top level fields")
        entity = raw.get("entityType", "unknown")
        if entity != "unknown":
            base = ftype.element if ftype.is_array and ftype.element else ftype
            if ENTITY_TYPES[entity] != base.kind:
                self.bad(
                    path + ["entityType"],
                    f"field {name} has entity type {entity}, but field type {ftype}, which does not match",
                )

        # Struct resolution (kafka-wire.md 2.4)
        struct: Struct | None = None
        sname = ftype.struct_of
        if "fields" in raw and sname is None:
            self.bad(path + ["fields"], f"field {name} of type {ftype} cannot have fields")
        if sname is not None:
            if sname in self.common:
                if "fields" in raw:
                    self.bad(
                        path + ["fields"],
                        f"can't re-specify the common struct {sname} as an inline struct",
                    )
            elif sname in self.structs:
                self.bad(path + ["type"], f"struct {sname} was specified twice")
            elif "fields" not in raw:
                self.bad(
                    path + ["type"], f"unknown struct {sname}: no common struct or inline fields"
                )
            else:
                if (declared & parent).empty and not declared.empty:
                    self.bad(
                        path + ["versions"],
                        f"version ranges {declared} and {parent} have no versions in common",
                    )
                struct = self.struct(
                    sname, versions, raw["fields"], path + ["fields"], common=False
                )

        nullable = nullable_declared & declared
        default, default_null = self.default(raw, name, ftype, declared, nullable_declared, path)
        return Field(
            name=name,
            attr=snake_case(name),
            type=ftype,
            versions=versions,
            declared=declared,
            nullable=nullable,
            tagged=tagged & versions,
            tag=tag,
            default=default,
            default_is_null_text=default_null,
            ignorable=_boolish(raw.get("ignorable", False)),
            map_key=map_key,
            flexible=flexible_override,
            zero_copy=zero_copy,
            entity_type=entity,
            about=raw.get("about", ""),
            struct=struct,
            json_path=json_path(path),
        )

    def default(
        self,
        raw: dict[str, Any],
        name: str,
        ftype: FieldType,
        declared: Versions,
        nullable: Versions,
        path: list[Any],
    ) -> tuple[Any, bool]:
        value = raw.get("default")
        if value is None:
            text = ""
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float) and value.is_integer() and ftype.kind != "float64":
            text = str(int(value))
        else:
            text = str(value)
        where = path + ["default"]
        kind = ftype.kind
        if text == "null":
            if kind not in NULLABLE_KINDS or kind == "records":
                if kind != "records":
                    self.bad(where, f"invalid default for {kind} field {name}: {text}")
                return None, True
            if declared not in nullable:
                self.bad(
                    where,
                    f"null cannot be the default for field {name}, because not all versions of this "
                    f"field are nullable",
                )
            return None, True
        if kind == "bool":
            if text == "":
                return False, False
            if text.lower() in ("true", "false"):
                return text.lower() == "true", False
            self.bad(where, f"invalid default for boolean field {name}: {text}")
            return False, False
        if kind in INT_RANGES:
            if text == "":
                return 0, False
            lo, hi = INT_RANGES[kind]
            try:
                if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
                    number = int(text[2:], 16)
                elif re.fullmatch(r"-?(0|[1-9][0-9]*)", text):
                    number = int(text)
                else:
                    raise ValueError
            except ValueError:
                detail = (
                    " (leading zeros would be octal in Kafka's Java output)"
                    if re.fullmatch(r"-?0[0-9]+", text)
                    else ""
                )
                self.bad(where, f"invalid default for {kind} field {name}: {text}{detail}")
                return 0, False
            if not lo <= number <= hi:
                self.bad(where, f"invalid default for {kind} field {name}: {text} is out of range")
                return 0, False
            return number, False
        if kind == "float64":
            if text == "":
                return 0.0, False
            try:
                real = float(text)
                if math.isnan(real):
                    raise ValueError
            except ValueError:
                self.bad(where, f"invalid default for float64 field {name}: {text}")
                return 0.0, False
            return real, False
        if kind == "uuid":
            if text == "":
                return uuid.UUID(int=0), False
            try:
                raw_bytes = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
                if len(text) > 24 or len(raw_bytes) != 16:
                    raise ValueError
            except ValueError:
                self.bad(where, f"invalid default for uuid field {name}: {text}")
                return uuid.UUID(int=0), False
            return uuid.UUID(bytes=raw_bytes), False
        if kind == "string":
            return text, False
        if kind == "bytes":
            if text:
                self.bad(
                    where,
                    f"invalid default for bytes field {name}: the only valid default for a bytes "
                    f"field is empty or null",
                )
            return b"", False
        if kind == "records":
            return None, False
        if kind == "struct":
            if text:
                self.bad(
                    where,
                    f"invalid default for struct field {name}: the only valid default for a struct "
                    f"field is the empty struct or null",
                )
            return STRUCT_DEFAULT, False
        if kind == "array":
            if text:
                self.bad(
                    where,
                    f"invalid default for array field {name}: the only valid default for an array "
                    f"field is the empty array or null",
                )
            return [], False
        raise AssertionError(kind)


def build_message(raw: dict[str, Any], file: str) -> tuple[Message | None, list[SchemaProblem]]:
    builder = _Builder(raw, file)
    message = builder.build()
    return message, builder.problems


def check_api_pairs(messages: list[Message]) -> list[SchemaProblem]:
    """One request and one response per api key, across the files of a run."""
    problems: list[SchemaProblem] = []
    seen: dict[tuple[int, str], Message] = {}
    for m in messages:
        if m.kind not in ("request", "response") or m.api_key is None:
            continue
        key = (m.api_key, m.kind)
        if key in seen:
            problems.append(
                SchemaProblem(
                    m.file,
                    "apiKey",
                    f"found more than one {m.kind} with API key {m.api_key} (also {seen[key].file})",
                )
            )
        seen[key] = m
    modules: dict[str, Message] = {}
    for m in messages:
        if m.module in modules:
            problems.append(
                SchemaProblem(
                    m.file, "name", f"message {m.name} is also defined in {modules[m.module].file}"
                )
            )
        modules[m.module] = m
    return problems


__all__ = ["ALL", "Field", "FieldType", "Message", "Struct", "build_message", "check_api_pairs"]
