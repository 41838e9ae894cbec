"""Check the wire facts of kwire's shipped schemas against upstream Apache Kafka.

Our files in ``schemas/`` cover every version from 0 up to the newest one known. Upstream sources
each cover only part of that range:

* kafka-python's bundled Kafka 4.x schemas (a test dependency, always present) have the newest
  versions but dropped some old ones (e.g. OffsetCommit starts at v2);
* the 2024-10 reference snapshot in ``../shared/reference-schemas`` (optional) still has the
  old versions;
* kio's generated per-version dataclasses (a test dependency) are a third, independent view;
* Kafka 4.4's kafka-clients jar (the jar KWIRE_KAFKA_CLIENTS_JAR names: `make test` fetches it
  from Maven Central into the venv; else scripts/capture/kafka/target/dependency, which `make
  capture` fills; read through scripts/schemas/jar_facts.py with java) knows the newest versions
  and APIs (KAFKA_44 below lists them for when it is absent); every version it speaks must have
  our wire layout.

For every version an upstream file covers, the fields present in that version, in wire order,
must agree with ours on everything that reaches the wire (type and struct name, nullability,
tagging, defaults, compact encoding) and on the metadata keys mapKey, entityType and zeroCopy.
For fields absent from a version, ``ignorable`` and ``default`` decide what a writer does, so
they are compared too. Descriptions (``about``) must be our own.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import re
import shutil
import sys
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
REFERENCE = REPO.parent / "shared" / "reference-schemas"
JAR_DIR = REPO / "scripts" / "capture" / "kafka" / "target" / "dependency"

MAX_VERSION = 32767

# Every file we ship; the test below checks that it covers every upstream file.
EXPECTED = sorted(p.stem for p in SCHEMAS.glob("*.json"))

# Renamed upstream (KIP-1142, Kafka 4.1): we ship the new name, whose version 0 is the old API.
RENAMED = {
    "ListClientMetricsResourcesRequest": "ListConfigResourcesRequest",
    "ListClientMetricsResourcesResponse": "ListConfigResourcesResponse",
}

# Fields renamed upstream after the 2024-10 snapshot (same bytes): we ship the newer name, as the
# import script does; the snapshot and kafka-python's files are compared under the new names.
RENAMED_FIELDS = {
    ("VoteRequest", "CandidateEpoch"): "ReplicaEpoch",
    ("VoteRequest", "CandidateId"): "ReplicaId",
    ("VoteRequest", "CandidateDirectoryId"): "ReplicaDirectoryId",
    # Kafka 4.4 (same bytes, new names).
    ("TxnOffsetCommitRequest", "GenerationId"): "GenerationIdOrMemberEpoch",
    ("StreamsGroupHeartbeatResponse", "AcceptableRecoveryLag"): "AcceptableRecoveryLagLegacy",
}
# The renames kio (generated from Kafka 4.1) predates: our name -> kio's, per message.
KIO_NAMES = {
    ("TxnOffsetCommitRequest", "GenerationIdOrMemberEpoch"): "GenerationId",
    ("StreamsGroupHeartbeatResponse", "AcceptableRecoveryLagLegacy"): "AcceptableRecoveryLag",
}

# The newest version of the messages that only Kafka 4.4 (its kafka-clients jar) has among our
# sources, so that the checks below know them when the jar is not on this machine; with the jar
# they are checked against it (test_kafka_44_table_matches_the_jar).
KAFKA_44 = {
    "ApiVersionsRequest": 5,
    "ApiVersionsResponse": 5,
    "DeleteGroupsRequest": 3,
    "DeleteGroupsResponse": 3,
    "StreamsGroupDescribeRequest": 1,
    "StreamsGroupDescribeResponse": 1,
    "StreamsGroupHeartbeatRequest": 1,
    "StreamsGroupHeartbeatResponse": 1,
    "StreamsGroupTopologyDescriptionUpdateRequest": 0,
    "StreamsGroupTopologyDescriptionUpdateResponse": 0,
    "TxnOffsetCommitRequest": 6,
    "TxnOffsetCommitResponse": 6,
    "UnregisterControllerRequest": 0,
    "UnregisterControllerResponse": 0,
}

# Message versions where the snapshot is not the released protocol, with the reason.
SNAPSHOT_SUPERSEDED = {
    ("ReadShareGroupStateSummaryResponse", 0): "v0 gained Results.Partitions.LeaderEpoch in place "
    "before KIP-932 was released (kio, generated from Kafka 4.1, has it); we follow the release",
}

# APIs that only kio's generated modules have among our sources (Kafka 4.1+).
KIO_ONLY = sorted(
    f"{api}{kind}"
    for api in (
        "AlterShareGroupOffsets",
        "DeleteShareGroupOffsets",
        "DescribeShareGroupOffsets",
        "StreamsGroupDescribe",
        "StreamsGroupHeartbeat",
    )
    for kind in ("Request", "Response")
)

TOP_KEYS = {
    "apiKey",
    "type",
    "listeners",
    "name",
    "validVersions",
    "flexibleVersions",
    "deprecatedVersions",
    "latestVersionUnstable",
    "commonStructs",
    "fields",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "default",
    "ignorable",
    "mapKey",
    "entityType",
    "about",
    "taggedVersions",
    "tag",
    "flexibleVersions",
    "zeroCopy",
    "fields",
}
PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "uuid",
    "string",
    "bytes",
    "records",
}


# --------------------------------------------------------------------------------------------
# Loading


def strip_comments(text: str) -> str:
    """Remove // and /* */ comments that are outside JSON string literals."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("unterminated /* comment")
            out.append(" ")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


