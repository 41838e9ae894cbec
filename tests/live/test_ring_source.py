"""The live source's file admission and the live tracker's state bounds, without Spark.

- A ring directory (tcpdump -C/-W): the newest file is open; a name written again is a new file;
  a file that changed after its admission is reported lost, not read.
- A spool: every file is closed, in the order of its number.
- Replays: the registry gives a restarted reader the same files for the same offsets.
- track_live: a flow idle past the horizon is ended (its waiting request reported as such) and
  leaves no state; the end of the capture ends every flow as the batch capture does.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa

from kwire.capture.distributed import SEGMENT_RECORD, SEGMENT_SCHEMA, Range, read_segments
from kwire.capture.engine import E_NO_RESPONSE
from kwire.capture.reader import read_frames
from kwire.capture.table import SCHEMA
from kwire.capture.tls import KeyLog
from kwire.live.source import LOST, Registry, RingReader, closed_files, detect_layout
from kwire.live.track import LIVE_SCHEMA, track_live
from tests.capture.ring import T0
from tests.fuzz.pcaps import conversation, pcap_file

DATA = Path(__file__).resolve().parents[1] / "data" / "capture"


def _write(path: Path, data: bytes, mtime_ns: int) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _reader(tmp: Path, directory: Path, layout: str = "auto", **extra: str) -> RingReader:
    options = {"path": str(directory), "registry": str(tmp / "files.jsonl"), "layout": layout}
    options.update({k.lower(): v for k, v in extra.items()})
    return RingReader(options)


def test_ring_newest_is_open_and_reused_names_are_new_files(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    ring.mkdir()
    for i in range(3):
        _write(ring / f"ring.pcap{i}", b"x" * (10 + i), 1_000_000_000 * (i + 1))
    assert detect_layout(str(ring)) == "ring"
    reader = _reader(tmp_path, ring)
    end = reader.latestOffset({"seq": 0}, None)
    assert end == {"seq": 2}  # ring.pcap2 is being written
    assert [e["name"] for e in reader.registry.between(0, 2)] == ["ring.pcap0", "ring.pcap1"]
    # tcpdump -W wraps: ring.pcap0 is written again (a new file), then ring.pcap1 opens.
    _write(ring / "ring.pcap0", b"y" * 50, 4_000_000_000)
    _write(ring / "ring.pcap1", b"z" * 5, 5_000_000_000)
    end = reader.latestOffset(end, None)
    names = [(e["seq"], e["name"], e["size"]) for e in reader.registry.between(0, end["seq"])]
    assert names == [
        (1, "ring.pcap0", 10),
        (2, "ring.pcap1", 11),
        (3, "ring.pcap2", 12),
        (4, "ring.pcap0", 50),
    ]
    # A restarted reader (same registry) plans the same files for the same offsets, and the
    # ones the writer overwrote since are lost, not read.
    again = _reader(tmp_path, ring)
    parts = again.partitions({"seq": 0}, {"seq": 4})
    lost = [item for p in parts for item in p.lost]  # type: ignore[attr-defined]
    read = [r.file_index for p in parts for r in p.ranges]  # type: ignore[attr-defined]
    assert sorted(s for s, _, _ in lost) == [1, 2]
    assert all(why == LOST for _, _, why in lost)
    assert read == [3, 4]
    rows = [b for p in parts if p.lost for b in again.read(p)]  # type: ignore[attr-defined]
    stats = [json.loads(r["stats"]) for b in rows for r in b.to_pylist()]
    assert [s["files"][0]["error"] for s in stats] == [LOST, LOST]


def test_spool_order_cap_and_ending(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    for i in (3, 1, 2):
        _write(spool / f"{i:012d}-ring.pcap", b"p" * i, 10**9 * (10 - i))
    (spool / ".000000000004-ring.pcap.part").write_bytes(b"partial")
    assert detect_layout(str(spool)) == "spool"
    reader = _reader(tmp_path, spool, maxFilesPerTrigger="2")
    first = reader.latestOffset({"seq": 0}, None)
    assert first == {"seq": 2}  # at most two files a trigger
    assert reader.latestOffset(first, None) == {"seq": 3}
    assert [e["name"][:12] for e in reader.registry.entries] == [
        "000000000001",
        "000000000002",
        "000000000003",
    ]
    assert reader.latestOffset({"seq": 3}, None) == {"seq": 3}  # nothing new
    assert reader.partitions({"seq": 3}, {"seq": 3}) == []
    # A registry cut by a crash mid-line keeps its whole lines.
    with open(tmp_path / "files.jsonl", "a") as f:
        f.write('{"seq": 4, "pa')
    assert Registry(str(tmp_path / "files.jsonl")).last == 3
    assert len(closed_files(str(spool), "spool")) == 3


def _segments(packets: list[tuple[int, bytes]], tmp: Path) -> list[pa.RecordBatch]:
    data, _ = pcap_file(packets)
    path = tmp / "c.pcap"
    path.write_bytes(data)
    batches = list(read_segments([Range(1, str(path), 0, len(data), len(data), True)]))
    return [b for b in batches if b.num_rows]


def _run(
    batches: list[pa.RecordBatch], ports: Any = (9092,), **kw: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    out = [r for b in track_live(batches, {1: "c.pcap"}, list(ports), **kw) for r in b.to_pylist()]
    frames = [r for r in out if r["state"] is None and r["stats"] is None]
    states = [r for r in out if r["state"] is not None]
    return frames, states


def _as_input(states: list[dict[str, Any]]) -> pa.RecordBatch:
    """State rows as the next batch receives them (segment columns null)."""
    names = [n for n in SEGMENT_SCHEMA.names] + ["state", "last_us"]
    fields = list(SEGMENT_SCHEMA) + [LIVE_SCHEMA.field("state"), LIVE_SCHEMA.field("last_us")]
    rows = [{n: s.get(n) for n in names} for s in states]
    return pa.RecordBatch.from_pylist(rows, schema=pa.schema(fields))


def _with_state_columns(batch: pa.RecordBatch) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = list(batch.columns) + [pa.nulls(n, pa.binary()), pa.nulls(n, pa.int64())]
    fields = list(batch.schema) + [LIVE_SCHEMA.field("state"), LIVE_SCHEMA.field("last_us")]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def test_idle_flows_end_and_leave_no_state(tmp_path: Path) -> None:
    # ApiVersions v0 (header v1: key 18, version 0, correlation id 7, client id "t"), with its
    # length prefix; no response, and the connection stays open.
    body = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    request = struct.pack(">i", len(body)) + body
    packets = conversation([(request, None)], close=False, t0_us=T0)
    segs = [_with_state_columns(b) for b in _segments(packets, tmp_path)]
    # Batch 1: the request, no response yet: the flow is held.
    frames, states = _run(segs, horizon_us=None, final=False)
    assert frames == [] and len(states) == 1
    # Batch 2, nothing new, the horizon still near: held again, unchanged.
    frames, again = _run([_as_input(states)], horizon_us=T0 + 60_000_000, final=False)
    assert frames == [] and len(again) == 1
    # Batch 3: the ring went on 20 minutes past the flow's last packet: ended, reported, gone.
    frames, gone = _run([_as_input(again)], horizon_us=T0 + 20 * 60_000_000, final=False)
    assert gone == []
    assert [r["direction"] for r in frames] == ["request"]
    assert frames[0]["error"] == f"{E_NO_RESPONSE} (connection idle)"
    # The end of the capture reports the same request as the batch capture's end does.
    frames, none = _run([_as_input(states)], horizon_us=None, final=True)
    assert none == [] and frames[0]["error"] == f"{E_NO_RESPONSE} (capture ended)"


def _rows_of(batches: Any) -> list[str]:
    return sorted(
        json.dumps({k: v for k, v in r.items() if k in FRAME_COLUMNS}, default=repr, sort_keys=True)
        for b in batches
        for r in b.to_pylist()
    )


FRAME_COLUMNS = set(SCHEMA.names) - {"source_file"}


def _pieces(batch: pa.RecordBatch, n: int) -> list[pa.RecordBatch]:
    """Each run of the batch cut into runs of `n` segments (one row each), in order."""
    size = SEGMENT_RECORD.size
    out = []
    for row in batch.to_pylist():
        records = row["segments"]
        pos = 0
        for i in range(0, len(records), n * size):
            piece = dict(row)
            piece["segments"] = records[i : i + n * size]
            segs = list(SEGMENT_RECORD.iter_unpack(piece["segments"]))
            piece["max_us"] = max(s[1] for s in segs)
            length = sum(s[5] for s in segs)
            piece["payload"] = row["payload"][pos : pos + length]
            pos += length
            out.append(pa.RecordBatch.from_pylist([piece], schema=batch.schema))
    return out


def test_tls_connections_carry_across_batches_with_keys_read_again(tmp_path: Path) -> None:
    """A TLS 1.3 capture (three suites, a resumed session) cut into batches at several points,
    each batch's state carried into the next with the key log handed over again: the frames are
    those of one pass over the whole capture; a batch whose key log lost the secrets goes on
    with those connections from mid-stream and says so."""
    base = DATA / "tls" / "tls13_records"
    ports = json.loads(base.with_suffix(".json").read_text())["broker_ports"]
    keylog = KeyLog.load([str(base.with_suffix(".keys"))])
    size = base.with_suffix(".pcap").stat().st_size
    runs = [
        b
        for b in read_segments([Range(1, str(base.with_suffix(".pcap")), 0, size, size, True)])
        if b.num_rows and b.column("stats").null_count == b.num_rows
    ]
    rows = [_with_state_columns(r) for b in runs for r in _pieces(b, 2)]
    # The key log's secrets (last field of each line): never inside a carried state.
    secrets = [
        bytes.fromhex(line.split()[-1])
        for line in base.with_suffix(".keys").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    whole = _rows_of(read_frames([base.with_suffix(".pcap")], ports, keylog=keylog))
    assert len(whole) > 100
    assert len(rows) > 100
    for cut in (1, len(rows) // 5, len(rows) // 3, len(rows) // 2, len(rows) - 2):
        frames, states = _run(rows[:cut], horizon_us=None, final=False, keylog=keylog, ports=ports)
        more, _ = _run(
            [_as_input(states)] + rows[cut:],
            horizon_us=None,
            final=True,
            keylog=keylog,
            ports=ports,
        )
        got = _rows_of([pa.RecordBatch.from_pylist(frames + more)]) if frames + more else []
        assert got == whole, f"cut after run {cut}"
        blobs = [st["state"] for st in states]
        assert blobs and not any(secret in blob for secret in secrets for blob in blobs)
    # The second batch without the key log: the carried TLS state cannot be restored.
    cut = len(rows) // 2
    _, states = _run(rows[:cut], horizon_us=None, final=False, keylog=keylog, ports=ports)
    out = [
        r
        for b in track_live([_as_input(states)], {1: "x"}, ports, horizon_us=None, final=True)
        for r in b.to_pylist()
    ]
    told = json.loads(out[-1]["stats"])["connections_ignored"]
    assert any(k.startswith("carried state not restored") for k in told), told


def test_files_arriving_together_are_read_in_capture_order(tmp_path: Path) -> None:
    """Parallel hooks can number a later file first: files admitted in one trigger are put
    back in the order of their first packets."""
    spool = tmp_path / "spool"
    spool.mkdir()
    later, earlier = pcap_file([(T0 + 2_000_000, b"x" * 60)])[0], pcap_file([(T0, b"y" * 60)])[0]
    _write(spool / "000000000001-ring.pcap2", later, 10**9)
    _write(spool / "000000000002-ring.pcap1", earlier, 2 * 10**9)
    reader = _reader(tmp_path, spool)
    assert reader.latestOffset({"seq": 0}, None) == {"seq": 2}
    assert [e["name"] for e in reader.registry.entries] == [
        "000000000002-ring.pcap1",
        "000000000001-ring.pcap2",
    ]
