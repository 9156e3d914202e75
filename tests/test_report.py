"""stoker report: the HTML it writes from a plan, a simulation and measured records (what each
chart says, computed from the data), the record format, the CLI, and bad input as one line."""

from __future__ import annotations

import copy
import html as html_lib
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stoker
from report_inputs import ROOT, SIMULATION, checkpoint_record, ledger_record, plan_json
from stoker.cli import app
from stoker.errors import ReportError

runner = CliRunner()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("report-inputs")
    return {
        "plan": plan_json(folder),
        "ledger": ledger_record(folder),
        "ckpt": checkpoint_record(folder),
    }


def _readings(html: str) -> dict[str, str]:
    found = re.findall(
        r'<figure class="chart" id="([^"]+)">.*?<p class="reading">(.*?)</p>', html, re.S
    )
    return {key: html_lib.unescape(text) for key, text in found}


def test_a_plan_and_a_simulation_make_one_self_contained_page(inputs, tmp_path):
    out = tmp_path / "r.html"
    result = stoker.report(out, plan=inputs["plan"], simulation=SIMULATION)
    html = out.read_text()
    assert result.size_bytes == out.stat().st_size < 5e6
    assert result.sections["Plan"] == ["step-split", "tier-options", "goodput-interval", "bill"]
    assert result.sections["Simulation"] == ["sim-goodput", "sim-lost", "sim-timeline"]
    # Nothing outside the file: no script, no link, no remote image or font.
    assert "<script" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "@import" not in html and "url(http" not in html
    assert html.count("<svg") == len(result.charts) == 7


def test_each_reading_is_computed_from_its_data(inputs, tmp_path):
    plan = json.loads(inputs["plan"].read_text())
    sim = json.loads(SIMULATION.read_text())
    stoker.report(tmp_path / "a.html", plan=plan, simulation=sim)
    a = _readings((tmp_path / "a.html").read_text())
    assert f"{plan['checkpoints']['goodput'] * 100:.1f} %" in a["goodput-interval"]
    assert f"{plan['step']['gpu_utilization'] * 100:.0f} %" in a["step-split"]
    assert f"{sim['goodput']['p50'] * 100:.1f} %" in a["sim-goodput"]
    top = max(sim["lost_hours"], key=lambda c: sim["lost_hours"][c]["p50"])
    assert f"{top.replace('_', ' ').capitalize()} loses the most time" in a["sim-lost"]
    events = len(sim["timeline"])
    assert f"{events:,} events" in a["sim-timeline"]

    # Change the data, and what the charts say changes with it.
    sim2 = copy.deepcopy(sim)
    sim2["goodput"]["p50"] = 0.5
    sim2["lost_hours"]["stragglers"] = {"p5": 90.0, "p50": 100.0, "p95": 120.0}
    sim2["timeline"] = sim["timeline"][:10]
    plan2 = copy.deepcopy(plan)
    plan2["checkpoints"]["goodput"] = 0.8
    stoker.report(tmp_path / "b.html", plan=plan2, simulation=sim2)
    b = _readings((tmp_path / "b.html").read_text())
    assert "50.0 %" in b["sim-goodput"]
    assert "Stragglers loses the most time: 100 h" in b["sim-lost"]
    assert "10 events" in b["sim-timeline"]
    assert "80.0 %" in b["goodput-interval"]


def test_measured_records_are_charted_beside_the_plan(inputs, tmp_path):
    out = tmp_path / "m.html"
    result = stoker.report(out, plan=inputs["plan"], measured=[inputs["ledger"], inputs["ckpt"]])
    assert result.sections["Measured runs"] == ["ledger-0", "utilization", "checkpoint-blocking"]
    readings = _readings(out.read_text())
    # The step split shows the plan's bar and the measured one side by side.
    led = json.loads(inputs["ledger"].read_text())["summary"]
    assert "Planned:" in readings["step-split"]
    assert f"compute {led['compute_share'] * 100:.0f} %" in readings["step-split"]
    plan = json.loads(inputs["plan"].read_text())
    expects = f"the plan expects {plan['step']['gpu_utilization'] * 100:.0f} %"
    assert expects in readings["utilization"]
    ckpt = json.loads(inputs["ckpt"].read_text())
    assert f"median of {ckpt['summary']['saves']}" in readings["checkpoint-blocking"]
    assert "the plan's save blocks" in readings["checkpoint-blocking"]


