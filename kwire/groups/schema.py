"""The tables under OUT/groups/: their names, columns and Spark types (the contract of ../design).

Built by kwire.groups.build from the decoded tables, read by the story (`kwire groups OUT`) and the
report (`kwire report OUT`). One place names the columns so that the three agree.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _t(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])  # type: ignore[arg-type]


S, I, L, D, TS = StringType(), IntegerType(), LongType(), DoubleType(), TimestampType()

# Vocabularies (design.md): what a rebalance was caused by, how a member's time ended, how a
# generation finished, and Burrow's verdicts on a partition's commits.
CAUSES = (
    "first_join",
    "member_joined",
    "member_left",
    "member_evicted",
    "poll_timeout",
    "subscription_changed",
    "metadata_changed",
    "leader_rejoined",
    "unknown",
)
ENDINGS = (
    "active_at_end",
    "left",
    "left_poll_timeout",
    "evicted",
    "fenced",
    "static_restart",
    "unknown",
)
OUTCOMES = ("completed", "failed", "open_at_end")
PROGRESS = ("OK", "STALL", "STOP", "REWIND", "ERR")
CHANGE_KINDS = ("moved", "added", "revoked", "unassigned")

TABLES: dict[str, StructType] = {
    "generations": _t(
        ("group_id", S),
        ("protocol", S),  # "classic" or "consumer" (KIP-848)
        ("generation", I),  # the group epoch for KIP-848 groups
        ("started_at", TS),
        ("completed_at", TS),
        ("duration_ms", D),
        ("join_phase_ms", D),
        ("sync_phase_ms", D),
        ("leader_member_id", S),
        ("assignor", S),
        ("members", I),
        ("members_joined", ArrayType(S)),
        ("members_left", ArrayType(S)),
        ("cause", S),
        ("cause_member_id", S),
        ("cause_evidence", S),
        ("outcome", S),
    ),
    "members": _t(
        ("group_id", S),
        ("member_id", S),
        ("group_instance_id", S),
        ("client_id", S),
        ("client_addr", S),
        ("client_software", S),
        ("first_seen", TS),
        ("last_seen", TS),
        ("first_generation", I),
        ("last_generation", I),
        ("session_timeout_ms", I),
        ("rebalance_timeout_ms", I),
        ("last_heartbeat_at", TS),
        ("max_heartbeat_gap_ms", D),
        ("ending", S),
        ("ending_at", TS),
        ("ending_evidence", S),
        ("errors_seen", ArrayType(S)),
    ),
    "assignments": _t(
        ("group_id", S),
        ("generation", I),
        ("member_id", S),
        ("topic", S),
        ("partitions", ArrayType(I)),
        ("source", S),  # "sync_group" (classic) or "consumer_group_heartbeat" (KIP-848)
    ),
    "assignment_changes": _t(
        ("group_id", S),
        ("from_generation", I),
        ("to_generation", I),
        ("topic", S),
        ("partition", I),
        ("from_member", S),
        ("to_member", S),
        ("kind", S),
    ),
    "commits": _t(
        ("ts", TS),
        ("group_id", S),
        ("member_id", S),
        ("group_instance_id", S),
        ("generation", I),
        ("topic", S),
        ("partition", I),
        ("offset", L),
        ("leader_epoch", I),
        ("metadata", S),
        ("error", S),
        ("latency_us", L),
        ("coordinator", S),
        ("time_lag_ms", D),
        ("timestamp_lag_ms", D),
    ),
    "progress": _t(
        ("group_id", S),
        ("topic", S),
        ("partition", I),
        ("first_commit_at", TS),
        ("last_commit_at", TS),
        ("first_offset", L),
        ("last_offset", L),
        ("commits", L),
        ("status", S),
        ("log_end_offset", L),
        ("lag", L),
        ("lag_source", S),
        ("time_lag_ms", D),
        ("timestamp_lag_ms", D),
    ),
    "latency": _t(
        ("api_key", ShortType()),
        ("api_name", S),
        ("api_version", ShortType()),
        ("broker", S),
        ("client_id", S),
        ("requests", L),
        ("errors", L),
        ("p50_ms", D),
        ("p95_ms", D),
        ("p99_ms", D),
        ("max_ms", D),
        ("note", S),
    ),
    "clients": _t(
        ("connection_id", S),
        ("client_addr", S),
        ("client_port", I),
        ("client_id", S),
        ("software_name", S),
        ("software_version", S),
        ("first_seen", TS),
        ("last_seen", TS),
        ("member_ids", ArrayType(S)),
        ("group_ids", ArrayType(S)),
    ),
    "coordinators": _t(
        ("group_id", S),
        ("node_id", I),
        ("host", S),
        ("port", I),
        ("from_ts", TS),
        ("to_ts", TS),
        ("not_coordinator_errors", L),
        ("load_in_progress_ms", D),
    ),
}
