"""The report's overview (kwire.groups.overview) against facts from outside kwire: tshark's
count of requests per API in each capture, and what the ground-truth scenarios' clients reported
of their members. The page itself is opened in a browser by tests/groups/test_story.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kwire.groups import overview, story
from kwire.spark.api import api_names

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "capture"

pytestmark = pytest.mark.xdist_group("groups_job")


def _meta(capture: str) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((DATA / (Path(capture).stem + ".json")).read_text())
    return meta


def test_requests_per_api_add_up_to_tsharks_count(groups_out: Path) -> None:
    """The rate chart's series, summed over time, are the requests tshark's Kafka dissector
    counted in the captures (their JSON's `counts`, per api key and version): every capture in
    the clear (the TLS ones are read without their keys, so none of theirs is a request)."""
    span = overview.window(groups_out)
    assert span is not None
    step = overview.step_for(*span)
    series = overview.requests_per_second(groups_out, span[0], step)
    got = {name: round(sum(v.values()) * step) for name, v in series.values.items()}
    want: Counter[str] = Counter()
    names = api_names()
    for capture in sorted(p.name for p in DATA.glob("*.pcap*")):
        for key, versions in _meta(capture)["counts"]["request"].items():
            want[names[int(key)]] += sum(versions.values())
    assert got == dict(want)


@pytest.fixture(scope="module")
def groups(groups_out: Path) -> dict[str, story.Group]:
    return story.load(groups_out)


def test_every_group_is_a_row_with_its_members_and_evictions(
    groups: dict[str, story.Group],
) -> None:
    rows = {r["group"]: r for r in overview.group_rows(groups)}
    assert set(rows) == set(groups)
    checked = 0
    for path in sorted(DATA.glob("mock_gt_*.json")):
        for truth in json.loads(path.read_text())["group_truth"]["groups"]:
            endings = Counter(e for m in truth["members"] for e in m["endings"].values())
            row = rows[truth["group_id"]]
            assert row["members at end"] == endings["active_at_end"], truth["group_id"]
            assert row["evictions"] == endings["evicted"] + endings["fenced"], truth["group_id"]
            checked += 1
    assert checked >= 10


def test_error_codes_are_found_at_every_depth(groups_out: Path) -> None:
    """The errors chart walks every `error_code` in the decoded responses, nested in lists of
    structs too: its OffsetCommit partition errors are the failed commits of groups/commits (a
    Spark SQL explode, a different path), and every error a member saw is in the chart."""
    span = overview.window(groups_out)
    assert span is not None
    series = overview.errors_over_time(groups_out, span[0], overview.step_for(*span))
    totals = {name: round(sum(v.values())) for name, v in series.values.items()}
    commits = pq.read_table(groups_out / "groups" / "commits").to_pylist()
    failed = Counter(c["error"] for c in commits if c["error"] not in (None, "no response"))
    assert failed, "the group captures hold failed commits"
    for name, n in failed.items():
        assert totals.get(name, 0) >= n, name
    members = pq.read_table(groups_out / "groups" / "members").to_pylist()
    # A streams member's "status X" entries are the heartbeat's status codes, not error codes.
    seen = {e for m in members for e in (m["errors_seen"] or []) if not e.startswith("status ")}
    assert seen and seen <= set(totals)
    paths = overview.error_paths(
        pq.read_schema(next((groups_out / "responses").rglob("*.parquet")))
    )
    assert ("offset_commit", ["topics", "[]", "partitions", "[]", "error_code"]) in paths
