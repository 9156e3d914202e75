"""Two emulated nodes of two ranks each, node-local fast tiers, then a load on three ranks.

    python examples/checkpoint_nodes.py [ROOT]      (default .demo/ckpt-nodes)

Run as is, it launches torchrun twice (gloo on the CPU):

1. 4 ranks, a DDP model trained a few steps. Ranks 0-1 are "node 0", with the fast tier
   ROOT/node0, and ranks 2-3 are "node 1", with ROOT/node1: each node has its own disk. The
   durable tier is ROOT/durable (Blob's stand-in). Each save names what DDP replicates
   (``replicated=("model", "optim")``), so the model is written once across the four ranks;
   each rank's random state is its own.
2. 3 ranks on "new VMs" (empty fast folders) load from the durable tier alone: a plain load is
   refused, since the private keys belong to 4 ranks; ``load(reshard=True)`` gives every rank
   the model, the optimizer and rank 0's private entries.

Each phase prints, per rank, what it wrote or loaded and where from.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from stoker import Checkpointer

RANKS_PER_NODE = 2
STEPS, EVERY = 6, 2


def launch(root: Path) -> None:
    """The parent: torchrun with 4 ranks to save, then with 3 to load."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--master-port=0"]
    torchrun += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for n, phase in ((4, "save"), (3, "load")):
        print(f"--- {phase} on {n} ranks", flush=True)
        subprocess.run(
            [*torchrun, f"--nproc-per-node={n}", __file__, phase, str(root)], check=True, env=env
        )


def digest(state: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for key in sorted(state):
        value = state[key]
        h.update(key.encode() + (value.numpy().tobytes() if torch.is_tensor(value) else b""))
    return h.hexdigest()[:12]


def serve_preemption(root: Path, rank: int) -> Any:
    """Hook: a Scheduled Events server for this demo, and the watcher of the Checkpointer,
    are added here by the preemption work (stoker.checkpoint._events_server). None: no
    preemption in this run."""
    return None


def say(lines: str) -> None:
    """Print every rank's lines in rank order (their stdout would interleave)."""
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, lines)
    if dist.get_rank() == 0:
        print("\n".join(gathered), flush=True)


def save(root: Path) -> None:
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same model on every rank, as DDP starts it
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    node = rank // RANKS_PER_NODE
    ckpt = Checkpointer(root / f"node{node}", root / "durable", keep_last=2)
    watcher = serve_preemption(root, rank)  # (None for now)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank's own data order
    for step in range(1, STEPS + 1):
        x = torch.randn(32, 256, generator=gen)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: the model stays the same on every rank
        opt.step()
        if step % EVERY == 0:
            state = {
                "model": model.module.state_dict(),
                "optim": opt.state_dict(),
                "rng": gen.get_state(),  # private: each rank's own
            }
            stats = ckpt.save(step, state, replicated=("model", "optim"))
        if watcher is not None and watcher.should_stop(step):
            break
    ckpt.wait()
    mine = root / f"node{node}" / f"step-{stats.step:012d}"
    files = sorted(p.name for p in mine.glob("shard-*"))
    model_digest = digest(model.module.state_dict())
    say(
        f"rank {rank} (node {node}): saved step {stats.step}, its file {stats.bytes:,} bytes; "
        f"node {node}'s fast tier holds {', '.join(files)}; model {model_digest}"
    )
    if rank == 0:
        step_dir = root / "durable" / f"step-{stats.step:012d}"
        total = sum(p.stat().st_size for p in step_dir.glob("shard-*"))
        params = sum(t.numel() * t.element_size() for t in model.module.state_dict().values())
        print(
            f"durable tier: {total:,} bytes of shards for a model of {params:,} bytes plus "
            "AdamW's two moments (without replicated=, each of the 4 ranks would write all)",
            flush=True,
        )
    ckpt.close()


def load(root: Path) -> None:
    rank = dist.get_rank()
    ckpt = Checkpointer(root / f"new-vm{rank}", root / "durable")
    try:
        ckpt.load()
        refused = "loaded?"
    except Exception as exc:  # noqa: BLE001 - shown, as the demo's point
        refused = f"a plain load is refused: {str(exc)[:110]}..."
    restored = ckpt.load(reshard=True)
    tiers = sorted(set(restored.files.values()))
    say(
        f"rank {rank}: {refused}\n"
        f"rank {rank}: load(reshard=True): step {restored.step} from the {', '.join(tiers)} "
        f"tier ({len(restored.files)} files read); model {digest(restored.state['model'])}, "
        f"rank 0's rng state ({restored.state['rng'].numel()} bytes)"
    )
    ckpt.close()


def main() -> None:
    if "RANK" not in os.environ:
        launch(Path(sys.argv[1] if len(sys.argv) > 1 else ".demo/ckpt-nodes"))
        return
    phase, root = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    try:
        (save if phase == "save" else load)(root)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
