"""Valid inputs to mutate: model-derived values encoded as bodies, frames and captures.

Values come from the project's model-derived strategies (tests/strategies.py), drawn with a fixed
hypothesis seed so that a corpus is a function of (seed, examples per case). Real captured frames
are added when tests/data holds captures.
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import generated as g
from tests.fuzz import pcaps
from tests.sampling import IMPORTED, sample_versions
from tests.strategies import Strategies, load_message

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "schemas").glob("*.json"))
KITCHEN_SINK = ROOT / "tests" / "generator" / "fixtures" / "KitchenSinkRequest.json"


def draw(strategy: st.SearchStrategy[Any], n: int, at_seed: int) -> list[Any]:
    """Up to n examples of a strategy, the same ones for the same seed."""
    out: list[Any] = []

    @settings(
        max_examples=n,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @seed(at_seed)
    @given(strategy)
    def collect(x: Any) -> None:
        out.append(x)

    collect()
    return out


def messages() -> dict[str, Any]:
    """Schema name -> the generator's model of it."""
    return {p.stem: load_message(p) for p in SCHEMAS}


def fuzz_versions(name: str, valid: Any) -> list[int]:
    """The versions the systematic fuzz seeds cover: all of them for the hand-written family
    and in `make sweep` (KWIRE_SWEEP=1); for the rest of the protocol in `make test`, the
    oldest, the first flexible and the newest version of each message (the long `make fuzz`
    run covers every version)."""
    versions = list(valid)
    if name not in IMPORTED:
        return versions
    cls: Any = g.MESSAGES.get(name)
    return sample_versions(versions, set(cls.FLEXIBLE_VERSIONS) if cls is not None else set())


def values(
    n: int,
    at_seed: int,
    models: dict[str, Any] | None = None,
    module_of: Callable[[Any], ModuleType] | None = None,
    sample: bool = True,
) -> dict[tuple[str, int], list[Any]]:
    """(message name, version) -> n model-derived instances (the default instance first)."""
    models = models if models is not None else messages()
    module_of = module_of or (lambda m: importlib.import_module(f"generated.{m.module}"))
    out: dict[tuple[str, int], list[Any]] = {}
    for name, model in sorted(models.items()):
        module = module_of(model)
        cls = getattr(module, name)
        for v in fuzz_versions(name, model.valid) if sample else model.valid:
            drawn = draw(Strategies(model, module).message_at(v), n, at_seed + v)
            out[(name, v)] = [cls()] + drawn
    return out


class Corpus:
    """Seed inputs per target name (see tests.fuzz.harness), all valid for their target."""

    def __init__(self) -> None:
        self.seeds: dict[str, list[bytes]] = {}
        self.captures: list[pcaps.CaptureSeed] = []
        # Real captured frames of known apis that did not decode: (capture, target, error).
        self.real_failures: list[tuple[str, str, str]] = []
        self.real_taken: dict[tuple[Any, ...], int] = {}

    def add(self, target: str, data: bytes) -> None:
        bucket = self.seeds.setdefault(target, [])
        if data not in bucket:
            bucket.append(data)

    def all_inputs(self) -> list[bytes]:
        return [d for seeds in self.seeds.values() for d in seeds]


def build(
    n: int = 4,
    at_seed: int = 0,
    captures: bool = True,
    real_per_version: int | None = None,
    sample: bool = True,
) -> Corpus:
    """Bodies for every message and version, request/response frames for every api key and
    version, version-prefixed payloads, and synthetic (plus any real) capture files.

    `real_per_version` caps the frames taken from real captures per (api key, version, direction);
    `sample` limits the imported schemas' versions as fuzz_versions says.
    """
    rng = random.Random(at_seed)
    corpus = Corpus()
    drawn = values(n, at_seed, sample=sample)
    requests: list[tuple[bytes, bytes | None]] = []
    for (name, v), objs in drawn.items():
        cls: Any = g.MESSAGES[name]
        for i, obj in enumerate(objs):
            body = obj.encode(v)
            corpus.add(f"decode:{name}:v{v}", body)
            if v in getattr(cls, "HEAD_FIELDS", {}):
                corpus.add(f"head:{name}:v{v}", body)
            api_key = getattr(cls, "API_KEY", None)
            if api_key is None:
                if name not in ("RequestHeader", "ResponseHeader"):
                    corpus.add(f"prefixed:{name}", g.encode_version_prefixed(obj, v))
                continue
            corr = rng.randrange(-(2**31), 2**31) if i % 2 else i
            if cls.MESSAGE_TYPE == "request":
                client_id = rng.choice(["", "kwire-fuzz", None, "ü" * 3])
                frame = g.encode_request(g.RequestHeader(api_key, v, corr, client_id), obj)
                corpus.add("request", frame[4:])
                corpus.add("inspect_request", frame[4:])
                response_cls = g.REGISTRY[api_key].response
                responses = drawn.get((response_cls.__name__, v))
                reply = None
                if responses:
                    resp = responses[i % len(responses)]
                    reply = g.encode_response(g.ResponseHeader(corr), resp, v)
                requests.append((frame, reply))
            else:
                frame = g.encode_response(g.ResponseHeader(corr), obj, v)
                corpus.add(f"response:{api_key}:v{v}", frame[4:])
                corpus.add(f"inspect_response:{api_key}:v{v}", frame[4:])
    add_records(corpus)
    if captures:
        add_captures(corpus, requests, rng, real_per_version)
    return corpus