@lru_cache(maxsize=None)
def load(path: Path) -> dict[str, Any]:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=None)
def kafka_python_dir() -> Path:
    # Locate kafka.protocol.schemas without importing kafka.protocol, whose import parses all
    # bundled schemas (slow, and noisy with deprecation warnings).
    spec = importlib.util.find_spec("kafka")
    assert spec is not None and spec.submodule_search_locations, "kafka-python is not installed"
    package = Path(list(spec.submodule_search_locations)[0]) / "protocol" / "schemas"
    assert (package / "__init__.py").is_file(), f"kafka.protocol.schemas not found in {package}"
    resources = package / "resources"
    assert resources.is_dir(), f"kafka-python bundles no schema resources in {resources}"
    return resources


def ours(name: str) -> dict[str, Any]:
    return load(SCHEMAS / f"{name}.json")


def kafka_python(name: str) -> dict[str, Any]:
    path = kafka_python_dir() / f"{name}.json"
    if not path.exists():
        pytest.skip(f"kafka-python's bundled Kafka 4.x schemas have no {name}.json")
    return load(path)


def reference(name: str) -> dict[str, Any]:
    if not REFERENCE.is_dir():
        pytest.skip(f"reference snapshot {REFERENCE} is not available on this machine")
    path = REFERENCE / f"{name}.json"
    if not path.exists():
        pytest.skip(f"reference snapshot has no {name}.json")
    return load(path)


@lru_cache(maxsize=None)
def kafka_jar() -> Path | None:
    """The kafka-clients jar to compare with, or None (no jar here, or no java to read it)."""
    named = os.environ.get("KWIRE_KAFKA_CLIENTS_JAR")
    jars = [Path(named)] if named else sorted(JAR_DIR.glob("kafka-clients-*.jar"))
    if not jars or not jars[-1].is_file() or not (shutil.which("java") and shutil.which("javac")):
        return None
    return jars[-1]


@lru_cache(maxsize=None)
def jar_facts() -> Any:
    """scripts/schemas/jar_facts.py and what it read from the jar (skips without a jar)."""
    jar = kafka_jar()
    if jar is None:
        pytest.skip("no kafka-clients jar (or no java) on this machine")
    sys.path.insert(0, str(REPO / "scripts" / "schemas"))
    import jar_facts as module  # type: ignore[import-not-found]

    return module, module.dump(jar)


# --------------------------------------------------------------------------------------------
# Version ranges


def parse_range(text: Any) -> tuple[int, int]:
    """Parse "N", "A-B", "A+" or "none"; returns (low, high) with high < low for empty."""
    s = str(text).strip()
    if s == "none":
        return (0, -1)
    if s.endswith("+"):
        return (int(s[:-1]), MAX_VERSION)
    if "-" in s:
        lo, hi = s.split("-", 1)
        return (int(lo), int(hi))
    return (int(s), int(s))


def has(field: dict[str, Any], key: str, version: int) -> bool:
    lo, hi = parse_range(field.get(key, "none"))
    return lo <= version <= hi


def norm_default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


# --------------------------------------------------------------------------------------------
# Per-version view of a schema


def element_type(type_name: str) -> str:
    return type_name[2:] if type_name.startswith("[]") else type_name


