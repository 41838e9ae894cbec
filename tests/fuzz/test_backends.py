"""The compiled readers and the pure-Python ones on the fuzz corpus: every seed (model-derived
bodies and frames of every message and version, and the frames of the committed real captures),
cuts of it and byte flips in it give the same value or the same error (type, text, byte offset)
from both builds (every fourth seed per target in make test, from a start that differs by
target, all of them in make sweep). Skips where the compiled readers are not built (see
test_the_compiled_build_is_in_use_where_it_was_built in tests/generated/test_backends.py)."""

from __future__ import annotations

import random
import zlib
from typing import Any

import pytest

import generated
from generated import _runtime
from tests.fuzz.harness import Target
from tests.sampling import SWEEP

pytestmark = pytest.mark.skipif(
    not _runtime._INSTALLED,
    reason="the compiled readers are not built here (make setup builds them) or "
    "KWIRE_PURE_PYTHON is set: only the Python build is tested",
)
GROUPS = ("decode", "request", "response", "inspect", "prefixed", "head")


def _outcome(target: Target, data: bytes) -> tuple[str, str]:
    try:
        value = target.call(data)
    except generated.KwireError as e:
        return "error", f"{type(e).__name__} at {getattr(e, 'offset', None)}: {e}"
    tags = getattr(value, "wire_tags", None)
    return "value", f"{value!r} tags={tags!r}"


def _inputs(data: bytes, rng: random.Random) -> list[bytes]:
    out = [data, data[: len(data) // 2], data[: max(0, len(data) - 1)], data + b"\x00"]
    for _ in range(3):
        if data:
            i = rng.randrange(len(data))
            out.append(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :])
    return out


@pytest.mark.long(14)
@pytest.mark.parametrize("group", GROUPS)
def test_both_builds_agree_on_the_corpus(
    group: str, corpus: Any, targets: dict[str, Target]
) -> None:
    rng = random.Random(group)
    compared = differ = 0
    first: list[str] = []
    for name, seeds in sorted(corpus.seeds.items()):
        head = name.split(":", 1)[0]
        if ("inspect" if head.startswith("inspect") else head) != group:
            continue
        target = targets[name]
        # make test compares every fourth seed of a target (its cuts and flips included), from
        # a start fixed per target so that together they reach every position; make sweep
        # compares them all.
        start = zlib.crc32(name.encode()) % 4
        for data in seeds if SWEEP else seeds[start::4] or seeds[:1]:
            for case in _inputs(data, rng):
                generated.set_backend("python")
                try:
                    py = _outcome(target, case)
                finally:
                    generated.set_backend("compiled")
                compiled = _outcome(target, case)
                compared += 1
                if py != compiled:
                    differ += 1
                    if len(first) < 3:
                        first.append(
                            f"{name} {case.hex()}:\n  python   {py}\n  compiled {compiled}"
                        )
    assert compared > 0
    assert differ == 0, f"{differ} of {compared} inputs differ:\n" + "\n".join(first)
