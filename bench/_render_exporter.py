"""The ``## exporter:`` section of BENCHMARKS.md, from ``bench/results/exporter.json``."""

from __future__ import annotations


def render(doc: dict) -> str:
    r = doc["results"]
    rows = "\n".join(
        f"| {e['endpoint']} | {e['format']} | {e['series']} | {e['bytes']:,} B "
        f"| {e['median_ms']:.2f} ms | {e['p95_ms']:.2f} ms | {e['median_ms'] / r['target_ms']:.2f}x "
        f"| {e['others_cpu']:.0%} |"
        for e in r["endpoints"]
    )
    worst = max(e["median_ms"] for e in r["endpoints"])
    s = r["in_scrape_sampling_ms"]
    return f"""## exporter: one scrape of /metrics (target < {r["target_ms"]:g} ms with 8 GPUs' worth of series)

{r["scrapes"]} HTTP GETs of /metrics per row on loopback, each timed whole (request, collection,
exposition, response). The GPUs come from a fake NVML driver (no GPU here); a poller thread
samples them, so a scrape reads the latest sample and never waits on NVML.

| endpoint | format | series | size | median | p95 | median / target | other processes' CPU |
|---|---|---:|---:|---:|---:|---:|---:|
{rows}

The slowest median, {worst:.2f} ms, is {worst / r["target_ms"]:.2f}x the target. Reading the GPUs
inside the scrape instead, as the exporter did before the poller, costs the GPM window: one
GPU with GPM measured {s["measured_one_gpm_gpu"]:.0f} ms here, so about {s["eight_gpm_gpus_estimate"]:.0f} ms for eight H100s.
dcgm-exporter publishes no per-scrape cost that we found (it collects on its own interval,
30 s by default, and serves the latest values, as stoker's poller does).
"""
