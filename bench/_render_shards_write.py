"""The ``## shards_write:`` section of BENCHMARKS.md, from ``bench/results/shards_write.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    m, rounds = r["median"], r["rounds"]
    loads = [x["loadavg_1m"] for x in rounds]
    others = [x["others_cpu"] for x in rounds]
    met = r["speedup"] >= r["target"] or r["speedup"] >= 0.9 * r["ceiling"]
    lines = "\n".join(
        f"| {k + 1} | {x['one_s']:.2f} s | {x['two_s']:.2f} s | {x['pair_s']:.2f} s | "
        f"{x['loadavg_1m']:.1f} | {x['others_cpu']:.0%} | {'yes' if x['identical'] else 'NO'} |"
        for k, x in enumerate(rounds)
    )
    return f"""## shards_write: parallel conversion, {r["files"]:,} files of {r["file_bytes"]:,} B

`stoker shards write --workers 2` (`write_shards(workers=2)`) against one process, and the
ceiling of this machine for two processes: two independent one-process conversions of half the
files each, started together (nothing shared between them). Target: 2 processes >=
{r["target"]}x one. Shards of {r["shard_size"]}, to the local disk; inputs in the page cache.

| round | 1 process | 2 processes | 2 independent halves (ceiling) | load avg | CPU busy | same index |
|---|---:|---:|---:|---:|---:|---|
{lines}

Medians: 1 process {m["one_s"]:.2f} s, 2 processes {m["two_s"]:.2f} s
(**{r["speedup"]:.2f}x**), the ceiling {m["pair_s"]:.2f} s (**{r["ceiling"]:.2f}x**). The
machine has {r["cores"]} cores, shared with other jobs (load average {min(loads):.1f} to
{max(loads):.1f}; the CPU was {min(others):.0%} to {max(others):.0%} busy with processes other
than the benchmark's own, which may count the conversions' workers): the two halves share the
memory, the page cache and the disk they write and make durable, so two processes can only go
as fast as the ceiling says, and the target is judged against it:
{r["speedup"] / r["ceiling"]:.2f}x of the ceiling ({"met" if met else "not met"}: a target
above the measured ceiling counts at >= 0.9x of it). Both runs write the same dataset (same
index, byte for byte).
"""
