"""The Spark UDF pack's batch decoders fed mutated frames: one output row per input row, errors
only from the codecs' own error types, and every row exactly what the codecs say of its frame.

decode_request_array / decode_response_array are what Spark's Python workers run on each Arrow
batch (pure pyarrow, no Spark needed here). They turn any exception into the row's error, so a
crash would hide as "internal error: ..." text: that prefix must never appear.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

import generated as g
from tests.fuzz import mutate
from kwire.spark.api import plan
from kwire.spark.decode import decode_request_array, decode_response_array

BATCHES = 6
PER_BATCH = 300


def _seeds(corpus: Any, prefix: str) -> list[tuple[str, bytes]]:
    return [
        (name, data)
        for name, seeds in sorted(corpus.seeds.items())
        if name == prefix or name.startswith(prefix + ":")
        for data in seeds
    ]


def _expect_request(frame: bytes | None, tolerant: bool) -> tuple[Any, ...]:
    """(api key, error, warnings) as the codecs say, strict or reading as Kafka does."""
    if frame is None:
        return (None, None, None)
    warnings: list[str] = []
    try:
        header, message = g.decode_request(frame, tolerant=tolerant, warnings=warnings)
    except g.KwireError as e:
        return (getattr(getattr(e, "header", None), "request_api_key", "?"), str(e), None)
    return (header.request_api_key, None, warnings or None)


@pytest.mark.parametrize("batch", range(BATCHES))
def test_request_batches_of_mutated_frames(corpus: Any, batch: int) -> None:
    tolerant = batch % 2 == 0  # the job's default, and --strict
    r = random.Random(f"udf-requests/{batch}")
    seeds = [data for _, data in _seeds(corpus, "request")]
    assert seeds, "the fuzz corpus has no request frames"
    frames: list[bytes | None] = [None, b"", b"\x00\x0c"]
    while len(frames) < PER_BATCH:
        data = r.choice(seeds)
        frames.append(
            data if r.random() < 0.2 else mutate.mutate(data, r, other=r.choice(seeds))[0]
        )
    p = plan("request", tolerant=tolerant)
    rows = decode_request_array(pa.array(frames, pa.binary()), p).to_pylist()
    assert len(rows) == len(frames)
    by_key = p.by_key
    for frame, row in zip(frames, rows):
        assert not (row["error"] or "").startswith("internal error"), row["error"]
        key, error, warnings = _expect_request(frame, tolerant)
        assert (row["error"], row["warnings"]) == (error, warnings), frame
        if error is None and frame is not None:
            assert row["api_key"] == key
            assert row[by_key[key][0]] is not None  # the message landed in its family's column


def test_response_batches_with_any_key_and_version(corpus: Any) -> None:
    r = random.Random("udf-responses")
    seeds = []
    for name, data in _seeds(corpus, "response"):
        _, key, version = name.split(":")
        seeds.append((data, int(key), int(version[1:])))
    assert seeds, "the fuzz corpus has no response frames"
    frames: list[bytes | None] = []
    keys: list[int | None] = []
    versions: list[int | None] = []
    for _ in range(4 * PER_BATCH):
        data, key, version = r.choice(seeds)
        pick = r.random()
        if pick < 0.6:
            data = mutate.mutate(data, r)[0]
        elif pick < 0.7:
            key = r.choice([None, 1, 19, 32767, -1])  # unpaired or unknown api keys
        elif pick < 0.8:
            version = r.choice([None, -1, version + 40])  # unpaired or unsupported versions
        frames.append(data)
        keys.append(key)
        versions.append(version)
    rows = decode_response_array(
        pa.array(frames, pa.binary()),
        pa.array(keys, pa.int16()),
        pa.array(versions, pa.int16()),
        plan("response"),
    ).to_pylist()
    assert len(rows) == len(frames)
    for frame, key, version, row in zip(frames, keys, versions, rows):
        assert not (row["error"] or "").startswith("internal error"), row["error"]
        assert (row["api_key"], row["api_version"]) == (key, version)
        if key is None or version is None:
            assert row["error"] and "not paired" in row["error"]
            continue
        warnings: list[str] = []
        try:
            g.decode_response(frame, key, version, tolerant=True, warnings=warnings)
            expected = None
        except g.KwireError as e:
            expected = str(e)
        assert (row["error"], row["warnings"]) == (expected, warnings or None)


PRUNED = (
    "heartbeat.group_id",
    "offset_commit.group_id",
    "join_group.group_id",
    "join_group.protocol_type",
    "sync_group.member_id",
    "offset_fetch.group_id",
)


@pytest.mark.parametrize("batch", range(2))
def test_pruned_batches_read_less_and_never_invent_errors(corpus: Any, batch: int) -> None:
    """With pruning (families not asked for: header only; asked-for columns in the head:
    read_head) a row's error is either none or exactly the whole decode's error, the header
    columns are the whole decode's, and a pruned column holds the whole decode's value."""
    r = random.Random(f"udf-pruned/{batch}")
    seeds = [data for _, data in _seeds(corpus, "request")]
    frames: list[bytes | None] = [None, b"", b"\x00\x0c"]
    while len(frames) < PER_BATCH:
        data = r.choice(seeds)
        frames.append(
            data if r.random() < 0.2 else mutate.mutate(data, r, other=r.choice(seeds))[0]
        )
    column = pa.array(frames, pa.binary())
    pruned_plan = plan("request", None, PRUNED)
    assert pruned_plan.heads and pruned_plan.header_only
    full = decode_request_array(column, plan("request")).to_pylist()
    pruned = decode_request_array(column, pruned_plan).to_pylist()
    assert len(pruned) == len(frames)
    for a, b in zip(full, pruned):
        assert not (b["error"] or "").startswith("internal error"), b["error"]
        assert b["error"] in (None, a["error"])
        for name in ("api_key", "api_version", "correlation_id", "client_id"):
            assert a[name] == b[name]
        for family in pruned_plan.family_names:
            if b[family] is not None and a[family] is not None:
                for column_name, value in b[family].items():
                    assert value == a[family][column_name]