def test_the_ledger_record_follows_the_loop_over_time(inputs):
    m = stoker.report.read_measured(inputs["ledger"])
    assert m.source == "ledger" and m.summary["steps"] == 39  # the first step is left out
    data = m.series["data_share"].values
    assert len(data) >= 3
    shares = [
        sum(
            m.series[f"{p}_share"].values[i]
            for p in ("data", "copy", "compute", "exposed_comm", "checkpoint", "other")
        )
        for i in range(len(data))
    ]
    assert all(abs(s - 1) < 0.02 for s in shares)  # each window's phases add up to its steps
    assert data[-1] > data[0]  # the loader slowed down halfway: the data wait grew


def test_pdf_and_png_of_the_same_charts(inputs, tmp_path):
    import matplotlib

    before = dict(matplotlib.rcParams)
    result = stoker.report(
        tmp_path / "r.html",
        measured=[inputs["ledger"]],
        pdf=tmp_path / "r.pdf",
        png=tmp_path / "png",
    )
    pdf = (tmp_path / "r.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-"
    # the step split, the ledger over time, utilization: a page and a PNG each
    assert len(re.findall(rb"/Type /Page\b", pdf)) == len(result.charts) == 3
    assert [p.stem for p in result.png] == ["step-split", "ledger-0", "utilization"]
    assert dict(matplotlib.rcParams) == before  # a notebook's own settings are left alone
    assert "<text" in (tmp_path / "r.html").read_text()  # text stays text in the SVG
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in result.png)


