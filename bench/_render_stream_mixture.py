"""The ``## stream_mixture:`` section of BENCHMARKS.md, from ``bench/results/stream_mixture.json``."""

from __future__ import annotations

PATHS = {
    "loader": "`StreamingLoader(batch 64, 2 workers)`, tensors",
    "dataloader": "torch `DataLoader(batch_size=64, num_workers=2)`, sample by sample",
}


def render(doc: dict) -> str:
    r = doc["results"]
    weights = " / ".join(f"{w:g}" for w in r["weights"])
    rows, worst, loads = [], [], []
    for shape, x in r["shapes"].items():
        for path, label in PATHS.items():
            one, mix = x["runs"][f"{path}/one"], x["runs"][f"{path}/mix"]
            shares = [max(abs(s - w) for s, w in zip(m["shares"], r["weights"], strict=True))
                      for m in mix]  # fmt: skip
            loads += [m["loadavg_1m"] for m in one + mix]
            ratio = x["ratio"][path]
            worst.append(ratio)
            rows.append(
                f"| {shape} ({x['sample_bytes']:,} B) | {label} | "
                f"{x['median_per_s'][f'{path}/one']:,.0f} | {x['median_per_s'][f'{path}/mix']:,.0f} "
                f"| **{ratio:.3f}x** | {min(m['per_s'] / o['per_s'] for o, m in zip(one, mix, strict=True)):.2f}"
                f"-{max(m['per_s'] / o['per_s'] for o, m in zip(one, mix, strict=True)):.2f} "
                f"| {max(shares):.4f} |"
            )  # fmt: skip
    table = "\n".join(rows)
    rounds = len(next(iter(r["shapes"].values()))["runs"]["loader/one"])
    ceilings = ", ".join(
        f"{shape} {x['ceiling_mbps']:,.0f} MB/s" for shape, x in r["shapes"].items()
    )
    met = min(worst) >= 0.95
    return f"""## stream_mixture: what mixing costs (3 sources at {weights})

One dataset against a mixture of three that hold the same number of samples in the proportions
{weights} (`StreamingMixture(weights=...)`, `epoch_samples` = the one's samples, so no source
repeats), read the same way in alternating rounds ({rounds} per row, the order of the two swapped
each round), warm (page cache). Target: mixing costs < 5 % (ratio >= 0.95).

| records | path | one dataset (samples/s, median) | mixture (samples/s, median) | mixture / one (median of rounds) | range of rounds | largest share error |
|---|---|---:|---:|---:|---:|---:|
{table}

The share error is the largest difference, over the rounds, between a source's share of the
samples the epoch delivered (counted from the samples themselves) and its weight. Ceiling (one
process reading the one dataset's shard files with `os.pread`, warm): {ceilings}. Target
{"met in every row" if met else "not met in every row"}: the lowest median is {min(worst):.3f}x. The
machine: {r.get("cores", doc["machine"]["cores"])} cores, shared with other jobs (load average
{min(loads):.1f} to {max(loads):.1f} during the rounds): single rounds vary by the range shown, so
only the medians of alternating rounds are compared. How a mixture reads: a batch's (or, sample
by sample, a group's) ids are located in every source's shards by one search of one table of
them all; sample by sample, a group holds 64 samples across the sources (within 16 MiB), the
page cache judged once for the group; as tensors, every source's samples of a
batch are read in one read into one buffer, each part then checked and counted by its source;
no advice is searched for while batches read warm. What mixing costs in one process (small
records, warm, thread CPU time of alternating slices of 40 batches, 60 pairs, 2026-12-03): as
tensors 1.28x one dataset's per batch before that day's changes (advice searched per source
for every batch, a split then a search per source, a tensor made per source), 1.14x with
the advice and tensors fixed, 1.11x with one search; sample by sample, under cProfile over
600 batches, 1.15-1.50x with groups of 64 across the sources, 1.01-1.10x with 64 per source;
but without the profiler, in a simulated DataLoader worker with torch's collate (8 alternating
rounds, later that day), 1.07x with 64 across the sources, 1.09x with 128, 1.21x with 64 per
source (192), so groups went back to 64 across the sources (the profiler inflates what each
call costs, and a group of 64 makes more calls). In torch's DataLoader, alternating pairs in one process read the small
mixture at 0.79-0.90x one dataset in seven sets of 2-6 pairs with groups of 192 (20 rounds of
this benchmark: 0.78x), and 0.92x (20 rounds, small records alone) and the figure above with
groups of 64. The machine's speed drifted
by up to 1.5x between runs of the same code that day, so only medians of pairs are quoted.
Each epoch's clock starts after a `gc.collect()` (the last epoch's garbage).
"""
