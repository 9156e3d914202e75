"""The ``stoker`` command through typer's CliRunner: output formats, errors, catalog listing.

conftest.py points STOKER_PRICES at a missing file, unsets STOKER_CATALOG and sets COLUMNS=200.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.cli import app

EXAMPLES = Path(__file__).parent.parent / "examples"
PRETRAIN = str(EXAMPLES / "pretrain-64vm.toml")
FINETUNE = str(EXAMPLES / "finetune-1vm.toml")

BAD_UNIT = """
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 4

[workload]
step_time = "1 s"
seq_len = 4096
dataset_size = "60 TBB"
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _ok(result) -> None:
    assert result.exit_code == 0, (result.output, result.exception)


# ------------------------------------------------------------------------------------ plan


def test_plan_json(runner):
    result = runner.invoke(app, ["plan", PRETRAIN, "--json"])
    _ok(result)
    plan = json.loads(result.stdout)
    assert plan["schema"] == "stoker.plan/1"
    assert plan["name"] == "pretrain-70b-64vm"
    assert plan["vm_size"] == "ND96isr_H100_v5"
    assert plan["nodes"] == 64
    assert plan["gpus"] == 512


def test_plan_markdown(runner):
    result = runner.invoke(app, ["plan", PRETRAIN, "--markdown"])
    _ok(result)
    assert result.stdout.startswith("# stoker plan:")
    assert result.stdout.startswith("# stoker plan: pretrain-70b-64vm")


def test_plan_rich_report(runner):
    result = runner.invoke(app, ["plan", PRETRAIN])
    _ok(result)
    assert "pretrain-70b-64vm" in result.stdout


def test_plan_compare_json(runner):
    result = runner.invoke(app, ["plan", "--compare", FINETUNE, PRETRAIN, "--json"])
    _ok(result)
    plans = json.loads(result.stdout)
    assert isinstance(plans, list)
    assert len(plans) == 2
    assert [p["name"] for p in plans] == ["finetune-8b-1vm", "pretrain-70b-64vm"]
    assert {p["schema"] for p in plans} == {"stoker.plan/1"}


def test_plan_compare_markdown(runner):
    result = runner.invoke(app, ["plan", "--compare", FINETUNE, PRETRAIN, "--markdown"])
    _ok(result)
    assert "finetune-8b-1vm" in result.stdout
    assert "pretrain-70b-64vm" in result.stdout


def test_plan_two_specs_without_compare_is_an_error(runner):
    result = runner.invoke(app, ["plan", FINETUNE, PRETRAIN])
    assert result.exit_code == 2
    assert "--compare" in result.stderr


def test_plan_json_and_markdown_together_is_an_error(runner):
    result = runner.invoke(app, ["plan", PRETRAIN, "--json", "--markdown"])
    assert result.exit_code == 2 and "pick one output" in result.stderr


def test_plan_compare_needs_two(runner):
    result = runner.invoke(app, ["plan", "--compare", PRETRAIN])
    assert result.exit_code == 2
    assert "two or more" in result.stderr


def test_bad_spec_is_one_clear_error(runner, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BAD_UNIT, "utf-8")
    result = runner.invoke(app, ["plan", str(path), "--json"])
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error:")
    assert "workload.dataset_size" in result.stderr
    assert "'60 TBB'" in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""  # nothing that looks like a plan


