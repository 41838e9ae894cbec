"""Records decode speed: kwire's ``records`` package against kafka-python (and aiokafka).

Run from the repository root::

    python -m benchmarks.records            # full run (~1 minute)
    python -m benchmarks.records --quick    # smoke run (a few seconds)
    python -m benchmarks.records --json out.json --repeats 21

What it does, in order:

1. Builds one records field per case from seeded values: 10 v2 batches of 100 records with
   ~100-byte values (none, gzip, snappy, lz4, zstd), and magic 1 message sets of 100 messages
   per wrapper (none, gzip).  The bytes come from kwire's encoder (the same bytes for every
   library).
2. Checks that every library reads the same (offset, timestamp, key, value, headers) from
   every field it can read; a disagreement exits 1 before timing.
3. Times a full decode of the field (every record materialised, as a consumer would):
   calls per batch calibrated to ``--min-time``, then ``--repeats`` rounds with the libraries
   interleaved, garbage collection off during a batch.  Reports the median records/s and the
   ratio kwire / peer (>1: kwire is faster).  A peer lacking a codec library is "n/a".
4. Prints a table and writes JSON (``--json``, default ``benchmarks/results/records.json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kwire import records as R  # noqa: E402

DEFAULT_JSON = HERE / "results" / "records.json"
DEFAULT_SEED = 20240611
BATCHES = 10
PER_BATCH = 100
VALUE_SIZE = 100

CASES: list[tuple[str, int, str]] = [
    ("v2 none", 2, "none"),
    ("v2 gzip", 2, "gzip"),
    ("v2 snappy", 2, "snappy"),
    ("v2 lz4", 2, "lz4"),
    ("v2 zstd", 2, "zstd"),
    ("v1 none", 1, "none"),
    ("v1 gzip", 1, "gzip"),
]

Reader = Callable[[bytes], list[tuple[Any, ...]]]


def build_field(magic: int, compression: str, seed: int) -> tuple[bytes, int]:
    """A records field of BATCHES x PER_BATCH records and its record count."""
    rng = random.Random(seed)
    words = [rng.randbytes(8).hex().encode() for _ in range(64)]
    batches: list[R.Batch] = []
    offset = 0
    ts = 1_700_000_000_000
    for _ in range(BATCHES):
        recs = []
        for _ in range(PER_BATCH):
            value = b" ".join(rng.choice(words) for _ in range(VALUE_SIZE // 17 + 1))
            key = b"user-%d" % rng.randrange(1000)
            headers = [("trace", rng.randbytes(8))] if magic == 2 else []
            recs.append(R.Record(offset, ts, key, value[:VALUE_SIZE], headers))
            offset += 1
            ts += rng.randrange(5)
        if magic == 2:
            batches.append(
                R.make_batch(recs, compression=compression, producer_id=1, producer_epoch=0,
                             base_sequence=offset - PER_BATCH)
            )  # fmt: skip
        else:
            batches.extend(R.make_message_set(recs, magic=magic, compression=compression))
    return R.encode_records(batches), BATCHES * PER_BATCH


def kwire_read(data: bytes) -> list[tuple[Any, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, r.headers)
        for b in R.decode_records(data)
        for r in b.records
    ]


def kwire_python_read(data: bytes) -> list[tuple[Any, ...]]:
    """The same decode through the reference Python loop (the fallback when not built)."""
    was = R.backend()
    R.set_backend("python")
    try:
        return kwire_read(data)
    finally:
        R.set_backend(was)


def _peer_reader(memory_records: Any) -> Reader:
    def read(data: bytes) -> list[tuple[Any, ...]]:
        out = []
        mr = memory_records(data)
        while mr.has_next():
            batch = mr.next_batch()
            if batch is None:
                break
            for r in batch:
                out.append((r.offset, r.timestamp, r.key, r.value, r.headers))
        return out

    return read


def peers() -> dict[str, tuple[Reader, Callable[[int], bool]]]:
    """Each peer's reader and whether it can read a codec id here."""
    out: dict[str, tuple[Reader, Callable[[int], bool]]] = {}
    from kafka import codec as kp_codec
    from kafka.record import MemoryRecords as KpMemoryRecords

    kp_has = {0: True, 1: True, 2: kp_codec.has_snappy(), 3: kp_codec.has_lz4(),
              4: kp_codec.has_zstd()}  # fmt: skip
    out["kafka-python"] = (_peer_reader(KpMemoryRecords), kp_has.__getitem__)
    try:
        from aiokafka import codec as aio_codec
        from aiokafka.record import MemoryRecords as AioMemoryRecords
    except ImportError:
        return out
    aio_has = {0: True, 1: True, 2: aio_codec.has_snappy(), 3: aio_codec.has_lz4(),
               4: aio_codec.has_zstd()}  # fmt: skip
    out["aiokafka"] = (_peer_reader(AioMemoryRecords), aio_has.__getitem__)
    return out


