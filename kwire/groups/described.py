"""OUT/groups/described: what the describe calls of a capture answered, one row per answer,
group and member.

An admin (kafka-consumer-groups.sh, kafka-share-groups.sh, kafka-streams-groups.sh, a Kafka
Streams instance's own admin, a monitoring tool) asks the group coordinator how a group stands:
DescribeGroups (api key 15, classic groups), ConsumerGroupDescribe (69), ShareGroupDescribe (77)
and StreamsGroupDescribe (89). The answer is the coordinator's view at that instant: the
group's state and epochs, and each member with what it is assigned, including members whose own
traffic the capture does not hold. The members' own requests tell the rest of the group tables;
this one keeps the coordinator's word beside them.

Assignments are lists of text: "topic-partition" for consumer, share and classic groups (a
classic member's assignment as the consumer protocol carries it), "subtopology_partition" for a
streams group's tasks, as Kafka Streams prints a TaskId.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from kwire.spark.model import rows_of
from kwire.groups.pairs import _error_name, _named
from kwire.groups.schema import TABLES

# The describe APIs (their column in the decoded responses) and the group type each tells.
DESCRIBES = (
    ("describe_groups", "classic"),
    ("consumer_group_describe", "consumer"),
    ("share_group_describe", "share"),
    ("streams_group_describe", "streams"),
)


def _fields(df: DataFrame, path: str) -> list[str]:
    """The field names of the struct (or array of structs) at a dotted `path` of `df`."""
    kind: Any = df.schema
    for part in path.split("."):
        kind = kind[part].dataType
        while hasattr(kind, "elementType"):
            kind = kind.elementType
    return list(kind.fieldNames())


def _get(have: list[str], struct: Column, name: str, kind: str) -> Column:
    """`struct[name]` where the decoded struct has it (the versions of an API all add their
    fields to one struct), else a null of `kind`."""
    return struct[name] if name in have else F.lit(None).cast(kind)


def _partitions(topics: Column, names: dict[str, str], topic: str = "topic_name") -> Column:
    """[{topic_name or topic, topic_id, partitions}] -> ["topic-partition"], the topic named by
    the answer, else by the capture's Metadata (kwire.groups.pairs._named), else by its id."""

    def topic_id(t: Column) -> Column:
        return t["topic_id"].cast("string") if topic == "topic_name" else F.lit(None).cast("string")

    return F.flatten(
        F.transform(
            topics,
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.concat_ws(
                    "-",
                    _named(t[topic], topic_id(t), names),
                    p.cast("string"),
                ),
            ),
        )
    )


def _tasks(tasks: Column) -> Column:
    """[{subtopology_id, partitions}] -> ["subtopology_partition"], as Kafka Streams prints a
    TaskId."""
    return F.flatten(
        F.transform(
            tasks,
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.concat_ws("_", t["subtopology_id"], p.cast("string")),
            ),
        )
    )


def _answer(
    api: str, kind: str, group: list[str], member: list[str], names: dict[str, str]
) -> Column:
    """One describe API's answer as the groups and members of OUT/groups/described, built
    inside the answer before it is exploded, so that Spark reads only these fields of it:
    StreamsGroupDescribe's topology description alone is hundreds of nested fields. `group`
    and `member` are the decoded struct's field names (all the API's versions in one)."""

    def one_member(m: Column) -> Column:
        assigned = target = standby = warmup = F.lit(None).cast("array<string>")
        if kind == "classic" and "consumer_assignment" in member:
            assigned = _partitions(m["consumer_assignment"]["assigned_partitions"], names, "topic")
        elif kind in ("consumer", "share"):
            assigned = _partitions(m["assignment"]["topic_partitions"], names)
            if "target_assignment" in member:
                target = _partitions(m["target_assignment"]["topic_partitions"], names)
        elif kind == "streams":
            assigned = _tasks(m["assignment"]["active_tasks"])
            standby = _tasks(m["assignment"]["standby_tasks"])
            warmup = _tasks(m["assignment"]["warmup_tasks"])
            target = _tasks(m["target_assignment"]["active_tasks"])
        instance = "group_instance_id" if kind == "classic" else "instance_id"
        return F.struct(
            m["member_id"].alias("member_id"),
            _get(member, m, "member_epoch", "int").alias("member_epoch"),
            m["client_id"].alias("member_client_id"),
            m["client_host"].alias("client_host"),
            _get(member, m, instance, "string").alias("instance_id"),
            _get(member, m, "process_id", "string").alias("process_id"),
            assigned.alias("assigned"),
            standby.alias("standby"),
            warmup.alias("warmup"),
            target.alias("target"),
        )

    def one_group(g: Column) -> Column:
        assignor = _get(
            group, g, "protocol_data" if kind == "classic" else "assignor_name", "string"
        )
        topology = g["topology"]["epoch"] if "topology" in group else F.lit(None)
        return F.struct(
            g["group_id"].alias("group_id"),
            _error_name(g["error_code"]).alias("error"),
            g["group_state"].alias("state"),
            _get(group, g, "group_epoch", "int").alias("group_epoch"),
            _get(group, g, "assignment_epoch", "int").alias("assignment_epoch"),
            topology.cast("int").alias("topology_epoch"),
            F.when(assignor != "", assignor).alias("assignor"),
            F.transform(g["members"], one_member).alias("members"),
        )

    return F.transform(F.col(f"{api}.groups"), one_group)


def _one(responses: DataFrame, api: str, kind: str, names: dict[str, str]) -> DataFrame:
    group = _fields(responses, f"{api}.groups")
    member = _fields(responses, f"{api}.groups.members")
    d = rows_of(responses, api).select(
        F.col("ts_first").alias("described_at"),
        F.col("client_id").alias("asked_by"),
        F.concat_ws(":", F.col("broker_addr"), F.col("broker_port").cast("string")).alias(
            "coordinator"
        ),
        F.explode(_answer(api, kind, group, member, names)).alias("g"),
    )
    d = d.select("*", F.explode_outer("g.members").alias("m"))
    return d.select(
        "g.group_id",
        F.lit(kind).alias("group_type"),
        "described_at",
        "asked_by",
        "coordinator",
        *[f"g.{c}" for c in ("error", "state", "group_epoch", "assignment_epoch")],
        "g.topology_epoch",
        "g.assignor",
        "m.*",
    )


def described(responses: DataFrame, names: dict[str, str]) -> DataFrame:
    """OUT/groups/described (see the module's docstring) from the decoded responses (as the
    job wrote them: partitioned by api key, so only the describe answers' files are read);
    empty when the capture has no describe answer."""
    schema = TABLES["described"]
    parts = [
        _one(responses, api, kind, names)
        for api, kind in DESCRIBES
        if api in responses.columns and isinstance(responses.schema[api].dataType, StructType)
    ]
    parts = [p.select(*[F.col(f.name).cast(f.dataType) for f in schema]) for p in parts]
    if not parts:
        return responses.sparkSession.createDataFrame([], schema)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
