"""Who writes a checkpoint: every rank its shard with FSDP, one replica the whole state with DDP."""

import copy
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import plan_job

SPEC = tomllib.loads((Path(__file__).parent.parent / "examples/pretrain-64vm.toml").read_text())


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def one_b(cat, sharding, mode="sync", tier="nvme", tp=1):
    spec = copy.deepcopy(SPEC)
    spec["data"]["blob_accounts"] = 4  # 4 x 7.5 GB/s ingress: more than one VM's NIC
    spec["workload"].update(params="1B", tp=tp, sharding=sharding)
    spec["checkpoints"].update(mode=mode, tier=tier)
    return plan_job(spec, cat)


def test_ddp_writes_the_whole_state_from_one_vm(cat):
    vm = cat.vm["ND96isr_H100_v5"]
    ddp, fsdp = one_b(cat, "ddp").checkpoints, one_b(cat, "fsdp").checkpoints
    assert (ddp.writer_ranks, ddp.writer_vms) == (1, 1)
    assert (fsdp.writer_ranks, fsdp.writer_vms) == (512, 64)
    assert ddp.write_bps == pytest.approx(vm.nvme_write)  # one VM's NVMe, not 64
    assert ddp.write_s == pytest.approx(64 * fsdp.write_s)
    assert "DDP" in ddp.writers and "assumed" in ddp.writers


def test_ddp_async_snapshot_is_copied_by_the_writing_ranks_only(cat):
    ddp = one_b(cat, "ddp", mode="async").checkpoints
    assert ddp.blocking_s == pytest.approx(14e9 / 51.2e9)  # the whole 14 GB through one GPU
    tp8 = one_b(cat, "ddp", mode="async", tp=8).checkpoints
    assert tp8.writer_ranks == 8 and tp8.blocking_s == pytest.approx(14e9 / 8 / 51.2e9)


def test_ddp_blob_checkpoint_goes_through_one_nic(cat):
    vm = cat.vm["ND96isr_H100_v5"]
    ddp = one_b(cat, "ddp", tier="blob").checkpoints
    assert ddp.write_bps == pytest.approx(vm.frontend_nic)
    assert one_b(cat, "fsdp", tier="blob").checkpoints.write_bps == pytest.approx(4 * 7.5e9)
    assert "1 VM, 1 writer stream (DDP" in plan_reason(one_b(cat, "ddp"))


def plan_reason(plan):
    return next(r.reason for r in plan.recommendations if r.need == "checkpoints")
