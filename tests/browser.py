"""Pages opened in a real headless browser (Debian's chromium driven by Playwright), for the
report tests: the test skips, saying why, where this machine has neither."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

CHROMIUM = os.environ.get("KWIRE_CHROMIUM", "/usr/bin/chromium")
# Flags for a root, offline, headless chromium (no sandbox as root; no calls home).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

T = TypeVar("T")


def read_page(page_file: Path, ready: str, read: Callable[[Any], T]) -> tuple[T, list[str]]:
    """Opens `page_file`, waits (up to 60 s) until the JavaScript expression `ready` is true,
    and returns what `read(page)` gives and the page's errors (uncaught exceptions and console
    errors)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no browser at {CHROMIUM} (apt-get install chromium); the page was written")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(page_file.as_uri())
            page.wait_for_function(ready, timeout=60_000)
            return read(page), errors
        finally:
            browser.close()
