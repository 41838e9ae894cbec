"""`kwire groups OUT [--group G]` and `kwire report OUT -o report.html`: the front ends of the
group tables the decode job wrote under OUT/groups/ (`kwire` with any other arguments runs the
decode job itself)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from groups.story import StoryError

COMMANDS = ("groups", "report")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kwire", description="What happened to each consumer group, from a decode job's OUT."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    story = sub.add_parser("groups", help="print each group's story in plain sentences")
    story.add_argument("out", help="the decode job's output directory (holding groups/)")
    story.add_argument("--group", help="only this group id")
    report = sub.add_parser("report", help="write one self-contained HTML report")
    report.add_argument("out", help="the decode job's output directory (holding groups/)")
    report.add_argument("-o", "--output", default="report.html", help="HTML file to write")
    report.add_argument("--group", help="only this group id")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "groups":
            from groups.story import tell

            sys.stdout.write(tell(args.out, args.group))
        else:
            from groups.report import write_report

            path = write_report(args.out, Path(args.output), args.group)
            print(f"report -> {path}")
    except StoryError as e:
        print(f"kwire {args.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
