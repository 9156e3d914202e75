"""The checkpointer with Blob (a real Azurite) as the durable tier: the same commit protocol,
retention on both tiers, loading from Blob when the fast tier lost or damaged a shard, and Blob
errors reported to the training loop."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import torch

from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import step_dir
from stoker.errors import CheckpointError, StoreError
from stoker.store import open_store

SHARD = "shard-00000-of-00001.bin"


def _keys(url: str) -> list[str]:
    async def collect() -> list[str]:
        store = open_store(url)
        try:
            return sorted([i.key async for batch in store.list() for i in batch])
        finally:
            await store.close()

    return asyncio.run(collect())


def _state(step: int) -> dict:
    return {"w": torch.full((1 << 18,), float(step)), "step": step}


def test_saves_reach_blob_committed_and_pruned(blob_env: str, tmp_path: Path) -> None:
    url = f"{blob_env}/run1"
    with Checkpointer(tmp_path / "fast", url, keep_last=2) as ckpt:
        for step in (1, 2, 3):
            ckpt.save(step, _state(step))
        ckpt.wait()
        assert ckpt.last_save is not None and ckpt.last_save.durable_s is not None
        assert ckpt.last_save.durable_s >= ckpt.last_save.fast_s  # type: ignore[operator]
        listed = {i.step: i.tiers for i in ckpt.list()}
    assert listed == {
        3: {"fast": "ok", "durable": "ok"},
        2: {"fast": "ok", "durable": "ok"},
    }
    assert _keys(url) == [
        "latest.json",
        f"{step_dir(2)}/manifest.json",
        f"{step_dir(2)}/{SHARD}",
        f"{step_dir(3)}/manifest.json",
        f"{step_dir(3)}/{SHARD}",
        "stoker-claim.json",  # the prefix's owner (see _claim.py)
    ]


def test_lost_fast_tier_loads_from_blob_and_is_repaired(blob_env: str, tmp_path: Path) -> None:
    url, fast = f"{blob_env}/run2", tmp_path / "fast"
    with Checkpointer(fast, url) as ckpt:
        ckpt.save(5, _state(5))
    shutil.rmtree(fast)  # the VM was replaced: its NVMe is empty
    with Checkpointer(fast, url) as ckpt:
        restored = ckpt.load()
        assert (restored.step, restored.tier) == (5, "durable")
        assert torch.equal(restored.state["w"], _state(5)["w"])
        again = ckpt.load()
    assert (again.step, again.tier) == (5, "fast")  # pulled to the fast tier on the way


def test_corrupt_fast_shard_is_read_again_from_blob(blob_env: str, tmp_path: Path) -> None:
    url, fast = f"{blob_env}/run3", tmp_path / "fast"
    with Checkpointer(fast, url) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.save(2, _state(2))
    shard = fast / step_dir(2) / SHARD
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    with Checkpointer(fast, url) as ckpt:
        restored = ckpt.load()
    assert (restored.step, restored.tier) == (2, "durable")
    assert torch.equal(restored.state["w"], _state(2)["w"])


def test_blob_failure_reaches_the_training_loop(blob_env: str, tmp_path: Path) -> None:
    missing = "az://no-such-container/run"  # in the account of blob_env
    # made without the write probe, as if the container were deleted after the job started
    with Checkpointer(tmp_path / "fast", missing, check_writable=False) as ckpt:
        ckpt.save(1, _state(1))
        with pytest.raises((CheckpointError, StoreError), match="background checkpoint save"):
            ckpt.wait()
        # the fast tier still has it
        assert ckpt.load().step == 1


def test_dcp_save_reaches_blob_and_loads_back_from_it(blob_env: str, tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    url, fast = f"{blob_env}/dcp", tmp_path / "fast"
    state = {"w": torch.arange(12.0).reshape(3, 4), "epoch": 2}
    with Checkpointer(fast, url) as ckpt:
        dcp.save(state, storage_writer=ckpt.dcp_writer(40), no_dist=True)
        ckpt.wait()
        assert {i.step: i.tiers for i in ckpt.list()} == {40: {"fast": "ok", "durable": "ok"}}
    shutil.rmtree(fast)
    target = {"w": torch.zeros(3, 4), "epoch": 0}
    with Checkpointer(fast, url) as ckpt:
        dcp.load(target, storage_reader=ckpt.dcp_reader(), no_dist=True)
    assert torch.equal(target["w"], state["w"]) and target["epoch"] == 2
    assert (fast / step_dir(40) / "manifest.json").exists()  # fetched and committed locally
