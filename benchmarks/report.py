"""The performance tables (docs/scale.md), printed as Markdown from the benchmarks' JSON results.

    python -m benchmarks.report      # after `make bench`; reads benchmarks/results/*.json

Copying numbers by hand invites typos; this prints exactly what the last runs measured.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.codecs import _us  # the codec table's own µs formatting

RESULTS = Path(__file__).resolve().parent / "results"


def machine_line(d: dict[str, Any], extra: str = "") -> str:
    m = d["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items())
    return (
        f"{d['created'][:10]}, commit {str(m.get('git_commit', '?'))[:7]}: {m['cpu_model']}, "
        f"{m['cores_usable']} cores, {m['python_implementation']} {m['python']}, "
        f"{packages}{extra}"
    )


def codecs(d: dict[str, Any]) -> str:
    lines = [
        f"Measured {machine_line(d)}; median of {d['settings']['repeats']} rounds.",
        "",
        "| corpus entry | bytes | decode µs (kio, kafka-python) | decode vs kio / kafka-python "
        "| encode µs | encode vs kio / kafka-python | frame decode vs kio / kafka-python |",
        "| --- | ---: | --- | --- | ---: | --- | --- |",
    ]
    sizes = {c["label"]: c["body_bytes"] for c in d["corpus"]}
    for label, r in d["results"].items():
        dec, enc, fr = r["decode"], r["encode"], r["frame"]
        lines.append(
            f"| {label} | {sizes[label]:,} | {_us(dec['kwire']['median_s'])} "
            f"({_us(dec['kio']['median_s'])}, {_us(dec['kafka-python']['median_s'])}) "
            f"| {dec['ratio']['kio']:.2f}× / {dec['ratio']['kafka-python']:.2f}× "
            f"| {_us(enc['kwire']['median_s'])} "
            f"| {enc['ratio']['kio']:.1f}× / {enc['ratio']['kafka-python']:.1f}× "
            f"| {fr['ratio']['kio']:.2f}× / {fr['ratio']['kafka-python']:.2f}× |"
        )
    lines.append("")
    for key, s in d["summary"].items():
        lines.append(
            f"- {key} (target ≥ {s['target']}): geomean {s['geomean_ratio']:.2f}×, "
            f"range {s['min_ratio']:.2f}-{s['max_ratio']:.2f}×, met on {s['pass']} of "
            f"{s['pass'] + s['miss']} entries"
        )
    gen = d.get("generation")
    if gen:
        lines.append(
            f"- generation of the {gen['schemas']} schemas bundled with kafka-python: "
            f"{gen['seconds']:.1f} s wall, {gen['cpu_seconds']:.1f} s CPU (target < "
            f"{gen['target_s']:.0f} s)"
        )
    return "\n".join(lines)


def spark(d: dict[str, Any]) -> str:
    extra = f"; {d['settings']['rows']:,} frames"
    lines = [
        f"Measured {machine_line(d, extra)}; median of the timed Parquet writes.",
        "",
        "| variant | seconds | rows/s | vs sql_header | target | peak memory MiB |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for name, r in d["results"].items():
        if r.get("failed"):
            lines.append(f"| {name} | failed | | | | |")
            continue
        target = f"≥ {r['target']:.2f} ({r['verdict']})" if "target" in r else ""
        peak = r.get("memory", {}).get("peak_rss_bytes")
        lines.append(
            f"| {name} | {r['median_seconds']:.2f} | {r['rows_per_second']:,.0f} "
            f"| {r.get('ratio_to_sql_header', 0):.3f} | {target} "
            f"| {'' if not peak else f'{peak / 2**20:,.0f}'} |"
        )
    py = d.get("python_only")
    if py:
        lines.append("")
        lines.append(
            f"Outside Spark, one core, {py['rows']:,} frames: kwire_full "
            f"{py['kwire_full_rows_per_second']:,.0f} rows/s, kwire_pruned "
            f"{py['kwire_pruned_rows_per_second']:,.0f}, kio {py['kio_rows_per_second']:,.0f} "
            f"(kwire_full / kio = {py['kwire_full_over_kio']:.2f}×)."
        )
    full = d["results"].get("kwire_full", {})
    if "ratio_to_kio" in full:
        lines.append("")
        lines.append(
            f"kwire_full / kio = {full['ratio_to_kio']:.2f}× (target ≥ 1.3, "
            f"{full['verdict_vs_kio']})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS, help="results directory")
    args = parser.parse_args(argv)
    for name, render in (("codecs", codecs), ("spark", spark)):
        path = args.results / f"{name}.json"
        if path.exists():
            print(f"### {name}\n\n{render(json.loads(path.read_text()))}\n")
        else:
            print(f"### {name}\n\n(no {path.name}: run `make bench` first)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
