"""Train from a StreamingDataset, checkpoint the model and the loader, stop, and resume.

    python examples/train_stream.py --source .demo/fast --data .demo/shards      # a folder
    python examples/train_stream.py --source .demo/fast --emulator               # Blob (Azurite)
    python examples/train_stream.py ... --compute-ms 20                          # emulated GPU
    torchrun --nproc-per-node 2 examples/train_stream.py --source ... --emulator # two ranks
    torchrun --nproc-per-node 4 examples/train_stream.py --source A --mix B --dp-size 2

Writes SOURCE's files as shards to DATA (or to a container in a local Azurite started from
node_modules), then trains a small model on them: each sample's first 256 bytes in, their
mean out. The loader's state is saved with the model through stoker.Checkpointer every
``--every`` steps. Half way through, the "job dies". A new loader and model then restore from
the newest checkpoint and finish the epoch. At the end the script prints that no sample was seen
twice or missed, the loss, and where the time went (waiting for data vs. computing).
``--compute-ms`` replaces the model with an emulated accelerator that sleeps that long per batch.
Under torchrun (gloo), rank 0 writes the dataset and starts the emulator, every rank trains on
its share of each global batch (DDP), and rank 0 checks the samples all ranks saw.
``--mix B`` trains on a mixture of SOURCE and B (``--weights``, default 0.7,0.3; the epoch ends
where SOURCE's share runs out) and prints each source's share. ``--dp-size N`` makes N
data-parallel groups of the ranks (consecutive ranks share a model replica, as tensor-parallel
ranks do): the ranks of a group must get identical batches, the groups together the epoch; each
group's accelerator utilization is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from stoker import Checkpointer, Ledger
from stoker.stream import StreamingDataset, StreamingLoader, StreamingMixture, write_shards

FEATURES = 256
MARKER = ".made-by-train_stream"  # in a checkpoint folder this script may empty on its next run


def tagged(source: int, sample: bytes) -> tuple[int, bytes]:
    """A mixture's sample with the number of its source (to count each source's share)."""
    return source, sample


def collate(samples: list[Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sample's first 256 bytes as floats in, their mean out; and each one's source."""
    tags = torch.tensor([s[0] if isinstance(s, tuple) else 0 for s in samples])
    samples = [s[1] if isinstance(s, tuple) else s for s in samples]
    x = torch.stack([torch.frombuffer(bytearray(s[:FEATURES]), dtype=torch.uint8) for s in samples])
    x = x.float() / 255
    return x, x.mean(dim=1, keepdim=True), tags


def start_emulator() -> tuple[object, str]:
    """An in-memory Azurite from node_modules (installed by `make test`), and a fresh container."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from azurite import Azurite  # the tests' helper: starts, waits, creates containers

    server = Azurite().start()
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
    container = server.container().container_name
    return server, f"az://{container}/shards"  # the account: the connection string's


def start_ranks() -> tuple[int, int]:
    """This process's rank and the world size: torchrun's, in a gloo process group (which the
    Checkpointer needs to save one checkpoint from every rank), or 0 and 1 alone."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def from_rank_0(*values: Any) -> list[Any]:
    """Rank 0's values on every rank (as they are, alone)."""
    if not dist.is_initialized():
        return list(values)
    out = list(values)
    dist.broadcast_object_list(out, src=0)
    return out


def fresh_checkpoint_folder(path: Path | None) -> Path:
    """An empty folder for this run's checkpoints: PATH emptied if this script made it (its
    marker file is there), refused if it holds anything else; a temporary one without PATH."""
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="stoker-ckpt-"))
    elif (path / MARKER).exists():
        shutil.rmtree(path)  # a previous run's checkpoints would pass for this run's
    elif path.exists() and any(path.iterdir()):
        raise SystemExit(f"--ckpt {path} is not empty: give a new or empty folder")
    path.mkdir(parents=True, exist_ok=True)
    (path / MARKER).touch()
    return path


