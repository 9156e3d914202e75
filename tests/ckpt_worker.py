"""Run under torchrun by test_checkpoint_dist.py and test_checkpoint_nodes.py: MODE OUT FAST
[DURABLE...]; each rank writes its result to OUT/rank-N.json (stdout of ranks interleaves).

Modes "nodes" (4 ranks as 2 emulated nodes of 2, each node's fast tier its own folder) and
"reload" (another world size, from the durable tiers alone) take FAST as a base folder and one
or more DURABLE URLs; see test_checkpoint_nodes.py for what they check."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from stoker.checkpoint import Checkpointer

# One job on emulated nodes: their fast folders differ here (on real nodes one path), so the
# default job id (from the fast folder) would differ by node; a job says who it is.
JOB = "ckpt-worker"


def main() -> None:
    mode, out, fast = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    durable = sys.argv[4] if len(sys.argv) > 4 else None
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if mode in ("nodes", "reload"):
        result = nodes(mode, Path(fast), sys.argv[4:], rank, world)
        (out / f"rank-{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()
        return
    ckpt = Checkpointer(fast, durable, keep_last=2, job_id=JOB)
    if mode == "save":
        for step in (1, 2, 3):
            ckpt.save(step, {"x": torch.full((1000,), float(rank * 100 + step)), "rank": rank})
        ckpt.wait()
        restored = ckpt.load()
        ok = torch.all(restored.state["x"] == rank * 100 + 3).item()
        result = {"rank": rank, "step": restored.step, "ok": ok, "who": restored.state["rank"]}
    elif mode == "dcp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard, distribute_tensor

        mesh = init_device_mesh("cpu", (world,))
        full = torch.arange(16, dtype=torch.float32).reshape(8, 2)
        loader = {"version": 1, "epoch": 4, "position": 96, "dataset": "ab12", "shuffle": True}
        state = {"w": distribute_tensor(full, mesh, [Shard(0)]), "epoch": 4, "loader": loader}
        dcp.save(state, storage_writer=ckpt.dcp_writer(7))
        ckpt.wait()
        result = {"rank": rank, "steps": [i.step for i in ckpt.list()]}
    (out / f"rank-{rank}.json").write_text(json.dumps(result))
    ckpt.close()
    dist.destroy_process_group()


RANKS_PER_NODE = 2
# (durable URL's position, how the state is replicated): the first durable gets a state with
# private keys, the second a DDP state, all replicated
REPLICATED: list[Any] = [("model", "optim"), True]


def model_state(step: int) -> dict[str, Any]:
    """A DDP model and optimizer state: the same on every rank (from the step alone)."""
    gen = torch.Generator().manual_seed(step)
    sizes = [(256, 256), (256,), (512, 128), (128,), (64, 64), (1000,), (3,), (300, 7)]
    model = {f"layer{i}.weight": torch.randn(s, generator=gen) for i, s in enumerate(sizes)}
    model["tied.half"] = torch.randn(50, 50, generator=gen).half()
    optim = {
        "state": {
            i: {"exp_avg": torch.randn(s, generator=gen), "step": step}
            for i, s in enumerate(sizes[:3])
        },
        "param_groups": [{"lr": 0.1, "params": [0, 1, 2]}],
    }
    return {"model": model, "optim": optim}


def private_state(rank: int, step: int) -> dict[str, Any]:
    return {"rng": torch.full((7,), float(rank * 100 + step)), "rank": rank}


def digest(state: Any) -> str:
    """One hash of every tensor (by path) and value: identical states give identical digests."""
    h = hashlib.sha256()

    def walk(obj: Any, path: str) -> None:
        if isinstance(obj, torch.Tensor):
            h.update(path.encode() + str(obj.dtype).encode() + obj.contiguous().numpy().tobytes())
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                walk(obj[k], f"{path}[{k!r}]")
        elif isinstance(obj, list | tuple):
            for i, v in enumerate(obj):
                walk(v, f"{path}[{i}]")
        else:
            h.update(f"{path}={obj!r}".encode())

    walk(state, "")
    return h.hexdigest()


def nodes(mode: str, base: Path, durables: list[str], rank: int, world: int) -> dict[str, Any]:
    result: dict[str, Any] = {"rank": rank, "world": world, "runs": []}
    for i, durable in enumerate(durables):
        replicated = REPLICATED[i]
        run: dict[str, Any] = {"durable": durable}
        if mode == "nodes":
            fast = base / f"d{i}" / f"node{rank // RANKS_PER_NODE}"
            ckpt = Checkpointer(fast, durable, keep_last=2, job_id=JOB)
            run["nodes"] = ckpt.group.nodes
            for step in (1, 2, 3):
                state = model_state(step)
                if replicated is not True:
                    state |= private_state(rank, step)
                stats = ckpt.save(step, state, replicated=replicated)
            ckpt.wait()
            run["bytes"] = stats.bytes
            run["first"] = loaded(ckpt.load(), replicated, rank)
            run["fast_steps"] = sorted(s for s, x in ckpt.fast.steps().items() if x.committed)
            dist.barrier()  # every rank has loaded before one node's disk goes
            if rank == RANKS_PER_NODE:  # the first rank of node 1 wipes its node's fast tier
                shutil.rmtree(fast)
            dist.barrier()
            run["wiped"] = loaded(ckpt.load(), replicated, rank)
            ckpt.close()
        else:  # another world size, from the durable tier alone (a fresh fast folder)
            ckpt = Checkpointer(base / f"d{i}" / f"fresh{rank}", durable, job_id=JOB)
            try:
                run["plain"] = loaded(ckpt.load(), replicated, rank)
            except Exception as exc:  # noqa: BLE001 - reported to the test
                run["plain"] = {"error": f"{type(exc).__name__}: {exc}"}
            run["reshard"] = loaded(ckpt.load(reshard=True), replicated, rank)
            ckpt.close()
        result["runs"].append(run)
    if mode == "nodes":
        result["dcp"] = dcp_nodes(base / "dcp" / f"node{rank // RANKS_PER_NODE}", durables[-1])
        result["mismatch"] = mismatch(base / "mismatch" / f"node{rank // RANKS_PER_NODE}", rank)
    return result


def mismatch(fast: Path, rank: int) -> str:
    """Node-local fast tiers without a durable one: replicated= is refused on every rank.
    Rank 3 holds one more tensor under a replicated key: every rank refuses to commit."""
    ckpt = Checkpointer(fast)
    try:
        ckpt.save(1, model_state(1), replicated=True)
        alone = ""
    except Exception as exc:  # noqa: BLE001 - reported to the test
        alone = str(exc)
    ckpt.close()
    ckpt = Checkpointer(fast, fast.parent / "durable", job_id=JOB)
    state = model_state(1)
    if rank == 3:
        state["model"]["extra"] = torch.zeros(3)
    try:
        ckpt.save(1, state, replicated=("model", "optim"))
        ckpt.wait()
        said = ""
    except Exception as exc:  # noqa: BLE001 - reported to the test
        said = str(exc)
    said += f" | committed: {sorted(s for s, x in ckpt.fast.steps().items() if x.committed)}"
    ckpt.close()
    return alone + " | " + said


def dcp_nodes(fast: Path, durable: str) -> dict[str, Any]:
    """A DCP save on node-local fast tiers: each rank uploads its own files; then a DCP load
    on the same ranks, each node fetching the other node's files from the durable tier."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    full = torch.arange(64, dtype=torch.float32).reshape(16, 4)
    ckpt = Checkpointer(fast, durable + "-dcp", job_id=JOB)
    dcp.save({"w": distribute_tensor(full, mesh, [Shard(0)])}, storage_writer=ckpt.dcp_writer(9))
    ckpt.wait()
    dist.barrier()  # every rank's upload is done, so each node's lowest rank has committed
    mine = sorted(p.name for p in (fast / "step-000000000009").iterdir())
    # Each node's ranks share its fast tier: none loads (fetching the other node's files
    # into it) before every rank has listed what the save left there.
    dist.barrier()
    back = {"w": distribute_tensor(torch.zeros(16, 4), mesh, [Shard(0)])}
    dcp.load(back, storage_reader=ckpt.dcp_reader())
    ok = torch.equal(back["w"].full_tensor(), full)
    try:  # save() itself refuses a DTensor, pointing at DCP
        ckpt.save(10, back)
        refused = ""
    except Exception as exc:  # noqa: BLE001 - reported to the test
        refused = str(exc)
    ckpt.close()
    return {"fast_files": mine, "loaded_ok": ok, "dtensor_refused": refused}


def loaded(restored: Any, replicated: Any, rank: int) -> dict[str, Any]:
    state = restored.state
    expected = model_state(restored.step)
    shared = {k: state[k] for k in expected}
    out = {
        "step": restored.step,
        "tier": restored.tier,
        "files": restored.files,
        "replicated_ok": digest(shared) == digest(expected),
        "replicated_digest": digest(shared),
    }
    if replicated is not True:
        out["private"] = {"rng": state["rng"][0].item(), "rank": state["rank"]}
    return out


if __name__ == "__main__":
    main()
