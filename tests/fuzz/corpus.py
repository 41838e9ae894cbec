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


def values(
    n: int,
    at_seed: int,
    models: dict[str, Any] | None = None,
    module_of: Callable[[Any], ModuleType] | None = None,
) -> dict[tuple[str, int], list[Any]]:
    """(message name, version) -> n model-derived instances (the default instance first)."""
    models = models if models is not None else messages()
    module_of = module_of or (lambda m: importlib.import_module(f"generated.{m.module}"))
    out: dict[tuple[str, int], list[Any]] = {}
    for name, model in sorted(models.items()):
        module = module_of(model)
        cls = getattr(module, name)
        for v in model.valid:
            drawn = draw(Strategies(model, module).message_at(v), n, at_seed + v)
            out[(name, v)] = [cls()] + drawn
    return out


class Corpus:
    """Seed inputs per target name (see tests.fuzz.harness), all valid for their target."""

    def __init__(self) -> None:
        self.seeds: dict[str, list[bytes]] = {}
        self.captures: list[tuple[bytes, pcaps.Fields]] = []  # file bytes, length positions

    def add(self, target: str, data: bytes) -> None:
        bucket = self.seeds.setdefault(target, [])
        if data not in bucket:
            bucket.append(data)

    def all_inputs(self) -> list[bytes]:
        return [d for seeds in self.seeds.values() for d in seeds]


def build(n: int = 4, at_seed: int = 0, captures: bool = True) -> Corpus:
    """Bodies for every message and version, request/response frames for every api key and
    version, version-prefixed payloads, and synthetic (plus any real) capture files."""
    rng = random.Random(at_seed)
    corpus = Corpus()
    drawn = values(n, at_seed)
    requests: list[tuple[bytes, bytes | None]] = []
    for (name, v), objs in drawn.items():
        cls = g.MESSAGES[name]
        for i, obj in enumerate(objs):
            body = obj.encode(v)
            corpus.add(f"decode:{name}:v{v}", body)
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
    if captures:
        add_captures(corpus, requests, rng)
    return corpus


def add_captures(
    corpus: Corpus, exchanges: list[tuple[bytes, bytes | None]], rng: random.Random
) -> None:
    """Synthetic pcap/pcapng files of the exchanges (a few per file), plus real captures."""
    rng.shuffle(exchanges)
    makers = [
        lambda p: pcaps.pcap_file(p),
        lambda p: pcaps.pcap_file(p, big_endian=True, nano=True),
        lambda p: pcaps.pcapng_file(p),
        lambda p: pcaps.pcapng_file(p, big_endian=True),
    ]
    for i in range(0, min(len(exchanges), 48), 4):
        group = exchanges[i : i + 4]
        link = pcaps.LINK_RAW if i % 8 else pcaps.LINK_ETHERNET
        packets = pcaps.conversation(
            group,
            client_port=40000 + i,
            mss=rng.choice((7, 64, 1460)),
            close=bool(i % 3),
            link=link,
        )
        data, fields = (
            makers[(i // 4) % len(makers)](packets)
            if link == pcaps.LINK_ETHERNET
            else _with_link(makers[(i // 4) % len(makers)], packets, link)
        )
        corpus.captures.append((data, fields))
    for path in pcaps.real_captures():
        data = path.read_bytes()
        if len(data) <= 1 << 20:  # big captures are fuzzed through their frames only
            corpus.captures.append((data, []))
        add_real_frames(corpus, path)


def _with_link(maker: Any, packets: Any, link: int) -> tuple[bytes, pcaps.Fields]:
    data, fields = maker(packets)
    # The makers write Ethernet; patch the link type field for raw-IP conversations.
    if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        data = data[:20] + link.to_bytes(4, "little") + data[24:]
    elif data[:4] in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        data = data[:20] + link.to_bytes(4, "big") + data[24:]
    else:  # pcapng: the interface block follows the 28-byte section header
        le = data[8:12] == b"\x4d\x3c\x2b\x1a"
        data = data[:36] + link.to_bytes(2, "little" if le else "big") + data[38:]
    return data, fields


def add_real_frames(corpus: Corpus, path: Path) -> None:
    """Frames of a real capture, read by the capture step, as seeds for the frame decoders."""
    try:
        rows, _ = pcaps.read_capture(path, "report")
    except Exception:  # noqa: BLE001 - the capture tests report this; here it only loses seeds
        return
    for row in rows:
        frame = row["frame"]
        if frame is None or len(frame) > 1 << 16:
            continue
        if row["direction"] == "request":
            corpus.add("request", frame)
            corpus.add("inspect_request", frame)
        elif row["api_key"] in g.REGISTRY:
            key, v = row["api_key"], row["api_version"]
            if v in g.REGISTRY[key].response.VALID_VERSIONS:
                corpus.add(f"response:{key}:v{v}", frame)
                corpus.add(f"inspect_response:{key}:v{v}", frame)


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
