"""`kwire report OUT -o report.html`: one self-contained HTML page about every consumer group.

First the overview (kwire.groups.overview): every group in one table, and the whole capture's
charts over time. Then, per group: its story (kwire.groups.story), a timeline drawn with plotly (members as lanes: each
member's time in the group as a bar coloured by how it ended, its commits as ticks, failed
commits in red, its ending as a marker; generations as shaded bands labelled with their cause),
then its tables (generations, members, progress). Then the latency and client tables of the
whole capture. plotly's JavaScript is inlined once, so the page opens with no network.
"""

from __future__ import annotations

import html
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kwire.groups import story
from kwire.groups.story import Group, Names, Row

ENDING_COLOURS = {
    "active_at_end": "#2e7d32",
    "left": "#1565c0",
    "left_poll_timeout": "#ef6c00",
    "evicted": "#c62828",
    "fenced": "#6a1b9a",
    "static_restart": "#00838f",
    "unknown": "#757575",
}
ENDING_SYMBOLS = {
    "left": "triangle-right",
    "left_poll_timeout": "hourglass",
    "evicted": "x",
    "fenced": "square-x",
    "static_restart": "circle-open",
}
CAUSE_COLOURS = {
    "member_evicted": "rgba(198,40,40,0.16)",
    "poll_timeout": "rgba(239,108,0,0.16)",
    "member_left": "rgba(21,101,192,0.12)",
}
BAND = "rgba(120,120,120,0.12)"

CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
pre.story { background: #f6f6f6; padding: .8em; white-space: pre-wrap; font-size: .85em; }
table { border-collapse: collapse; font-size: .8em; margin: .5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #eee; } nav a { margin-right: 1em; }
"""


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, datetime):
        return story.clock(v)
    if isinstance(v, float):
        return f"{v:.1f}"
    if isinstance(v, list):
        return html.escape(", ".join(str(x) for x in v))
    return html.escape(str(v))


def table_html(rows: list[Row], columns: list[str], cls: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows
    )
    return f'<table class="{cls}"><tr>{head}</tr>{body}</table>'


def timeline(group: Group) -> Any:
    """The group's timeline as a plotly figure."""
    import plotly.graph_objects as go

    names = Names(group.rows("members"))
    members = group.rows("members")
    lanes = [names(m["member_id"]) for m in members]
    fig = go.Figure()
    for m, lane in zip(members, lanes):
        start = m["first_seen"]
        end = m["ending_at"] or m["last_seen"]
        if start is None or end is None:
            continue
        colour = ENDING_COLOURS.get(m["ending"], "#757575")
        fig.add_trace(
            go.Scatter(
                x=[start, end],
                y=[lane, lane],
                mode="lines",
                line={"color": colour, "width": 12},
                name=m["ending"].replace("_", " "),
                legendgroup=m["ending"],
                showlegend=False,
                hovertext=f"{lane}: {m['ending']} ({m['ending_evidence'] or ''})",
                hoverinfo="text",
            )
        )
        if m["ending"] in ENDING_SYMBOLS and m["ending_at"] is not None:
            fig.add_trace(
                go.Scatter(
                    x=[m["ending_at"]],
                    y=[lane],
                    mode="markers",
                    marker={"symbol": ENDING_SYMBOLS[m["ending"]], "size": 14, "color": colour},
                    name=m["ending"].replace("_", " "),
                    hovertext=f"{lane} {m['ending']}: {m['ending_evidence'] or ''}",
                    hoverinfo="text",
                    showlegend=False,
                )
            )
    by_member: dict[tuple[str, bool], list[Row]] = defaultdict(list)
    for c in group.rows("commits"):
        by_member[(names(c["member_id"]), bool(c["error"]))].append(c)
    for (lane, failed), rows in sorted(by_member.items()):
        fig.add_trace(
            go.Scatter(
                x=[c["ts"] for c in rows],
                y=[lane] * len(rows),
                mode="markers",
                marker={
                    "symbol": "line-ns-open",
                    "size": 16,
                    "color": "#c62828" if failed else "#424242",
                },
                name="failed commit" if failed else "commit",
                legendgroup="failed" if failed else "commit",
                showlegend=False,
                hovertext=[
                    f"{c['topic']}[{c['partition']}] @ {c['offset']}"
                    + (f" {c['error']}" if c["error"] else "")
                    for c in rows
                ],
                hoverinfo="text",
            )
        )
    word = "gen" if group.protocol == "classic" else "epoch"
    for g in group.rows("generations"):
        start = g["started_at"]
        end = g["completed_at"] or start
        if start is None:
            continue
        fig.add_vrect(
            x0=start,
            x1=end,
            fillcolor=CAUSE_COLOURS.get(g["cause"], BAND),
            line_width=1,
            line_color="rgba(80,80,80,0.4)",
            # Labels sit above the lanes, slanted so that close generations stay readable.
            annotation={
                "text": f"{word} {g['generation']}: {g['cause'].replace('_', ' ')}",
                "x": start,
                "xanchor": "left",
                "y": 1.0,
                "yref": "paper",
                "yanchor": "bottom",
                "textangle": -25,
                "font": {"size": 10},
                "showarrow": False,
            },
        )
    fig.update_layout(
        height=170 + 38 * max(1, len(set(lanes))),
        margin={"l": 10, "r": 10, "t": 90, "b": 30},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(lanes))},
        xaxis={"title": "time (UTC)"},
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig


OUTCOME_COLOURS = {
    "lock_expired": "#ef6c00",
    "session_closed": "#6a1b9a",
    "released": "#1565c0",
    "rejected": "#c62828",
    "ack_refused": "#ad1457",
}


def redeliveries(group: Group) -> Any:
    """A share group's deliveries over time as a plotly figure: per time bucket, first deliveries
    and redeliveries stacked, and the attempts that ended without an acceptance (released, lock
    expired, session closed, rejected, refused) as markers by outcome."""
    import plotly.graph_objects as go

    share = group.share_tables()
    rows = [d for d in share.get("deliveries", []) if d["acquired_at"] is not None]
    fig = go.Figure()
    if rows:
        start = min(d["acquired_at"] for d in rows)
        end = max(d["acquired_at"] for d in rows)
        # About 60 buckets over the group's deliveries, at least 100 ms each.
        step = max(100_000, int((end - start).total_seconds() * 1e6 / 60))  # µs
        first: dict[datetime, int] = defaultdict(int)
        again: dict[datetime, int] = defaultdict(int)
        for d in rows:
            us = int((d["acquired_at"] - start).total_seconds() * 1e6) // step * step
            at = start + timedelta(microseconds=us)
            (again if (d["delivery_count"] or 1) > 1 else first)[at] += 1
        xs = sorted(set(first) | set(again))
        fig.add_trace(go.Bar(x=xs, y=[first[x] for x in xs], name="first deliveries"))
        fig.add_trace(
            go.Bar(
                x=xs,
                y=[again[x] for x in xs],
                name="redeliveries",
                marker={"color": "#ef6c00"},
            )
        )
        fig.update_layout(barmode="stack")
    for outcome, colour in OUTCOME_COLOURS.items():
        ended = [d for d in share.get("deliveries", []) if d["outcome"] == outcome]
        ended = [d for d in ended if d["outcome_at"] is not None]
        if not ended:
            continue
        fig.add_trace(
            go.Scatter(
                x=[d["outcome_at"] for d in ended],
                y=[0] * len(ended),
                mode="markers",
                marker={"color": colour, "size": 9, "symbol": "x"},
                name=outcome.replace("_", " "),
                hovertext=[
                    f"{d['topic']}-{d['partition']} @ {d['offset']} delivery {d['delivery_count']}"
                    + (f": {d['evidence']}" if d["evidence"] else "")
                    for d in ended
                ],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 30},
        xaxis={"title": "time (UTC)"},
        yaxis={"title": "deliveries"},
        plot_bgcolor="white",
        legend={"orientation": "h"},
    )
    return fig


def _share_sections(g: Group, i: int) -> list[str]:
    share = g.share_tables()
    parts = ["<h3>deliveries and redeliveries</h3>"]
    parts.append(
        redeliveries(g).to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"redeliveries-{i}",
            config={"displaylogo": False},
        )
    )
    parts.append("<h3>share progress</h3>")
    parts.append(
        table_html(
            share.get("progress", []),
            [
                "topic",
                "partition",
                "status",
                "start_offset",
                "described_start_offset",
                "in_flight",
                "available",
                "lag",
                "deliveries",
                "redeliveries",
                "acknowledged",
                "archived",
                "poison_records",
                "last_ack_error",
            ],
            "share-progress",
        )
    )
    troubled = sorted(
        (
            r
            for r in share.get("records", [])
            if (r["attempts"] or 0) > 1 or r["final_state"] != "acknowledged"
        ),
        key=lambda r: (str(r["topic"]), r["partition"], r["offset"]),
    )
    if troubled:
        parts.append("<h3>records that came back or did not end accepted</h3>")
        parts.append(
            table_html(
                troubled[:500],
                [
                    "topic",
                    "partition",
                    "offset",
                    "attempts",
                    "members",
                    "final_state",
                    "archived_reason",
                    "inferred",
                    "releases",
                    "lock_expiries",
                    "session_releases",
                    "refused_acks",
                ],
                "share-records",
            )
        )
    parts.append("<h3>share sessions</h3>")
    parts.append(
        table_html(
            share.get("sessions", []),
            [
                "member_id",
                "client_id",
                "broker",
                "first_seen",
                "first_epoch",
                "last_epoch",
                "fetches",
                "acknowledges",
                "records_acquired",
                "ending",
                "ended_at",
                "ending_evidence",
                "errors_seen",
            ],
            "share-sessions",
        )
    )
    return parts