def add_records(corpus: Corpus) -> None:
    """Seeds for the records target: a field per format and codec (v2 batches, magic 0/1
    message sets with their wrappers), a transaction marker, and a mixed field."""
    from kwire import records as R

    recs = [R.Record(offset=i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * i)
            for i in range(3)]  # fmt: skip
    fields = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        fields.append(R.encode_records([R.make_batch(recs, base_offset=10, compression=codec)]))
        if codec != "zstd":  # zstd exists only in v2 batches
            for magic in (0, 1):
                fields.append(
                    R.encode_records(R.make_message_set(recs, magic=magic, compression=codec))
                )
    marker = R.make_batch(
        [R.control_record(5, 1_700_000_000_000)], is_control=True, is_transactional=True,
        producer_id=7, producer_epoch=1,
    )  # fmt: skip
    fields.append(R.encode_records([marker]))
    fields.append(fields[0] + fields[1] + fields[-1])
    for data in fields:
        corpus.add("records", data)


def add_captures(
    corpus: Corpus,
    exchanges: list[tuple[bytes, bytes | None]],
    rng: random.Random,
    real_per_version: int | None = None,
) -> None:
    """Synthetic pcap/pcapng files of the exchanges (a few per file), plus real captures."""
    rng.shuffle(exchanges)
    makers = [
        ("pcap", lambda p, link: pcaps.pcap_file(p, link)),
        ("pcap-be-nano", lambda p, link: pcaps.pcap_file(p, link, big_endian=True, nano=True)),
        ("pcapng", lambda p, link: pcaps.pcapng_file(p, link)),
        ("pcapng-be", lambda p, link: pcaps.pcapng_file(p, link, big_endian=True)),
    ]
    for i in range(0, min(len(exchanges), 48), 4):
        link = pcaps.LINK_RAW if i % 8 else pcaps.LINK_ETHERNET
        packets = pcaps.conversation(
            exchanges[i : i + 4],
            client_port=40000 + i,
            mss=rng.choice((7, 64, 1460)),
            close=bool(i % 3),
            link=link,
        )
        kind, maker = makers[(i // 4) % len(makers)]
        data, fields = maker(packets, link)
        corpus.captures.append(pcaps.CaptureSeed(f"synthetic-{kind}-{i // 4}", data, fields))
    for path, ports in pcaps.real_captures():
        data = path.read_bytes()
        if len(data) <= 1 << 20:  # bigger captures are fuzzed through their frames only
            corpus.captures.append(pcaps.CaptureSeed(path.name, data, [], ports))
        add_real_frames(corpus, path, ports, real_per_version)


def add_real_frames(
    corpus: Corpus, path: Path, ports: tuple[int, ...] = (9092,), limit: int | None = None
) -> None:
    """Frames of a real capture, read by the capture step, as seeds for the frame decoders
    (at most `limit` per api key, version and direction over the whole corpus)."""
    try:
        rows, _ = pcaps.read_capture(path, "report", ports)
    except Exception:  # noqa: BLE001 - the capture tests report this; here it only loses seeds
        return
    for row in rows:
        frame = row["frame"]
        if frame is None or len(frame) > 1 << 16:
            continue
        shape = (row["direction"], row["api_key"], row["api_version"])
        if limit is not None and corpus.real_taken.get(shape, 0) >= limit:
            continue
        if row["direction"] == "request":
            if len(frame) < 2 or int.from_bytes(frame[:2], "big") not in g.REGISTRY:
                continue
            names = ["request", "inspect_request"]
            call: Callable[[bytes], Any] = g.decode_request
        else:
            key, v = row["api_key"], row["api_version"]
            if key not in g.REGISTRY or v not in g.REGISTRY[key].response.VALID_VERSIONS:
                continue
            names = [f"response:{key}:v{v}", f"inspect_response:{key}:v{v}"]
            call = pcaps.response_target(key, v).call
        try:
            call(frame)
        except g.KwireError as e:
            corpus.real_failures.append((path.name, names[0], f"{type(e).__name__}: {e}"))
            continue
        corpus.real_taken[shape] = corpus.real_taken.get(shape, 0) + 1
        for name in names:
            corpus.add(name, frame)


# -- the kitchen sink: dialect corners the shipped schemas do not use -----------------------------


def kitchen_sink(tmp: Path) -> ModuleType:
    """The generator's kitchen-sink fixture compiled into a throwaway package `kwire_ks_fuzz`
    (uuid, float64, records, nullable structs, tags valid only in later versions)."""
    from generator.render import compile_schemas, write_package

    name = "kwire_ks_fuzz"
    if name in sys.modules:
        return sys.modules[name]
    write_package(compile_schemas([KITCHEN_SINK], format=False), tmp / name)
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp))


def kitchen_sink_values(pkg: ModuleType, n: int, at_seed: int) -> dict[tuple[str, int], list[Any]]:
    model = load_message(KITCHEN_SINK)
    module = importlib.import_module(f"{pkg.__name__}.{model.module}")
    return values(n, at_seed, {model.name: model}, lambda m: module)
