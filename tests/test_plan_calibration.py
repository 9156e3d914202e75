"""stoker plan --measured: measured figures replace the catalog's, and the plan shows both."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.errors import SpecError
from stoker.plan import plan_job
from stoker.plan.checkpoints import TORCH_SAVE_UNKNOWN

SPEC = Path(__file__).resolve().parents[1] / "examples" / "finetune-1vm.toml"
runner = CliRunner()


def _file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(data))
    return path


def test_measured_nvme_and_busbw_replace_the_catalog(tmp_path: Path) -> None:
    base = plan_job(SPEC)
    slow = plan_job(
        SPEC,
        measured=_file(
            tmp_path,
            {"nvme": {"read": "2 GB/s", "write": "1 GB/s"}, "allreduce": {"busbw": "300 GB/s"}},
        ),
    )
    rows = {c.figure: c for c in slow.calibration}
    assert rows["nvme_write"].measured_bps == 1e9 and rows["nvme_write"].catalog_bps == 33.9e9
    assert rows["scaleup_busbw_measured"].measured_bps == 300e9
    assert rows["scaleup_busbw_measured"].catalog_bps == 478.9e9  # the published one-VM figure
    assert slow.to_dict() != base.to_dict() and base.calibration == []
    assert slow.to_dict()["calibration"][0]["figure"] in rows


def test_rows_from_bench_storage_json(tmp_path: Path) -> None:
    rows = [
        {"test": "seq-read", "cache": "cold", "mb_per_s": 900.0},
        {"test": "seq-read", "cache": "cold", "mb_per_s": 1500.0},
        {"test": "seq-read", "cache": "warm", "mb_per_s": 9000.0},  # the page cache: not the disk
        {"test": "seq-write", "cache": "-", "mb_per_s": 700.0},
        {"test": "rand-read", "cache": "cold", "mb_per_s": 50.0},
    ]
    plan = plan_job(SPEC, measured=_file(tmp_path, {"nvme": rows}))
    got = {c.figure: c.measured_bps for c in plan.calibration}
    assert got == {"nvme_read": 1500e6, "nvme_write": 700e6}


def test_bad_measurement_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(
        SpecError, match="taken on ND96amsr_A100_v4; the job runs on ND96isr_H100_v5"
    ):
        plan_job(
            SPEC, measured=_file(tmp_path, {"vm": "ND96amsr_A100_v4", "nvme": {"read": "1 GB/s"}})
        )
    with pytest.raises(SpecError, match=r"nvme.read: 'fast' is not a rate"):
        plan_job(SPEC, measured=_file(tmp_path, {"nvme": {"read": "fast"}}))
    with pytest.raises(SpecError, match="unknown keys"):
        plan_job(SPEC, measured=_file(tmp_path, {"disk": 1}))


def test_cli_shows_catalog_and_measured_side_by_side(tmp_path: Path) -> None:
    path = _file(tmp_path, {"allreduce": {"busbw": "440 GB/s"}})
    out = runner.invoke(app, ["plan", str(SPEC), "--measured", str(path), "--markdown"])
    assert out.exit_code == 0, out.output
    assert "| scaleup_busbw_measured | 479 GB/s | 440 GB/s | 0.92x |" in out.stdout


def test_measured_busbw_drives_the_scale_up_level_and_is_labelled_measured(tmp_path: Path) -> None:
    base = plan_job(SPEC).interconnect
    slow = plan_job(SPEC, measured=_file(tmp_path, {"allreduce": {"busbw": "100 GB/s"}}))
    ic = slow.interconnect
    assert ic is not None and base is not None
    assert ic.comm_s > 4 * base.comm_s  # 100 GB/s instead of ~480 GB/s
    assert ic.single_vm_busbw_bps == pytest.approx(100e9, rel=0.01)
    assert ic.single_vm_busbw_measured_bps == 100e9
    assert ic.single_vm_busbw_published_bps == base.single_vm_busbw_published_bps
    assert ic.algorithm.startswith("NVLink 4 + NVSwitch (measured)")


@pytest.mark.parametrize("read", [0, "-5 GB/s", float("inf")])
def test_measured_rates_must_be_above_zero(tmp_path: Path, read: object) -> None:
    with pytest.raises(SpecError, match=r"nvme.read: .* is not a rate above zero"):
        plan_job(SPEC, measured=_file(tmp_path, {"nvme": {"read": read}}))


def _sweep(ranks: int = 8, backend: str = "nccl", device: str = "cuda:0") -> dict:
    """What `stoker bench allreduce --json` prints (trimmed to two rows)."""
    row = {"collective": "all_reduce", "time_s": 0.01, "algbw": 1.0, "wrong": 0}
    return {
        "backend": backend,
        "device": device,
        "world_size": ranks,
        "ranks_per_node": ranks,
        "across": "max",
        "rows": [row | {"size": 1 << 20, "busbw": 100e9}, row | {"size": 4 << 20, "busbw": 300e9}],
        "methods": {"all_reduce": "all_reduce"},
        "unsupported": {},
        "vm": None,
    }


@pytest.mark.parametrize("wrapped", [False, True])
def test_raw_bench_allreduce_output_is_a_calibration_file(tmp_path: Path, wrapped: bool) -> None:
    data = {"allreduce": _sweep()} if wrapped else _sweep()
    (row,) = plan_job(SPEC, measured=_file(tmp_path, data)).calibration
    assert row.figure == "scaleup_busbw_measured" and row.measured_bps == 300e9
    assert row.warning is None


def test_useless_allreduce_measurements_are_refused_or_flagged(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"measured on 1 rank\(s\).*nproc-per-node"):
        plan_job(SPEC, measured=_file(tmp_path, _sweep(ranks=1)))
    cpu = plan_job(SPEC, measured=_file(tmp_path, _sweep(2, "gloo", "cpu")))
    (row,) = cpu.calibration
    assert row.warning is not None and "gloo on cpu" in row.warning
    assert "GPU fabric" in row.warning and row.warning in cpu.warnings  # shown with the plan's
    with pytest.raises(SpecError, match=r"busbw: True is not a rate"):
        plan_job(SPEC, measured=_file(tmp_path, {"allreduce": {"busbw": True}}))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nvme": [{"test": "seq-read", "cache": "cold"}]}, r"nvme\[0\]: no 'mb_per_s'"),
        ({"nvme": ["x"]}, r"nvme\[0\]: 'x' is not a row"),
        ({"nvme": "20 GB/s"}, r"nvme: expected the rows of `stoker bench storage --json`"),
        ({"nvme": 5}, r"nvme: expected the rows"),
        (
            {"nvme": {"rd": "5 GB/s"}},
            r"nvme: unknown keys \['rd'\]; use read, write and/or stream_write",
        ),
        ({"nvme": {}}, r"nvme: empty"),
        ({}, "nothing measured; give nvme and/or allreduce"),
        ({"allreduce": 3}, r"allreduce: expected the output of `stoker bench allreduce"),
        ({"allreduce": [{"size": 8}]}, r"allreduce\[0\]: no 'busbw'"),
        ({"allreduce": [{"busbw": 8}]}, r"allreduce\[0\]: no 'size'"),
        ({"allreduce": {"busbw": 1e400}}, r"busbw: inf is not a rate above zero"),
        ({"allreduce": {"bw": "1 GB/s"}}, r"allreduce: unknown keys \['bw'\]; use busbw"),
        ({"vm": 5, "nvme": {"read": "1 GB/s"}}, r"vm: 5 is not a VM size name"),
    ],
    ids=lambda v: None if isinstance(v, str) else json.dumps(v).replace(" ", ""),
)
def test_malformed_measurement_files_give_one_clear_error(
    tmp_path: Path, data: object, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        plan_job(SPEC, measured=_file(tmp_path, data))
    out = runner.invoke(app, ["plan", str(SPEC), "--measured", str(_file(tmp_path, data))])
    assert out.exit_code == 2 and out.exception is None or isinstance(out.exception, SystemExit)
    assert "error:" in out.output and "Traceback" not in out.output


def test_vm_as_imds_writes_it_is_the_same_size(tmp_path: Path) -> None:
    data = {"vm": "Standard_ND96isr_H100_v5", "nvme": {"read": "1 GB/s"}}
    (row,) = plan_job(SPEC, measured=_file(tmp_path, data)).calibration
    assert row.figure == "nvme_read"


def test_a_one_job_write_is_one_checkpoint_stream(tmp_path: Path) -> None:
    # `stoker bench storage` runs jobs 1 and 4: the one-job write is one writer's rate, which no
    # source publishes for local NVMe; with it the plan knows a lone torch.save's write time.
    rows = [
        {"test": "seq-write", "cache": "-", "jobs": 1, "mb_per_s": 2000.0},
        {"test": "seq-write", "cache": "-", "jobs": 4, "mb_per_s": 7000.0},
    ]
    spec = tomllib.loads(SPEC.read_text())
    spec.setdefault("checkpoints", {}).update(tier="nvme", writers="single")
    # The raw stream alone: without the catalog's published torch.save rate, which binds first.
    cat = load_catalog(defaults=False).model_copy(update={"writers": None})
    before = plan_job(spec, cat).checkpoints
    after = plan_job(spec, cat, measured=_file(tmp_path, {"nvme": rows}))
    got = {c.figure: c.measured_bps for c in after.calibration}
    assert got == {"nvme_write": 7000e6, "nvme_stream_write": 2000e6}
    ck = after.checkpoints
    # The raw stream is known now; a torch.save's serialising rate is its own measurement
    # (stoker.measure.single_writer, tests/test_plan_writers.py).
    assert before.unknown and ck.unknown == [TORCH_SAVE_UNKNOWN]
    assert ck.stream_write_bps == 2e9 and ck.write_bps == 2e9 and ck.write_limit == "streams"
    also = plan_job(spec, cat, measured=_file(tmp_path, {"nvme": {"stream_write": "1 GB/s"}}))
    assert also.checkpoints.write_bps == 1e9
