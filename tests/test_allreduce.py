"""``stoker bench allreduce``: nccl-tests' formulas, and a real sweep of two CPU ranks (gloo)
under torchrun whose busbw is recomputed by hand from the time it reports."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from stoker.catalog import load_catalog
from stoker.cli.bench_allreduce import allreduce
from stoker.errors import StokerError
from stoker.measure import collectives as mc
from stoker.plan.interconnect import single_vm_busbw

WORKER = Path(__file__).with_name("measure_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
TORCHRUN += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n}
FACTOR["reduce_scatter"] = FACTOR["all_gather"]


def _check_rows(result: dict) -> None:
    """busbw == S / t x factor(n), by hand, for every row (nccl-tests doc/PERFORMANCE.md)."""
    n = result["world_size"]
    assert result["rows"]
    for row in result["rows"]:
        by_hand = row["size"] / row["time_s"] * FACTOR[row["collective"]](n)
        assert row["time_s"] > 0
        assert row["algbw"] == pytest.approx(row["size"] / row["time_s"], rel=1e-12)
        assert row["busbw"] == pytest.approx(by_hand, rel=1e-12), row
        assert row["wrong"] == 0, row


def test_bus_factors_are_nccl_tests():
    # doc/PERFORMANCE.md: all-reduce 2(n-1)/n; reduce-scatter and all-gather (n-1)/n.
    for n in (2, 4, 8, 16):
        for name in mc.COLLECTIVES:
            row = mc.make_row(name, 1 << 30, n, 0.01)
            assert row.busbw == pytest.approx((1 << 30) / 0.01 * FACTOR[name](n))


def test_a_row_as_all_reduce_perf_prints_it():
    # 8 ranks, 128 MiB all-reduce in 1183.3 us: algbw 113.43 GB/s, busbw x 14/8 = 198.50 GB/s.
    row = mc.make_row("all_reduce", 134217728, 8, 1183.3e-6)
    assert round(row.algbw / 1e9, 2) == 113.43
    assert round(row.busbw / 1e9, 2) == 198.50
    # The same time as an all-gather of 128 MiB in total: x 7/8.
    assert round(mc.make_row("all_gather", 134217728, 8, 1183.3e-6).busbw / 1e9, 2) == 99.25
    assert mc.make_row("all_reduce", 8, 1, 1e-6).busbw == 0.0  # one rank moves nothing


def test_sizes_and_counts_follow_nccl_tests():
    assert mc.sweep_sizes(8, 128 * 2**20, 4)[:3] == [8, 32, 128]
    assert len(mc.sweep_sizes(8, 128 * 2**20, 4)) == 13
    assert mc.sweep_sizes(8, 128 * 2**20, 2)[-1] == 128 * 2**20
    # all-reduce: S = count x 4; all-gather / reduce-scatter: S = count per rank x ranks x 4.
    assert mc.nccl_count("all_reduce", 10, 4) == (2, 8)
    assert mc.nccl_count("all_gather", 1024, 4) == (64, 1024)
    assert mc.nccl_count("reduce_scatter", 8, 4) == (1, 16)  # at least one element per rank
    with pytest.raises(StokerError):
        mc.sweep_sizes(64, 8, 2)


def test_prediction_is_the_plans():
    cat = load_catalog(defaults=False)
    vm = cat.vm["ND96isr_H100_v5"]
    t = mc.predicted_seconds("all_reduce", 8e9, 8, 8, vm, cat.fabric)
    bus = 8e9 / t * FACTOR["all_reduce"](8)
    assert bus == pytest.approx(single_vm_busbw(vm, cat.fabric))
    # Two VMs: the ring crosses InfiniBand, so all-gather is slower than inside one VM.
    one = mc.predicted_seconds("all_gather", 1e9, 8, 8, vm, cat.fabric)
    two = mc.predicted_seconds("all_gather", 1e9, 16, 8, vm, cat.fabric)
    assert 0 < one < two
    assert mc.predicted_seconds("all_reduce", 1e9, 1, 1, vm, cat.fabric) == 0.0


def test_without_torchrun_it_says_how_to_launch(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    app = typer.Typer()
    app.command()(allreduce)
    run = CliRunner().invoke(app, ["--iters", "1"])
    assert run.exit_code == 2
    assert "torchrun --nproc-per-node N" in run.output and "WORLD_SIZE" in run.output


def test_bad_options_are_refused_before_the_sweep(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    app = typer.Typer()
    app.command()(allreduce)
    run = CliRunner().invoke(app, ["--vm", "ND96_nope"])
    assert run.exit_code == 2 and "unknown VM size 'ND96_nope'" in run.output
    run = CliRunner().invoke(app, ["--op", "all_to_all"])
    assert run.exit_code == 2 and "unknown collective 'all_to_all'" in run.output


def test_two_cpu_ranks_cli_busbw_matches_the_hand_computation():
    args = ["-m", "stoker.cli.bench_allreduce", "--json", "-b", "8", "-e", "1MiB", "-f", "8"]
    args += ["--iters", "3", "--warmup", "1", "--vm", "ND96isr_H100_v5"]
    run = subprocess.run([*TORCHRUN, *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)  # rank 0 alone prints
    assert (result["backend"], result["device"], result["world_size"]) == ("gloo", "cpu", 2)
    assert set(result["methods"]) == set(mc.COLLECTIVES) and not result["unsupported"]
    _check_rows(result)
    assert {r["size"] for r in result["rows"]} == {8, 64, 512, 4096, 32768, 262144}
    assert result["floor_busbw"] == 460e9 and result["published_busbw"] == 478.9e9
    assert all(r["predicted_busbw"] > 0 for r in result["rows"])


def test_every_rank_gets_the_same_sweep_and_the_list_forms_work(tmp_path: Path):
    run = subprocess.run(
        [*TORCHRUN, str(WORKER), "sweep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["sweep"]["rows"] == ranks[1]["sweep"]["rows"]  # times reduced across ranks
    for r in ranks:
        _check_rows(r["sweep"])
        _check_rows(r["fallback"])
        assert r["fallback"]["methods"] == {
            "all_reduce": "all_reduce",
            "all_gather": "all_gather (list)",
            "reduce_scatter": "reduce_scatter (list)",
        }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE=abc: torchrun sets a whole number >= 1"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0: torchrun sets a whole number >= 1"),
        ({"WORLD_SIZE": "2"}, r"RANK=\(unset\): torchrun sets .* below WORLD_SIZE \(2\)"),
        ({"WORLD_SIZE": "2", "RANK": "2"}, r"RANK=2: .* below WORLD_SIZE \(2\)"),
    ],
    ids=["abc", "zero", "no-rank", "rank-too-big"],
)
def test_a_hand_set_torchrun_environment_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, env: dict, message: str
) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(StokerError, match=message):
        mc.init_from_env()


def test_a_size_too_large_to_allocate_names_the_option() -> None:
    op = mc._Op("all_reduce", None, True, True)
    with pytest.raises(StokerError, match=r"cannot allocate .* use a smaller --maxbytes"):
        mc._buffers(op, 1 << 50, "cpu", 2, 0)


def test_wrong_results_fail_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """#wrong above 0 exited 0, though nccl-tests counts it a failure, whatever the speed."""
    from azurite import free_port

    for name, value in {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    real = mc.sweep

    def one_wrong(*args: object, **kwargs: object) -> mc.SweepResult:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        rows = (*result.rows[:-1], dataclasses.replace(result.rows[-1], wrong=3))
        return dataclasses.replace(result, rows=rows)

    monkeypatch.setattr(mc, "sweep", one_wrong)
    app = typer.Typer()
    app.command()(allreduce)
    run = CliRunner().invoke(app, ["-b", "8", "-e", "64", "--iters", "1", "--warmup", "0"])
    assert run.exit_code == 1 and "3 wrong elements (#wrong)" in run.output, run.output


def test_the_sweep_reports_its_steps_and_checks_across_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API twin refused a bad `across` only in the CLI (it averaged 'med'), and the sweep
    showed no progress."""
    import torch.distributed as dist

    from azurite import free_port

    for name, value in {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    assert mc.init_from_env()
    try:
        with pytest.raises(StokerError, match="--across 'med'"):
            mc.sweep(["all_reduce"], [8, 64], 1, 0, across="med")  # type: ignore[arg-type]
        heard: list[tuple[str, int, int]] = []
        result = mc.sweep(
            ["all_reduce", "all_gather"], [8, 64], 1, 0, progress=lambda *a: heard.append(a)
        )
        assert [(done, total) for _, done, total in heard] == [(0, 4), (1, 4), (2, 4), (3, 4)]
        assert heard[0][0] == "all_reduce 8 B" and len(result.rows) == 4
    finally:
        dist.destroy_process_group()