def test_cli_writes_the_report_and_says_where(inputs, tmp_path):
    out = tmp_path / "cli.html"
    res = runner.invoke(
        app,
        [
            "report",
            "--out",
            str(out),
            "--plan",
            str(inputs["plan"]),
            "--simulation",
            str(SIMULATION),
            "--measured",
            str(inputs["ledger"]),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["path"] == str(out) and out.exists()
    assert summary["size_bytes"] == out.stat().st_size
    assert len(summary["charts"]) == 9


@pytest.mark.parametrize(
    ("write", "flag", "message"),
    [
        (None, "--plan", "no such plan file"),
        ("not json", "--plan", "not JSON"),
        ('[{"schema": "stoker.plan/1"}]', "--plan", "a list of plans"),
        ('{"kind": "stoker.simulation/0"}', "--simulation", "not a simulation"),
        ('{"kind": "stoker.simulation/1", "lost_hours": [1]}', "--simulation", "lost_hours"),
        ('{"kind": "stoker.measured/1", "source": "nvml"}', "--measured", "source 'nvml'"),
        (
            '{"kind": "stoker.measured/1", "source": "ledger", "series": {"x": {"unit": "s", '
            '"t_s": [1, 2], "values": [1]}}}',
            "--measured",
            "series.x",
        ),
    ],
)
def test_a_bad_input_is_one_line_naming_the_file(tmp_path, write, flag, message):
    bad = tmp_path / "in.json"
    if write is not None:
        bad.write_text(write)
    res = runner.invoke(app, ["report", "--out", str(tmp_path / "r.html"), flag, str(bad)])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and message in lines[0], res.stderr
    assert not (tmp_path / "r.html").exists()


def test_nothing_to_report_and_an_unwritable_out(tmp_path, inputs):
    with pytest.raises(ReportError, match="nothing to report"):
        stoker.report(tmp_path / "r.html")
    (tmp_path / "file").write_text("")
    with pytest.raises(ReportError, match="is a file, not a folder"):
        stoker.report(tmp_path / "file" / "r.html", measured=inputs["ledger"])


def test_stage_record_follows_the_copy_and_is_charted(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(20):
        (src / f"f{i}.bin").write_bytes(bytes([i]) * 200_000)
    record = tmp_path / "stage.json"
    res = runner.invoke(app, ["stage", str(src), str(tmp_path / "dst"), "--record", str(record)])
    assert res.exit_code == 0, res.output
    m = stoker.report.read_measured(record)
    assert m.source == "stage" and m.summary["bytes_copied"] == 20 * 200_000
    assert m.series["throughput_bps"].values and min(m.series["throughput_bps"].values) >= 0
    result = stoker.report(tmp_path / "r.html", measured=[record])
    assert result.sections["Measured runs"] == ["throughput"]


def test_bench_storage_record_is_charted_beside_the_plans_need(tmp_path, inputs):
    target = tmp_path / "tier"
    target.mkdir()
    record = tmp_path / "storage.json"
    res = runner.invoke(
        app,
        [
            "bench",
            "storage",
            str(target),
            "--size",
            "4MiB",
            "--block",
            "1MiB",
            "--jobs",
            "1",
            "--record",
            str(record),
        ],
    )
    assert res.exit_code == 0, res.output
    m = stoker.report.read_measured(record)
    rates = {k: v for k, v in m.summary.items() if k.endswith("_bps")}
    assert m.source == "storage" and "seq-read_1MiB_x1_cold_bps" in rates
    assert all(v > 0 for v in rates.values())
    out = tmp_path / "r.html"
    stoker.report(out, plan=inputs["plan"], measured=[record])
    reading = _readings(out.read_text())["storage"]
    best = max(rates.values())
    assert f"{best / 1e6:,.0f} MB/s" in reading and "the plan needs" in reading


def test_a_plan_with_its_simulation_and_an_inference_plan(tmp_path):
    from stoker import plan_job

    # stoker plan --simulate --json carries the simulation inside the plan: both are drawn.
    spec = str(ROOT / "examples" / "pretrain-64vm.toml")
    res = runner.invoke(app, ["plan", spec, "--simulate", "--runs", "2", "--json"])
    assert res.exit_code == 0, res.output
    both = tmp_path / "plan-sim.json"
    both.write_text(res.stdout)
    result = stoker.report(tmp_path / "a.html", plan=both)
    assert result.sections["Simulation"] == ["sim-goodput", "sim-lost", "sim-timeline"]

    plan = plan_job(ROOT / "examples" / "inference-cache.toml").to_dict()
    result = stoker.report(tmp_path / "b.html", plan=plan)
    assert result.sections["Plan"] == ["cold-start", "bill"]  # no step, data or checkpoints
    reading = _readings((tmp_path / "b.html").read_text())["cold-start"]
    chosen = plan["inference"]["chosen"]
    assert f"each from {chosen} in" in reading


def test_a_data_stall_is_read_with_the_cheapest_tier_that_removes_it(inputs, tmp_path):
    plan = json.loads(inputs["plan"].read_text())
    step = plan["step"]
    step["data_stall_s"] = step["total_s"] * 0.11 / 0.89  # the GPU waits 11 % of each step
    step["total_s"] += step["data_stall_s"]
    for option, (stall, price) in zip(
        plan["data"]["options"],
        [(1.5, None), (0.0, 0.0), (0.0, 40.0), (0.0, 90.0), (0.3, 20.0)],
        strict=False,
    ):
        option.update(stall_per_step_s=stall, price_per_hour_usd=price, fits=True)
    plan["data"]["options"][1]["fits"] = False  # NVMe cannot hold it
    plan["data"]["chosen"] = plan["data"]["options"][0]  # Blob, which stalls
    stoker.report(tmp_path / "r.html", plan=plan)
    readings = _readings((tmp_path / "r.html").read_text())
    lustre = plan["data"]["options"][2]["name"]
    assert "waits 11.0 % on data" in readings["step-split"]
    assert f"{lustre} removes the data wait" in readings["step-split"]
    assert "stall 1.5 s a step; files would stall the GPU 300 ms a step" in readings["tier-options"]
