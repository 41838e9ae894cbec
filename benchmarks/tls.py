"""TLS: the same traffic plain and over TLS, the decode job and the single process side by side.

    python scripts/scale/make_tls_ring.py out/ring_big          # makes out/ring_big_tls (~10 s)
    python -m benchmarks.tls --plain out/ring_big --tls out/ring_big_tls [--repeats 3]

The TLS ring is the plaintext ring's traffic, every connection wrapped in a real TLS session
(Python's ssl, TLS 1.3 AES-256-GCM by default) with the key log its clients would have written
(scripts/scale/make_tls_ring.py). Each repeat runs, in turn: `kwire capture` on both (one
process) and `kwire decode` at its defaults on both (`--keylog` for the TLS one), so both see the
same machine load. Reported: median seconds, TLS / plain per variant (issue target: the job
within 1.3x), peak memory, and the check that both give the same frames (row counts).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.scale import GB, parquet_rows, ring_info, run_timed, say  # noqa: E402


def _commands(ring: Path, ports: str, keylog: Path | None, tmp: Path) -> dict[str, list[str]]:
    extra = ["--keylog", str(keylog)] if keylog else []
    py = [sys.executable, "-m", "kwire"]
    return {
        "single": [*py, "capture", str(ring), "-o", str(tmp / "frames.parquet"), "-p", ports]
        + ["-q", *extra],
        "job": [*py, "decode", str(ring), "-o", str(tmp / "out"), "-p", ports, "-q", *extra],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tls", description=__doc__)
    parser.add_argument("--plain", type=Path, required=True, help="the plaintext ring")
    parser.add_argument("--tls", type=Path, required=True, help="the same ring over TLS")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "tls.json")
    args = parser.parse_args(argv)
    _, meta = ring_info(args.plain)
    ports = ",".join(map(str, meta["broker_ports"]))
    keylog = (args.tls / "keys.log").resolve()
    tmp = Path(tempfile.mkdtemp(prefix="kwire-tls-bench-"))
    results: dict[str, dict[str, Any]] = {}
    try:
        for repeat in range(args.repeats):
            for variant in ("single", "job"):
                for kind, ring, keys in (("plain", args.plain, None), ("tls", args.tls, keylog)):
                    shutil.rmtree(tmp / "out", ignore_errors=True)
                    (tmp / "frames.parquet").unlink(missing_ok=True)
                    cmd = _commands(ring, ports, keys, tmp)[variant]
                    say(f"run {repeat + 1}/{args.repeats}: {variant} {kind}")
                    took, proc, memory = run_timed(cmd, args.timeout, cwd=ROOT)
                    if proc.returncode != 0:
                        raise RuntimeError(f"{variant} {kind} failed: {proc.stderr[-2000:]}")
                    frames = tmp / ("frames.parquet" if variant == "single" else "out")
                    if variant == "job":
                        frames = frames / "frames.parquet"
                    r = results.setdefault(f"{variant} {kind}", {"seconds": [], "peak_gb": []})
                    r["seconds"].append(took)
                    r["peak_gb"].append(memory["peak_rss_bytes"] / GB)
                    r["frames_rows"] = parquet_rows(frames)
                    say(f"  {took:.1f} s, peak {memory['peak_rss_bytes'] / GB:.2f} GB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = []
    for variant in ("single", "job"):
        plain, tls = results[f"{variant} plain"], results[f"{variant} tls"]
        ratio = statistics.median(tls["seconds"]) / statistics.median(plain["seconds"])
        same = plain["frames_rows"] == tls["frames_rows"]
        results[f"{variant} tls"]["vs_plain"] = ratio
        lines.append(
            f"{variant:<7} plain {statistics.median(plain['seconds']):6.1f} s  tls "
            f"{statistics.median(tls['seconds']):6.1f} s  = {ratio:.2f}x"
            + ("  (target <= 1.3)" if variant == "job" else "")
            + f"  frames rows {plain['frames_rows']:,} / {tls['frames_rows']:,}"
            + ("" if same else "  DIFFER")
            + f"  peak GB {max(plain['peak_gb']):.2f} / {max(tls['peak_gb']):.2f}"
        )
    print("\n".join(lines))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"plain": str(args.plain), "tls": str(args.tls), "results": results}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
