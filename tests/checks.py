"""Assertions shared by the round-trip tests of our schemas and of upstream's."""

from __future__ import annotations

from typing import Any


def check_head(obj: Any, encoded: bytes, version: int) -> None:
    """read_head (column pruning) reads the fields before the first array or struct and leaves
    every later field at its default; a version without a head is read whole. Read from inside
    a larger buffer, since pruned frames carry a header before the body."""
    cls = type(obj)
    head = cls.read_head(b"\x99" * 3 + encoded + b"\x77", 3, version)
    if version not in cls.HEAD_FIELDS:
        assert head == obj
        return
    read, default = set(cls.HEAD_FIELDS[version]), cls()
    for info in cls.FIELDS:
        source = obj if info.attr in read else default
        assert getattr(head, info.attr) == getattr(source, info.attr), info.attr
    assert head.unknown_tags == {}


def out_tables(out: Any) -> dict[str, list[str]]:
    """Every table OUT's manifest lists, as sorted row texts (row order is Spark's business)."""
    import json
    from pathlib import Path

    import pyarrow.dataset as ds

    listed = json.loads((Path(out) / "manifest.json").read_text())["tables"]
    found = {}
    for name, rel in sorted(listed.items()):
        data = ds.dataset(str(Path(out) / rel), format="parquet", partitioning="hive")
        found[name] = sorted(repr(sorted(r.items())) for r in data.to_table().to_pylist())
    return found
