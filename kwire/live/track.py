"""The capture step of one live batch, per task: each flow's carried state, then its new segments.

A task receives the rows of whole flows (the batch's segments, regrouped by flow as the batch
capture step does, plus one state row per flow carried from the batch before), state rows first,
then segments in ring order (file number, byte offset). It restores the carried flows into one
Tracker (kwire.capture.carry), feeds the segments, and emits:
- the frames completed in this batch (kwire.capture.distributed.FRAMES_SCHEMA's columns);
- a state row per flow still held, unless the flow saw no packet for `idle_us` of capture time
  before the horizon (the newest packet time of the batches before this one): such a flow is
  ended as the capture's end would end it (what it still held is reported, its requests without
  responses say "connection idle"), so the state stays bounded however long the ring runs;
- at the end of the capture (`final`): every flow ended as the batch job ends it, no state;
- one statistics row (the tracker's Summary, as JSON).

Nothing here depends on wall-clock time or on the order of rows other than the sort key, so a
batch replayed after a crash gives the same rows and the same state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from kwire.capture.carry import CarryError, end_flow, flow_keys, load_flow, save_flow
from kwire.capture.distributed import (
    FRAME_BATCH_BYTES,
    FRAME_BATCH_ROWS,
    FRAMES_SCHEMA,
    TRACKED,
    feed_run,
)
from kwire.capture.engine import Tracker
from kwire.capture.summary import Summary
from kwire.capture.table import BatchBuilder
from kwire.capture.tls import KeyLog

# A flow with no packet for this long (capture time) is ended and its state dropped. Brokers
# close connections idle for connections.max.idle.ms (10 minutes by default), so a Kafka
# connection this quiet has been closed by its broker.
IDLE_US = 15 * 60 * 1_000_000

LIVE_SCHEMA = pa.schema(
    list(FRAMES_SCHEMA)
    + [
        pa.field("a_addr", pa.string()),
        pa.field("a_port", pa.int32()),
        pa.field("b_addr", pa.string()),
        pa.field("b_port", pa.int32()),
        pa.field("flow", pa.int64()),
        pa.field("state", pa.binary()),
        pa.field("last_us", pa.int64()),
    ]
)
EXTRA = ("a_addr", "a_port", "b_addr", "b_port", "flow", "state", "last_us")

# The batch capture step's columns of a run, then the carried state's.
_SEGMENT_COLUMNS = ("flow", *TRACKED, "max_us", "state", "last_us")


def _extend(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A frames batch (FRAMES_SCHEMA without stats) widened to LIVE_SCHEMA."""
    n = batch.num_rows
    arrays = list(batch.columns) + [pa.nulls(n, pa.string())]
    arrays += [pa.nulls(n, f.type) for f in LIVE_SCHEMA if f.name in EXTRA]
    return pa.RecordBatch.from_arrays(arrays, schema=LIVE_SCHEMA)


def track_live(
    batches: Iterable[pa.RecordBatch],
    paths: dict[int, str],
    broker_ports: Iterable[int],
    *,
    horizon_us: int | None,
    final: bool,
    idle_us: int = IDLE_US,
    infer_direction: bool = True,
    keep_auth_bytes: bool = False,
    keylog: KeyLog | None = None,
) -> Iterator[pa.RecordBatch]:
    summary = Summary()
    builder = BatchBuilder(FRAME_BATCH_ROWS, FRAME_BATCH_BYTES)
    tracker = Tracker(broker_ports, infer_direction, builder.add, summary, keep_auth_bytes, keylog)
    last: dict[tuple[str, int, str, int], int] = {}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        cols = [batch.column(name).to_pylist() for name in _SEGMENT_COLUMNS]
        for _flow, index, a, ap, b, bp, records, payload, max_us, state, last_us in zip(*cols):
            key = (a, ap, b, bp)
            if state is not None:
                try:
                    load_flow(tracker, key, state)
                except CarryError as e:
                    # e.g. a TLS connection whose secrets left the key log since the last
                    # batch: the connection goes on as one seen from mid-stream.
                    summary.connections_ignored[f"carried state not restored: {e}"] += 1
                    continue
                last[key] = max(last.get(key, 0), last_us or 0)
                continue
            if a is None:
                continue  # a statistics row
            tracker.src = paths.get(index, "")
            for done in feed_run(tracker, builder, key, records, payload):
                yield _extend(done)
            if records:
                last[key] = max(last.get(key, 0), max_us)
    states: list[dict[str, Any]] = []
    if final:
        tracker.finish()
    else:
        threshold = None if horizon_us is None else horizon_us - idle_us
        for key in sorted(flow_keys(tracker)):
            seen = last.get(key, 0)
            if threshold is not None and seen < threshold:
                end_flow(tracker, key, "idle")
                continue
            state = save_flow(tracker, key)
            if state is not None:
                states.append(
                    {
                        "a_addr": key[0],
                        "a_port": key[1],
                        "b_addr": key[2],
                        "b_port": key[3],
                        "flow": _flow_of(key),
                        "state": state,
                        "last_us": seen,
                    }
                )
    if builder.rows:
        yield _extend(builder.take())
    if states:
        yield pa.RecordBatch.from_pylist(states, schema=LIVE_SCHEMA)
    row: dict[str, Any] = {name: None for name in LIVE_SCHEMA.names}
    row["stats"] = json.dumps(summary.state())
    yield pa.RecordBatch.from_pylist([row], schema=LIVE_SCHEMA)


def _flow_of(key: tuple[str, int, str, int]) -> int:
    from kwire.capture.distributed import flow_key

    return flow_key(*key)
