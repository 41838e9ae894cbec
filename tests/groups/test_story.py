"""`kwire groups OUT` and `kwire report OUT`: the stories and the HTML report of real captures.

What each group did comes from its scenario (scripts/capture/scenarios.py), not from kwire; the
report is opened in a real headless browser (Debian's chromium driven by Playwright).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kwire import cli
from kwire.groups import story
from tests.browser import read_page

pytestmark = pytest.mark.xdist_group("groups_job")

ROOT = Path(__file__).resolve().parents[2]


def _story(out: Path, group: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert cli.main(["groups", str(out), "--group", group]) == 0
    return capsys.readouterr().out.splitlines()


def _line(lines: list[str], needle: str) -> str:
    found = [line for line in lines if needle in line]
    assert found, f"no line with {needle!r} in:\n" + "\n".join(lines)
    return found[0]


def test_words() -> None:
    assert story.ranges([5, 0, 1, 2, 3]) == "0-3,5"
    assert story.ranges([]) == ""
    assert story.ranges([7]) == "7"
    assert story.span(0.25) == "0.2 ms" or story.span(0.25) == "0.3 ms"
    assert story.span(45_000) == "45.0 s"
    assert story.span(125_000) == "2 min 5 s"


def test_classic_story_tells_the_join_the_move_and_the_leaves(
    groups_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """group-classic: rdk-a joins alone, rdk-b joins (range gives it the upper half of orders'
    four partitions), both close with LeaveGroup; rdk-a's commits during the rebalance fail."""
    lines = _story(groups_out, "g-classic", capsys)
    assert lines[0].startswith("group g-classic (classic protocol, assignor range")
    gen_a = _line(lines, "first generation seen")
    assert "rdk-a" in gen_a and "orders 0-3" in gen_a and "1 member;" in gen_a
    gen_b = _line(lines, "rdk-b (127.0.0.1) joined")
    assert "orders 2-3 moved rdk-a -> rdk-b" in gen_b and "2 members" in gen_b
    assert "rebalance took" in gen_b
    assert "rdk-b (127.0.0.1) left (LeaveGroup" in _line(lines, "rdk-b (127.0.0.1) left")
    assert "rdk-a (127.0.0.1) left (LeaveGroup" in _line(lines, "rdk-a (127.0.0.1) left")
    assert lines.index(_line(lines, "rdk-b (127.0.0.1) left")) < lines.index(
        _line(lines, "rdk-a (127.0.0.1) left")
    )
    # rdk-a, alone in generation 2, commits while rdk-b's join holds the group in a rebalance.
    assert "by rdk-a at generation 2" in _line(lines, "REBALANCE_IN_PROGRESS:")
    # Only the group asked for.
    assert not any(line.startswith("group ") for line in lines[1:])