def view(
    fields: list[dict[str, Any]],
    version: int,
    flexible: bool,
    common: dict[str, dict[str, Any]],
) -> tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]]]:
    """Facts about a struct at one version.

    Returns the present fields in wire order (each with its full facts and a nested view), and
    for absent fields what a writer needs: whether a non-default value may be dropped.
    """
    present: list[tuple[Any, ...]] = []
    absent: dict[str, tuple[Any, ...]] = {}
    for f in fields:
        if not has(f, "versions", version):
            absent[f["name"]] = (bool(f.get("ignorable", False)), norm_default(f.get("default")))
            continue
        elem = element_type(f["type"])
        tagged = has(f, "taggedVersions", version)
        compact = flexible
        if "flexibleVersions" in f and str(f["flexibleVersions"]).strip():
            compact = has(f, "flexibleVersions", version)
        nested: Any = None
        if elem not in PRIMITIVES:
            if elem in common:
                struct = common[elem]
                sub = [g for g in struct["fields"]] if has(struct, "versions", version) else []
                origin = "common"
            else:
                sub = f.get("fields", [])
                origin = "inline"
            nested = (origin, view(sub, version, flexible, common))
        present.append(
            (
                f["name"],
                f["type"],
                has(f, "nullableVersions", version),
                tagged,
                int(f["tag"]) if tagged else None,
                norm_default(f.get("default")),
                bool(f.get("mapKey", False)),
                f.get("entityType", "unknown"),
                bool(f.get("zeroCopy", False)),
                compact,
                nested,
            )
        )
    return present, absent


FACT_NAMES = (
    "name",
    "type",
    "nullable",
    "tagged",
    "tag",
    "default",
    "mapKey",
    "entityType",
    "zeroCopy",
    "compact",
)


def compare_struct(
    mine: tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]]],
    theirs: tuple[list[tuple[Any, ...]], dict[str, tuple[Any, ...]]],
    path: str,
    errors: list[str],
) -> None:
    my_present, my_absent = mine
    their_present, their_absent = theirs
    my_names = [f[0] for f in my_present]
    their_names = [f[0] for f in their_present]
    if my_names != their_names:
        errors.append(
            f"{path}: fields in wire order differ: ours {my_names}, upstream {their_names}"
        )
        return
    for a, b in zip(my_present, their_present):
        where = f"{path}.{a[0]}"
        for label, x, y in zip(FACT_NAMES[1:], a[1:-1], b[1:-1]):
            if x != y:
                errors.append(f"{where}: {label} is {x!r} in ours, {y!r} upstream")
        if (a[-1] is None) != (b[-1] is None):
            errors.append(f"{where}: struct-ness differs")
        elif a[-1] is not None:
            if a[-1][0] != b[-1][0]:
                errors.append(f"{where}: struct is {a[-1][0]} in ours, {b[-1][0]} upstream")
            compare_struct(a[-1][1], b[-1][1], where, errors)
    for name, facts in their_absent.items():
        if name not in my_absent:
            if name not in my_names:
                errors.append(f"{path}.{name}: upstream field is missing from ours")
            continue
        if my_absent[name] != facts:
            errors.append(
                f"{path}.{name}: (ignorable, default) when absent is {my_absent[name]} in ours, "
                f"{facts} upstream"
            )


def schema_view(spec: dict[str, Any], version: int) -> Any:
    flexible = has(spec, "flexibleVersions", version)
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    return view(spec["fields"], version, flexible, common)


def versions_of(spec: dict[str, Any]) -> range:
    lo, hi = parse_range(spec["validVersions"])
    return range(lo, hi + 1)


def compare_with_upstream(name: str, upstream: dict[str, Any]) -> None:
    mine = ours(name)
    errors: list[str] = []
    for key in ("name", "type", "apiKey"):
        if mine.get(key) != upstream.get(key):
            errors.append(f"{key}: {mine.get(key)!r} in ours, {upstream.get(key)!r} upstream")
    if parse_range(mine["flexibleVersions"]) != parse_range(upstream["flexibleVersions"]):
        errors.append(
            f"flexibleVersions: {mine['flexibleVersions']} in ours, "
            f"{upstream['flexibleVersions']} upstream"
        )
    mine_versions = set(versions_of(mine))
    missing = [v for v in versions_of(upstream) if v not in mine_versions]
    if missing:
        errors.append(f"versions {missing} are valid upstream but not in ours")
    for version in versions_of(upstream):
        if version in mine_versions:
            compare_struct(
                schema_view(mine, version),
                schema_view(upstream, version),
                f"{name} v{version}",
                errors,
            )
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------------------------
# Tests: shape of our files


