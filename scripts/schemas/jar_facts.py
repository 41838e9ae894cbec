"""Wire facts of a Kafka release read from its kafka-clients jar (for APIs newer than our files).

`python scripts/schemas/jar_facts.py JAR [--compare] [--names]`

A kafka-clients jar carries no message JSON files, but its generated protocol classes know every
API version it speaks: `KafkaWireLayouts.java` (beside this file, compiled against the jar on
first use) prints, for every API key, the wire layout of each request and response version (the
`Schema` objects: field order, types, compact and nullable encodings, tagged fields) and, for
each generated `*Data` class, its Java fields (the camelCase of the schema names), the struct
class of each struct field and the value a new instance holds (its default).

This module turns that into Kafka-dialect message specs, one per version, that
import_upstream.py merges like its other sources (`--jar JAR`); and it flattens any spec into
the same layout form, so tests can compare every version of our schemas with the jar's
(`wire_layout`). What a jar cannot tell is left out: entityType, mapKey, ignorable, listeners,
descriptions.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "KafkaWireLayouts.java"
Spec = dict[str, Any]

# Kafka's Type names -> the dialect's primitive types.
PRIMITIVES = {
    "BOOLEAN": "bool",
    "INT8": "int8",
    "INT16": "int16",
    "UINT16": "uint16",
    "INT32": "int32",
    "UNSIGNED_INT32": "uint32",
    "INT64": "int64",
    "FLOAT64": "float64",
    "UUID": "uuid",
    "STRING": "string",
    "BYTES": "bytes",
    "RECORDS": "records",
}
_ZERO = {"0", "0.0", "false", "", "[]", "{}", "AAAAAAAAAAAAAAAAAAAAAA"}


class JarFactsError(Exception):
    pass


# -- running the dumper ---------------------------------------------------------------------------


def classpath(jar: Path) -> str:
    """The jar and the slf4j API beside it (kafka-clients logs through slf4j)."""
    extra = sorted(jar.parent.glob("slf4j-api-*.jar"))
    return ":".join(str(p) for p in [jar, *extra[:1]])


@functools.lru_cache(maxsize=None)
def dump(jar: Path) -> dict[str, Any]:
    """What KafkaWireLayouts prints for this jar (compiled into a temp dir, run once per jar)."""
    jar = Path(jar).resolve()
    if not jar.is_file():
        raise JarFactsError(f"no jar at {jar}")
    if not (shutil.which("javac") and shutil.which("java")):
        raise JarFactsError("javac and java are needed to read a kafka-clients jar")
    key = hashlib.sha256(SOURCE.read_bytes() + str(jar).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"kwire-jar-facts-{key}"
    out = cache / "layouts.json"
    if not out.is_file():
        # Several processes (test workers) may get here at once: each builds in its own
        # directory and the finished file replaces any other atomically.
        cache.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=cache))
        cp = classpath(jar)
        subprocess.run(["javac", "-cp", cp, "-d", str(work), str(SOURCE)], check=True)
        text = subprocess.run(
            ["java", "-cp", f"{work}:{cp}", "KafkaWireLayouts"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        json.loads(text)
        (work / "layouts.json").write_text(text, encoding="utf-8")
        os.replace(work / "layouts.json", out)
        shutil.rmtree(work, ignore_errors=True)
    loaded: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return loaded


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def message_names(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Message name (e.g. StreamsGroupHeartbeatRequest) -> (api key, request|response)."""
    out = {}
    for key, api in facts["apis"].items():
        if not api["request"]:
            continue  # an API the jar keeps as an id only (removed from the protocol)
        for kind in ("request", "response"):
            out[api["name"] + kind.capitalize()] = (key, kind)
    return out


def versions(facts: dict[str, Any], name: str) -> list[int]:
    key, kind = message_names(facts)[name]
    return sorted(int(v) for v in facts["apis"][key][kind])


# -- specs from the jar ---------------------------------------------------------------------------


def _default(shown: str, kafka_type: str) -> str | None:
    """The dialect's default text for the value a new instance holds (None: the type's own)."""
    if shown in _ZERO or shown.startswith("bytes["):
        return None
    if shown == "null":
        return "null"
    if kafka_type == "bool":
        return shown
    if kafka_type in ("int8", "int16", "uint16", "int32", "uint32", "int64", "float64"):
        return shown
    return shown


