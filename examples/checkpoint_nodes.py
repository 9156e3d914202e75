"""Two emulated nodes of two ranks each, node-local fast tiers, then a load on three ranks.

    python examples/checkpoint_nodes.py [ROOT]      (default .demo/ckpt-nodes)

Run as is, it launches torchrun twice (gloo on the CPU):

1. 4 ranks, a DDP model trained a few steps. Ranks 0-1 are "node 0", with the fast tier
   ROOT/node0, and ranks 2-3 are "node 1", with ROOT/node1: each node has its own disk. The
   durable tier is ROOT/durable (Blob's stand-in). Each save names what DDP replicates
   (``replicated=("model", "optim")``), so the model is written once across the four ranks;
   each rank's random state is its own.
   While they train, Azure's Scheduled Events (here a local stand-in of the metadata service,
   ``stoker.checkpoint._events_server``) announces a Spot eviction of node 1 with 30 s of
   notice. Each node's local rank 0 polls its own metadata service; ``should_stop(step)``,
   called every step, saves that step on every rank, waits until it is committed, and only
   then node 1 acknowledges the event; every rank stops cleanly.
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
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from stoker import Checkpointer

RANKS_PER_NODE = 2
STEPS, EVERY = 10, 2


EVICT_AT_STEP = 3  # the eviction notice is posted once the ranks report this step


JOB = "demo-nodes"  # the training run's name, the same on every VM and every restart


def launch(root: Path) -> None:
    """The parent: torchrun with 4 ranks to save (serving the metadata service's Scheduled
    Events, which evict node 1 mid-run), then with 3 to load."""
    from stoker.checkpoint._events_server import EventsServer

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--master-port=0"]
    torchrun += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with EventsServer(vm_name="node1") as imds:
        env["STOKER_DEMO_IMDS"] = imds.url
        for n, phase in ((4, "save"), (3, "load")):
            print(f"--- {phase} on {n} ranks", flush=True)
            child = subprocess.Popen(
                [*torchrun, f"--nproc-per-node={n}", __file__, phase, str(root)], env=env
            )
            if phase == "save":
                evict_when_ready(root, imds, child)
            if child.wait():
                raise SystemExit(f"the {phase} phase failed (exit {child.returncode})")
            if phase == "save":
                acked = [ids for _, ids in imds.acks]
                print(f"metadata service: node 1's eviction acknowledged {acked}", flush=True)


def evict_when_ready(root: Path, imds: Any, child: subprocess.Popen) -> None:
    """Post a Preempt for node 1 (30 s notice, as Spot gives) once training reaches a step."""
    marker = root / f"reached-{EVICT_AT_STEP}"
    while not marker.exists() and child.poll() is None:
        time.sleep(0.05)
    if child.poll() is None:
        imds.schedule("Preempt", notice_s=30, resources=["node1"])
        print("metadata service: Preempt of node1 posted (NotBefore in 30 s)", flush=True)


def digest(state: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for key in sorted(state):
        value = state[key]
        h.update(key.encode() + (value.numpy().tobytes() if torch.is_tensor(value) else b""))
    return h.hexdigest()[:12]


def serve_preemption(ckpt: Checkpointer, rank: int, state_fn: Any) -> Any:
    """The watcher of this rank: each emulated node's first rank polls the metadata service
    (as torchrun's LOCAL_RANK 0 would on a real node) under the VM name of its node."""
    os.environ["LOCAL_RANK"] = str(rank % RANKS_PER_NODE)  # emulated nodes share one VM here
    return ckpt.watch_preemption(
        state_fn,
        endpoint=os.environ["STOKER_DEMO_IMDS"],
        vm_name=f"node{rank // RANKS_PER_NODE}",
        poll_s=0.05,
        replicated=("model", "optim"),
    )


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
    # One name for the training run: the durable tier is claimed for it, and the run resumed on
    # other VMs (below) names itself the same to load from it.
    ckpt = Checkpointer(root / f"node{node}", root / "durable", keep_last=2, job_id=JOB)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank's own data order

    def state() -> dict[str, Any]:
        return {
            "model": model.module.state_dict(),
            "optim": opt.state_dict(),
            "rng": gen.get_state(),  # private: each rank's own
        }

    watcher = serve_preemption(ckpt, rank, state)
    for step in range(1, STEPS + 1):
        x = torch.randn(32, 256, generator=gen)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients: the model stays the same on every rank
        opt.step()
        if step % EVERY == 0:
            stats = ckpt.save(step, state(), replicated=("model", "optim"))
        if step == EVICT_AT_STEP and rank == 0:
            (root / f"reached-{step}").touch()  # (tells the demo's parent to post the event)
        if step >= EVICT_AT_STEP:
            time.sleep(0.5)  # a step long enough for the poll to see the event in a step or two
        if watcher.should_stop(step):
            stats = ckpt.last_save or stats
            report = watcher.last
            say(f"rank {rank}: preempted at step {step}: {report.note if report else ''}")
            break
    watcher.close()
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
    ckpt = Checkpointer(root / f"new-vm{rank}", root / "durable", job_id=JOB)
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