def test_every_upstream_file_has_a_schema() -> None:
    shipped = set(EXPECTED)
    upstream = {p.stem for p in kafka_python_dir().glob("*.json")}
    if REFERENCE.is_dir():
        upstream |= {p.stem for p in REFERENCE.glob("*.json")}
    upstream = {RENAMED.get(name, name) for name in upstream} | set(KIO_ONLY) | set(KAFKA_44)
    assert sorted(upstream - shipped) == []
    if REFERENCE.is_dir():
        # Only the snapshot knows the APIs Kafka 4 removed: without it, no shipped schema can
        # be shown to have an upstream file, so that half waits for it.
        assert sorted(shipped - upstream) == []


def test_one_request_and_one_response_per_api_key() -> None:
    keys: dict[int, list[str]] = {}
    for name in EXPECTED:
        spec = ours(name)
        if spec["type"] in ("request", "response"):
            keys.setdefault(spec["apiKey"], []).append(spec["type"])
    assert all(sorted(kinds) == ["request", "response"] for kinds in keys.values()), keys
    assert len(keys) >= 93


def walk(fields: list[dict[str, Any]], prefix: str = "") -> typing.Iterator[tuple[str, dict]]:
    for f in fields:
        path = prefix + f["name"]
        yield path, f
        yield from walk(f.get("fields", []), path + ".")