def run(
    loader: StreamingLoader,
    model: nn.Module | None,
    optim: torch.optim.Optimizer | None,
    ckpt: Checkpointer,
    *,
    first_step: int = 1,
    stop_at: int | None,
    every: int,
    compute_s: float,
    seen: list[tuple[int, bytes]],
    ledger: Ledger,
) -> float:
    loss_value = float("nan")
    for step, (x, y, tags) in enumerate(ledger.wrap(loader), start=first_step):
        rows = (bytes(row.to(torch.uint8).tolist()) for row in (x * 255).round())
        seen.extend(zip(tags.tolist(), rows, strict=True))
        with ledger.compute():
            if model is None:
                time.sleep(compute_s)  # the emulated accelerator
            else:
                loss = nn.functional.mse_loss(model(x), y)
                optim.zero_grad()  # type: ignore[union-attr]
                loss.backward()
                optim.step()  # type: ignore[union-attr]
                loss_value = loss.item()
        if step % every == 0:
            state = {"loader": loader.state_dict(), "step": step}
            if model is not None:
                state |= {"model": model.state_dict(), "optim": optim.state_dict()}  # type: ignore[union-attr]
            with ledger.checkpoint():
                ckpt.save(step, state)
        if stop_at is not None and step == stop_at:
            break
    ckpt.wait()
    return loss_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a folder of files")
    parser.add_argument("--data", default=None, help="where the shards go (folder or URL)")
    parser.add_argument("--emulator", action="store_true", help="put the shards in Azurite")
    parser.add_argument("--ckpt", type=Path, default=None, help="checkpoint folder")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--every", type=int, default=3)
    parser.add_argument("--compute-ms", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mix", type=Path, default=None, help="a second folder of files")
    parser.add_argument("--weights", default="0.7,0.3", help="the two sources' shares")
    parser.add_argument("--dp-size", type=int, default=None, help="data-parallel groups")
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="save each run's step ledger for stoker report: PATH, and PATH's stem + -resumed",
    )
    args = parser.parse_args()

    rank, world = start_ranks()
    server, data, index, ckpt_dir, cache, data2 = None, None, None, None, None, None
    dp = args.dp_size or world  # data-parallel groups; world // dp ranks share a replica
    if world % dp:
        raise SystemExit(f"--dp-size {dp} does not divide the {world} ranks")
    if rank == 0:  # one writer of the dataset, one emulator, one checkpoint folder and cache
        if args.emulator:
            server, data = start_emulator()
        else:
            data = args.data or str(args.source.parent / "shards")
        # A dataset a previous run left at DATA is continued, not written again (nor deleted).
        index = write_shards(args.source, data, shard_size="4MiB", resume=True)
        print(f"{index.samples} samples in {len(index.shards)} shards at {data}")
        if args.mix:
            data2 = f"{data}-mix"
            mixed = write_shards(args.mix, data2, shard_size="4MiB", resume=True)
            print(f"{mixed.samples} samples in {len(mixed.shards)} shards at {data2}")
        ckpt_dir = fresh_checkpoint_folder(args.ckpt)
        cache = Path(tempfile.mkdtemp(prefix="stoker-cache-"))  # one node cache for all ranks
    data, data2, ckpt_dir, cache, credentials = from_rank_0(
        data, data2, ckpt_dir, cache, os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    )
    if credentials:
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = credentials
    emulate = args.compute_ms > 0

    def fresh() -> tuple[StreamingLoader, nn.Module | None, torch.optim.Optimizer | None]:
        torch.manual_seed(0)
        groups = {"dp_rank": rank // (world // dp), "dp_size": dp} if args.dp_size else {}
        ds: StreamingDataset | StreamingMixture
        if data2 is None:
            ds = StreamingDataset(data, cache, seed=7, block_shards=4, **groups)
        else:  # each source its own node cache folder (their shards have the same names)
            sources = [
                StreamingDataset(where, cache / f"source-{s}", transform=partial(tagged, s))
                for s, where in enumerate((data, data2))
            ]
            weights = [float(w) for w in args.weights.split(",")]
            ds = StreamingMixture(sources, weights=weights, on_exhausted="stop", seed=7, **groups)
        loader = StreamingLoader(ds, args.batch, num_workers=args.workers, collate_fn=collate)
        model = (
            None if emulate else nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))
        )
        if model is not None and world > 1:
            model = nn.parallel.DistributedDataParallel(model)
        return loader, model, None if model is None else torch.optim.Adam(model.parameters(), 1e-2)

    seen: list[tuple[int, bytes]] = []  # (source, the sample's first bytes)
    ledgers = [Ledger(), Ledger()]  # the first run, and the resumed one
    try:
        with Checkpointer(ckpt_dir, keep_last=2) as ckpt:
            loader, model, optim = fresh()
            epoch_samples = len(loader.dataset)  # (a mixture's: up to where a source runs out)
            half = len(loader) // 2
            run(
                loader,
                model,
                optim,
                ckpt,
                stop_at=half,
                every=args.every,
                compute_s=args.compute_ms / 1e3,
                seen=seen,
                ledger=ledgers[0],
            )
            first = loader.metrics
            if not ckpt.list():
                raise SystemExit(
                    f"the job died at step {half}, before its first checkpoint (every "
                    f"{args.every} steps): give more data, a smaller --batch or --every"
                )
            if rank == 0:
                print(
                    f"stopped at step {half} (the job died); newest checkpoint: step "
                    f"{ckpt.list()[0].step}"
                )

            loader, model, optim = fresh()  # a new process would start here
            restored = ckpt.load()
            loader.load_state_dict(restored.state["loader"])
            if model is not None:
                model.load_state_dict(restored.state["model"])
                optim.load_state_dict(restored.state["optim"])  # type: ignore[union-attr]
            del seen[restored.step * args.batch :]  # batches after the checkpoint are redone
            loss = run(
                loader,
                model,
                optim,
                ckpt,
                first_step=restored.step + 1,  # steps go on from the checkpoint's
                stop_at=None,
                every=args.every,
                compute_s=args.compute_ms / 1e3,
                seen=seen,
                ledger=ledgers[1],
            )
            m = loader.metrics
        aus = [m.utilization]
        if world > 1:  # every rank's samples and utilization, to rank 0
            every: list[Any] = [None] * world
            dist.all_gather_object(every, (seen, m.utilization))
            per = world // dp  # the ranks of one replica: identical batches, or the model is wrong
            same = all(every[r][0] == every[r - r % per][0] for r in range(world))
            seen = [sample for g in range(dp) for sample in every[g * per][0]]
            aus = [au for _, au in every]
            dist.barrier()  # every rank is done with the cache and the emulator
    finally:
        if rank == 0:
            shutil.rmtree(cache, ignore_errors=True)
        if server is not None:
            server.close()  # type: ignore[attr-defined]
    if world > 1:
        dist.destroy_process_group()
    if rank != 0:
        return

    assert index is not None
    expected = epoch_samples // (args.batch * dp) * args.batch * dp
    ok = len(set(seen)) == len(seen) == expected and (world == 1 or same)
    print(
        f"resumed from step {restored.step}: {len(seen)} samples consumed, {len(set(seen))} "
        f"distinct, {expected} expected -> {'ok' if ok else 'WRONG'}"
    )
    if model is not None:
        print(f"final training loss {loss:.5f}")
    if data2 is not None:
        count = Counter(source for source, _ in seen)
        for s, (where, w) in enumerate(zip((data, data2), args.weights.split(","), strict=True)):
            print(f"source {s} ({where}): {count[s] / len(seen):.1%} of the samples (weight {w})")
    if args.dp_size:
        per = world // dp
        print(f"{dp} data-parallel groups of {per} ranks: a group's ranks got identical batches: "
              f"{'yes' if world == 1 or same else 'NO'}")  # fmt: skip
        for g in range(dp):
            au = [a for a in aus[g * per : (g + 1) * per] if a is not None]
            shown = f"{sum(au) / len(au):.1%}" if au else "n/a"
            print(f"group {g} (ranks {g * per}-{(g + 1) * per - 1}): accelerator utilization "
                  f"{shown} after the resume")  # fmt: skip
    for name, part in (("first run", first), ("after resume", m)):
        au = part.utilization
        print(
            f"{name}: {part.batches} batches, first batch {part.first_batch_s or 0:.3f} s, waited "
            f"{part.wait_s:.3f} s, computed {part.compute_s:.3f} s -> accelerator utilization "
            f"{'n/a' if au is None else f'{au:.1%}'}; tier {part.tier}, "
            f"{part.bytes_read / 1e6:.1f} MB read, {part.bytes_fetched / 1e6:.1f} MB fetched, "
            f"cache hits {part.cache_hits}, misses {part.cache_misses}"
        )
    for name, ledger in zip(("first run", "after resume"), ledgers, strict=True):
        print(f"where each step's time went, {name} (step ledger, first step left out):")
        ledger.report()
        if args.record:  # stoker report --measured reads these
            path = (
                args.record
                if name == "first run"
                else args.record.with_stem(args.record.stem + "-resumed")
            )
            print(f"step ledger saved: {ledger.save_json(path, f'train_stream, {name}')}")
    if not ok:
        raise SystemExit("the resumed epoch repeated or missed samples")


if __name__ == "__main__":
    main()