def test_missing_spec_file(runner, tmp_path):
    result = runner.invoke(app, ["plan", str(tmp_path / "absent.toml")])
    assert result.exit_code == 2
    assert "error:" in result.stderr
    assert "absent.toml" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_vm_size_error_names_the_file(runner, tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(
        BAD_UNIT.replace('dataset_size = "60 TBB"\n', "").replace(
            "ND96isr_H100_v5", "ND96isr_H100"
        ),
        "utf-8",
    )
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert "cluster.vm_size" in result.stderr
    assert "ND96isr_H100_v5" in result.stderr  # the known sizes are listed
    assert str(path) in result.stderr  # which of the files given is wrong


def test_error_message_is_printed_verbatim(runner, tmp_path):
    # Error text is data, not rich markup: brackets from the message must survive.
    path = tmp_path / "section.toml"
    path.write_text("[gpus.H100]\nprice = 1\n", "utf-8")
    result = runner.invoke(app, ["catalog", "--catalog", str(path)])
    assert result.exit_code == 2
    assert "unknown section [gpus]" in result.stderr


def test_error_message_with_markup_like_text_does_not_crash(runner, tmp_path):
    path = tmp_path / "markup.toml"
    path.write_text(
        BAD_UNIT.replace('dataset_size = "60 TBB"\n', "").replace("ND96isr_H100_v5", "[/bold]"),
        "utf-8",
    )
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.exception
    assert "[/bold]" in result.stderr


def test_error_message_is_not_wrapped_on_narrow_output(runner, tmp_path, monkeypatch):
    # Output that is not a terminal (CI logs, pipes) gets rich's default 80 columns; a one-line
    # message must stay one line there, or grep and log readers see it cut in two.
    monkeypatch.setenv("COLUMNS", "80")
    path = tmp_path / "bad.toml"
    path.write_text(BAD_UNIT, "utf-8")
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    wanted = (
        "workload.dataset_size: cannot read '60 TBB' as a size; "
        "write it like '28 TiB', '2.5 PB' or '512 MB'"
    )
    assert wanted in result.stderr.splitlines()


# ------------------------------------------------------------------------------------ catalog


def test_catalog_json_lists_sourced_dated_figures(runner):
    result = runner.invoke(app, ["catalog", "--json"])
    _ok(result)
    data = json.loads(result.stdout)
    assert data["catalog"]["as_of"] == "2026-12-07"  # the built-in catalog's date
    figures = data["figures"]
    assert len(figures) > 200
    for row in figures:
        assert row["source"]
        dt.date.fromisoformat(row["date"])
    entries = {row["entry"] for row in figures}
    assert {"vm.ND96isr_H100_v5", "fabric", "lustre.AMLFS-Durable-Premium-500"} <= entries


def test_catalog_entry_filter(runner):
    result = runner.invoke(app, ["catalog", "--entry", "vm.ND96isr_H100_v5"])
    _ok(result)
    assert "ND96isr_H100_v5" in result.stdout
    assert "ND96isr_H200_v5" not in result.stdout
    assert "fabric" not in result.stdout
    assert "cd-ndh100v5" in result.stdout


def test_catalog_entry_filter_json(runner):
    result = runner.invoke(app, ["catalog", "--entry", "lustre", "--json"])
    _ok(result)
    figures = json.loads(result.stdout)["figures"]
    assert figures
    assert {row["entry"].split(".")[0] for row in figures} == {"lustre", "lustre_common"}


def test_catalog_table_keeps_entry_names_whole_on_narrow_output(runner, monkeypatch):
    # `stoker catalog | grep ND96isr_H100_v5` must find the rows; rich's default width for a
    # pipe is 80 columns.
    monkeypatch.setenv("COLUMNS", "80")
    result = runner.invoke(app, ["catalog", "--entry", "vm.ND96isr_H100_v5"])
    _ok(result)
    assert "vm.ND96isr_H100_v5" in result.stdout


def test_catalog_with_override_file(runner, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("[vm.ND96isr_H100_v5]\nprice_per_hour = 77.5\n", "utf-8")
    result = runner.invoke(
        app, ["catalog", "--catalog", str(path), "--entry", "vm.ND96isr_H100_v5", "--json"]
    )
    _ok(result)
    rows = {r["field"]: r for r in json.loads(result.stdout)["figures"]}
    assert rows["price_per_hour"]["value"] == 77.5
    assert rows["price_per_hour"]["source"] == "user:mine.toml"
    assert rows["gpus"]["source"] == "cd-ndh100v5"


def test_catalog_table_notes_sizes_without_price(runner):
    result = runner.invoke(app, ["catalog"])
    _ok(result)
    assert "no public price" in result.stderr
    assert "ND96asr_v4" in result.stderr


def test_catalog_sources(runner):
    result = runner.invoke(app, ["catalog", "sources"])
    _ok(result)
    assert "cd-ndh100v5" in result.stdout
    assert "2025-09-02" in result.stdout


def test_catalog_sources_json(runner):
    result = runner.invoke(app, ["catalog", "sources", "--json"])
    _ok(result)
    sources = json.loads(result.stdout)
    assert sources["cd-ndh100v5"]["published"] == "2025-09-02"
    assert sources["retail-api-h100-eastus"]["verified"] is False
    for key, src in sources.items():
        assert src["published"] or src["retrieved"], key


def _folder_or_binary(tmp_path: Path, kind: str) -> Path:
    if kind == "folder":
        (tmp_path / "adir").mkdir()
        return tmp_path / "adir"
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xfb\xff\x00name = 1\n")
    return path


@pytest.mark.parametrize("kind", ["folder", "binary"])
@pytest.mark.parametrize("where", ["spec", "--catalog", "--measured"])
def test_unreadable_inputs_are_one_clear_error(runner, tmp_path, kind, where):
    bad = str(_folder_or_binary(tmp_path, kind))
    args = {"spec": [bad], "--catalog": [PRETRAIN, "-c", bad], "--measured": [PRETRAIN, where, bad]}
    result = runner.invoke(app, ["plan", *args[where]])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error:") and bad in result.stderr
    assert ("folder" if kind == "folder" else "not UTF-8") in result.stderr


@pytest.mark.parametrize("interval", ["0", '"-5 s"'])
def test_zero_interval_is_refused_not_a_traceback(runner, tmp_path, interval):
    path = tmp_path / "job.toml"
    path.write_text(
        Path(PRETRAIN).read_text().replace('interval = "auto"', f"interval = {interval}")
    )
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    assert "checkpoints.interval: must be greater than zero, or 'auto'" in result.stderr


def test_zero_gpu_mtbf_in_a_catalog_override_is_refused(runner, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("[reliability]\ngpu_mtbf = 0\n")
    result = runner.invoke(app, ["plan", PRETRAIN, "-c", str(path)])
    assert result.exit_code == 2, result.output
    assert "reliability.gpu_mtbf: Input should be greater than 0" in result.stderr


def _extreme_spec(tmp_path, step_time: str, gpu_mtbf: str | None, tokens: str = "2T") -> str:
    """The 70B example with a step time, GPU MTBF and run length pushed to the edges."""
    text = (
        Path(PRETRAIN)
        .read_text()
        .replace("tokens_per_s_per_gpu = 1100", f'step_time = "{step_time}"')
    )
    text = text.replace('tokens = "2T"', f'tokens = "{tokens}"')
    if gpu_mtbf is not None:
        text += f'\n[reliability]\ngpu_mtbf = "{gpu_mtbf}"\n'
    path = tmp_path / "extreme.toml"
    path.write_text(text)
    return str(path)


def _strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"{constant} in the plan's JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("step_time", "gpu_mtbf", "tokens"),
    [
        ("1e300 s", "1e300 h", "2T"),  # a step near the float limit, a job that never fails
        ("1e-9 s", None, "2T"),  # a step far below any GPU's
        ("1 s", None, "1e30"),  # a run of 1e23 steps
    ],
    ids=["huge-step", "tiny-step", "huge-run"],
)
def test_plan_json_never_writes_infinity(runner, tmp_path, step_time, gpu_mtbf, tokens):
    # Inputs the plan accepts, however extreme, give a plan whose JSON has only finite numbers.
    path = _extreme_spec(tmp_path, step_time, gpu_mtbf, tokens)
    result = runner.invoke(app, ["plan", path, "--json"])
    _ok(result)
    plan = _strict_json(result.stdout)
    assert "Infinity" not in result.stdout and "NaN" not in result.stdout
    assert plan["run"]["wall_s"] > 0


def test_plan_json_refuses_a_figure_that_overflows(runner, tmp_path):
    # 1e23 steps of 1e300 s: the VM-hours overflow. The plan refuses, naming the figure, and
    # writes no JSON at all rather than an Infinity.
    path = _extreme_spec(tmp_path, "1e300 s", "1e300 h", "1e30")
    result = runner.invoke(app, ["plan", path, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "plan.cost.gpu_vm_hours comes out as inf" in result.stderr
    assert "out of range" in result.stderr and result.stderr.count("\n") == 1


def test_plan_refuses_a_step_the_jobs_mtbf_cannot_save(runner, tmp_path):
    # A 1e300 s step at the catalog's GPU MTBF: the job fails long before a step ends, which
    # the renewal model refuses on reliability.gpu_mtbf before any figure overflows.
    path = _extreme_spec(tmp_path, "1e300 s", None)
    result = runner.invoke(app, ["plan", path, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "reliability.gpu_mtbf" in result.stderr


def test_emit_json_refuses_nan(capsys):
    from stoker.cli._output import emit_json

    with pytest.raises(ValueError):
        emit_json({"x": float("nan")})


@pytest.mark.parametrize("sub", ["prices", "sources"])
def test_catalog_option_before_a_subcommand_applies_to_it(runner, tmp_path, sub):
    path = tmp_path / "mine.toml"
    path.write_text("[vm.ND96asr_v4]\nprice_per_hour = 27.20\n", "utf-8")
    result = runner.invoke(app, ["catalog", "--catalog", str(path), sub, "--json"])
    _ok(result)
    data = json.loads(result.stdout)
    if sub == "prices":
        row = next(r for r in data if r["vm_size"] == "ND96asr_v4")
        assert row["price_per_hour"] == 27.2 and row["source"] == "user:mine.toml"
    else:
        assert "user:mine.toml" in data


def test_catalog_unknown_entry_is_an_error_listing_entries(runner):
    result = runner.invoke(app, ["catalog", "--entry", "nope"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --entry nope: no catalog entry")
    assert "vm.ND96isr_H100_v5" in result.stderr and result.stdout == ""
