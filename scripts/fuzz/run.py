#!/usr/bin/env python3
"""Long fuzz run of kwire's decoders and capture step (the project issue "Reliability").

    python scripts/fuzz/run.py --inputs 1000000 --minutes 30 --seed 1 --crash-dir out/fuzz

Inputs go to every `Message.decode` at every version, decode_request, decode_response at every
(api key, version), decode_version_prefixed, the tolerant inspect_request/inspect_response (which
must never raise), the generator's kitchen-sink fixture (dialect corners the shipped schemas do
not reach), and the capture step (capture.read_frames on corrupted pcap/pcapng files, whose
frames are then decoded). They are:

1. a systematic sweep over the valid corpus (model-derived values encoded as bodies, frames and
   captures): every truncation, and every length/count/tag field set to huge, negative, null and
   overlong values;
2. random mutations (bit flips, interesting bytes, truncation, insertion, removal, duplication,
   length inflation, splices of two seeds) and random bytes, in chunks of inputs drawn from
   random.Random(f"{seed}/{chunk}"), spread over --workers processes;
3. if atheris is installed (and not --no-atheris), a coverage-guided share run by libFuzzer, one
   process per worker, started from the same corpus.

A crash is any exception that is not a KwireError (or, for capture, not CaptureFileError when
errors="raise", nothing at all with errors="report"); a violation is a KwireError that breaks the
contract (offset outside the input, no message name, ...), a tolerant call that raised, or a
decode whose traced allocation peak exceeds --max-alloc-mb (sampled). Each is saved as
<crash-dir>/<target>-<sha1>.bin with a .txt beside it (target, input hex, traceback). The exit
status is 1 when there was any crash or violation.

The same --seed gives the same inputs (a --minutes cap can only cut the run short).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz import harness, mutate, pcaps  # noqa: E402
from tests.fuzz.harness import Crash, Target, Violation  # noqa: E402

CHUNK = 2000
SAMPLE_EVERY = 997  # inputs between traced-allocation samples (a prime: no aliasing with groups)
GROUP_WEIGHTS = {  # how random-phase inputs are spread over groups of targets
    "decode": 36,
    "head": 6,
    "request": 14,
    "response": 12,
    "inspect": 10,
    "prefixed": 4,
    "ks": 6,
    "capture": 2,
    "records": 6,  # record batches and message sets, compressed ones and bombs included
}
RANDOM_BYTES_SHARE = 0.12


# -- the world a worker fuzzes: targets and their seeds -----------------------------------------


class World:
    def __init__(self, at_seed: int, examples: int, tmp: Path) -> None:
        from tests.fuzz import corpus as corpus_mod

        # Real captured frames: up to 4 per api key, version and direction (they repeat a lot).
        corpus = corpus_mod.build(examples, at_seed, real_per_version=4, sample=False)
        self.targets: dict[str, Target] = {t.name: t for t in harness.all_targets()}
        self.seeds: dict[str, list[bytes]] = dict(corpus.seeds)
        self.captures = corpus.captures
        ks = corpus_mod.kitchen_sink(tmp)
        ks_targets = harness.message_targets(ks, prefix="ks")
        for t in ks_targets:
            self.targets[t.name] = t
        for (name, v), objs in corpus_mod.kitchen_sink_values(ks, examples, at_seed).items():
            self.seeds[f"ks:{name}:v{v}"] = list(dict.fromkeys(o.encode(v) for o in objs))
        self.groups: dict[str, list[str]] = {g: [] for g in GROUP_WEIGHTS}
        for name in sorted(self.targets):
            self.groups[_group(name)].append(name)
        self.group_names = sorted(GROUP_WEIGHTS)
        self.group_weights = [GROUP_WEIGHTS[g] for g in self.group_names]
        self.all_seeds = [(n, d) for n in sorted(self.seeds) for d in self.seeds[n]]
        self._fields: dict[tuple[str, bytes], list[tuple[int, str]]] = {}

    def fields(self, name: str, data: bytes) -> list[tuple[int, str]]:
        key = (name, data)
        got = self._fields.get(key)
        if got is None:
            got = self._fields[key] = mutate.length_fields(self.targets[name].call, data)
        return got


def _group(name: str) -> str:
    head = name.split(":", 1)[0]
    if head.startswith("inspect"):
        return "inspect"
    return head


# -- a worker's share ------------------------------------------------------------------------------

_world: World | None = None
_crash_dir = Path(".")
_tmpdir = Path(".")
_deadline = 0.0
_max_alloc = 0
_max_capture_alloc = 0
_counter = 0  # inputs this process ran: picks the traced-allocation samples


def _init(crash_dir: str, deadline: float, max_alloc: int, max_capture_alloc: int) -> None:
    """Pool initializer: the world itself is inherited from the parent (fork)."""
    global _crash_dir, _tmpdir, _deadline, _max_alloc, _max_capture_alloc
    sys.setrecursionlimit(10_000)
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    _tmpdir = Path(tempfile.mkdtemp(prefix="kwire-fuzz-", dir=base))
    _crash_dir = Path(crash_dir)
    _deadline = deadline
    _max_alloc = max_alloc
    _max_capture_alloc = max_capture_alloc


class Stats:
    def __init__(self) -> None:
        self.inputs = 0
        self.kinds: Counter[str] = Counter()
        self.mutations: Counter[str] = Counter()
        self.crashes: list[dict[str, Any]] = []
        self.masked: list[dict[str, Any]] = []
        self.sampled = 0
        self.peak_alloc = 0
        self.peak_alloc_at = ""
        self.capture_peak_alloc = 0
        self.capture_inputs = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _save(kind: str, err: Crash | Violation, extra: str = "") -> dict[str, Any]:
    digest = hashlib.sha1(err.data).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", err.target) + f"-{digest}"
    _crash_dir.mkdir(parents=True, exist_ok=True)
    (_crash_dir / f"{stem}.bin").write_bytes(err.data)
    exc = err.exc
    summary = f"{type(exc).__name__}: {exc}" if exc is not None else getattr(err, "problem", "")
    sig = harness.signature(exc) if kind == "crash" and exc is not None else kind + ": " + summary
    text = (
        f"kind: {kind}\ntarget: {err.target}\nsignature: {sig}\n{extra}summary: {summary}\n"
        f"input ({len(err.data)} bytes): {err.data.hex()}\n\n{err.trace}"
    )
    (_crash_dir / f"{stem}.txt").write_text(text)
    return {
        "kind": kind,
        "target": err.target,
        "signature": sig,
        "known": sig in harness.KNOWN_CRASHES,
        "type": type(exc).__name__ if exc is not None else "",
        "message": summary[:300],
        "file": str(_crash_dir / f"{stem}.bin"),
        "input_hex": err.data.hex() if len(err.data) <= 512 else err.data[:512].hex() + "...",
    }


def _one(stats: Stats, name: str, data: bytes, how: str) -> None:
    """Runs one decode input, with the bookkeeping."""
    world = _world
    assert world is not None
    global _counter
    stats.inputs += 1
    _counter += 1
    target = world.targets[name]
    sample = _counter % SAMPLE_EVERY == 0
    try:
        if sample:
            tracemalloc.start()
            try:
                kind = harness.run_one(target, data)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            stats.sampled += 1
            if peak > stats.peak_alloc:
                stats.peak_alloc, stats.peak_alloc_at = peak, f"{name} ({len(data)} bytes)"
            if peak > _max_alloc:
                raise Violation(name, data, None, f"traced allocation peak {peak} bytes")
        else:
            kind = harness.run_one(target, data)
    except Crash as c:
        stats.crashes.append(_save("crash", c, f"mutation: {how}\n"))
        stats.kinds[f"CRASH {type(c.exc).__name__}"] += 1
        return
    except Violation as v:
        stats.crashes.append(_save("violation", v, f"mutation: {how}\nproblem: {v.problem}\n"))
        stats.kinds[f"VIOLATION {v.problem[:60]}"] += 1
        return
    stats.kinds[kind] += 1
    if "cannot decode:" in kind and len(stats.masked) < 20:
        stats.masked.append({"target": name, "input_hex": data.hex(), "kind": kind})


def _capture(
    stats: Stats,
    data: bytes,
    how: str,
    ports: tuple[int, ...] = (9092,),
    always_sample: bool = False,
) -> None:
    stats.inputs += 1
    stats.capture_inputs += 1
    sample = always_sample or stats.capture_inputs % 50 == 0
    try:
        if sample:
            tracemalloc.start()
        for kind in pcaps.check_capture(data, _tmpdir / "fuzz.pcap", ports):
            stats.kinds[kind] += 1
    except Crash as c:
        stats.crashes.append(_save("crash", c, f"mutation: {how}\n"))
        stats.kinds[f"CRASH {c.target} {type(c.exc).__name__}"] += 1
    except Violation as v:
        stats.crashes.append(_save("violation", v, f"mutation: {how}\nproblem: {v.problem}\n"))
        stats.kinds[f"VIOLATION {v.problem[:60]}"] += 1
    finally:
        if sample:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            stats.capture_peak_alloc = max(stats.capture_peak_alloc, peak)
            if peak > _max_capture_alloc:
                v = Violation("capture", data, None, f"traced allocation peak {peak} bytes")
                stats.crashes.append(
                    _save("violation", v, f"mutation: {how}\nproblem: {v.problem}\n")
                )
                stats.kinds[f"VIOLATION {v.problem[:60]}"] += 1


def sweep_capture_job(index: int) -> dict[str, Any]:
    """One capture cut at 64 points, and each of its first 48 record/block lengths (about ten
    packets' worth) set to every extreme value."""
    world = _world
    assert world is not None
    stats = Stats()
    seed = world.captures[index]
    data, ports = seed.data, seed.broker_ports
    step = max(1, len(data) // 64)
    for n in range(0, len(data), step):
        if time.time() > _deadline:
            break
        _capture(stats, data[:n], "truncate", ports, always_sample=True)
    for pos, kind in seed.fields[:48]:
        if time.time() > _deadline:
            break
        for value in pcaps.U32_VALUES:
            _capture(
                stats, pcaps.set_u32(data, pos, kind, value), "inflate", ports, always_sample=True
            )
    return stats.as_dict()


def sweep_job(name: str, stride: int = 1) -> dict[str, Any]:
    """Every truncation and every length-field inflation of every stride-th seed of a target."""
    world = _world
    assert world is not None
    stats = Stats()
    for data in world.seeds.get(name, [])[::stride]:
        if time.time() > _deadline:
            break
        for n in range(len(data)):
            _one(stats, name, data[:n], "truncate")
        fields = world.fields(name, data)
        for bad in mutate.inflations(data, fields):
            _one(stats, name, bad, "inflate")
    return stats.as_dict()


def random_job(chunk: int, count: int, at_seed: int) -> dict[str, Any]:
    world = _world
    assert world is not None
    r = random.Random(f"{at_seed}/{chunk}")
    stats = Stats()
    for i in range(count):
        if i % 64 == 0 and time.time() > _deadline:
            break
        group = r.choices(world.group_names, world.group_weights)[0]
        if group == "capture":
            seed = r.choice(world.captures)
            data = seed.data
            if seed.fields and r.random() < 0.3:
                pos, kind = r.choice(seed.fields)
                data, how = pcaps.set_u32(data, pos, kind, r.choice(pcaps.U32_VALUES)), "inflate"
            else:
                data, how = mutate.mutate(data, r, other=r.choice(world.captures).data)
            stats.mutations["capture " + how] += 1
            _capture(stats, data, how, seed.broker_ports)
            continue
        name = r.choice(world.groups[group])
        seeds = world.seeds.get(name) or [b""]
        if r.random() < RANDOM_BYTES_SHARE:
            data = r.randbytes(r.choice((0, 1, 2, 4, 8, 16, 32, 64, 256)))
            how = "random"
        else:
            base = r.choice(seeds)
            other = r.choice(world.all_seeds)[1] if r.random() < 0.5 else r.choice(seeds)
            data, how = mutate.mutate(base, r, world.fields(name, base), other)
            if group in ("request", "inspect") and name.endswith("request") and r.random() < 0.7:
                # Keep the api key and version most of the time: past the header is where the
                # body decoders are (a mutated key mostly tests UnknownApiKeyError).
                data = base[:4] + data[4:]
                how += "+keep_key"
        stats.mutations[how] += 1
        _one(stats, name, data, how)
    return stats.as_dict()


def _job(job: tuple[Any, ...]) -> dict[str, Any]:
    if job[0] == "sweep":
        return sweep_job(job[1], job[2])
    if job[0] == "sweep-capture":
        return sweep_capture_job(job[1])
    return random_job(job[1], job[2], job[3])


# -- atheris ---------------------------------------------------------------------------------------


ATHERIS_WORKER = r"""
import json, os, sys, time
sys.path.insert(0, {root!r})
sys.setrecursionlimit(10000)
import atheris
with atheris.instrument_imports(include=["generated", "kwire.capture", "kwire.records", "tests.fuzz"]):
    import generated
    from kwire import capture
    from tests.fuzz import harness, pcaps
from collections import Counter
targets = [t for t in harness.all_targets()]
targets.sort(key=lambda t: t.name)
crash_dir, stats_path, tmp, runs = {crash_dir!r}, {stats_path!r}, {tmp!r}, {runs}
stats = {{"inputs": 0, "kinds": Counter(), "crashes": []}}
def dump():
    with open(stats_path + ".part", "w") as f:
        json.dump(stats, f)
    os.replace(stats_path + ".part", stats_path)
def save(kind, err):
    import hashlib, re
    digest = hashlib.sha1(err.data).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", err.target) + "-" + digest
    os.makedirs(crash_dir, exist_ok=True)
    open(os.path.join(crash_dir, stem + ".bin"), "wb").write(err.data)
    open(os.path.join(crash_dir, stem + ".txt"), "w").write(
        "kind: %s\ntarget: %s\nsource: atheris\ninput: %s\n\n%s" % (kind, err.target, err.data.hex(), err.trace))
    sig = harness.signature(err.exc) if kind == "crash" and err.exc is not None else kind + ": " + str(err)[:100]
    stats["crashes"].append({{"kind": kind, "target": err.target, "signature": sig,
                              "known": sig in harness.KNOWN_CRASHES,
                              "type": type(err.exc).__name__ if err.exc else "",
                              "message": str(err)[:300], "file": os.path.join(crash_dir, stem + ".bin")}})
def one(data):
    stats["inputs"] += 1
    if len(data) < 2:
        return
    idx = int.from_bytes(data[:2], "big") % (len(targets) + 1)
    body = bytes(data[2:])
    try:
        if idx == len(targets):
            for k in pcaps.check_capture(body, os.path.join(tmp, "a.pcap")):
                stats["kinds"][k] += 1
        else:
            stats["kinds"][harness.run_one(targets[idx], body)] += 1
    except (harness.Crash, harness.Violation) as e:
        kind = "crash" if isinstance(e, harness.Crash) else "violation"
        stats["kinds"][kind.upper() + " " + (type(e.exc).__name__ if e.exc else "")] += 1
        save(kind, e)
    if stats["inputs"] % 2000 == 0 or stats["inputs"] >= runs:
        dump()
atheris.Setup(sys.argv, one)
atheris.Fuzz()
"""


def atheris_available() -> bool:
    try:
        import atheris  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def write_atheris_corpus(directory: Path, world: World) -> None:
    names = sorted(t.name for t in harness.all_targets())
    index = {n: i for i, n in enumerate(names)}
    directory.mkdir(parents=True, exist_ok=True)
    for name, seeds in world.seeds.items():
        if name not in index:
            continue
        for data in seeds:
            blob = index[name].to_bytes(2, "big") + data
            (directory / hashlib.sha1(blob).hexdigest()).write_bytes(blob)
    for seed in world.captures:
        if len(seed.data) <= 8192:
            blob = len(names).to_bytes(2, "big") + seed.data
            (directory / hashlib.sha1(blob).hexdigest()).write_bytes(blob)


def run_atheris(
    world: World, runs: int, workers: int, at_seed: int, crash_dir: Path, seconds: float, tmp: Path
) -> dict[str, Any]:
    seed_dir = tmp / "atheris-seeds"
    write_atheris_corpus(seed_dir, world)
    procs = []
    per = max(1, runs // workers)
    for w in range(workers):
        stats_path = tmp / f"atheris-{w}.json"
        script = tmp / f"atheris_worker_{w}.py"
        work_tmp = tmp / f"atheris-tmp-{w}"
        work_tmp.mkdir(exist_ok=True)
        script.write_text(
            ATHERIS_WORKER.format(
                root=str(ROOT),
                crash_dir=str(crash_dir),
                stats_path=str(stats_path),
                tmp=str(work_tmp),
                runs=per,
            )
        )
        corpus_dir = tmp / f"atheris-corpus-{w}"  # new finds go here; seeds are read-only
        corpus_dir.mkdir(exist_ok=True)
        args = [
            sys.executable,
            str(script),
            str(corpus_dir),
            str(seed_dir),
            f"-runs={per}",
            f"-seed={at_seed * 100 + w + 1}",
            "-max_len=8192",
            "-timeout=20",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
            f"-max_total_time={max(1, int(seconds))}",
            f"-artifact_prefix={crash_dir}/atheris-",
        ]
        log = open(tmp / f"atheris-{w}.log", "w")
        procs.append(
            (
                subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT),
                stats_path,
                tmp / f"atheris-{w}.log",
                log,
            )
        )
    total: dict[str, Any] = {
        "inputs": 0,
        "kinds": Counter(),
        "crashes": [],
        "exit_codes": [],
        "libfuzzer_runs": 0,
        "coverage": [],
    }
    for proc, stats_path, log_path, log in procs:
        proc.wait()
        log.close()
        total["exit_codes"].append(proc.returncode)
        text = log_path.read_text(errors="replace")
        m = re.findall(r"Done (\d+) runs in", text)
        total["libfuzzer_runs"] += int(m[-1]) if m else 0
        cov = re.findall(r"cov: (\d+) ft: (\d+)", text)
        if cov:
            total["coverage"].append({"cov": int(cov[-1][0]), "ft": int(cov[-1][1])})
        if stats_path.exists():
            s = json.loads(stats_path.read_text())
            total["inputs"] += s["inputs"]
            total["kinds"].update(s["kinds"])
            total["crashes"].extend(s["crashes"])
        if proc.returncode not in (0,):
            total.setdefault("log_tails", []).append(text[-3000:])
    return total


# -- main ----------------------------------------------------------------------------------------


def merge(into: dict[str, Any], part: dict[str, Any]) -> None:
    into["inputs"] += part["inputs"]
    into["kinds"].update(part["kinds"])
    into["mutations"].update(part.get("mutations", {}))
    into["crashes"].extend(part["crashes"])
    into["masked"].extend(part.get("masked", []))
    into["sampled"] += part.get("sampled", 0)
    into["capture_inputs"] += part.get("capture_inputs", 0)
    into["capture_peak_alloc"] = max(into["capture_peak_alloc"], part.get("capture_peak_alloc", 0))
    if part.get("peak_alloc", 0) > into["peak_alloc"]:
        into["peak_alloc"], into["peak_alloc_at"] = part["peak_alloc"], part["peak_alloc_at"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--inputs", type=int, default=1_000_000, help="inputs to run in all")
    ap.add_argument("--minutes", type=float, default=30.0, help="stop after this long")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--crash-dir", default="out/fuzz-crashes")
    ap.add_argument("--examples", type=int, default=6, help="model-derived values per version")
    ap.add_argument(
        "--sweep-share",
        type=float,
        default=0.35,
        help="at most this share of --inputs goes to the systematic sweep",
    )
    ap.add_argument(
        "--atheris-share",
        type=float,
        default=0.2,
        help="share of --inputs run coverage-guided under atheris, if installed",
    )
    ap.add_argument("--no-atheris", action="store_true")
    ap.add_argument(
        "--max-alloc-mb",
        type=float,
        default=1.0,
        help="traced allocation peak above which a sampled decode is a violation",
    )
    ap.add_argument(
        "--max-capture-alloc-mb",
        type=float,
        default=32.0,
        help="traced allocation peak above which a capture-step input is a violation "
        "(every sweep input is traced, one in 50 random ones)",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)

    started = time.time()
    deadline = started + args.minutes * 60
    crash_dir = Path(args.crash_dir).resolve()
    if crash_dir.exists():
        shutil.rmtree(crash_dir)
    crash_dir.mkdir(parents=True)
    use_atheris = not args.no_atheris and args.atheris_share > 0 and atheris_available()
    atheris_inputs = int(args.inputs * args.atheris_share) if use_atheris else 0
    own_inputs = args.inputs - atheris_inputs
    # The coverage-guided part gets the time share its inputs are of the total.
    own_deadline = started + args.minutes * 60 * (own_inputs / max(args.inputs, 1))

    tmp = Path(tempfile.mkdtemp(prefix="kwire-fuzz-main-"))
    print(
        f"kwire fuzz: seed {args.seed}, {args.inputs} inputs ({atheris_inputs} under atheris"
        f"{'' if use_atheris else ': not installed or disabled'}), {args.workers} workers, "
        f"cap {args.minutes} min",
        flush=True,
    )
    global _world
    world = _world = World(args.seed, args.examples, tmp)
    print(
        f"corpus: {len(world.targets)} targets, {len(world.all_seeds)} seed inputs, "
        f"{len(world.captures)} capture files ({time.time() - started:.1f}s)",
        flush=True,
    )

    total: dict[str, Any] = {
        "inputs": 0,
        "kinds": Counter(),
        "mutations": Counter(),
        "crashes": [],
        "masked": [],
        "sampled": 0,
        "peak_alloc": 0,
        "peak_alloc_at": "",
        "capture_inputs": 0,
        "capture_peak_alloc": 0,
    }
    ctx = mp.get_context("fork")
    last = time.time()
    init = (
        str(crash_dir),
        own_deadline,
        int(args.max_alloc_mb * 2**20),
        int(args.max_capture_alloc_mb * 2**20),
    )
    # Length-field positions of every seed, found before forking so that workers share them.
    size = sum(len(d) + 12 * len(world.fields(n, d)) for n, d in world.all_seeds)
    size += sum(64 + len(c.fields[:48]) * len(pcaps.U32_VALUES) for c in world.captures)
    budget = own_inputs * args.sweep_share
    # Every stride-th seed of each target, so that the sweep fits its share of the run.
    stride = max(1, -(-int(size) // max(int(budget), 1)))
    with ctx.Pool(args.workers, _init, init) as pool:
        # 1. The systematic sweep (capture files first: they are the slowest jobs).
        sweep: list[tuple[Any, ...]] = []
        if budget >= 1000:
            captures = range(0, len(world.captures), stride)
            sweep = [("sweep-capture", i) for i in captures]
            sweep += [("sweep", n, stride) for n in sorted(world.seeds)]
        for part in pool.imap_unordered(_job, sweep):
            merge(total, part)
        print(
            f"  sweep (every {stride} seed{'s' if stride > 1 else ''}): {total['inputs']:,} "
            f"inputs, {len(total['crashes'])} crashes/violations, {time.time() - started:.0f}s",
            flush=True,
        )
        # 2. Random mutations and random bytes, in deterministic chunks, up to --inputs.
        remaining = own_inputs - total["inputs"]
        jobs = []
        for chunk in range((max(remaining, 0) + CHUNK - 1) // CHUNK):
            jobs.append(("random", chunk, min(CHUNK, remaining - chunk * CHUNK), args.seed))
        for part in pool.imap_unordered(_job, jobs):
            merge(total, part)
            if time.time() - last > 15:
                last = time.time()
                print(
                    f"  {total['inputs']:>9,} inputs, {len(total['crashes'])} "
                    f"crashes/violations, {time.time() - started:.0f}s",
                    flush=True,
                )
    own_seconds = time.time() - started

    atheris_total: dict[str, Any] | None = None
    if use_atheris and atheris_inputs:
        left = max(10.0, deadline - time.time())
        print(
            f"atheris: {atheris_inputs} runs over {args.workers} processes, " f"cap {left:.0f}s",
            flush=True,
        )
        atheris_total = run_atheris(
            world, atheris_inputs, args.workers, args.seed, crash_dir, left, tmp
        )
        total["inputs"] += atheris_total["inputs"]
        total["kinds"].update({f"{k}": v for k, v in atheris_total["kinds"].items()})
        total["crashes"].extend(atheris_total["crashes"])

    duration = time.time() - started
    rss_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rss_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    kinds: Counter[str] = total["kinds"]
    error_kinds = {k: v for k, v in kinds.items() if k != "ok" and k != "capture ok"}
    by_type: Counter[str] = Counter()
    for k, v in error_kinds.items():
        by_type[k.split(":")[0]] += v
    crashes = [c for c in total["crashes"] if c["kind"] == "crash"]
    violations = [c for c in total["crashes"] if c["kind"] == "violation"]
    figures = {
        "seed": args.seed,
        "inputs": total["inputs"],
        "inputs_random_and_sweep": total["inputs"] - (atheris_total or {}).get("inputs", 0),
        "inputs_atheris": (atheris_total or {}).get("inputs", 0),
        "atheris_libfuzzer_runs": (atheris_total or {}).get("libfuzzer_runs", 0),
        "atheris_coverage": (atheris_total or {}).get("coverage", []),
        "atheris_exit_codes": (atheris_total or {}).get("exit_codes", []),
        "capture_inputs": total["capture_inputs"],
        "decoded_ok": kinds.get("ok", 0),
        "distinct_error_kinds": len(error_kinds),
        "errors_by_type": dict(by_type.most_common()),
        "error_kinds": dict(sorted(error_kinds.items(), key=lambda kv: -kv[1])),
        "mutations": dict(total["mutations"].most_common()),
        "masked_internal_exceptions": total["masked"],
        "crashes": len(crashes),
        "violations": len(violations),
        "crash_signatures": _signatures(total["crashes"]),
        "crash_details": total["crashes"][:50],
        "distinct_crash_inputs": len({c.get("file") for c in total["crashes"]}),
        "traced_alloc_samples": total["sampled"],
        "traced_alloc_peak_bytes": total["peak_alloc"],
        "traced_alloc_peak_at": total["peak_alloc_at"],
        "capture_traced_alloc_peak_bytes": total["capture_peak_alloc"],
        "peak_rss_mb": round(max(rss_self, rss_children) / 1024, 1),
        "peak_rss_mb_main": round(rss_self / 1024, 1),
        "peak_rss_mb_workers": round(rss_children / 1024, 1),
        "seconds": round(duration, 1),
        "seconds_random_and_sweep": round(own_seconds, 1),
        "crash_dir": str(crash_dir),
    }
    if atheris_total and atheris_total.get("log_tails"):
        figures["atheris_log_tails"] = atheris_total["log_tails"]
    _print(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if crashes or violations else 0


def _signatures(crashes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Crashes grouped by cause, each with its count, targets and smallest saved input."""
    groups: dict[str, dict[str, Any]] = {}
    for c in crashes:
        g = groups.setdefault(
            c.get("signature", c["type"]),
            {"count": 0, "known": c.get("known", False), "targets": set(), "smallest": None},
        )
        g["count"] += 1
        g["targets"].add(c["target"].split(":")[0])
        size = Path(c["file"]).stat().st_size if Path(c["file"]).exists() else 1 << 60
        if g["smallest"] is None or size < g["smallest"][0]:
            g["smallest"] = (size, c["file"], c["message"])
    return [
        {
            "signature": sig,
            "count": g["count"],
            "known": g["known"],
            "targets": sorted(g["targets"]),
            "smallest_input": g["smallest"][1],
            "smallest_bytes": g["smallest"][0],
            "message": g["smallest"][2],
        }
        for sig, g in sorted(groups.items(), key=lambda kv: -kv[1]["count"])
    ]


def _print(f: dict[str, Any]) -> None:
    print()
    print(
        f"inputs tried:        {f['inputs']:,} ({f['inputs_random_and_sweep']:,} sweep+random, "
        f"{f['inputs_atheris']:,} atheris; {f['capture_inputs']:,} capture files)"
    )
    print(f"decoded fine:        {f['decoded_ok']:,}")
    print(f"distinct error kinds: {f['distinct_error_kinds']} (type: problem shape)")
    for t, n in f["errors_by_type"].items():
        print(f"  {n:>10,}  {t}")
    print("most common kinds:")
    for k, n in list(f["error_kinds"].items())[:25]:
        print(f"  {n:>10,}  {k[:110]}")
    print(
        f"masked internal exceptions (DecodeError 'cannot decode: ...'): "
        f"{len(f['masked_internal_exceptions'])}"
    )
    print(f"crashes:             {f['crashes']}")
    print(f"contract violations: {f['violations']}")
    for s in f["crash_signatures"]:
        known = " (known: pinned by an xfail test)" if s["known"] else " (NEW)"
        print(f"  {s['count']:>6} x {s['signature']}{known} in {', '.join(s['targets'])}")
        print(f"         {s['message'][:140]}")
        print(f"         smallest: {s['smallest_input']} ({s['smallest_bytes']} bytes)")
    print(
        f"traced alloc peak:   {f['traced_alloc_peak_bytes']:,} bytes over "
        f"{f['traced_alloc_samples']:,} sampled decodes (at {f['traced_alloc_peak_at']}); "
        f"capture samples: {f['capture_traced_alloc_peak_bytes']:,} bytes"
    )
    print(
        f"peak RSS:            {f['peak_rss_mb']} MB (main {f['peak_rss_mb_main']} MB, "
        f"largest worker {f['peak_rss_mb_workers']} MB)"
    )
    if f["inputs_atheris"] or f["atheris_libfuzzer_runs"]:
        print(
            f"atheris:             {f['atheris_libfuzzer_runs']:,} libFuzzer runs, coverage "
            f"{f['atheris_coverage']}, exit codes {f['atheris_exit_codes']}"
        )
    print(f"duration:            {f['seconds']} s")


if __name__ == "__main__":
    sys.exit(main())
