"""A headless browser for the report's tests and benchmark: Debian's Chromium (`make chromium`),
driven by Playwright (``executable_path``: no browser is downloaded, ``playwright install`` is
never run). ``open_page`` reports what a person would have seen: console errors, each chart's
drawn marks, every URL the page asked for, the load time."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

CHROMIUM = "/usr/bin/chromium"  # Debian's package (`make chromium`)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # no update checks, no safe-browsing lists: the page's
    "--disable-component-update",  # own requests are the only ones
    "--disable-sync",
]

# For each chart: its id, and the SVG marks (shapes and text) that take up space on screen.
_CHARTS_JS = """
[...document.querySelectorAll('figure.chart')].map(fig => {
  const svg = fig.querySelector('svg');
  if (!svg) return {id: fig.id, width: 0, height: 0, marks: 0, text: 0};
  const box = svg.getBoundingClientRect();
  const drawn = [...svg.querySelectorAll('path, rect, use, line, polyline, circle, ellipse')]
    .filter(e => { const b = e.getBoundingClientRect(); return b.width > 0 || b.height > 0; });
  const text = [...svg.querySelectorAll('text')].filter(e => e.textContent.trim()).length;
  return {id: fig.id, width: box.width, height: box.height, marks: drawn.length, text: text,
          title: (fig.querySelector('h3') || {}).textContent || '',
          reading: (fig.querySelector('.reading') || {}).textContent || ''};
})
"""


@dataclass
class PageView:
    console_errors: list[str] = field(default_factory=list)
    charts: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    load_s: float = 0.0  # from the request to the load event


def open_page(url: str, screenshot: Path | None = None, width: int = 1000) -> PageView:
    """Load ``url`` in a fresh headless Chromium and report what a person would have seen."""
    assert Path(CHROMIUM).exists(), "no Chromium: run `make chromium` (Debian's package, as root)"
    view = PageView()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            # console.error/assert and the browser's own error log (a failed load, a CSP refusal)
            page.on(
                "console",
                lambda msg: (
                    msg.type in ("error", "assert")
                    and view.console_errors.append(f"console.{msg.type}: {msg.text}")
                ),
            )
            page.on("pageerror", lambda exc: view.console_errors.append(f"uncaught: {exc}"))
            page.on("request", lambda request: view.requests.append(request.url))
            started = time.perf_counter()
            page.goto(url, wait_until="load", timeout=60_000)
            view.load_s = time.perf_counter() - started
            page.wait_for_timeout(200)  # late console messages land before we look
            view.charts = page.evaluate(_CHARTS_JS) or []
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=screenshot, full_page=True)
        finally:
            browser.close()
    return view
