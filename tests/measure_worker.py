"""Run under torchrun by test_allreduce.py and test_ledger.py: MODE OUT; each rank writes its
result to OUT/rank-N.json (stdout of two ranks interleaves).

    sweep   the collective sweep, then again with the single-tensor calls refused (list forms)
    ddp     a small MLP under DDP (gloo) with the step ledger attached
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from stoker.measure.collectives import sweep
from stoker.measure.ledger import Ledger


def _sweep() -> dict:
    sizes = [8, 1024, 65536, 2**20]
    result = sweep(sizes=sizes, iters=3, warmup=1)

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("refused by the test")

    for name in ("all_gather_single", "all_gather_into_tensor"):
        setattr(dist, name, refuse)
    for name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        setattr(dist, name, refuse)
    fallback = sweep(sizes=sizes, iters=2, warmup=0)
    return {"sweep": result.to_dict(), "fallback": fallback.to_dict()}


def _batches(n: int, rank: int):
    gen = torch.Generator().manual_seed(rank)
    for _ in range(n):
        time.sleep(0.002)  # a loader that makes the loop wait a little
        yield torch.randn(64, 256, generator=gen), torch.randint(0, 10, (64,), generator=gen)


def _ddp(out: Path) -> dict:
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU())
    model = DistributedDataParallel(nn.Sequential(mlp, nn.Linear(512, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ledger = Ledger(skip_first=1)
    ledger.attach(model)
    for step, (x, y) in enumerate(ledger.wrap(_batches(12, dist.get_rank()))):
        with ledger.copy():  # stands in for the host-to-device copy
            x, y = x.clone(), y.clone()
        with ledger.compute():
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if step % 4 == 3:
            with ledger.checkpoint():
                torch.save(model.state_dict(), out / f"ckpt-{dist.get_rank()}.pt")
    first = next(model.parameters()).detach().clone()
    dist.all_reduce(first, op=dist.ReduceOp.MAX)
    in_sync = torch.equal(first, next(model.parameters()).detach())
    return {"summary": ledger.summary().to_dict(), "in_sync": in_sync}


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    result = _sweep() if mode == "sweep" else _ddp(out)
    (out / f"rank-{dist.get_rank()}.json").write_text(json.dumps(result))
    dist.destroy_process_group()
    if mode == "ddp":
        # torch 2.13's DDP over gloo aborts now and then while the interpreter shuts down
        # ("terminate called without an active exception"; 1 run in 12 of a bare DDP loop here,
        # with or without the ledger), after the results are written: leave without that.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
