"""`kwire decode --remote` on a local Spark Connect server against the classic job, side by side.

Run from the repository root::

    python -m benchmarks.connect                     # a small real capture, one round (make bench)
    python -m benchmarks.connect --input out/ring --repeats 3   # the 1.2 GB scale ring

Each round runs, in this order, the classic job (`kwire decode INPUT -o TMP/classic -p
PORTS`: its whole process, the Spark it starts included) and the same job over Spark Connect
(`... --remote sc://127.0.0.1:PORT`: the client's whole process) against a server started
fresh for the run (tests/connect_server.py: the installed pyspark's own jars, local[2], a 1 GB
driver, C1 JIT as kwire's batch jobs have it), cold as the classic job's JVM is; the server's
start is not timed (a user's server is running already). Both write the same tables (their row
counts are compared). The statistic is the ratio of the medians, Connect / classic; the
targets are 1.10 on a small capture and 1.20 on the scale ring (issue 54).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale import SMALL_CAPTURE, job_stages, parquet_rows, run_timed  # noqa: E402
from tests.connect_server import ConnectServer  # noqa: E402

# The server settings kwire's own sessions start with that a server's operator can give too
# (kwire.spark.session.session_settings): held blocks compressed, Parquet's vectored reads off.
KWIRE_SERVER_CONF = {
    "spark.rdd.compress": "true",
    "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
}
SMALL_TARGET = 1.10
RING_TARGET = 1.20


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _ports(path: Path) -> list[int]:
    """The broker ports a capture's truth (x.json beside x.pcap) or a ring's ring.json names."""
    truth = path / "ring.json" if path.is_dir() else path.with_suffix(".json")
    if truth.exists():
        return list(json.loads(truth.read_text())["broker_ports"])
    return [9092]


def _rows(out: Path) -> dict[str, int]:
    return {t: parquet_rows(out / t) for t in ("requests", "responses", "records")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=SMALL_CAPTURE)
    parser.add_argument(
        "--ports", help="broker ports (default: the capture's truth or ring.json, else 9092)"
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--kwire-server-conf",
        action="store_true",
        help=f"start the server with kwire's session settings too: {KWIRE_SERVER_CONF}",
    )
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/connect.json")
    args = parser.parse_args(argv)
    ports = args.ports or ",".join(map(str, _ports(args.input)))
    small = args.input.is_file() and args.input.stat().st_size < 50e6
    target = SMALL_TARGET if small else RING_TARGET
    result: dict[str, Any] = {
        "input": str(args.input),
        "commands": {
            "classic": "kwire decode INPUT -o TMP/classic -p PORTS",
            "connect": "kwire decode INPUT -o TMP/connect -p PORTS --remote URL",
        },
        "seconds_classic": [],
        "seconds_connect": [],
        "rows": [],
        "stages_classic": [],
        "stages_connect": [],
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "target": target,
        "server_conf": KWIRE_SERVER_CONF if args.kwire_server_conf else {},
    }
    with tempfile.TemporaryDirectory(prefix="kwire-bench-connect-") as tmp_name:
        tmp = Path(tmp_name)
        base = [sys.executable, "-m", "kwire", "decode", str(args.input), "-p", ports]
        for repeat in range(args.repeats):
            rows = {}
            for which in ("classic", "connect"):
                out = tmp / which
                shutil.rmtree(out, ignore_errors=True)
                cmd = [*base, "-o", str(out)]
                server = None
                if which == "connect":
                    conf = KWIRE_SERVER_CONF if args.kwire_server_conf else None
                    server = ConnectServer(tmp / f"server{repeat}", conf=conf)
                    server.wait()
                    cmd += ["--remote", server.url]
                say(f"{which}: run {repeat + 1}/{args.repeats}")
                try:
                    took, proc, _ = run_timed(cmd, args.timeout, cwd=ROOT)
                finally:
                    if server is not None:
                        server.stop()
                if proc.returncode != 0:
                    raise RuntimeError(f"{which} exited {proc.returncode}: {proc.stderr[-3000:]}")
                result[f"seconds_{which}"].append(took)
                result[f"stages_{which}"].append(job_stages(proc.stderr or ""))
                rows[which] = _rows(out)
                say(f"  {took:.1f} s, rows {rows[which]}, stages {result[f'stages_{which}'][-1]}")
            result["rows"].append(rows)
            if rows["classic"] != rows["connect"]:
                raise RuntimeError(f"the two runs wrote different tables: {rows}")
    ratio = statistics.median(result["seconds_connect"]) / statistics.median(
        result["seconds_classic"]
    )
    result["ratio"] = ratio
    result["verdict"] = "PASS" if ratio <= target else "MISS"
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"kwire decode over Spark Connect / classic on {args.input.name}: "
        f"{statistics.median(result['seconds_connect']):.1f} s / "
        f"{statistics.median(result['seconds_classic']):.1f} s = {ratio:.2f}x "
        f"(target {target:.2f}x: {result['verdict']}); {args.repeats} round(s) -> {args.json}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
