"""stoker report as a person sees it: Debian's Chromium (`make chromium`), headless, driven by
Playwright, opens the file; no console error, every chart drawn, nothing fetched from outside,
a screenshot kept in the test's output folder. The driver's own checks are shown to fail on a
page that errs.

Playwright launches the system's Chromium (``executable_path``): no browser is downloaded
(``playwright install`` is never run)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

import stoker
from report_inputs import SIMULATION, checkpoint_record, ledger_record, plan_json

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
            page.goto(url, wait_until="load", timeout=60_000)
            page.wait_for_timeout(200)  # late console messages land before we look
            view.charts = page.evaluate(_CHARTS_JS) or []
            if screenshot is not None:
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=screenshot, full_page=True)
        finally:
            browser.close()
    return view


@pytest.fixture(scope="module")
def full_report(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, stoker.report.ReportResult]:
    folder = tmp_path_factory.mktemp("report-browser")
    measured = [ledger_record(folder), checkpoint_record(folder)]
    out = folder / "report.html"
    return out, stoker.report(out, plan=plan_json(folder), simulation=SIMULATION, measured=measured)


def test_chromium_opens_the_report_with_no_error_and_every_chart_drawn(full_report, tmp_path):
    out, result = full_report
    shot = tmp_path / "report.png"
    view = open_page(out.as_uri(), screenshot=shot)
    assert view.console_errors == []
    assert view.requests == [out.as_uri()]  # the page fetched nothing else: it works offline
    assert [c["title"] for c in view.charts] == result.charts
    assert len(view.charts) == 10  # plan 4, simulation 3, measured 3 (ledger, AU, blocking)
    for chart in view.charts:
        assert chart["width"] > 300 and chart["height"] > 100, chart["id"]
        assert chart["marks"] >= 5 and chart["text"] >= 3, chart["id"]  # axes, ticks, data
        assert chart["reading"].strip(), chart["id"]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


def test_the_driver_sees_console_errors_and_empty_charts(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body>"
        '<figure class="chart" id="empty"><h3>t</h3><svg viewBox="0 0 10 10"></svg></figure>'
        '<figure class="chart" id="none"><h3>t</h3></figure>'
        "<script>console.error('broken'); undefined_function();</script></body></html>"
    )
    view = open_page(page.as_uri())
    assert any("broken" in e for e in view.console_errors)
    assert any("undefined_function" in e for e in view.console_errors)
    assert [(c["id"], c["marks"]) for c in view.charts] == [("empty", 0), ("none", 0)]
