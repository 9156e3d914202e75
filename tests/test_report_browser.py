"""stoker report as a person sees it: Debian's Chromium (`make chromium`), headless, driven by
Playwright, opens the file; no console error, every chart drawn, nothing fetched from outside,
a screenshot kept in the test's output folder. The driver's own checks are shown to fail on a
page that errs.

Playwright launches the system's Chromium (``executable_path``): no browser is downloaded
(``playwright install`` is never run)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stoker
from browser import open_page
from report_inputs import SIMULATION, checkpoint_record, ledger_record, plan_json


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