def test_static_restart_and_kip848_stories(
    groups_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """static-members: rdk-static-b closes and comes back under inst-b (the mock rebalances);
    consumer-protocol: rdk-848-a then rdk-848-b join, b leaves, a leaves."""
    lines = _story(groups_out, "g-static", capsys)
    back = _line(lines, "came back")
    assert "static member inst-b restarted" in back and "rdk-static-b" in back
    assert not any("evicted" in line for line in lines)
    lines = _story(groups_out, "g-848", capsys)
    assert lines[0].startswith("group g-848 (consumer protocol")
    assert "rdk-848-a (127.0.0.1) joined" in _line(lines, "first generation seen")
    assert "epoch" in _line(lines, "rdk-848-b (127.0.0.1) joined")
    # A KIP-848 member leaves with a heartbeat of epoch -1, and the story says so.
    left = [
        line
        for line in lines
        if " left (ConsumerGroupHeartbeat with epoch -1" in line and "members:" not in line
    ]
    assert [("rdk-848-b" in left[0]), ("rdk-848-a" in left[1])] == [True, True]


def test_every_group_is_told_and_errors_are_clear(
    groups_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = story.tell(groups_out)
    told = {line.split()[1] for line in text.splitlines() if line.startswith("group ")}
    assert {"g-classic", "g-kpy", "g-static", "g-static-kpy", "g-coop", "g-848"} <= told
    assert cli.main(["groups", str(groups_out), "--group", "no-such-group"]) == 2
    assert "no group 'no-such-group'" in capsys.readouterr().err
    assert cli.main(["groups", str(tmp_path)]) == 2
    assert "is not the output of kwire decode" in capsys.readouterr().err
    # The `kwire` entry point routes to the same front end.
    done = subprocess.run(
        [sys.executable, "-m", "kwire", "groups", str(groups_out), "--group", "g-kpy"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("group g-kpy (classic protocol")


def test_report_renders_every_group_in_a_headless_browser(groups_out: Path, tmp_path: Path) -> None:
    page_file = tmp_path / "report.html"
    assert cli.main(["report", str(groups_out), "-o", str(page_file)]) == 0
    text = page_file.read_text()
    assert "<script" in text and "cdn.plot.ly" not in text.split("</script>")[-1]
    groups = list(story.load(groups_out))
    charts = text.count('class="plotly-graph-div"')

    def read(page: Any) -> dict[str, Any]:
        return {
            "drawn": page.eval_on_selector_all(
                "#overview .js-plotly-plot",
                "els => els.map(e => [e.id, e.querySelectorAll('.main-svg .trace').length])",
            ),
            "overview_rows": page.eval_on_selector_all(
                "#overview table.overview-groups tr td:first-child a",
                "els => els.map(e => [e.textContent, e.getAttribute('href')])",
            ),
            "targets": page.eval_on_selector_all(
                "section.group", "els => els.map(e => '#' + e.id)"
            ),
            "shown": page.eval_on_selector_all(
                "section.group", "els => els.map(e => e.dataset.group)"
            ),
            "lanes": page.eval_on_selector_all(
                "#timeline-0 .ytick text", "els => els.map(e => e.textContent)"
            ),
            "story_text": page.inner_text("section.group[data-group='g-classic'] pre.story"),
        }

    seen, errors = read_page(
        page_file,
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
        read,
    )
    drawn, overview_rows, targets = seen["drawn"], seen["overview_rows"], seen["targets"]
    shown, lanes, story_text = seen["shown"], seen["lanes"], seen["story_text"]
    assert errors == []
    assert shown == groups
    # The overview comes first: every chart drawn with its series, every group a row that links
    # to its section.
    assert [d[0] for d in drawn] == [
        f"overview-{c}" for c in ("rate", "latency", "errors", "records", "bytes", "delivery")
    ]
    assert all(traces > 0 for _, traces in drawn), drawn
    # One timeline per group, and a share group's redeliveries besides
    # (tests/groups/test_share_truth.py reads those).
    loaded = story.load(groups_out)
    share = [gid for gid in groups if loaded[gid].protocol == "share"]
    assert charts == len(drawn) + len(groups) + len(share)
    assert [name for name, _ in overview_rows] == groups
    assert [href for _, href in overview_rows] == targets
    first = loaded[groups[0]]
    assert sorted(lanes) == sorted(
        story.Names(first.rows("members"))(m["member_id"]) for m in first.rows("members")
    )
    assert "rdk-b (127.0.0.1) joined" in story_text


GROUND_TRUTH = sorted(ROOT.glob("tests/data/capture/mock_gt_*.json"))
# How the story words each cause and ending (kwire/groups/story.py); the truth says which happened.
CAUSE_WORDS = {
    "first_join": ("first generation seen",),
    # A static member that restarts under its instance id "came back".
    "member_joined": ("joined", "came back: static member"),
    "member_left": ("left (",),
    "member_evicted": ("evicted",),
    # LeaveGroup v1 carries no reason: the wire shows a leave (tests/groups/test_group_truth.py).
    "poll_timeout": ("left (",),
}
ENDING_WORDS = {
    "active_at_end": "active at end",
    "left": ": left at",
    "left_poll_timeout": ": left at",  # the same: no reason on the wire
    "evicted": ": evicted at",
    "static_restart": ": static restart at",
    "fenced": ": fenced",
}


def _truth_groups() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in GROUND_TRUTH:
        for g in json.loads(path.read_text())["group_truth"]["groups"]:
            out.append((f"{path.stem}:{g['group_id']}", g))
    return out


@pytest.mark.parametrize(
    ("label", "truth"), _truth_groups(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_the_story_tells_what_the_ground_truth_scenario_did(
    label: str, truth: dict[str, Any], groups_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each generation the scenario went through is told, with its cause and the member that
    caused it; each member id ends as the clients' own account says."""
    lines = _story(groups_out, truth["group_id"], capsys)
    word = "epoch" if truth["protocol"] == "consumer" else "generation"
    client = {m["name"]: m["client_id"] for m in truth["members"]}
    for gen in truth.get("generations", []):
        line = _line(lines, f"{word} {gen['generation']}: ")
        if gen.get("round", 1) > 1 and "second round of generation" in line:
            continue  # the same rebalance again, said so (its cause is the round before's)
        assert any(w in line for w in CAUSE_WORDS[gen["cause"]]), (gen, line)
        if gen["cause"] != "first_join" and gen.get("cause_member"):
            assert client[gen["cause_member"]] in line, (gen, line)
    for m in truth["members"]:
        for member_id, ending in m["endings"].items():
            line = _line(lines, f"member {member_id}")
            assert ENDING_WORDS[ending] in line, (m["name"], member_id, ending, line)