def _fields(
    layout: list[Any], cls: str, facts: dict[str, Any], version: int, where: str
) -> list[Spec]:
    members = facts["classes"].get(cls)
    if members is None:
        raise JarFactsError(f"{where}: the jar describes no class {cls}")
    by_norm = {_norm(m[0]): m for m in members}
    out: list[Spec] = []
    entries: list[tuple[str, Any, int | None]] = []
    for name, kind in layout:
        if name == "_tagged_fields":
            for tag, (tname, ttype) in sorted(kind["tagged"].items(), key=lambda t: int(t[0])):
                entries.append((tname, ttype, int(tag)))
        else:
            entries.append((name, kind, None))
    for snake, kind, tag in entries:
        member = by_norm.get(_norm(snake))
        if member is None:
            raise JarFactsError(f"{where}: no Java field for {snake} in {cls}")
        java_name, element_class, is_list, shown = member
        name = java_name[0].upper() + java_name[1:]
        field: Spec = {"name": name}
        nullable = False
        nested: list[Spec] | None = None
        if isinstance(kind, dict) and "array" in kind:
            nullable = kind["nullable"]
            inner = kind["array"]
            if isinstance(inner, dict) and "struct" in inner:
                struct = element_class.rsplit("$", 1)[-1]
                field["type"] = "[]" + struct
                nested = _fields(inner["struct"], element_class, facts, version, f"{where}.{name}")
            else:
                field["type"] = "[]" + _primitive(inner, where)
        elif isinstance(kind, dict) and "struct" in kind:
            nullable = kind["nullable"]
            field["type"] = element_class.rsplit("$", 1)[-1]
            nested = _fields(kind["struct"], element_class, facts, version, f"{where}.{name}")
        else:
            base = _primitive(kind, where)
            nullable = "NULLABLE" in kind
            field["type"] = base
        field["versions"] = str(version)
        if nullable:
            field["nullableVersions"] = str(version)
        if tag is not None:
            field["taggedVersions"] = str(version)
            field["tag"] = tag
        default = _default(shown, field["type"])
        if default is not None and not (default == "null" and not nullable):
            field["default"] = default
        if nested is not None:
            field["fields"] = nested
        field["_probe"] = f"{cls}#{java_name}"
        out.append(field)
    return out


def _primitive(kind: Any, where: str) -> str:
    text = str(kind).replace("COMPACT_", "").replace("NULLABLE_", "")
    if text not in PRIMITIVES:
        raise JarFactsError(f"{where}: unknown Kafka type {kind}")
    return PRIMITIVES[text]


def _flexible(layout: list[Any]) -> bool:
    return any(name == "_tagged_fields" for name, _ in layout)


def jar_specs(facts: dict[str, Any], name: str) -> list[Spec]:
    """One spec per version of the message, each valid for that version alone."""
    key, kind = message_names(facts)[name]
    api = facts["apis"][key]
    layouts = {int(v): lay for v, lay in api[kind].items()}
    flexible = sorted(v for v, lay in layouts.items() if _flexible(lay))
    out: list[Spec] = []
    for version, lay in sorted(layouts.items()):
        spec: Spec = {
            "apiKey": int(key),
            "type": kind,
            "name": name,
            "validVersions": str(version),
            "flexibleVersions": f"{flexible[0]}+" if flexible else "none",
            "fields": _fields(lay, api[f"{kind}Class"], facts, version, f"{name} v{version}"),
        }
        out.append(spec)
    _ignorable(out, facts.get("refused", {}))
    return out


def _ignorable(specs: list[Spec], refused: dict[str, list[int]]) -> None:
    """Marks ignorable the fields the jar writes (drops) at a version that lacks them.

    Only versions where the field's parent struct is present count; a field the dumper could
    not give a non-default value gets no ignorable fact."""
    present: dict[str, set[int]] = {}
    probes: dict[str, str] = {}

    def walk(fields: list[Spec], prefix: str, version: int) -> None:
        for f in fields:
            path = prefix + f["name"]
            present.setdefault(path, set()).add(version)
            probes[path] = f["_probe"]
            walk(f.get("fields", []), path + ".", version)

    for spec in specs:
        walk(spec["fields"], "", int(spec["validVersions"]))
    every = {int(s["validVersions"]) for s in specs}

    def mark(fields: list[Spec], prefix: str) -> None:
        for f in fields:
            path = prefix + f["name"]
            parent = present.get(prefix[:-1], every) if prefix else every
            absent = parent - present[path]
            if absent and probes[path] in refused and not absent & set(refused[probes[path]]):
                f["ignorable"] = True
            del f["_probe"]
            mark(f.get("fields", []), path + ".")

    for spec in specs:
        mark(spec["fields"], "")


# -- the same layout form for any spec ------------------------------------------------------------


