"""The ``## storage:`` section of BENCHMARKS.md, from ``bench/results/storage.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    cut = r["device_speed_mb_s"]
    stoker_in = [x for x in r["stoker_mb_s"] if cut is None or x < cut]
    dd_in = [x for x in r["dd_mb_s"] if cut is None or x < cut]
    host = (
        f'"Device speed" is under {cut:,.0f} MB/s, where the reads in speed order jump by more '
        f"than {r['device_factor']:g}x: this virtual disk serves some reads from the host's page "
        "cache at several times the device's speed, mostly a read that follows another within a "
        "second or two, whichever tool makes it; those figures measure the host and are left out "
        "of the medians."
        if cut is not None
        else "No read stood apart as served by the host's page cache (a jump of more than "
        f"{r['device_factor']:g}x between reads in speed order): every read is in the medians."
    )
    met = "met" if abs(r["ratio"] - 1) <= r["target"] else "**missed**"
    lo, hi = 1 - r["target"], 1 + r["target"]
    cores = doc["machine"]["cores"]
    return f"""## storage: `stoker bench storage` sequential read against `dd iflag=direct` (target: within {r["target"]:.0%})

{cores} cores; a file of {r["size"]} on the repository's disk (`/dev/{r["disk"]}`); {r["block"]}
requests, one job, O_DIRECT, the file's pages dropped (`posix_fadvise(DONTNEED)`) before every
read; {r["reps"]} pairs, the order swapped every pair, {r["pause_s"]:g} s pause before each read.
fio is not installed here (it is not on PyPI): dd with O_DIRECT is the reference.

| reader | median MB/s at device speed | reads at device speed | all reads (MB/s) |
|---|---:|---:|---|
| `stoker bench storage` (seq-read, cold) | {r["stoker_median_mb_s"]:,.0f} | {len(stoker_in)} of {len(r["stoker_mb_s"])} | {", ".join(f"{x:.0f}" for x in r["stoker_mb_s"])} |
| `dd iflag=direct` (the ceiling) | {r["dd_median_mb_s"]:,.0f} | {len(dd_in)} of {len(r["dd_mb_s"])} | {", ".join(f"{x:.0f}" for x in r["dd_mb_s"])} |

stoker / dd: **{r["ratio"]:.2f}x** (target {lo:.2f}-{hi:.2f}x: {met}). dd is the ceiling: it
reads the device with nothing in between. {host}
Other processes took
{r["others_cpu"]:.0%} of the CPU meanwhile (load average {r["loadavg_1m"]:.1f} at the end).
"""
