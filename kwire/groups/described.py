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

# The describe APIs, their group type and api key.
DESCRIBES = (
    ("describe_groups", "classic"),
    ("consumer_group_describe", "consumer"),
    ("share_group_describe", "share"),
    ("streams_group_describe", "streams"),
)


def _has(df: DataFrame, column: str) -> bool:
    return column in df.columns


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


_TOPICS = "array<struct<topic_id:string,topic_name:string,partitions:array<int>>>"
_TASKS = "array<struct<subtopology_id:string,partitions:array<int>>>"


def _topics(value: Column) -> Column:
    return F.transform(
        value,
        lambda t: F.struct(
            t["topic_id"].cast("string").alias("topic_id"),
            t["topic_name"].alias("topic_name"),
            t["partitions"].alias("partitions"),
        ),
    )


def _task_ids(value: Column) -> Column:
    return F.transform(
        value,
        lambda t: F.struct(t["subtopology_id"].alias("subtopology_id"), t["partitions"]),
    )


def _narrowed_answer(api: str, kind: str, group: list[str], member: list[str]) -> Column:
    """One describe API's answer with only what OUT/groups/described reads, in one struct shape
    for all four (its decoded struct's group and member fields given): StreamsGroupDescribe's
    topology description alone is hundreds of nested fields, which Spark then never reads."""

    def one_member(m: Column) -> Column:
        tp = F.lit(None).cast(_TOPICS)
        target_tp = F.lit(None).cast(_TOPICS)
        tasks = {k: F.lit(None).cast(_TASKS) for k in ("active", "standby", "warmup")}
        target_active = F.lit(None).cast(_TASKS)
        if kind == "classic" and "consumer_assignment" in member:
            tp = F.transform(
                m["consumer_assignment"]["assigned_partitions"],
                lambda t: F.struct(
                    F.lit(None).cast("string").alias("topic_id"),
                    t["topic"].alias("topic_name"),
                    t["partitions"].alias("partitions"),
                ),
            )
        elif kind in ("consumer", "share"):
            tp = _topics(m["assignment"]["topic_partitions"])
            if "target_assignment" in member:
                target_tp = _topics(m["target_assignment"]["topic_partitions"])
        elif kind == "streams":
            tasks = {
                k: _task_ids(m["assignment"][f"{k}_tasks"]) for k in ("active", "standby", "warmup")
            }
            target_active = _task_ids(m["target_assignment"]["active_tasks"])
        instance = "group_instance_id" if kind == "classic" else "instance_id"
        return F.struct(
            m["member_id"].alias("member_id"),
            _get(member, m, "member_epoch", "int").alias("member_epoch"),
            m["client_id"].alias("client_id"),
            m["client_host"].alias("client_host"),
            _get(member, m, instance, "string").alias("instance_id"),
            _get(member, m, "process_id", "string").alias("process_id"),
            tp.alias("tp"),
            target_tp.alias("target_tp"),
            *[tasks[k].alias(k) for k in ("active", "standby", "warmup")],
            target_active.alias("target_active"),
        )

    def one_group(g: Column) -> Column:
        assignor = "protocol_data" if kind == "classic" else "assignor_name"
        topology = g["topology"]["epoch"] if "topology" in group else F.lit(None)
        return F.struct(
            g["error_code"].alias("error_code"),
            g["group_id"].alias("group_id"),
            g["group_state"].alias("group_state"),
            _get(group, g, "group_epoch", "int").alias("group_epoch"),
            _get(group, g, "assignment_epoch", "int").alias("assignment_epoch"),
            topology.cast("int").alias("topology_epoch"),
            _get(group, g, assignor, "string").alias("assignor"),
            F.transform(g["members"], one_member).alias("members"),
        )

    return F.when(
        F.col(api).isNotNull(),
        F.struct(F.transform(F.col(f"{api}.groups"), one_group).alias("groups")),
    ).alias(api)


def _partitions(topics: Column, names: dict[str, str]) -> Column:
    """[{topic_id, topic_name, partitions}] -> ["topic-partition"], the topic named by the
    answer, else by the capture's Metadata (kwire.groups.build._named), else by its id."""
    return F.flatten(
        F.transform(
            topics,
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.concat_ws(
                    "-", _named(t["topic_name"], t["topic_id"], names), p.cast("string")
                ),
            ),
        )
    )


def _tasks(tasks: Column) -> Column:
    """[{subtopology_id, partitions}] -> ["subtopology_partition"]."""
    return F.flatten(
        F.transform(
            tasks,
            lambda t: F.transform(
                F.coalesce(t["partitions"], F.array()),
                lambda p: F.concat_ws("_", t["subtopology_id"], p.cast("string")),
            ),
        )
    )


def _one(responses: DataFrame, api: str, kind: str, names: dict[str, str]) -> DataFrame:
    group = _fields(responses, f"{api}.groups")
    member = _fields(responses, f"{api}.groups.members")
    d = rows_of(responses, api).select(
        "ts_first",
        "client_id",
        "broker_addr",
        "broker_port",
        _narrowed_answer(api, kind, group, member).alias("resp"),
    )
    d = d.select("*", F.explode("resp.groups").alias("g"))
    d = d.select("*", F.explode_outer("g.members").alias("m"))
    m = F.col("m")
    if kind == "streams":
        assigned, target = _tasks(m["active"]), _tasks(m["target_active"])
    else:
        assigned, target = _partitions(m["tp"], names), _partitions(m["target_tp"], names)
    return d.select(
        F.col("g.group_id").alias("group_id"),
        F.lit(kind).alias("group_type"),
        F.col("ts_first").alias("described_at"),
        F.col("client_id").alias("asked_by"),
        F.concat_ws(":", F.col("broker_addr"), F.col("broker_port").cast("string")).alias(
            "coordinator"
        ),
        _error_name(F.col("g.error_code")).alias("error"),
        F.col("g.group_state").alias("state"),
        F.col("g.group_epoch").alias("group_epoch"),
        F.col("g.assignment_epoch").alias("assignment_epoch"),
        F.col("g.topology_epoch").alias("topology_epoch"),
        F.when(F.col("g.assignor") != "", F.col("g.assignor")).alias("assignor"),
        m["member_id"].alias("member_id"),
        m["member_epoch"].alias("member_epoch"),
        m["client_id"].alias("member_client_id"),
        m["client_host"].alias("client_host"),
        m["instance_id"].alias("instance_id"),
        m["process_id"].alias("process_id"),
        assigned.alias("assigned"),
        _tasks(m["standby"]).alias("standby"),
        _tasks(m["warmup"]).alias("warmup"),
        target.alias("target"),
    )


def described(responses: DataFrame, names: dict[str, str]) -> DataFrame:
    """OUT/groups/described (see the module's docstring) from the decoded responses (as the
    job wrote them: partitioned by api key, so only the describe answers' files are read);
    empty when the capture has no describe answer."""
    schema = TABLES["described"]
    parts = [
        _one(responses, api, kind, names)
        for api, kind in DESCRIBES
        if _has(responses, api) and isinstance(responses.schema[api].dataType, StructType)
    ]
    parts = [p.select(*[F.col(f.name).cast(f.dataType) for f in schema]) for p in parts]
    if not parts:
        return responses.sparkSession.createDataFrame([], schema)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
