"""The docs pictures of `kwire report`: renders the report of a decode job's OUT and
screenshots one part of it in headless chromium (Playwright drives Debian's `chromium`).

    python scripts/report_picture.py OUT --part overview -o docs/images/report-overview.png

`--part` is `overview` or a group id (that group's section). docs/images/report-overview.png is
`kwire decode tests/data/capture/mock_gt_progress.pcap -o OUT` then this script on OUT;
docs/images/report-share.png is `kwire decode tests/data/capture/kafka_share_stall_kill.pcap -o OUT`
then this script with `--part share-stall-g`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

CHROMIUM = os.environ.get("KWIRE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--no-first-run"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="a decode job's output directory")
    parser.add_argument("--part", default="overview", help="overview, or a group id")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1200)
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from kwire.groups.report import write_report

    with tempfile.TemporaryDirectory() as tmp:
        page_file = write_report(args.out, Path(tmp) / "report.html")
        charts = page_file.read_text().count('class="plotly-graph-div"')
        selector = (
            "#overview" if args.part == "overview" else f"section.group[data-group='{args.part}']"
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = browser.new_page(viewport={"width": args.width, "height": 900})
                page.goto(page_file.as_uri())
                page.wait_for_function(
                    f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
                    timeout=120_000,
                )
                element = page.query_selector(selector)
                if element is None:
                    print(f"report_picture: no {selector} in the report", file=sys.stderr)
                    return 2
                element.screenshot(path=args.output)
            finally:
                browser.close()
    print(f"report_picture: {args.part} -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