def _norm(rows: list[tuple[Any, ...]], magic: int) -> list[tuple[Any, ...]]:
    return [
        (o, None if magic == 0 else t, None if k is None else bytes(k),
         None if v is None else bytes(v), [(hk, None if hv is None else bytes(hv)) for hk, hv in h])
        for o, t, k, v, h in rows
    ]  # fmt: skip


def calibrate(fn: Callable[[], Any], min_time: float) -> int:
    """Calls per timed batch so that one batch lasts at least ``min_time`` seconds."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= min_time:
            return number
        number *= 2


def time_batch(fn: Callable[[], Any], number: int) -> float:
    gc_was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
    finally:
        if gc_was:
            gc.enable()


def run(repeats: int, min_time: float, seed: int) -> dict[str, Any]:
    libs = {"kwire": (kwire_read, lambda codec: True)}
    if R.backend() == "compiled":  # kwire is the compiled loop: also time its Python twin
        libs["kwire-python"] = (kwire_python_read, lambda codec: True)
    libs.update(peers())
    results: dict[str, Any] = {}
    disagreements: list[str] = []
    for i, (label, magic, compression) in enumerate(CASES):
        data, count = build_field(magic, compression, seed + i)
        codec = R.model.CODEC_IDS[compression]
        usable = {name: fn for name, (fn, has) in libs.items() if has(codec)}
        want = _norm(kwire_read(data), magic)
        assert len(want) == count
        for name, fn in usable.items():
            if _norm(fn(data), magic) != want:
                disagreements.append(f"{label}: {name} reads different records")
        calls = {name: (lambda fn=fn: fn(data)) for name, fn in usable.items()}
        numbers = {name: calibrate(call, min_time) for name, call in calls.items()}
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(repeats):
            for name, call in calls.items():  # interleaved: load hits every library alike
                samples[name].append(time_batch(call, numbers[name]))
        med = {name: statistics.median(s) for name, s in samples.items()}
        results[label] = {
            "bytes": len(data),
            "records": count,
            "seconds_per_field": samples,
            "median_seconds": med,
            "records_per_second": {name: count / s for name, s in med.items()},
            "ratio_vs": {name: med[name] / med["kwire"] for name in med if name != "kwire"},
        }
    return {"cases": results, "disagreements": disagreements}


def render(results: dict[str, Any], peer_names: list[str]) -> str:
    head = f"{'case':<10} {'bytes':>8} {'kwire rec/s':>12}"
    for p in peer_names:
        head += f" {p + ' rec/s':>18} {'ratio':>6}"
    lines = [head, "-" * len(head)]
    for label, r in results["cases"].items():
        rps = r["records_per_second"]
        line = f"{label:<10} {r['bytes']:>8} {rps['kwire']:>12,.0f}"
        for p in peer_names:
            if p in rps:
                line += f" {rps[p]:>18,.0f} {r['ratio_vs'][p]:>5.2f}x"
            else:
                line += f" {'n/a':>18} {'':>6}"
        lines.append(line)
    lines.append("ratio = peer time / kwire time (>1: kwire faster); median of interleaved rounds")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--min-time", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--quick", action="store_true", help="3 rounds of short batches")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.min_time = 3, 0.02
    started = time.time()
    results = run(args.repeats, args.min_time, args.seed)
    for problem in results["disagreements"]:
        print("DISAGREEMENT:", problem)
    if results["disagreements"]:
        return 1
    peer_names = sorted(
        {p for r in results["cases"].values() for p in r["ratio_vs"]},
        key=lambda p: (p != "kwire-python", p),
    )
    print(f"kwire's records loop: {R.backend()}")
    print(render(results, peer_names))
    results["machine"] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "records_backend": R.backend(),
    }
    results["settings"] = {"repeats": args.repeats, "min_time": args.min_time, "seed": args.seed,
                           "batches": BATCHES, "per_batch": PER_BATCH, "value_size": VALUE_SIZE}  # fmt: skip
    results["took_seconds"] = time.time() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
