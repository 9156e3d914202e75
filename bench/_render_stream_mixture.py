"""The ``## stream_mixture:`` section of BENCHMARKS.md, from ``bench/results/stream_mixture.json``."""

from __future__ import annotations

import random
import statistics

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
            ratios = [m["per_s"] / o["per_s"] for o, m in zip(one, mix, strict=True)]
            quartiles = statistics.quantiles(ratios, n=4)
            low, high = _median_interval(ratios)
            worst.append(ratio)
            rows.append(
                f"| {shape} ({x['sample_bytes']:,} B) | {label} | "
                f"{x['median_per_s'][f'{path}/one']:,.0f} | {x['median_per_s'][f'{path}/mix']:,.0f} "
                f"| **{ratio:.3f}x** | {low:.3f}-{high:.3f} | {quartiles[0]:.2f}-{quartiles[2]:.2f} "
                f"| {min(ratios):.2f}-{max(ratios):.2f} | {max(shares):.4f} |"
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

| records | path | one dataset (samples/s, median) | mixture (samples/s, median) | mixture / one (median of rounds) | 90 % interval of that median | middle half of rounds | range of rounds | largest share error |
|---|---|---:|---:|---:|---:|---:|---:|---:|
{table}

The share error is the largest difference, over the rounds, between a source's share of the
samples the epoch delivered (counted from the samples themselves) and its weight. Ceiling (one
process reading the one dataset's shard files with `os.pread`, warm): {ceilings}. Target
{"met in every row" if met else "not met in every row"}: the lowest median is {min(worst):.3f}x. The
machine: {r.get("cores", doc["machine"]["cores"])} cores, shared with other jobs (load average
{min(loads):.1f} to {max(loads):.1f} during the rounds): single rounds vary by the range shown, so
only the medians of alternating rounds are compared; the middle half of the rounds shows how
tightly they gather, and the interval (a bootstrap of the rounds, 2,000 resamples, a fixed
seed) how far the median itself could be off. How a mixture reads: the ids of 64 batches (or groups) at a time are
located in every source's shards by one search of one table of them all; sample by sample, a
group is the next 64 samples across the sources (within 16 MiB), each located by a row of that
table and read in the mixture's order, the page cache judged once for the group; as tensors, every source's samples of a batch are read in one read into one buffer;
the sources share one set of counters, told once a batch; no advice is searched for while
batches read warm. What each of these saved, measured in one process: docs/stream.md
("Mixtures").
Each epoch's clock starts after a `gc.collect()` (the last epoch's garbage).
"""


def _median_interval(ratios: list[float], resamples: int = 2000) -> tuple[float, float]:
    """The 5th and 95th percentiles of the median of ``ratios`` resampled with replacement
    (a bootstrap; seeded, so a render is the same each time)."""
    rng = random.Random(0)
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples)
    )
    return medians[resamples // 20], medians[resamples - resamples // 20 - 1]
