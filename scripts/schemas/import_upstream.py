"""Carries the wire facts of upstream Kafka message schemas into kwire's own `schemas/`.

`python scripts/schemas/import_upstream.py --reference DIR [--newer DIR] [--kio] [--jar JAR]
[--out schemas]`

Upstream sources each cover part of a message's version range: the 2024-10 snapshot of Apache
Kafka's message directory (every version from 0), the Kafka 4.x files bundled with kafka-python
(newer versions, but the versions KIP-896 removed are gone), kio's generated modules (APIs and
versions neither file set has yet) and a newer Kafka release's kafka-clients jar (--jar, read by
jar_facts.py: the versions and APIs none of the others has, e.g. Kafka 4.4's). This script
merges them into one file per message covering every version from 0 to the newest known: each
version's wire layout is taken from the newest file that has that version (kio and the jar only
give the versions no file has), and the merge refuses (with the field and the versions) anything
it cannot express as one field list with contiguous version ranges.

Only facts are carried over (names, types, version ranges, tags, defaults and the metadata keys
the dialect defines). The prose is ours: file headers from API_NOTES, version histories derived
from the merged facts, and field descriptions from a glossary keyed by field name. Files that
already exist in the output directory without this script's mark are hand-written and left
alone unless --replace is given; files it wrote before are rewritten.
tests/schemas/test_schema_facts.py checks every shipped file against every upstream source.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # kio_facts, imported only with --kio

from generator.loader import strip_comments  # noqa: E402

MAX = 32767
MARK = "Facts carried over from upstream by scripts/schemas/import_upstream.py"
Spec = dict[str, Any]

# Messages renamed upstream: the newer name wins and the old file is not shipped.
RENAMED = {
    "ListClientMetricsResourcesRequest": "ListConfigResourcesRequest",
    "ListClientMetricsResourcesResponse": "ListConfigResourcesResponse",
}

# One line per API: what it is for, in our words (the header of every file of the API).
API_NOTES: dict[int, str] = {
    0: "a producer appends record batches to partition logs",
    1: "a consumer or a follower replica reads record batches from partition logs",
    2: "finds offsets by timestamp (earliest, latest, max timestamp, a point in time)",
    3: "the cluster's brokers, topics, partitions and their leaders",
    4: "the controller sets partition leaders and in-sync replicas on a broker (ZooKeeper mode)",
    5: "the controller tells a broker to stop replicating partitions (ZooKeeper mode)",
    6: "the controller pushes its view of the cluster to a broker (ZooKeeper mode)",
    7: "a broker asks the controller to move its leaderships away before it stops",
    8: "a consumer group member stores the offsets it has processed",
    9: "reads a group's committed offsets",
    10: "finds the coordinator of a group or of a transactional id",
    11: "a classic-protocol member joins or rejoins its group",
    12: "a classic-protocol member tells the coordinator it is alive",
    13: "classic-protocol members leave their group",
    14: "the group leader hands out assignments and every member receives its own",
    15: "the state, protocol and members of classic groups",
    16: "lists the groups a broker coordinates",
    17: "a client picks its SASL mechanism",
    18: "a client learns which APIs and versions the broker supports",
    19: "creates topics",
    20: "deletes topics",
    21: "moves partitions' log start offsets forward, deleting the records before them",
    22: "a producer obtains its producer id and epoch (idempotence, transactions)",
    23: "finds where a leader epoch ends in a partition log (truncation after leader changes)",
    24: "a transactional producer adds partitions to its transaction",
    25: "a transactional producer adds a group's offsets to its transaction",
    26: "a transactional producer commits or aborts its transaction",
    27: "the transaction coordinator writes commit or abort markers to partition leaders",
    28: "a transactional producer commits consumer offsets inside its transaction",
    29: "lists access control entries matching a filter",
    30: "creates access control entries",
    31: "deletes access control entries matching filters",
    32: "reads configuration of topics, brokers and other resources",
    33: "replaces configuration of resources (superseded by IncrementalAlterConfigs)",
    34: "moves replicas between log directories of a broker",
    35: "describes a broker's log directories and the replicas they hold",
    36: "carries one round of SASL authentication bytes",
    37: "adds partitions to existing topics",
    38: "creates a delegation token",
    39: "extends a delegation token's life",
    40: "expires a delegation token",
    41: "describes delegation tokens",
    42: "deletes empty groups",
    43: "triggers leader election for partitions",
    44: "changes single configuration entries of resources",
    45: "starts or cancels partition reassignments",
    46: "lists ongoing partition reassignments",
    47: "deletes a group's committed offsets for partitions",
    48: "reads client quotas matching a filter",
    49: "sets or removes client quotas",
    50: "describes users' SCRAM credentials",
    51: "creates or deletes users' SCRAM credentials",
    52: "a KRaft candidate asks voters for their vote",
    53: "a new KRaft leader announces its epoch to the voters",
    54: "a KRaft leader gives up leadership",
    55: "describes the KRaft quorum: leader, voters, observers and their progress",
    56: "a partition leader asks the controller to change the in-sync replica set",
    57: "changes the cluster's finalized feature levels",
    58: "a broker forwards a client's request to the controller, wrapped with its principal",
    59: "a KRaft follower fetches a snapshot of the metadata log",
    60: "the cluster's id, controller and brokers",
    61: "the active producers of partitions",
    62: "a broker registers with the KRaft controller",
    63: "a broker tells the KRaft controller it is alive and learns its state",
    64: "removes a broker's registration from the KRaft controller",
    65: "describes transactions by transactional id",
    66: "lists transactions, optionally filtered by state or producer",
    67: "a broker reserves a block of producer ids from the controller",
    68: "a KIP-848 consumer group member heartbeats, joins, leaves and gets its assignment",
    69: "describes KIP-848 consumer groups and their members' assignments",
    70: "a KRaft controller registers with the active controller",
    71: "a client asks which metrics the broker wants it to push",
    72: "a client pushes its metrics to the broker",
    73: "a broker tells the controller which log directory holds each replica",
    74: "lists configuration resources (client metrics resources in version 0)",
    75: "describes topics' partitions, page by page",
    76: "a share group member heartbeats, joins, leaves and gets its assignment",
    77: "describes share groups and their members",
    78: "a share group member fetches records and acknowledges earlier ones",
    79: "a share group member acknowledges records it fetched",
    80: "adds a voter to the KRaft quorum",
    81: "removes a voter from the KRaft quorum",
    82: "a KRaft voter updates its endpoints and supported versions",
    83: "the share coordinator initialises a share partition's state",
    84: "reads the delivery state of share partitions",
    85: "writes the delivery state of share partitions",
    86: "deletes the delivery state of share partitions",
    87: "reads a summary (start offset) of share partitions' state",
    88: "a Kafka Streams group member heartbeats, joins, leaves and gets its tasks",
    89: "describes Kafka Streams groups and their members",
    90: "reads share groups' start offsets per partition",
    91: "sets share groups' start offsets per partition",
    92: "deletes share groups' offsets for topics",
    93: "a Kafka Streams group member sends the description of its topology (KIP-1331)",
    94: "removes a KRaft controller's registration from the active controller",
}

DATA_NOTES: dict[str, str] = {
    "DefaultPrincipalData": "a Kafka principal, serialized where a broker forwards a request",
    "KRaftVersionRecord": "a control record in the KRaft log: the kraft.version in force",
    "LeaderChangeMessage": "a control record in the KRaft log: a new leader and its voters",
    "SnapshotFooterRecord": "the control record that ends a KRaft snapshot",
    "SnapshotHeaderRecord": "the control record that starts a KRaft snapshot",
    "VotersRecord": "a control record in the KRaft log: the set of voters",
    "RequestHeader": "the header in front of every request body",
    "ResponseHeader": "the header in front of every response body",
}

# Field descriptions, by name (first match wins); the fallback reads the name as words.
GLOSSARY: list[tuple[str, str]] = [
    (r"ErrorCode", "Error code; 0 means no error."),
    (r"ErrorMessage", "Text explaining the error, or null."),
    (r"ThrottleTimeMs", "How long in ms a quota held the response back; 0 when not throttled."),
    (r"TopicId", "Id (uuid) of the topic."),
    (r"TopicName", "Topic, by name."),
    (r"PartitionIndex|Partition|PartitionId", "Number of the partition."),
    (r"Partitions", "Per-partition entries."),
    (r"Topics", "Per-topic entries."),
    (r"GroupId", "Id of the group."),
    (r"GroupInstanceId", "Static membership id of the member, or null when not static."),
    (r"MemberId", "Id of the member, assigned by the coordinator."),
    (r"MemberEpoch", "Epoch of the member in its group."),
    (r"GenerationId", "Generation of the group."),
    (r"ProducerId", "Id the producer got from InitProducerId, or -1."),
    (r"ProducerEpoch", "Epoch of the producer id."),
    (r"TransactionalId", "Transactional id of the producer, or null when not transactional."),
    (r"LeaderId", "Broker id of the partition's leader."),
    (r"LeaderEpoch", "Epoch of the partition's leader."),
    (r"CurrentLeaderEpoch", "The leader epoch the client knows, to fence stale requests."),
    (r"NodeId|BrokerId", "Broker (node) id."),
    (r"Host", "Host name of the broker."),
    (r"Port", "Port of the broker."),
    (r"Rack", "Rack of the broker, or null."),
    (r"TimeoutMs", "How long in ms the broker may take before answering."),
    (r"Records", "The records, as record batches (or legacy message sets)."),
    (r"HighWatermark", "Offset up to which the partition's records are replicated."),
    (r"LastStableOffset", "Offset below which every transaction is decided."),
    (r"LogStartOffset", "First offset still in the partition's log."),
    (r"ClientId", "Client id the client gave."),
    (r"ClusterId", "Id of the cluster."),
    (r"ControllerId", "Broker id of the active controller."),
    (r"ResourceType", "Type code of the resource."),
    (r"ResourceName", "Name of the resource."),
    (r"Configs", "Configuration entries."),
    (r"Name", "Name of the entry."),
    (r"Value", "Value of the entry."),
    (r"ValidateOnly", "When true the broker checks the request but changes nothing."),
    (r"Replicas", "Broker ids of the replicas."),
    (r"Isr", "Broker ids of the in-sync replicas."),
    (r"ClusterAuthorizedOperations", "Bit field of the operations allowed on the cluster."),
    (r"TopicAuthorizedOperations", "Bit field of the operations allowed on the topic."),
    (r"Timestamp", "Timestamp in ms since the epoch."),
    (r"Offset", "An offset in the partition's log."),
    (r"Metadata", "Metadata the client attached."),
    (r"Acks", "How many replicas must acknowledge: 0, 1 or -1 for all in-sync replicas."),
    (r"SessionId", "Id of the fetch session."),
    (r"SessionEpoch", "Epoch of the fetch session."),
    (r"ReplicaId", "Broker id of the follower fetching, or -1 for a consumer."),
    (r"IsolationLevel", "0 reads everything, 1 only committed transactions."),
    (r"Features", "Feature entries."),
    (
        r"AcceptableRecoveryLagLegacy",
        "How far (in offsets) a warm-up task may lag and still count "
        "as caught up; the 32-bit field of version 0.",
    ),
    (
        r"AcceptableRecoveryLag",
        "How far (in offsets) a warm-up task may lag and still count as caught up.",
    ),
    (
        r"TopologyDescriptionRequired",
        "True when the coordinator wants the member to send its "
        "topology description (StreamsGroupTopologyDescriptionUpdate).",
    ),
    (
        r"TopologyDescriptionStatus",
        "Whether the group's topology description is known: a code the coordinator defines.",
    ),
    (
        r"TopologyDescription",
        "The topology as Kafka Streams describes it: subtopologies and global stores.",
    ),
    (r"IncludeTopologyDescription", "True to ask for the topology description in the response."),
    (r"NodeType", "Kind of node: 1 source, 2 processor, 3 sink."),
    (r"SinkTopic", "Topic a sink node writes to, or null when it is chosen at run time."),
    (r"Successors", "Names of the nodes this node forwards records to."),
    (r"Stores", "Names of the state stores the node uses."),
    (r"GlobalStores", "The global state stores: the nodes that feed each one."),
    (r"TopologyEpoch", "Epoch of the topology the member runs."),
    (
        r"GenerationIdOrMemberEpoch",
        "Generation of a classic group, or the member's epoch in a KIP-848 group.",
    ),
]

# Where a field's name means something else in one message than the glossary says: (message,
# field path) -> our description.
SPECIFIC: dict[tuple[str, str], str] = {
    ("UnregisterControllerRequest", "ControllerId"): "Node id of the controller to unregister.",
}

_UNITS = {"ms": "in ms", "id": "id", "ids": "ids", "uuid": "uuid"}


def _words(name: str) -> list[str]:
    return re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", name)


# What a struct holds, from its type name, for fields whose name alone says little.
_OWNERS = [
    ("Partition", "partition"),
    ("Topic", "topic"),
    ("Group", "group"),
    ("Member", "member"),
    ("Broker", "broker"),
    ("Node", "node"),
    ("Resource", "resource"),
    ("Config", "configuration entry"),
    ("Listener", "listener"),
    ("Feature", "feature"),
    ("Voter", "voter"),
    ("Transaction", "transaction"),
    ("Acl", "access control entry"),
    ("Quota", "quota"),
    ("Token", "token"),
    ("Replica", "replica"),
    ("Dir", "log directory"),
    ("Producer", "producer"),
    ("Endpoint", "endpoint"),
    ("Api", "API"),
]
_OWNED = {
    "Name": "The {}'s name.",
    "Index": "Number of the {}.",
    "Id": "Id of the {}.",
    "Value": "Value of the {}.",
    "Host": "Host name of the {}.",
    "Port": "Port of the {}.",
}


def describe(field: Spec, owner: str = "") -> str:
    """Our description of a field: by its owner struct, the glossary, else its name."""
    name = field["name"]
    if name in _OWNED:
        for marker, noun in _OWNERS:
            if marker in owner:
                return _OWNED[name].format(noun)
    for pattern, text in GLOSSARY:
        if re.fullmatch(pattern, name):
            return text
    words = [_UNITS.get(w.lower(), w.lower()) for w in _words(name)]
    if words and words[0] in ("is", "has", "include", "allow"):
        phrase = " ".join(words)
        return f"True if {phrase}." if len(phrase) > 3 else f"Flag: {phrase}."
    text = " ".join(words)
    text = text[0].upper() + text[1:]
    element = _elem(field["type"])
    if not field["type"].startswith("[]"):
        return f"{text} ({element})."
    if _is_struct_type(element):
        owner = " ".join(w.lower() for w in _words(element))
        return f"{text}: one entry per {owner}."
    return f"{text}: a list of {element}."


# -- version ranges -------------------------------------------------------------------------------


def vset(text: Any, top: int) -> set[int]:
    """The versions of a range text ("N", "A-B", "A+", "none"), capped at top."""
    s = str(text).strip() if text is not None else "none"
    if s == "none" or s == "":
        return set()
    if s.endswith("+"):
        return set(range(int(s[:-1]), top + 1))
    if "-" in s:
        lo, hi = s.split("-", 1)
        return set(range(int(lo), min(int(hi), top) + 1))
    return {int(s)} if int(s) <= top else set()


def vtext(versions: set[int], top: int, where: str) -> str:
    """A range text for a contiguous set ("N+" when it reaches the message's newest version)."""
    if not versions:
        return "none"
    lo, hi = min(versions), max(versions)
    if versions != set(range(lo, hi + 1)):
        raise MergeError(f"{where}: versions {sorted(versions)} are not contiguous")
    if hi == top:
        return f"{lo}+"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


class MergeError(Exception):
    pass


# -- sources ---------------------------------------------------------------------------------------


def read(path: Path) -> Spec:
    spec: Spec = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    for key in ("fields", "commonStructs"):
        if isinstance(spec.get(key), dict):
            spec[key] = [spec[key]]
    return spec


def kio_sources(names: list[str]) -> dict[str, Spec]:
    """Specs rebuilt from kio's generated modules (see kio_facts.py), for the given names."""
    import kio_facts  # type: ignore[import-not-found]

    out = {}
    for name in names:
        spec = kio_facts.kio_schema(name)
        if spec is not None:
            out[name] = spec
    return out


# -- merge ----------------------------------------------------------------------------------------


_FACT_KEYS = (
    "default",
    "ignorable",
    "mapKey",
    "entityType",
    "zeroCopy",
    "flexibleVersions",
)


def merge_fields(parts: list[tuple[list[Spec], set[int]]], top: int, where: str) -> list[Spec]:
    """One field list from several sources, newest first, each with the versions taken from it.

    The newest source that has a field at all gives its facts (defaults, ignorable, ...), so a
    field a newer Kafka marked ignorable stays so for the versions only older sources hold."""
    merged: dict[str, Spec] = {}
    order: list[str] = []
    for fields, taken in parts:
        previous: str | None = None
        for f in fields:
            name = f["name"]
            path = f"{where}.{name}"
            versions = vset(f.get("versions"), MAX) & taken
            entry = merged.get(name)
            if entry is None:
                entry = {"name": name, "type": f["type"], "_v": set(), "_n": set(), "_t": set(),
                         "_parts": []}  # fmt: skip
                entry.update({k: f[k] for k in _FACT_KEYS if k in f})
                merged[name] = entry
                # A field new to the list goes right after its predecessor in its own source.
                order.insert(order.index(previous) + 1 if previous is not None else 0, name)
            previous = name
            if not versions:
                continue
            if entry["_v"] and _elem(entry["type"]) != _elem(f["type"]):
                if not (_is_struct_type(f["type"]) and _is_struct_type(entry["type"])):
                    raise MergeError(
                        f"{path}: type {entry['type']} in one source, {f['type']} in another"
                    )
            if not entry["_v"]:
                entry["type"] = f["type"]
            entry["_v"] |= versions
            entry["_n"] |= vset(f.get("nullableVersions"), MAX) & versions
            tagged = vset(f.get("taggedVersions"), MAX) & versions
            if tagged:
                if "tag" in entry and int(entry["tag"]) != int(f["tag"]):
                    raise MergeError(f"{path}: tag {entry['tag']} and {f['tag']} in sources")
                entry["tag"] = int(f["tag"])
                entry["_t"] |= tagged
            if "fields" in f:
                entry["_parts"].append((f["fields"], taken))
    out = []
    for name in order:
        entry = merged[name]
        if not entry["_v"]:
            continue
        field: Spec = {"name": name, "type": entry["type"]}
        field["versions"] = vtext(entry["_v"], top, f"{where}.{name}")
        if entry["_n"]:
            field["nullableVersions"] = vtext(entry["_n"], top, f"{where}.{name} nullable")
        if entry["_t"]:
            field["taggedVersions"] = vtext(entry["_t"], top, f"{where}.{name} tagged")
            field["tag"] = entry["tag"]
        for key in _FACT_KEYS:
            if key in entry:
                field[key] = entry[key]
        if entry["_parts"]:
            field["fields"] = merge_fields(entry["_parts"], top, f"{where}.{name}")
        out.append(field)
    return out


def _elem(type_name: str) -> str:
    return type_name[2:] if type_name.startswith("[]") else type_name


def _is_struct_type(type_name: str) -> bool:
    return _elem(type_name)[:1].isupper()


def _inline(spec: Spec) -> Spec:
    """A copy with every common struct written out where it is used (sources disagree on which
    structs are common, so they are merged inline and hoisted again by _hoist)."""
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}

    def walk(fields: list[Spec]) -> list[Spec]:
        out = []
        for f in fields:
            g = dict(f)
            if "fields" not in g and _elem(g["type"]) in common:
                g["fields"] = common[_elem(g["type"])]
            if "fields" in g:
                g["fields"] = walk(g["fields"])
            out.append(g)
        return out

    copy = {k: v for k, v in spec.items() if k != "commonStructs"}
    copy["fields"] = walk(spec["fields"])
    return copy


