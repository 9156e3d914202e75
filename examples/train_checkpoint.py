"""A small CPU training loop that checkpoints asynchronously with stoker, then restores.

    python examples/train_checkpoint.py [ROOT] [--record PATH]     (default .demo/ckpt)

The fast tier is ROOT/fast (NVMe's stand-in), the durable tier ROOT/durable (Blob's stand-in;
pass an az:// URL as a second argument to use Blob). Prints how long each save blocked the loop
against one synchronous torch.save + fsync of the same state, then "loses" the model and
restores it from the newest verified checkpoint.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from stoker import Checkpointer

STEPS, EVERY = 60, 15


def build() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def torch_save_seconds(state: dict, folder: Path) -> float:
    """The honest synchronous baseline: torch.save, fsync, rename."""
    start = time.perf_counter()
    with tempfile.NamedTemporaryFile(dir=folder, delete=False) as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(f.name, folder / "baseline.pt")
    seconds = time.perf_counter() - start
    (folder / "baseline.pt").unlink()
    return seconds


def main() -> None:
    args, record = sys.argv[1:], None
    if "--record" in args:  # --record PATH: the saves as a record for stoker report --measured
        at = args.index("--record")
        record, args[at : at + 2] = Path(args[at + 1]), []
    root = Path(args[0] if args else ".demo/ckpt")
    durable = args[1] if len(args) > 1 else str(root / "durable")
    # The demo's own folder (a durable folder whose parent is missing is refused: on a cluster
    # that is an unmounted volume, and the checkpoints would fill the local disk instead).
    root.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    model, optim = build()
    data = torch.randn(64, 512)
    blocked = []
    with Checkpointer(root / "fast", durable, keep_last=2) as ckpt:
        for step in range(1, STEPS + 1):
            loss = (model(data) - data).pow(2).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
            if step % EVERY == 0:
                state = {"model": model.state_dict(), "optim": optim.state_dict(), "step": step}
                blocked.append(ckpt.save(step, state).blocking_s)
        ckpt.wait()
        if record is not None:
            print(f"saves recorded: {ckpt.save_json(record, 'train_checkpoint')}")
        last = ckpt.last_save
        assert last is not None and last.fast_s is not None
        baseline = torch_save_seconds(state, root)
        print(f"trained {STEPS} steps, loss {loss.item():.4f}; state {last.bytes / 2**20:.0f} MiB")
        print(
            f"save blocked the loop {statistics.median(blocked) * 1e3:.1f} ms (median of "
            f"{len(blocked)}) vs torch.save+fsync {baseline * 1e3:.1f} ms "
            f"({statistics.median(blocked) / baseline:.2f}x); on the fast tier after "
            f"{last.fast_s * 1e3:.0f} ms, durable after {(last.durable_s or 0) * 1e3:.0f} ms"
        )
        expected = {k: v.clone() for k, v in model.state_dict().items()}

    model, optim = build()  # the job died: a fresh process starts from scratch
    with Checkpointer(root / "fast", durable) as ckpt:
        restored = ckpt.load()
    model.load_state_dict(restored.state["model"])
    optim.load_state_dict(restored.state["optim"])
    same = all(torch.equal(expected[k], v) for k, v in model.state_dict().items())
    print(
        f"restored step {restored.step} from the {restored.tier} tier, every shard verified; "
        f"weights identical: {same}"
    )
    if not same:
        raise SystemExit("restored weights differ")


if __name__ == "__main__":
    main()
