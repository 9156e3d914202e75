"""``stoker simulate`` and ``stoker plan --simulate`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.cli import app

SPEC = """
name = "cli-sim"
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 16
[workload]
kind = "pretrain"
params = "8B"
tokens_per_s_per_gpu = 9000
seq_len = 4096
global_batch = 512
dataset_size = "4 TB"
sharding = "fsdp"
[reliability]
gpu_mtbf = "1000 h"
[run]
length = "5 d"
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "job.toml"
    path.write_text(SPEC + extra)
    return str(path)


def test_json_is_the_simulation_document(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    result = runner.invoke(
        app,
        ["simulate", write(tmp_path), "--runs", "4", "--seed", "3", "--json", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "stoker.simulation/1"
    assert doc["runs"] == 4 and doc["seed"] == 3 and doc["gpus"] == 128
    assert doc["spec"] == "job.toml"
    assert doc["days"] == pytest.approx(5, rel=0.01)
    saved = json.loads(out.read_text())
    assert saved["goodput"] == doc["goodput"] and saved["timeline"] == doc["timeline"]


def test_the_spec_table_sets_the_knobs(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, '\n[simulate]\nstragglers = "none"\nfailure_shape = 0.8\n')
    result = runner.invoke(app, ["simulate", path, "--runs", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["knobs"]["stragglers"] == "none" and doc["knobs"]["failure_shape"] == 0.8
    assert doc["lost_hours"]["stragglers"]["p95"] == 0


def test_the_table_shows_plan_and_distribution(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["simulate", write(tmp_path), "--runs", "3", "--days", "2"])
    assert result.exit_code == 0, result.output
    for words in ("goodput", "GPU busy", "P50", "Time lost by cause", "stragglers", "3 runs"):
        assert words in result.stdout, words


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("straggler_cv = 2.5", "simulate.straggler_cv"),
        ('lustre_first_reads = "lazy"', "simulate.lustre_first_reads"),
        ("shape = 0.7", "simulate.shape"),
    ],
)
def test_a_bad_knob_exits_2_naming_it(
    runner: CliRunner, tmp_path: Path, table: str, key: str
) -> None:
    result = runner.invoke(app, ["simulate", write(tmp_path, f"\n[simulate]\n{table}\n")])
    assert result.exit_code == 2
    assert key in result.stderr and "Traceback" not in result.output
    assert str(tmp_path / "job.toml") in result.stderr


def test_bad_options_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    for args, words in (
        (["--runs", "0"], "runs"),
        (["--days", "0"], "days"),
        (["--out", str(tmp_path / "missing" / "x.json")], "--out"),
    ):
        result = runner.invoke(app, ["simulate", write(tmp_path), "--runs", "1", *args])
        assert result.exit_code == 2, (args, result.output)
        assert words in result.stderr


def test_plan_simulate_puts_the_distribution_beside_the_plan(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = write(tmp_path, '\n[simulate]\nstragglers = "none"\n')
    result = runner.invoke(app, ["plan", "--simulate", "--runs", "3", path])
    assert result.exit_code == 0, result.output
    assert "stoker plan" in result.stdout and "Plan (closed form) beside" in result.stdout
    result = runner.invoke(app, ["plan", "--simulate", "--runs", "3", "--json", path])
    doc = json.loads(result.stdout)
    assert doc["simulation"]["goodput"]["plan"] == doc["checkpoints"]["goodput"]
    assert doc["simulation"]["runs"] == 3
    result = runner.invoke(app, ["plan", "--simulate", "--markdown", "--runs", "2", path])
    assert "| goodput |" in result.stdout
    result = runner.invoke(app, ["plan", "--simulate", "--compare", path, path])
    assert result.exit_code == 2 and "--compare" in result.stderr