def _hoist(fields: list[Spec], declared: set[str], where: str) -> list[Spec]:
    """Moves structs that a file declared common, or that are used at several paths, into
    commonStructs; every use of one must have the same merged fields."""
    uses: dict[str, list[Spec]] = {}

    def walk(items: list[Spec]) -> None:
        for f in items:
            if "fields" in f:
                uses.setdefault(_elem(f["type"]), []).append(f)
                walk(f["fields"])

    walk(fields)
    common = []
    for struct, found in uses.items():
        if struct not in declared and len(found) == 1:
            continue
        first = json.dumps(found[0]["fields"], sort_keys=True)
        for f in found[1:]:
            if json.dumps(f["fields"], sort_keys=True) != first:
                raise MergeError(
                    f"{where}: struct {struct} differs between the places it is used:\n"
                    f"{first}\n{json.dumps(f['fields'], sort_keys=True)}"
                )
        common.append({"name": struct, "versions": "0+", "fields": found[0]["fields"]})
        for f in found:
            del f["fields"]
    return common


def merge(name: str, sources: list[Spec]) -> Spec:
    """Sources oldest first; each version comes from the newest source that has it (names
    follow upstream's renames), older sources adding the versions newer ones dropped."""
    top = max(max(vset(s["validVersions"], MAX)) for s in sources)
    valid: set[int] = set()
    parts: list[tuple[list[Spec], set[int]]] = []
    common_names = {
        c["name"]
        for s in sources
        if not (s.get("_kio") or s.get("_jar"))
        for c in s.get("commonStructs", [])
    }
    sources = [_inline(s) for s in sources]
    newest = sources[-1]
    flexible = vset(newest.get("flexibleVersions"), top)
    kio_parts: list[tuple[list[Spec], set[int]]] = []
    jar_parts: list[tuple[list[Spec], set[int]]] = []
    # Newest file first; kio's and the jar's clipped versions are new by construction (or win,
    # KIO_WINS).
    kio = [s for s in sources if s.get("_kio")]
    jar = [s for s in sources if s.get("_jar")]
    files = [s for s in sources if not (s.get("_kio") or s.get("_jar"))]
    for s in [*kio, *jar, *reversed(files)]:
        versions = vset(s["validVersions"], MAX) - valid
        if not versions:
            continue
        valid |= versions
        if vset(s.get("flexibleVersions"), top) & versions != flexible & versions:
            raise MergeError(f"{name}: flexibleVersions differ between sources")
        if s.get("_kio"):
            kio_parts = [(s["fields"], versions)]
        elif s.get("_jar"):
            jar_parts.append((s["fields"], versions))
        else:
            parts.append((s["fields"], versions))
    out: Spec = {}
    if "apiKey" in newest:
        out["apiKey"] = newest["apiKey"]
    out["type"] = newest["type"]
    if "listeners" in newest:
        out["listeners"] = newest["listeners"]
    out["name"] = name
    if valid != set(range(min(valid), top + 1)):
        raise MergeError(f"{name}: valid versions {sorted(valid)} are not contiguous")
    out["validVersions"] = str(top) if min(valid) == top else f"{min(valid)}-{top}"
    out["flexibleVersions"] = f"{min(flexible)}+" if flexible else "none"
    deprecated = [s for s in sources if "deprecatedVersions" in s]
    if deprecated:
        out["deprecatedVersions"] = deprecated[-1]["deprecatedVersions"]
    if newest.get("latestVersionUnstable") and len(sources) == 1:
        out["latestVersionUnstable"] = True
    out["fields"] = merge_fields(parts + kio_parts + jar_parts, top, name)
    common = _hoist(out["fields"], common_names, name)
    if common:
        out["commonStructs"] = common
    return out