def overview_html(out: Path, groups: dict[str, Group]) -> list[str]:
    """The overview section: every group in one table, then the capture's charts
    (kwire.groups.overview). Carries plotly's JavaScript, inlined once for the whole page."""
    from kwire.groups import overview

    index = {gid: i for i, gid in enumerate(groups)}
    rows = overview.group_rows(groups)
    for r in rows:
        lag = r["time lag at end"]
        r["time lag at end"] = (
            None if lag is None else "0 (caught up)" if lag == 0 else story.span(lag)
        )
    columns = list(rows[0]) if rows else ["group"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            (
                f'<td><a href="#g-{index[r["group"]]}">{html.escape(r["group"])}</a></td>'
                if c == "group"
                else f"<td>{_cell(r.get(c))}</td>"
            )
            for c in columns
        )
        + "</tr>"
        for r in rows
    )
    parts = [
        '<section id="overview">',
        "<h2>Overview</h2>",
        "<p>Every group at the end of the capture (time lag: the age of the oldest record the "
        "group had not consumed, on its worst partition), then the whole capture over time.</p>",
        f'<table class="overview-groups"><tr>{head}</tr>{body}</table>',
    ]
    plotly_js: bool | str = True
    for chart_id, title, fig in overview.figures(out):
        parts.append(f'<h3 id="chart-{chart_id}">{html.escape(title)}</h3>')
        if isinstance(fig, str):
            parts.append(f'<p class="no-chart" data-chart="{chart_id}">{html.escape(fig)}</p>')
            continue
        parts.append(
            fig.to_html(
                full_html=False,
                include_plotlyjs=plotly_js,
                div_id=f"overview-{chart_id}",
                config={"displaylogo": False},
            )
        )
        plotly_js = False
    if plotly_js is True:  # no chart: the group timelines still need plotly
        parts.append(_plotly_only())
    parts.append("</section>")
    return parts