def _vset(text: Any) -> range:
    s = str(text).strip() if text is not None else "none"
    if s in ("none", ""):
        return range(0)
    if s.endswith("+"):
        return range(int(s[:-1]), 32768)
    if "-" in s:
        lo, hi = s.split("-", 1)
        return range(int(lo), int(hi) + 1)
    return range(int(s), int(s) + 1)


def wire_layout(spec: Spec, version: int) -> list[Any]:
    """A spec's layout at one version in the dumper's form, names normalised (no underscores,
    lower case) on both sides by `normalise`."""
    flexible = version in _vset(spec.get("flexibleVersions"))
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}

    def kind(f: Spec, compact: bool) -> Any:
        t = f["type"]
        nullable = version in _vset(f.get("nullableVersions"))
        if t.startswith("[]"):
            inner = dict(f, type=t[2:])
            inner.pop("nullableVersions", None)
            return {"array": kind(inner, compact), "compact": compact, "nullable": nullable}
        if t not in PRIMITIVES.values():
            sub = f.get("fields") or common[t]
            return {"struct": walk(sub), "nullable": nullable}
        name = {v: k for k, v in PRIMITIVES.items()}[t]
        if t in ("string", "bytes", "records"):
            name = ("NULLABLE_" if nullable else "") + name
            name = ("COMPACT_" if compact else "") + name
        return name

    def walk(fields: list[Spec]) -> list[Any]:
        out: list[Any] = []
        tagged: dict[str, Any] = {}
        for f in fields:
            if version not in _vset(f.get("versions")):
                continue
            compact = flexible
            if "flexibleVersions" in f:
                compact = version in _vset(f["flexibleVersions"])
            if flexible and version in _vset(f.get("taggedVersions")):
                tagged[str(int(f["tag"]))] = [_norm(f["name"]), kind(f, True)]
            else:
                out.append([_norm(f["name"]), kind(f, compact)])
        if flexible:
            out.append(
                ["taggedfields", {"tagged": dict(sorted(tagged.items(), key=lambda t: int(t[0])))}]
            )
        return out

    return walk(spec["fields"])


def normalise(layout: list[Any]) -> list[Any]:
    """The dumper's layout with names normalised like wire_layout's."""

    def kind(k: Any) -> Any:
        if isinstance(k, dict) and "array" in k:
            return dict(k, array=kind(k["array"]))
        if isinstance(k, dict) and "struct" in k:
            return dict(k, struct=normalise(k["struct"]))
        if isinstance(k, dict) and "tagged" in k:
            return {"tagged": {t: [_norm(n), kind(v)] for t, (n, v) in k["tagged"].items()}}
        return k

    return [[_norm(n), kind(k)] for n, k in layout]


def layout_in_jar(facts: dict[str, Any], name: str, version: int) -> list[Any]:
    key, kind = message_names(facts)[name]
    return normalise(facts["apis"][key][kind][str(version)])


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two layouts first differ, for messages."""
    if type(a) is not type(b):
        return f"{path or '.'}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                label = x[0] if isinstance(x, list) and x and isinstance(x[0], str) else str(i)
                return first_difference(x, y, f"{path}/{label}")
        return f"{path or '.'}: {len(a)} entries vs {len(b)}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}.{k}")
    return f"{path or '.'}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"


# -- command line ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jar", type=Path)
    parser.add_argument("--compare", type=Path, metavar="SCHEMAS", help="compare a schema dir")
    parser.add_argument("--spec", help="print the per-version specs of one message")
    args = parser.parse_args(argv)
    facts = dump(args.jar)
    if args.spec:
        print(json.dumps(jar_specs(facts, args.spec), indent=1))
        return 0
    if args.compare:
        sys.path.insert(0, str(HERE.parents[1]))
        from generator.loader import strip_comments

        bad = 0
        for name in sorted(message_names(facts)):
            path = args.compare / f"{name}.json"
            if not path.exists():
                print(f"{name}: not in {args.compare} (jar versions {versions(facts, name)})")
                bad += 1
                continue
            spec = json.loads(strip_comments(path.read_text(encoding="utf-8")))
            ours = set(_vset(spec["validVersions"]))
            for v in versions(facts, name):
                if v not in ours:
                    print(f"{name} v{v}: only in the jar")
                    bad += 1
                    continue
                a, b = wire_layout(spec, v), layout_in_jar(facts, name, v)
                if a != b:
                    print(f"{name} v{v}: differs: {first_difference(a, b)}")
                    bad += 1
        print(f"{bad} difference(s)")
        return 1 if bad else 0
    for name in sorted(message_names(facts)):
        print(name, versions(facts, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