# -- our prose ------------------------------------------------------------------------------------


def describe_all(fields: list[Spec], owner: str = "", message: str = "", prefix: str = "") -> None:
    for f in fields:
        path = prefix + f["name"]
        f["about"] = SPECIFIC.get((message, path)) or describe(f, owner)
        if "fields" in f:
            describe_all(f["fields"], _elem(f["type"]), message, path + ".")


def history(spec: Spec) -> list[str]:
    """Version notes derived from the merged facts: what each version adds or drops."""
    lines = []
    valid = sorted(vset(spec["validVersions"], MAX))
    top = valid[-1]
    flexible = vset(spec.get("flexibleVersions"), top)
    fields: list[tuple[str, set[int]]] = []

    def walk(items: list[Spec], prefix: str) -> None:
        for f in items:
            fields.append((prefix + f["name"], vset(f.get("versions"), top)))
            walk(f.get("fields", []), prefix + f["name"] + ".")

    walk(spec["fields"], "")
    for c in spec.get("commonStructs", []):
        walk(c["fields"], c["name"] + ".")
    for v in valid[1:]:
        added = _tops([p for p, vs in fields if v in vs and v - 1 not in vs])
        removed = _tops([p for p, vs in fields if v - 1 in vs and v not in vs])
        notes = []
        if added:
            notes.append("adds " + ", ".join(added))
        if removed:
            notes.append("drops " + ", ".join(removed))
        if v in flexible and v - 1 not in flexible:
            notes.append("first flexible version")
        if notes:
            lines.append(f"v{v}: " + "; ".join(notes) + ".")
    if lines:
        lines.append("(a version not listed has the layout of the one before it)")
    return lines


