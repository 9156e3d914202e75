"""Who writes a checkpoint: every rank its shard with FSDP, one replica the whole state with DDP."""

import copy
import tomllib
from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import plan_job
from stoker.plan.checkpoints import TORCH_SAVE_UNKNOWN

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


def writers(cat, mode, tier="lustre", sharding="fsdp"):
    spec = copy.deepcopy(SPEC)
    spec["workload"].update(sharding=sharding)
    spec["checkpoints"].update(tier=tier, writers=mode, mode="sync")
    return plan_job(spec, cat).checkpoints


def test_one_writer_is_held_to_one_streams_rate(cat):
    stream = cat.lustre_common.stream_write  # 14.3 GB/s over MLPerf's 8 writers of Llama 3 8B
    assert stream == pytest.approx(14.3e9 / 8, rel=0.01)
    single = writers(cat, "single")
    assert (single.writer_streams, single.writer_vms) == (1, 1)
    # A lone writer is a torch.save: its serialising stream is slower than the raw one.
    torch_save = cat.writers.torch_save_write
    assert single.write_bps == pytest.approx(min(stream, torch_save))
    assert single.write_limit == "streams"
    per_vm = writers(cat, "per_vm")
    assert per_vm.writer_streams == per_vm.writer_vms == 64
    per_gpu = writers(cat, "per_gpu")
    assert per_gpu.writer_streams == 512
    # 64 streams are no longer what binds: the volume (sized to take one in 2 min) is.
    assert per_vm.write_limit == "provisioned" and per_vm.write_s < single.write_s / 4
    assert per_gpu.write_s == pytest.approx(per_vm.write_s)
    assert "one writer process (a single torch.save)" in single.writers


def test_a_stream_limit_no_source_publishes_is_said_to_be_unknown(cat):
    nvme = writers(cat, "per_vm", tier="nvme")
    assert nvme.stream_write_bps is None
    assert nvme.unknown == ["one writer's rate to ND H100 v5 local NVMe"]
    # A lone torch.save is held to its published serialising rate, whatever the NVMe's stream;
    # without that figure its rate is unknown too.
    bare = cat.model_copy(update={"writers": None})
    single = writers(bare, "single", tier="nvme")
    assert single.unknown == ["one writer's rate to ND H100 v5 local NVMe", TORCH_SAVE_UNKNOWN]
    assert writers(cat, "single", tier="nvme").unknown == []
    plan = plan_job(
        {**copy.deepcopy(SPEC), "checkpoints": {"tier": "nvme", "writers": "per_vm"}}, cat
    )
    warn = next(w for w in plan.warnings if w.startswith("checkpoint write time"))
    assert "is a lower bound" in warn and "stoker bench storage" in warn
    # One stream per GPU (FSDP): the unknown is recorded, but not worth a warning.
    spec = copy.deepcopy(SPEC)
    spec["checkpoints"].update(tier="nvme")
    per_gpu = plan_job(spec, cat)
    assert per_gpu.checkpoints.unknown and per_gpu.checkpoints.writer_streams == 512
    assert not any(w.startswith("checkpoint write time") for w in per_gpu.warnings)


def test_the_writers_default_follows_the_sharding(cat):
    assert writers(cat, "auto").writer_streams == 512  # FSDP: every rank its shard
    assert writers(cat, "auto", sharding="ddp").writer_streams == 8  # one replica: tp 8 x pp 1
