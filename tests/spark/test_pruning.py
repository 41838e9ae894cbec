"""Column pruning decodes only what is asked for, and gives the same values as a whole decode.

Checked without Spark on the real captures, the benchmark's request mix and damaged frames:
families not asked for get their header read and their body left alone; asked-for columns that
lie in a message's head (read_head) are read from it; anything else is decoded whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kwire import capture
import generated as g
from benchmarks import synth
from kwire.spark.decode import Plan, decode_request_array, decode_response_array

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "tests" / "data" / "capture"
GROUP_IDS = [f"{f}.group_id" for f in ("heartbeat", "offset_commit", "join_group", "sync_group")]
HEADER = ("api_key", "api_version", "correlation_id")


def _captured() -> pa.Table:
    return capture.frames_table(sorted(CAPTURES.glob("*.pcap*")))


def _same_selected(full: list[dict[str, Any]], pruned: list[dict[str, Any]], plan: Plan) -> None:
    """Every column the pruned plan has equals the whole decode's value, row by row."""
    assert len(full) == len(pruned)
    for a, b in zip(full, pruned):
        for name in HEADER:
            assert a[name] == b[name], (name, a, b)
        if a["api_key"] in plan.by_key:
            assert a["error"] == b["error"]
        else:  # a family not asked for: its body is not read, only a header error can show
            assert b["error"] in (None, a["error"])
        for family in plan.family_names:
            if b[family] is None:
                assert a[family] is None
                continue
            for column, value in b[family].items():
                assert value == a[family][column], (family, column)


def test_pruning_the_real_captures_gives_the_whole_decodes_values() -> None:
    table = _captured()
    req = table.filter(pa.compute.equal(table["direction"], "request"))
    res = table.filter(pa.compute.equal(table["direction"], "response"))
    fields = GROUP_IDS + [
        "join_group.protocol_type",
        "join_group.member_id",
        "sync_group.generation_id",
        "offset_fetch.group_id",
        "consumer_group_heartbeat.member_epoch",
    ]
    plan = Plan("request", fields=fields)
    assert plan.heads  # the selection lies in the heads: read_head does the work
    full = decode_request_array(req["frame"].combine_chunks(), Plan("request")).to_pylist()
    pruned = decode_request_array(req["frame"].combine_chunks(), plan).to_pylist()
    _same_selected(full, pruned, plan)
    assert sum(r["join_group"] is not None for r in pruned) > 5

    fields = ["join_group.generation_id", "join_group.leader", "sync_group.error_code"]
    plan = Plan("response", fields=fields)
    args = [res[c].combine_chunks() for c in ("frame", "api_key", "api_version")]
    full = decode_response_array(*args, Plan("response")).to_pylist()
    pruned = decode_response_array(*args, plan).to_pylist()
    _same_selected(full, pruned, plan)
    assert sum(r["join_group"] is not None for r in pruned) > 5


def test_pruning_the_benchmark_mix() -> None:
    frames = pa.concat_arrays([b.column(0) for b in synth.mixed_requests(3000, seed=7)])
    plan = Plan("request", fields=GROUP_IDS)
    full = decode_request_array(frames, Plan("request")).to_pylist()
    pruned = decode_request_array(frames, plan).to_pylist()
    _same_selected(full, pruned, plan)
    # Only a whole decode builds the partitions: the pruned read never went past GroupId.
    assert all(
        r["offset_commit"] is None or set(r["offset_commit"]) == {"group_id"} for r in pruned
    )


def _commit_frame(version: int) -> bytes:
    msg = g.OffsetCommitRequest(
        group_id="billing",
        topics=[
            g.offset_commit_request.OffsetCommitRequestTopic(
                name="t", partitions=[g.offset_commit_request.OffsetCommitRequestPartition(0, 5)]
            )
        ],
    )
    header = g.RequestHeader(8, version, 41, "c")
    return g.encode_request(header, msg)[4:]


def test_what_is_not_read_is_not_checked_and_what_is_read_fails_as_before() -> None:
    good = _commit_frame(8)
    tail_damaged = good[:-3]  # the frame ends inside the partitions
    head_damaged = good[:16]  # the frame ends inside GroupId (the header takes 12 bytes)
    unknown = b"\x03\xe7\x00\x01\x00\x00\x00\x07\x00\x00"  # api key 999
    header_damaged = good[:9]  # the frame ends inside the client id
    frames = pa.array(
        [good, tail_damaged, head_damaged, unknown, None, header_damaged], pa.binary()
    )
    full = decode_request_array(frames, Plan("request")).to_pylist()
    by_group = decode_request_array(frames, Plan("request", fields=GROUP_IDS)).to_pylist()
    other_family = decode_request_array(frames, Plan("request", families=["heartbeat"]))
    others = other_family.to_pylist()

    assert full[1]["error"] is not None and "Partitions" in full[1]["error"]
    assert by_group[1]["error"] is None  # the damage lies past the head
    assert by_group[1]["offset_commit"] == {"group_id": "billing"}
    assert others[1]["error"] is None and "offset_commit" not in others[1]
    assert "GroupId" in full[2]["error"]
    assert by_group[2]["error"] == full[2]["error"]  # a damaged head: the same error
    assert others[2]["error"] is None  # a body not asked for is not read at all
    for rows in (by_group, others):
        assert rows[3]["error"] == full[3]["error"] == "unknown api key 999"
        assert rows[4]["error"] == full[4]["error"]
        assert rows[5]["error"] == full[5]["error"]
        assert "ClientId" in rows[5]["error"]
        for a, b in zip(full, rows):
            assert (a["api_key"], a["api_version"], a["correlation_id"], a["client_id"]) == (
                b["api_key"],
                b["api_version"],
                b["correlation_id"],
                b["client_id"],
            )


@pytest.mark.parametrize("selection", [["join_group.protocols"], ["join_group.unknown_tags"]])
def test_columns_outside_the_head_are_decoded_whole(selection: list[str]) -> None:
    assert Plan("request", fields=selection).heads == {}
