"""What mixing costs: one dataset against a mixture of three (0.5 / 0.3 / 0.2 of the same
samples), read the same ways, side by side in alternating rounds.

    python bench/stream_mixture_bench.py [--rounds 5]

Two sample shapes (resnet50-shaped records of 114,660 B, and small 2 KiB ones, where a
per-batch cost shows most), two paths (``StreamingLoader`` with 2 workers, tensors read straight
into batches; torch's own ``DataLoader(batch_size=64, num_workers=2)`` sample by sample), warm
(the shards in the page cache). Each source's share over the epoch is measured from the samples
themselves. The ceiling: reading the same bytes with plain ``os.pread`` in one process.
Results: bench/results/stream_mixture.json (bench/_render_stream_mixture.py).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_mark, others_cpu_share  # noqa: E402
from _results import save  # noqa: E402

from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, StreamingMixture  # noqa: E402

WEIGHTS = (0.5, 0.3, 0.2)
SHAPES = {"resnet50": (114_660, 12_000), "small": (2_048, 160_000)}  # (bytes, samples an epoch)
BATCH = 64


def write(root: Path, samples: int, size: int, tag: int) -> Path:
    """``samples`` records of ``size`` bytes; each record's first byte says its source."""
    rng = np.random.default_rng(tag)
    block = rng.integers(0, 256, size + 4096, dtype=np.uint8)
    with ShardWriter(root, shard_size="64MiB", codec="array") as w:
        for i in range(samples):
            record = block[i % 4096 : i % 4096 + size].copy()
            record[0] = tag
            w.write(record)
    return root


def make(scratch: Path, shape: str) -> tuple[Path, list[Path]]:
    size, n = SHAPES[shape]
    one = write(scratch / f"{shape}-one", n, size, 9)
    parts = [round(w * n) for w in WEIGHTS]
    mix = [write(scratch / f"{shape}-{s}", parts[s], size, s) for s in range(len(WEIGHTS))]
    return one, mix


def dataset(root: Path, seed: int) -> StreamingDataset:
    return StreamingDataset(root, dtype=torch.uint8, seed=seed)


def loader(data: StreamingDataset | StreamingMixture, path: str) -> object:
    if path == "loader":
        return StreamingLoader(data, BATCH, num_workers=2)
    return torch.utils.data.DataLoader(data, batch_size=BATCH, num_workers=2)


def epoch(one: Path | None, mix: list[Path] | None, path: str, seed: int, n: int) -> dict:
    if one is not None:
        data: StreamingDataset | StreamingMixture = dataset(one, seed)
    else:
        data = StreamingMixture(
            [dataset(p, seed) for p in mix], weights=WEIGHTS, epoch_samples=n, seed=seed
        )
    gc.collect()  # (the last epoch's garbage: a full collection mid-epoch is ~0.1 s)
    start, samples, tags = time.perf_counter(), 0, np.zeros(256, dtype=np.int64)
    for batch in loader(data, path):
        samples += len(batch)
        tags += np.bincount(batch[:, 0].numpy(), minlength=256)
    seconds = time.perf_counter() - start
    return {"samples": samples, "seconds": seconds, "per_s": samples / seconds, "tags": tags}


def ceiling(roots: list[Path]) -> float:
    """MB/s of reading every shard's bytes with os.pread in 1 MiB pieces, one process, warm."""
    files = [f for r in roots for f in sorted(r.glob("*.stk"))]
    start, total = time.perf_counter(), 0
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            size, offset = os.fstat(fd).st_size, 0
            while offset < size:
                offset += len(os.pread(fd, 1 << 20, offset))
            total += size
        finally:
            os.close(fd)
    return total / (time.perf_counter() - start) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES))
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="stoker-mix-bench-", dir=args.dir))
    results: dict = {"weights": WEIGHTS, "batch": BATCH, "workers": 2, "shapes": {}}
    try:
        for shape in args.shapes:
            size, n = SHAPES[shape]
            one, mix = make(scratch, shape)
            runs: dict[str, list[dict]] = {}
            for path in ("loader", "dataloader"):
                epoch(one, None, path, 0, n)  # warm: the shards into the page cache
                epoch(None, mix, path, 0, n)
                for r in range(args.rounds):
                    mark = cpu_mark()
                    first, second = ("one", "mix") if r % 2 == 0 else ("mix", "one")
                    for which in (first, second):
                        got = epoch(one if which == "one" else None, mix, path, r + 1, n)
                        shares = (got["tags"][: len(WEIGHTS)] / got["samples"]).tolist()
                        runs.setdefault(f"{path}/{which}", []).append(
                            {
                                "per_s": got["per_s"],
                                "samples": got["samples"],
                                "shares": shares if which == "mix" else None,
                                "others_cpu": others_cpu_share(mark),
                                "loadavg_1m": os.getloadavg()[0],
                            }
                        )
                    a, b = runs[f"{path}/one"][-1], runs[f"{path}/mix"][-1]
                    print(f"{shape} {path} round {r + 1}: one {a['per_s']:,.0f}/s, mixture "
                          f"{b['per_s']:,.0f}/s ({b['per_s'] / a['per_s']:.3f}x), shares "
                          f"{', '.join(f'{s:.4f}' for s in b['shares'])}")  # fmt: skip
            ratios = {
                path: statistics.median(
                    m["per_s"] / o["per_s"]
                    for o, m in zip(runs[f"{path}/one"], runs[f"{path}/mix"], strict=True)
                )
                for path in ("loader", "dataloader")
            }
            results["shapes"][shape] = {
                "sample_bytes": size,
                "samples": n,
                "runs": runs,
                "median_per_s": {
                    k: statistics.median(x["per_s"] for x in v) for k, v in runs.items()
                },
                "ratio": ratios,
                "ceiling_mbps": ceiling([one]),
            }
        path = save("stream_mixture", results)
        print(f"-> {path}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
