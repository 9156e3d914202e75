"""Scrape cost of stoker's exporter (target < 10 ms a scrape with 8 GPUs' worth of series).

Two endpoints, as a node runs them: `stoker watch` (8 GPUs, NVML through a fake driver: this
machine has no GPU, and the poller keeps NVML off the scrape path anyway) and a training rank
serving everything at once (ledger, loader, checkpointer, stage, and the 8 GPUs). Each scrape
is a real HTTP GET of /metrics, timed whole, in text and in OpenMetrics. Beside it: what one
scrape would cost if it read the GPUs itself (the GPM window of 100 ms per GPU that has it).

    .venv/bin/python bench/exporter_bench.py --write BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]

import _results  # noqa: E402
from _machine import cpu_mark, others_cpu_share  # noqa: E402
from _markdown import publish  # noqa: E402

from fake_nvml import FakeNvml  # noqa: E402

TARGET_MS = 10.0


def _sources(tmp: Path) -> dict:
    import torch

    import stoker
    from stoker.measure._stage_meter import StageMeter
    from stoker.measure.ledger import Ledger
    from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader

    with ShardWriter(tmp / "ds", codec="pickle") as writer:
        for i in range(256):
            writer.write({"id": i})
    loader = StreamingLoader(StreamingDataset(tmp / "ds"), 8, collate_fn=list)
    ledger = Ledger("cpu", skip_first=0)
    for _ in ledger.wrap(loader):
        with ledger.compute():
            pass
    ledger.summary()
    ckpt = stoker.Checkpointer(tmp / "fast")
    for step in range(3):
        ckpt.save(step, {"w": torch.zeros(16)})
    ckpt.wait()
    (tmp / "src").mkdir()
    (tmp / "src" / "a.bin").write_bytes(b"x" * 4096)
    meter = StageMeter()
    stoker.stage(str(tmp / "src"), str(tmp / "dst"), reporter=meter)
    return {"ledger": ledger, "loader": loader, "checkpointer": ckpt, "stage": meter}


def _scrape_ms(port: int, n: int, accept: str) -> tuple[list[float], int, int]:
    url = f"http://127.0.0.1:{port}/metrics"
    times, size, series = [], 0, 0
    for _ in range(n):
        request = urllib.request.Request(url, headers={"Accept": accept})
        t0 = time.perf_counter()
        with urllib.request.urlopen(request) as response:
            body = response.read()
        times.append((time.perf_counter() - t0) * 1000)
        size = len(body)
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return times, size, series


def measure(scrapes: int) -> dict:
    from stoker.measure.exporter import serve
    from stoker.measure.gpus import Gpus

    out: dict = {"target_ms": TARGET_MS, "scrapes": scrapes, "endpoints": []}
    with tempfile.TemporaryDirectory() as tmp:
        sources = _sources(Path(tmp))
        for name, extra in (
            ("stoker watch: 8 GPUs", {}),
            ("a rank: 8 GPUs + ledger, loader, checkpointer, stage", sources),
        ):
            server = serve(0, addr="127.0.0.1", job="bench", gpus=Gpus(FakeNvml(8)), **extra)
            try:
                _scrape_ms(server.server_port, 20, "text/plain")  # warm: first GPU poll, imports
                for fmt, accept in (
                    ("text", "text/plain"),
                    ("OpenMetrics", "application/openmetrics-text"),
                ):
                    mark = cpu_mark()
                    times, size, series = _scrape_ms(server.server_port, scrapes, accept)
                    out["endpoints"].append(
                        {
                            "endpoint": name,
                            "format": fmt,
                            "series": series,
                            "bytes": size,
                            "median_ms": statistics.median(times),
                            "p95_ms": statistics.quantiles(times, n=20)[18],
                            "others_cpu": others_cpu_share(mark),
                        }
                    )
            finally:
                server.shutdown()
        sources["checkpointer"].close()
    gpus = Gpus(FakeNvml(8))
    t0 = time.perf_counter()
    gpus.sample(gpm_interval_s=0.1)  # the fake driver has GPM on GPU 0 only
    one_gpm = (time.perf_counter() - t0) * 1000
    out["in_scrape_sampling_ms"] = {
        "measured_one_gpm_gpu": one_gpm,
        "eight_gpm_gpus_estimate": 8 * 100.0,
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--write", type=Path, help="BENCHMARKS.md to render the section into")
    args = parser.parse_args(argv)
    results = measure(args.scrapes)
    _results.save(
        "exporter", results, command="python bench/exporter_bench.py --write BENCHMARKS.md"
    )
    import render

    publish(render.render("exporter"), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