def _plotly_only() -> str:
    import plotly.offline

    return f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>'


def render(out: str | Path, group: str | None = None) -> str:
    """The report as one HTML string."""
    groups = story.load(out, group)
    if group is not None and not groups:
        raise story.StoryError(f"no group {group!r} in {Path(out) / 'groups'}")
    base = Path(out) / "groups"
    latency = story._read(base / "latency", None) if (base / "latency").exists() else []
    clients = story._read(base / "clients", None) if (base / "clients").exists() else []
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>kwire: consumer groups in {html.escape(str(out))}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>What happened to each consumer group</h1>",
        f"<p>From the decode job's output <code>{html.escape(str(out))}</code>: "
        f"{len(groups)} group(s). Lanes are members (bar colour: how the member's time ended; "
        "ticks: commits, red when they failed); shaded bands are generations, labelled with "
        "their cause (red: eviction, orange: poll timeout, blue: a member left).</p>",
        "<nav>"
        + '<a href="#overview">overview</a>'
        + "".join(f'<a href="#g-{i}">{html.escape(gid)}</a>' for i, gid in enumerate(groups))
        + "</nav>",
    ]
    parts.extend(overview_html(Path(out), groups))
    first = False  # the overview inlined plotly's JavaScript
    for i, (gid, g) in enumerate(groups.items()):
        parts.append(f'<section class="group" id="g-{i}" data-group="{html.escape(gid)}">')
        parts.append(f"<h2>{html.escape(gid)}</h2>")
        parts.append(f'<pre class="story">{html.escape(chr(10).join(story.tell_group(g)))}</pre>')
        fig = timeline(g)
        parts.append(
            fig.to_html(
                full_html=False,
                include_plotlyjs=True if first else False,
                div_id=f"timeline-{i}",
                config={"displaylogo": False},
            )
        )
        first = False
        parts.append("<h3>generations</h3>")
        parts.append(
            table_html(
                g.rows("generations"),
                [
                    "generation",
                    "started_at",
                    "duration_ms",
                    "members",
                    "cause",
                    "cause_member_id",
                    "cause_evidence",
                    "outcome",
                ],
                "generations",
            )
        )
        parts.append("<h3>members</h3>")
        parts.append(
            table_html(
                g.rows("members"),
                [
                    "member_id",
                    "group_instance_id",
                    "client_id",
                    "client_addr",
                    "client_software",
                    "first_generation",
                    "last_generation",
                    "ending",
                    "ending_at",
                    "ending_evidence",
                    "errors_seen",
                ],
                "members",
            )
        )
        if g.share_tables():
            parts.extend(_share_sections(g, i))
        if g.rows("progress"):
            parts.append("<h3>progress</h3>")
            parts.append(
                table_html(
                    g.rows("progress"),
                    [
                        "topic",
                        "partition",
                        "status",
                        "last_offset",
                        "commits",
                        "lag",
                        "time_lag_ms",
                        "timestamp_lag_ms",
                    ],
                    "progress",
                )
            )
        parts.append("</section>")
    parts.append("<h2>Latency per api, version, broker and client</h2>")
    parts.append(
        table_html(
            sorted(latency, key=lambda r: (r["api_key"], r["api_version"], str(r["client_id"]))),
            [
                "api_name",
                "api_version",
                "broker",
                "client_id",
                "requests",
                "errors",
                "p50_ms",
                "p99_ms",
                "max_ms",
                "note",
            ],
            "latency",
        )
    )
    parts.append("<h2>Clients</h2>")
    named = [c for c in clients if c["software_name"] or c["member_ids"]]
    parts.append(
        table_html(
            sorted(named, key=lambda r: str(r["first_seen"])),
            [
                "client_id",
                "client_addr",
                "software_name",
                "software_version",
                "first_seen",
                "member_ids",
                "group_ids",
            ],
            "clients",
        )
    )
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(out: str | Path, path: Path, group: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(out, group), encoding="utf-8")
    return path
