"""Live: `kwire live` following a ring that rotates while it runs.

    python -m benchmarks.live --ring out/ring_big [--file-mb 25] [--every 10] [--files 40]

The ring's packets are cut again into files of --file-mb MB (pcap, as tcpdump -C writes them),
then moved into a spool with the real hook (kwire.live.spool), one every --every seconds (the
ring's rotation; 0 drops them all at once: a reader catching up), while `kwire live` runs on the
spool in its own process until idle. Reported per trigger, from the live run's batch logs: files,
frames, seconds (capture with the state carried across files, decode, group tables), the flows
held in the state after it, and per file the latency from its close (its move into the spool)
to its rows being committed (the batch log's write), and the largest memory of the live run's
process tree while the batch ran; then the last third of the batches against the first (seconds
per file, the group stage, the state's bytes, the memory), and the p95 close-to-visible in
rotations. Then, on the same files, `kwire decode` as the batch reference: total time, and
whether the tables hold the same rows (counts).

The history grows with the run: 40 files (--files 40) make the last batches read 40 times the
history the first read. `--quiet-every 8 --quiet-minutes 30` spreads the same traffic over hours
of capture time (quiet half hours after every 8 files: 40 files span over two hours), over which
`kwire live` ends the connections idle longer than its --idle-minutes (15); the batch reference
then differs by design (one batch job never ends a connection for idling), so give --no-batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale import TreeSampler, parquet_rows, say  # noqa: E402


def recut(
    ring: Path,
    into: Path,
    file_mb: float,
    limit: int | None,
    quiet_every: int = 0,
    quiet_minutes: float = 0.0,
) -> list[Path]:
    """The ring's packets, in capture order, in pcap files of about `file_mb` MB. With
    `quiet_every` N, the capture goes quiet for `quiet_minutes` after every N files: the packets
    of the files after are that much later (a ring spanning hours of capture time, over which
    `kwire live` ends the connections idle longer than --idle-minutes)."""
    import struct

    from kwire.capture.pcapfile import FileStats, iter_packets
    from kwire.capture.reader import expand_paths

    into.mkdir(parents=True, exist_ok=True)
    budget = int(file_mb * 1e6)
    out: list[Path] = []
    current: Any = None
    size = 0
    linktype = None
    shift_us = 0
    for path in expand_paths([str(ring)]):
        if not path.endswith((".pcap", ".pcapng")) and ".pcap" not in os.path.basename(path):
            continue
        with open(path, "rb") as f:
            for p in iter_packets(f, FileStats(path)):
                if linktype is None:
                    linktype = p.linktype
                if current is None or size >= budget:
                    if current is not None:
                        current.close()
                        if limit is not None and len(out) >= limit:
                            return out
                    if quiet_every and out and len(out) % quiet_every == 0:
                        shift_us += int(quiet_minutes * 60e6)
                    target = into / f"ring.pcap{len(out)}"
                    out.append(target)
                    current = open(target, "wb")
                    current.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
                    size = 24
                ts = p.ts_us + shift_us
                head = struct.pack(
                    "<IIII", ts // 1_000_000, ts % 1_000_000, len(p.data), p.orig_len
                )
                current.write(head + p.data)
                size += 16 + len(p.data)
    if current is not None:
        current.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ring", type=Path, required=True)
    parser.add_argument("--file-mb", type=float, default=25.0)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between rotations")
    parser.add_argument("--files", type=int, help="use only the first N files")
    parser.add_argument("--work", type=Path, default=Path("out/bench_live"))
    parser.add_argument("--json", type=Path, default=Path("out/bench_live.json"))
    parser.add_argument("--no-batch", action="store_true", help="skip the batch reference")
    parser.add_argument("--idle", type=float, default=20.0, help="--until-idle of the live run")
    parser.add_argument(
        "--quiet-every",
        type=int,
        default=0,
        help="after every N files the capture goes quiet for --quiet-minutes (capture time)",
    )
    parser.add_argument("--quiet-minutes", type=float, default=30.0)
    parser.add_argument(
        "--live-arg",
        action="append",
        default=[],
        help="more arguments for kwire live (repeat; e.g. --live-arg=--idle-minutes=0.5)",
    )
    args = parser.parse_args(argv)

    from kwire.live.spool import spool_file

    info = (
        json.loads((args.ring / "ring.json").read_text())
        if (args.ring / "ring.json").exists()
        else {}
    )
    ports = ",".join(str(p) for p in info.get("broker_ports", [9092]))
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    t = time.monotonic()
    files = recut(
        args.ring, work / "files", args.file_mb, args.files, args.quiet_every, args.quiet_minutes
    )
    total = sum(f.stat().st_size for f in files)
    say(f"{len(files)} files, {total / 1e9:.2f} GB, cut in {time.monotonic() - t:.1f} s")
    keep = work / "batch_in"
    keep.mkdir()
    for f in files:
        os.link(f, keep / f.name)  # the batch reference reads the same bytes
    spool = work / "spool"
    spool.mkdir()
    out = work / "out"
    cmd = [sys.executable, "-m", "kwire", "live", str(spool), "-o", str(out), "-p", ports]
    cmd += ["--until-idle", str(args.idle), "--trigger", "1", *args.live_arg]
    log = open(work / "live.log", "w")
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    closed: dict[str, float] = {}

    def rotate() -> None:
        time.sleep(5)
        for f in files:
            closed[os.path.basename(spool_file(str(f), str(spool)))] = time.time()
            if args.every:
                time.sleep(args.every)

    feeder = threading.Thread(target=rotate)
    feeder.start()
    with TreeSampler(proc.pid) as sampler:
        proc.wait()
    peak = sampler.peak
    feeder.join()
    live_s = time.time() - started
    if proc.returncode != 0:
        say(f"kwire live failed ({proc.returncode}); see {work / 'live.log'}")
        return 1
    batches = []
    for p in sorted((out / "_live" / "batches").glob("*.json")):
        b = json.loads(p.read_text())
        b["committed_at"] = p.stat().st_mtime
        batches.append(b)
    # The group rebuilds, each after a batch's commit and beside the next batches: named by
    # the last batch each read ("upto").
    rebuilds = [
        json.loads(p.read_text()) for p in sorted((out / "_live" / "rebuilds").glob("*.json"))
    ]
    latencies = []
    # A file's close to the group tables that include it: when the first rebuild that read its
    # batch put OUT/groups in place (a rebuild beside the batches does so before its other
    # tables); and to every rebuilt table (delivery's, the last): that rebuild's end.
    groups_latencies = []
    all_latencies = []
    for b in batches:
        built = next((r for r in rebuilds if r["upto"] >= b["tag"]), None)
        for f in b["files"]:
            name = os.path.basename(f["path"] or "")
            if name in closed:
                latencies.append(b["committed_at"] - closed[name])
                if built is not None:
                    in_place = built.get("in_place_at", {}).get("groups", built["committed_at"])
                    groups_latencies.append(in_place - closed[name])
                    all_latencies.append(built["committed_at"] - closed[name])
    triggers = [b for b in batches if b["files"]]
    secs = [b["seconds"]["total"] for b in triggers]
    rows = per_trigger(batches, closed, sampler.timeline, started, rebuilds)
    p95 = _p95(latencies)
    g95 = _p95(groups_latencies)
    report: dict[str, Any] = {
        "files": len(files),
        "bytes": total,
        "every_s": args.every,
        "capture_span_hours": round(_span_us([keep / f.name for f in files]) / 3.6e9, 2),
        "live_wall_s": round(live_s, 1),
        "peak_rss_bytes": peak,
        "triggers": rows,
        "trigger_s": {"median": statistics.median(secs), "max": max(secs)} if secs else None,
        "close_to_visible_s": _spread(latencies),
        "close_to_visible_p95_rotations": (
            round(p95 / args.every, 2) if latencies and args.every else None
        ),
        "close_to_group_tables_s": _spread(groups_latencies),
        "close_to_group_tables_p95_rotations": (
            round(g95 / args.every, 2) if groups_latencies and args.every else None
        ),
        "close_to_every_table_s": _spread(all_latencies),
        "rebuilds": len(rebuilds),
        "thirds": thirds(rows),
        "group_steps": step_growth(rebuilds),
        "state_flows": [b.get("state_flows") for b in triggers],
        "state_bytes": [b.get("state_bytes") for b in triggers],
    }
    th = report["thirds"]
    say(
        f"live: {len(triggers)} triggers, median {report['trigger_s']['median']:.1f} s, "
        f"close to visible median {report['close_to_visible_s']['median']:.1f} s, "
        f"p95 {p95:.1f} s, max {report['close_to_visible_s']['max']:.1f} s; state flows "
        f"{min(report['state_flows'])}-{max(report['state_flows'])}; peak {peak / 1e9:.2f} GB"
    )
    if groups_latencies:
        say(
            f"{len(rebuilds)} group rebuilds; close to the group tables that include the file: "
            f"median {statistics.median(groups_latencies):.1f} s, p95 {g95:.1f} s, "
            f"max {max(groups_latencies):.1f} s; to every rebuilt table (delivery too): median "
            f"{statistics.median(all_latencies):.1f} s, p95 {_p95(all_latencies):.1f} s"
        )
    say(
        f"last third against first: seconds per file {th['s_per_file']} (median per batch), "
        f"{th.get('seconds_over_files')} (the third's seconds over its files), group stage "
        f"{th['groups_s']}, state bytes {th['state_bytes']}, memory {th['rss_bytes']}"
    )
    say("the group rebuild's steps, median seconds, first third -> last third of the rebuilds:")
    for name, (a, b) in list(report["group_steps"].items())[:12]:
        say(f"  {name}: {a:.1f} -> {b:.1f} s")
    for r in rows:
        say(
            f"  {r['tag']}: {r['files']} file(s), {r['s_per_file'] or 0:.1f} s/file, groups "
            f"{r['groups_s'] or 0:.1f} s, close to visible {r['close_to_visible_s'] or 0:.1f} s, "
            f"state {r['state_bytes'] or 0:,} B, {r['rss_bytes'] / 1e9:.2f} GB"
        )
    if not args.no_batch:
        bout = work / "batch_out"
        t = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kwire",
                "decode",
                str(keep),
                "-o",
                str(bout),
                "-p",
                ports,
                "-q",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        report["batch_s"] = round(time.monotonic() - t, 1)
        if done.returncode != 0:
            say(f"kwire decode failed: {done.stderr[-2000:]}")
        else:
            same = {}
            for table in ("requests", "responses", "records"):
                same[table] = [parquet_rows(out / table), parquet_rows(bout / table)]
            report["rows_live_vs_batch"] = same
            say(f"batch: {report['batch_s']} s; rows live vs batch {same}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    say(f"-> {args.json}")
    return 0


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))] if values else 0.0


def _spread(values: list[float]) -> dict[str, float] | None:
    """The median, p95 and max of `values` (None without any)."""
    if not values:
        return None
    return {"median": statistics.median(values), "p95": _p95(values), "max": max(values)}


def _span_us(files: list[Path]) -> int:
    """Capture time from the first packet of the first file to the last of the last."""
    from kwire.capture.pcapfile import FileStats, iter_packets

    with open(files[0], "rb") as f:
        first = next(iter_packets(f, FileStats(str(files[0])))).ts_us
    with open(files[-1], "rb") as f:
        last = max(p.ts_us for p in iter_packets(f, FileStats(str(files[-1]))))
    return last - first


def per_trigger(
    batches: list[dict[str, Any]],
    closed: dict[str, float],
    timeline: list[tuple[float, int]],
    started: float,
    rebuilds: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> list[dict[str, Any]]:
    """Per batch: files, frames, seconds (and per file), the group stage (the rebuild that
    began after its commit, if one did), each file's close to its rows' commit (the largest),
    the state after it, and the largest memory of the live run's process tree while it ran
    (from the previous batch's commit to its own)."""
    rows = []
    since = started
    after = {r["upto"]: r["seconds"] for r in rebuilds}
    for b in batches:
        lat = [
            b["committed_at"] - closed[name]
            for f in b["files"]
            if (name := os.path.basename(f["path"] or "")) in closed
        ]
        rss = [r for t, r in timeline if since <= t <= b["committed_at"]]
        n = len(b["files"])
        rows.append(
            {
                "tag": b["tag"],
                "files": n,
                "frames": b["frames"],
                "seconds": b["seconds"],
                "s_per_file": round(b["seconds"]["total"] / n, 2) if n else None,
                "groups_s": after.get(b["tag"], b["seconds"].get("groups")),
                "close_to_visible_s": round(max(lat), 1) if lat else None,
                "state_flows": b.get("state_flows"),
                "state_bytes": b.get("state_bytes"),
                "rss_bytes": max(rss, default=0),
            }
        )
        since = b["committed_at"]
    return rows


def thirds(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The last third of the batches with files against the first third, as "last / first =
    ratio": the third's seconds over its files, and the medians of the seconds per file, the
    group stage (batches that built it), the state's bytes and the memory."""
    with_files = [r for r in rows if r["files"]]
    k = max(1, len(with_files) // 3)
    out: dict[str, Any] = {}
    # Each third's seconds over its files: a batch with a rebuild usually reads one file and
    # the one after it those that waited, so the median per batch swings with which batches
    # fall in a third (the same ring gave 2.22x and 0.90x); the sum does not.
    first_s, last_s = with_files[:k], with_files[-k:]
    if first_s and last_s:
        a = sum(r["seconds"]["total"] for r in first_s) / sum(r["files"] for r in first_s)
        b = sum(r["seconds"]["total"] for r in last_s) / sum(r["files"] for r in last_s)
        out["seconds_over_files"] = f"{b:,.1f} / {a:,.1f} = {b / a:.2f}x"
    for key in ("s_per_file", "groups_s", "state_bytes", "rss_bytes"):
        first = [r[key] for r in with_files[:k] if r[key] is not None]
        last = [r[key] for r in with_files[-k:] if r[key] is not None]
        if first and last and statistics.median(first):
            a, b = statistics.median(first), statistics.median(last)
            out[key] = f"{b:,.1f} / {a:,.1f} = {b / a:.2f}x"
        else:
            out[key] = None
    return out


def step_growth(rebuilds: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """Each step of the group rebuild (the rebuild logs' group_steps): the median of its
    seconds over the first third of the rebuilds and over the last third, the steps that grew
    most first: where the rebuild's time goes as the history grows."""
    built = [r["group_steps"] for r in rebuilds if r.get("group_steps")]
    if not built:
        return {}
    k = max(1, len(built) // 3)
    out = {}
    for name in sorted({n for b in built for n in b}):
        first = [b[name] for b in built[:k] if name in b]
        last = [b[name] for b in built[-k:] if name in b]
        if first and last:
            out[name] = (statistics.median(first), statistics.median(last))
    return dict(sorted(out.items(), key=lambda kv: kv[1][0] - kv[1][1]))


if __name__ == "__main__":
    raise SystemExit(main())