def all_fields(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = dict(walk(spec["fields"]))
    for struct in spec.get("commonStructs", []):
        found.update(walk(struct["fields"], struct["name"] + ":"))
    return found


@pytest.mark.parametrize("name", EXPECTED)
def test_dialect_and_shape(name: str) -> None:
    spec = ours(name)
    text = (SCHEMAS / f"{name}.json").read_text(encoding="utf-8")
    assert "Licensed to the Apache Software Foundation" not in text
    assert spec["name"] == name
    assert set(spec) <= TOP_KEYS, set(spec) - TOP_KEYS
    if spec["type"] in ("request", "response"):
        assert isinstance(spec["apiKey"], int)
        assert parse_range(spec["validVersions"])[0] == 0, "request/response must start at v0"
        assert name.endswith(spec["type"].capitalize())
    else:
        assert spec["type"] in ("header", "data")
    assert parse_range(spec["validVersions"])[1] < MAX_VERSION, "validVersions must be bounded"
    flexible = str(spec["flexibleVersions"]).strip()
    assert flexible == "none" or flexible.endswith("+")
    for path, f in all_fields(spec).items():
        assert set(f) <= FIELD_KEYS, (path, set(f) - FIELD_KEYS)
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", f["name"]), path
        assert isinstance(f.get("about"), str) and len(f["about"].strip()) >= 8, path
        if "tag" in f or "taggedVersions" in f:
            assert "tag" in f and "taggedVersions" in f, path
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        assert "\t" not in line and indent % 2 == 0, f"{name}: odd indentation: {line!r}"


@pytest.mark.parametrize("name", EXPECTED)
def test_tags_are_contiguous_per_struct(name: str) -> None:
    spec = ours(name)

    def check(fields: list[dict[str, Any]]) -> None:
        tags = sorted(int(f["tag"]) for f in fields if "tag" in f)
        assert tags == list(range(len(tags))), (name, tags)
        for f in fields:
            check(f.get("fields", []))

    check(spec["fields"])
    for struct in spec.get("commonStructs", []):
        check(struct["fields"])


# --------------------------------------------------------------------------------------------
# Tests: facts against upstream


def _renamed(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with RENAMED_FIELDS applied (a copy)."""
    spec = json.loads(json.dumps(spec))
    for _, f in all_fields(spec).items():
        f["name"] = RENAMED_FIELDS.get((spec["name"], f["name"]), f["name"])
    return spec


@pytest.mark.parametrize("name", EXPECTED)
def test_facts_match_kafka_python_4x(name: str) -> None:
    compare_with_upstream(name, _renamed(kafka_python(name)))


@pytest.mark.parametrize("name", EXPECTED)
def test_facts_match_reference_snapshot(name: str) -> None:
    upstream = _renamed(reference(name))
    superseded = [v for (n, v) in SNAPSHOT_SUPERSEDED if n == name]
    if superseded:
        low, high = parse_range(upstream["validVersions"])
        kept = [v for v in range(low, high + 1) if v not in superseded]
        if not kept:
            pytest.skip(SNAPSHOT_SUPERSEDED[(name, superseded[0])])
        upstream["validVersions"] = f"{min(kept)}-{max(kept)}"
    compare_with_upstream(name, upstream)


@pytest.mark.parametrize("name", EXPECTED)
def test_newest_version_is_the_newest_known(name: str) -> None:
    newest = []
    kp = kafka_python_dir() / f"{name}.json"
    if kp.exists():
        newest.append(max(versions_of(load(kp))))
    if REFERENCE.is_dir() and (REFERENCE / f"{name}.json").exists():
        newest.append(max(versions_of(load(REFERENCE / f"{name}.json"))))
    kio_versions = kio_versions_of(name)
    if kio_versions:
        newest.append(max(kio_versions))
    if name in KAFKA_44:
        newest.append(KAFKA_44[name])
    if not newest and not REFERENCE.is_dir():
        pytest.skip(f"only the reference snapshot {REFERENCE} (absent here) knows {name}")
    assert newest, f"no upstream source knows {name}"
    assert max(versions_of(ours(name))) == max(newest)


def normalise_text(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return " ".join(w for w in words if w not in ("the", "a", "an"))


@pytest.mark.parametrize("source", ["kafka-python", "reference"])
@pytest.mark.parametrize("name", EXPECTED)
def test_descriptions_are_our_own(name: str, source: str) -> None:
    upstream = kafka_python(name) if source == "kafka-python" else reference(name)
    theirs = all_fields(upstream)
    compared = same = 0
    for path, f in all_fields(ours(name)).items():
        other = theirs.get(path, {}).get("about", "")
        if not other.strip():
            continue
        compared += 1
        if normalise_text(f["about"]) == normalise_text(other):
            same += 1
    if compared == 0:
        pytest.skip(f"{source} {name}.json has no descriptions to compare with")
    assert same <= 0.1 * compared, f"{same} of {compared} descriptions match {source}'s"


# --------------------------------------------------------------------------------------------
# Tests: field layout against kio's generated dataclasses (a third, independent source)

KIO_TYPES = {
    "error_code": "int16",
    "timedelta_i32": "int32",
    "timedelta_i64": "int64",
    "datetime_i64": "int64",
}


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kio_module_parts(name: str) -> tuple[str, str]:
    for kind in ("Request", "Response"):
        if name.endswith(kind) and not name.endswith("Header"):
            return snake(name[: -len(kind)]), kind.lower()
    spec = ours(name)
    return snake(name), "header" if spec["type"] == "header" else "data"


@lru_cache(maxsize=None)
def kio_versions_of(name: str) -> tuple[int, ...]:
    if importlib.util.find_spec("kio") is None:
        return ()
    package, _ = kio_module_parts(name)
    spec = importlib.util.find_spec(f"kio.schema.{package}")
    if spec is None or not spec.submodule_search_locations:
        return ()
    root = Path(list(spec.submodule_search_locations)[0])
    return tuple(sorted(int(p.name[1:]) for p in root.glob("v[0-9]*") if p.is_dir()))


def kio_view(cls: type) -> list[tuple[Any, ...]]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        annotation = hints[f.name]
        nullable: bool | None = False
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            args = typing.get_args(annotation)
            nullable = type(None) in args
            annotation = next(a for a in args if a is not type(None))
        kio_type = f.metadata.get("kafka_type")
        kafka_type = KIO_TYPES.get(kio_type, kio_type)
        if kio_type == "datetime_i64":
            nullable = None  # kio types timestamps as Optional (-1 reads as None): not a wire fact
        is_array = typing.get_origin(annotation) is tuple
        inner = typing.get_args(annotation)[0] if is_array else annotation
        nested = kio_view(inner) if dataclasses.is_dataclass(inner) else None
        if nested is not None:
            kafka_type = None
        out.append((f.name, kafka_type, is_array, nullable, f.metadata.get("tag"), nested))
    return out


def our_kio_view(spec: dict[str, Any], fields: list[dict[str, Any]], version: int) -> list:
    """Our fields at one version as kio_view shows them (under kio's names, KIO_NAMES)."""
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    out = []
    for f in fields:
        if not has(f, "versions", version):
            continue
        elem = element_type(f["type"])
        nested = None
        kafka_type: str | None = elem
        if elem not in PRIMITIVES:
            sub = common[elem]["fields"] if elem in common else f.get("fields", [])
            nested = our_kio_view(spec, sub, version)
            kafka_type = None
        tag = int(f["tag"]) if has(f, "taggedVersions", version) else None
        out.append(
            (
                KIO_NAMES.get((spec["name"], f["name"]), f["name"]),
                kafka_type,
                f["type"].startswith("[]"),
                has(f, "nullableVersions", version),
                tag,
                nested,
            )
        )
    return out


def kio_name(name: str) -> str:
    # kio drops the unit suffix of durations (ThrottleTimeMs -> throttle_time).
    flat = name.replace("_", "").lower()
    return flat[:-2] if flat.endswith("ms") else flat


def compare_kio(mine: list, theirs: list, path: str, errors: list[str]) -> None:
    my_names = [kio_name(f[0]) for f in mine]
    their_names = [kio_name(f[0]) for f in theirs]
    if my_names != their_names:
        errors.append(f"{path}: fields differ: ours {my_names}, kio {their_names}")
        return
    for a, b in zip(mine, theirs):
        where = f"{path}.{a[0]}"
        if a[1] != b[1]:
            errors.append(f"{where}: type {a[1]} in ours, {b[1]} in kio")
        if a[2] != b[2]:
            errors.append(f"{where}: array-ness differs from kio")
        # kio types every uuid as Optional, so uuid nullability cannot be compared.
        if a[3] != b[3] and a[1] != "uuid" and b[3] is not None:
            errors.append(f"{where}: nullable {a[3]} in ours, {b[3]} in kio")
        if a[4] != b[4]:
            errors.append(f"{where}: tag {a[4]} in ours, {b[4]} in kio")
        if (a[5] is None) != (b[5] is None):
            errors.append(f"{where}: struct-ness differs from kio")
        elif a[5] is not None:
            compare_kio(a[5], b[5], where, errors)


@pytest.mark.parametrize("name", EXPECTED)
def test_field_layout_matches_kio(name: str) -> None:
    versions = kio_versions_of(name)
    if not versions:
        pytest.skip(f"kio has no generated module for {name}")
    spec = ours(name)
    package, kind = kio_module_parts(name)
    errors: list[str] = []
    missing = [v for v in versions if v not in versions_of(spec)]
    assert not missing, f"kio knows versions {missing} of {name} that ours lacks"
    for version in versions:
        module = importlib.import_module(f"kio.schema.{package}.v{version}.{kind}")
        cls = getattr(module, name)
        assert cls.__version__ == version
        compare_kio(
            our_kio_view(spec, spec["fields"], version),
            kio_view(cls),
            f"{name} v{version}",
            errors,
        )
    assert not errors, "\n".join(errors)


# --------------------------------------------------------------------------------------------
# Tests: wire layout against Kafka 4.4's kafka-clients jar (optional: see kafka_jar)


def test_kafka_44_table_matches_the_jar() -> None:
    """KAFKA_44 lists what the jar knows beyond our other sources, and nothing else."""
    module, facts = jar_facts()
    beyond = {}
    for name in module.message_names(facts):
        newest = max(module.versions(facts, name))
        known = [max(kio_versions_of(name), default=-1)]
        if (kafka_python_dir() / f"{name}.json").exists():
            known.append(max(versions_of(load(kafka_python_dir() / f"{name}.json"))))
        if (REFERENCE / f"{name}.json").exists():
            known.append(max(versions_of(load(REFERENCE / f"{name}.json"))))
        if newest > max(known):
            beyond[name] = newest
    assert beyond == KAFKA_44


@pytest.mark.parametrize("name", EXPECTED)
def test_wire_layout_matches_kafka_jar(name: str) -> None:
    """Every version the jar speaks has our wire layout: field order, types, compact and
    nullable encodings, tags (names compared without case or underscores)."""
    module, facts = jar_facts()
    if name not in module.message_names(facts):
        pytest.skip(f"the kafka-clients jar has no {name} (removed from Kafka 4, or not an API)")
    spec = ours(name)
    errors = []
    for version in module.versions(facts, name):
        if version not in versions_of(spec):
            errors.append(f"v{version}: in the jar, not in ours")
            continue
        mine = module.wire_layout(spec, version)
        theirs = module.layout_in_jar(facts, name, version)
        if mine != theirs:
            errors.append(f"v{version}: {module.first_difference(mine, theirs)}")
    assert not errors, "\n".join(errors)
