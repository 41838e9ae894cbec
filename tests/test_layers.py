"""The product's rooms import only the rooms below them, and no module imports itself back.

Rooms, from the top: the front door (kwire's own modules), kwire.groups, kwire.spark, then
kwire.capture and kwire.records side by side, then generated; generator (the compiler) sits
beside generated. Every import counts, the ones inside functions too: a lazy import still makes
the rooms lean on each other. The imports are read from the source with `ast`, so the test sees
what the code says, not what one run happened to load.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

# On one worker, so that the graph is parsed once for the module.
pytestmark = pytest.mark.xdist_group("layers")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kwire", "generator", "generated")

# room -> (level, rooms it may import besides itself)
ROOMS: dict[str, set[str]] = {
    "generated": set(),
    "generator": set(),
    "kwire.records": {"generated"},
    "kwire.capture": {"generated"},
    "kwire.spark": {"kwire.capture", "kwire.records", "generated"},
    "kwire.groups": {"kwire.spark", "kwire.capture", "kwire.records", "generated"},
    "kwire": {
        "kwire.groups",
        "kwire.spark",
        "kwire.capture",
        "kwire.records",
        "generated",
        "generator",
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def room_of(module: str) -> str | None:
    if module.split(".")[0] not in PACKAGES:
        return None
    best = None
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            if best is None or len(room) > len(best):
                best = room
    return best


def sources() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `module` imports (a name imported from a package counts as the
    submodule when there is one, else as the package)."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def compiled() -> set[str]:
    """The compiled modules (Cython sources) of kwire's packages, importable once built."""
    return {module_name(p) for p in (ROOT / "kwire").rglob("*.pyx")}


# Both checks read the same graph: parsed once (generated/'s modules are most of the 10 s a
# parse of every source takes on 2 cores).
@lru_cache(maxsize=1)
def graph() -> dict[str, set[str]]:
    found = sources()
    known = set(found) | compiled()
    return {m: imports(m, p, known) for m, p in found.items()}


def test_every_module_belongs_to_a_room() -> None:
    lost = [m for m in sources() if room_of(m) is None]
    assert not lost
    assert len(sources()) > 50  # the walk found the packages


def test_rooms_import_only_rooms_below() -> None:
    wrong = []
    for module, targets in graph().items():
        room = room_of(module)
        assert room is not None
        for target in targets:
            other = room_of(target)
            if other is None or other == room:
                continue
            if other not in ROOMS[room]:
                wrong.append(f"{module} ({room}) imports {target} ({other})")
    assert not wrong, "\n".join(wrong)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circles() -> None:
    edges = graph()
    # A package's __init__ importing its own submodules is how packages are made; a submodule
    # importing names back from its package __init__ while that __init__ imports it is a circle.
    cycle = _cycle(edges)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_checks_catch_what_they_claim() -> None:
    """The cycle finder and the room rule on made-up graphs (so a check that could never fail
    would show here)."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert room_of("kwire.spark.api") == "kwire.spark"
    assert room_of("kwire.job") == "kwire"
    assert "kwire.spark" not in ROOMS["kwire.capture"]
    assert "kwire.groups" not in ROOMS["kwire.spark"]