def _tops(paths: list[str]) -> list[str]:
    """The paths whose parent is not in the list too (a new struct, not each of its fields)."""
    chosen = set(paths)
    return [p for p in paths if p.rpartition(".")[0] not in chosen]


def render(spec: Spec) -> str:
    """The file text, laid out like the hand-written schemas (one field per line or two)."""
    api = spec.get("apiKey")
    kind = spec["type"]
    if api is not None:
        title = re.sub(r"(Request|Response)$", "", spec["name"])
        head = f"// {title} (API key {api}), {kind}: {API_NOTES.get(api, 'see the API name')}."
    else:
        head = f"// {spec['name']}: {DATA_NOTES.get(spec['name'], 'a serialized data structure')}."
    lines = [head, f"// {MARK};",
             "// the descriptions are kwire's own.", "", "{"]  # fmt: skip
    top_keys = ["apiKey", "type", "listeners", "name"]
    for key in top_keys:
        if key in spec:
            lines.append(f'  "{key}": {json.dumps(spec[key])},')
    notes = history(spec)
    if notes:
        lines.append("  // Version history:")
        lines.extend(f"  // {n}" for n in notes)
    for key in ("validVersions", "flexibleVersions", "deprecatedVersions", "latestVersionUnstable"):
        if key in spec:
            lines.append(f'  "{key}": {json.dumps(spec[key])},')
    lines.append('  "fields": [')
    lines.extend(_render_fields(spec["fields"], 4))
    if spec.get("commonStructs"):
        lines.append("  ],")
        lines.append('  "commonStructs": [')
        for i, c in enumerate(spec["commonStructs"]):
            lines.append(
                f'    {{ "name": {json.dumps(c["name"])}, "versions": {json.dumps(c["versions"])},'
                ' "fields": ['
            )
            lines.extend(_render_fields(c["fields"], 6))
            lines.append("    ]}" + ("," if i < len(spec["commonStructs"]) - 1 else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


_ORDER = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
          "ignorable", "mapKey", "entityType", "zeroCopy", "flexibleVersions")  # fmt: skip


def _render_fields(fields: list[Spec], indent: int) -> list[str]:
    pad = " " * indent
    out = []
    for i, f in enumerate(fields):
        facts = ", ".join(f'"{k}": {json.dumps(f[k])}' for k in _ORDER if k in f)
        about = f'"about": {json.dumps(f["about"])}'
        last = i == len(fields) - 1
        if "fields" in f:
            out.append(f"{pad}{{ {facts},")
            out.append(f'{pad}  {about}, "fields": [')
            out.extend(_render_fields(f["fields"], indent + 4))
            out.append(f"{pad}  ]}}" + ("" if last else ","))
        else:
            out.append(f"{pad}{{ {facts},")
            out.append(f"{pad}  {about} }}" + ("" if last else ","))
    return out


# -- command line ---------------------------------------------------------------------------------


def collect(
    reference: Path, newer: list[Path], use_kio: bool, jar: Path | None = None
) -> dict[str, list[Spec]]:
    by_name: dict[str, list[Spec]] = {}
    for directory in [reference, *newer]:
        for path in sorted(directory.glob("*.json")):
            spec = read(path)
            name = RENAMED.get(spec["name"], spec["name"])
            by_name.setdefault(name, []).append(spec)
    if use_kio:
        import kio_facts  # type: ignore[import-not-found]  # beside this file (kio_sources)

        only = {
            f"{api}{kind}" for api in kio_facts.KIO_ONLY_APIS for kind in ("Request", "Response")
        }
        for name, spec in kio_sources(sorted(set(by_name) | only)).items():
            known = set().union(*(vset(s["validVersions"], MAX) for s in by_name.get(name, [])))
            extra = vset(spec["validVersions"], MAX) - (set() if name in KIO_WINS else known)
            if extra:
                # kio gives only what no file has: its versions are clipped to the new ones,
                # and it comes first in the list so that the files' facts win for old fields.
                spec["validVersions"] = f"{min(extra)}-{max(extra)}"
                spec["_kio"] = True
                by_name.setdefault(name, []).insert(0, spec)
    # Every source so far predates the renames (the jar, when given, already has the new names).
    for specs in by_name.values():
        for spec in specs:
            _rename_fields(spec)
    if jar is not None:
        import jar_facts  # type: ignore[import-not-found]  # beside this file

        facts = jar_facts.dump(jar)
        for name in sorted(jar_facts.message_names(facts)):
            known = set().union(*(vset(s["validVersions"], MAX) for s in by_name.get(name, [])))
            # Like kio, the jar gives only the versions no other source has, and comes first so
            # that the other sources' facts (entityType, mapKey, ignorable, ...) win.
            extra = [s for s in jar_facts.jar_specs(facts, name)
                     if int(s["validVersions"]) not in known]  # fmt: skip
            for spec in extra:
                spec["_jar"] = True
            by_name.setdefault(name, [])[:0] = extra
    return by_name


# Fields renamed upstream after some of our sources were cut: one field, the newest name
# (applied to every source but the jar, the newest).
FIELD_RENAMES = {
    ("VoteRequest", "CandidateEpoch"): "ReplicaEpoch",
    ("VoteRequest", "CandidateId"): "ReplicaId",
    ("VoteRequest", "CandidateDirectoryId"): "ReplicaDirectoryId",
    # Kafka 4.4 (kafka-clients jar): same bytes, new names.
    ("TxnOffsetCommitRequest", "GenerationId"): "GenerationIdOrMemberEpoch",
    # Kafka 4.4 gave version 1 an int64 AcceptableRecoveryLag after TaskOffsetIntervalMs and
    # renamed version 0's int32 field (KIP-1331).
    ("StreamsGroupHeartbeatResponse", "AcceptableRecoveryLag"): "AcceptableRecoveryLagLegacy",
}

# Where kio's (newer) layout of a version replaces the files': ReadShareGroupStateSummary v0
# changed in place upstream before its release (LeaderEpoch was added); we follow the release.
KIO_WINS = {"ReadShareGroupStateSummaryResponse"}


def _rename_fields(spec: Spec) -> None:
    def walk(fields: list[Spec]) -> None:
        for f in fields:
            f["name"] = FIELD_RENAMES.get((spec["name"], f["name"]), f["name"])
            walk(f.get("fields", []))

    walk(spec["fields"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="upstream message dir")
    parser.add_argument("--newer", type=Path, action="append", default=[], help="newer files")
    parser.add_argument("--kio", action="store_true", help="add versions only kio has")
    parser.add_argument("--jar", type=Path, help="kafka-clients jar: add versions only it has")
    parser.add_argument("--out", type=Path, default=ROOT / "schemas")
    parser.add_argument("--replace", action="store_true", help="rewrite hand-written files too")
    args = parser.parse_args(argv)
    written = kept = 0
    problems = []
    for name, sources in sorted(collect(args.reference, args.newer, args.kio, args.jar).items()):
        target = args.out / f"{name}.json"
        imported = target.exists() and MARK in target.read_text(encoding="utf-8")
        if target.exists() and not (imported or args.replace):
            kept += 1
            continue
        try:
            spec = merge(name, sources)
        except MergeError as e:
            problems.append(str(e))
            continue
        describe_all(spec["fields"], message=name)
        for c in spec.get("commonStructs", []):
            describe_all(c["fields"], c["name"], name, c["name"] + ".")
        target.write_text(render(spec), encoding="utf-8")
        written += 1
    for p in problems:
        print(f"import: {p}", file=sys.stderr)
    print(f"wrote {written} schema files, kept {kept} existing, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
