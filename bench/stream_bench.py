"""The drop-in DataLoader path: stoker's StreamingDataset inside torch's own DataLoader beside a
map-style Dataset over one file per sample, Mosaic Streaming, LitData and WebDataset, used the
same way, on the same bytes, side by side in one run; with stoker's fastest path, stoker with
a data-parallel group given, and the ceilings of this machine.

Dataset: 20,000 resnet50-shaped records of 114,660 bytes (MLPerf Storage's record), in every
loader's format (bench/_stream_data.py). Each loader: ``DataLoader(ds, batch_size=64,
num_workers=2, collate_fn=collate)``, per sample, shuffled (bench/_stream_peers.py says how
each is built); one epoch per fresh process, timed from building the loader (after imports, and after a
``gc.collect()``: a full collection the imports left pending fired mid-epoch, ~0.1 s of a ~2 s
epoch, in whichever loader's imports had left the most) to the last batch; the consumer reads every sample's id and the ids are checked (none twice,
none out of range, none missing beyond the partial batches dropped).

* cold: the format's files evicted from the page cache first (``sync``, then
  ``POSIX_FADV_DONTNEED``; checked with ``fincore``); every format is read once with
  ``O_DIRECT`` before the first run (this VM's host caches its disk: the first read of fresh
  data was 10-50x slower than later cold reads). warm: the same run again at once.
* rows: stoker (drop-in: no dtype, samples as bytes), stoker with ``dp_rank=0, dp_size=1``
  (the data-parallel groups' code, world 1: its overhead), stoker's fastest path
  (``StreamingDataset(dtype=torch.uint8)`` + ``StreamingLoader(num_workers=0)``: reader
  threads into the batch), and the four peers.
* ceilings, run on stoker's own torch (the peers' newer torch fed from memory ran 1.17x
  faster): torch's DataLoader fed from memory (the same DataLoader, collate and consumer over
  records already in memory: no storage at all); the same DataLoader over one ``os.pread`` a
  sample of stoker's shards in the page cache (the least any loader reading files does: no
  lookup, no check); ``dd iflag=direct`` over a 1 GiB file (one
  stream and 4 at once), one core's memory copy.

Runs rotate the loaders' order; medians of ``--reps`` (3). The machine's load (other
processes' share of the CPU, the load average) is recorded beside each run.

    .venv/bin/python bench/stream_bench.py [--reps 3] [--samples 20000]
    .venv/bin/python bench/render.py --write BENCHMARKS.md stream
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _stream_ceilings as ceilings  # noqa: E402
import _stream_data as data  # noqa: E402
import _stream_peers as sp  # noqa: E402
from _machine import cpu_mark, load_since  # noqa: E402
from _results import save  # noqa: E402

BATCH, WORKERS, BLOCK_SHARDS = 64, 2, 8
RUN_TIMEOUT_S = 900
# name: (label, format, spec overrides)
LOADERS: dict[str, tuple[str, str, dict]] = {
    "stoker": ("stoker, drop-in", "stoker", {"dataset": "stoker"}),
    "stoker-dp": ("stoker, drop-in, dp_size=1 given", "stoker", {"dataset": "stoker", "dp": True}),
    "stoker-fastest": (
        "stoker, fastest path (StreamingLoader, dtype)",
        "stoker",
        {"dataset": "stoker", "fastest": True},
    ),
    "files": ("map-style Dataset, file per sample", "files", {"dataset": "files"}),
    "mosaic": ("Mosaic Streaming", "mosaic", {"dataset": "mosaic"}),
    "litdata": ("LitData", "litdata", {"dataset": "litdata"}),
    "wds": ("WebDataset", "wds", {"dataset": "wds"}),
}
PEERS = ("files", "mosaic", "litdata", "wds")
MEMORY = ("torch DataLoader from memory (ceiling)", "files", {"dataset": "memory"})
PAGE_CACHE = (
    "torch DataLoader, one pread a sample from the page cache (ceiling)",
    "stoker",
    {"dataset": "page_cache"},
)
CEILINGS = {"memory": MEMORY, "page_cache": PAGE_CACHE}


def spec_for(name: str, formats: dict, samples: int) -> dict:
    _, fmt, over = LOADERS[name] if name in LOADERS else CEILINGS[name]
    info = formats[fmt]
    per_shard = samples // max(1, len(info["starts"] or [0]))
    return {
        "source": info["dir"],
        "urls": [p for p in info["files"] if p.endswith(".tar")],
        "n": samples,
        "batch": BATCH,
        "workers": WORKERS,
        "seed": 0,
        "starts": info["starts"],
        "wds_buffer": BLOCK_SHARDS * per_shard,  # the same shuffle buffer as stoker's block
    } | over


def run_one(python: str, spec: dict, log: Path) -> dict:
    """One epoch in a fresh process: its JSON line, the CPU seconds of it and its workers,
    and the machine's load meanwhile."""
    mark, before = cpu_mark(), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "a") as err:
        done = subprocess.run(
            [python, sp.__file__, "run", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=sp.BENCH,
        )
    if done.returncode:
        raise RuntimeError(f"{spec['dataset']} exited {done.returncode}: see {log}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    out["samples_s"] = out["samples"] / out["epoch_s"]
    out["mb_s"] = out["samples"] * data.RECORD / out["epoch_s"] / 1e6
    return out | load_since(mark)


def check(name: str, kind: str, out: dict, samples: int, problems: list[str]) -> None:
    short = samples - out["samples"]
    if out["duplicates"] or out["out_of_range"] or short >= BATCH * WORKERS:
        problems.append(
            f"{name} {kind}: {out['samples']} samples of {samples}, {out['duplicates']} "
            f"duplicates, {out['out_of_range']} ids out of range"
        )


def measure(formats: dict, samples: int, reps: int, peer_python: Path, saved: Any) -> dict:
    """Every loader cold and warm, ``reps`` times; ``saved(result)`` after each rep (a run
    stopped early keeps the reps done)."""
    logs = sp.BENCH / "stream" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    names = [*LOADERS, *CEILINGS]
    runs: dict[str, dict[str, list[dict]]] = {n: {"cold": [], "warm": []} for n in names}
    problems: list[str] = []
    disk, disk4, resident = [], [], {}
    print(f"  read every format once with O_DIRECT: {data.prime(all_files(formats)):.0f} s")
    for rep in range(reps):
        disk.append(ceilings.disk_read_ceiling(sp.BENCH / "stream"))
        disk4.append(ceilings.disk_read_ceiling(sp.BENCH / "stream", 4))
        print(f"  disk (dd O_DIRECT): {disk[-1]:,.0f} MB/s; 4 at once {disk4[-1]:,.0f} MB/s")
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            spec = spec_for(name, formats, samples)
            # The ceilings run on stoker's own torch: its DataLoader is what they bound (the
            # peers' torch 2.14.1 fed from memory ran 1.17x torch 2.13.0, 6 interleaved pairs).
            ours = name.startswith("stoker") or name in CEILINGS
            python = sys.executable if ours else str(peer_python)
            kinds = ("warm",) if name in CEILINGS else ("cold", "warm")
            if name == "page_cache":  # its files warm, as they are for every warm run
                data.warm(formats[CEILINGS[name][1]]["files"])
            if "cold" in kinds:
                files = formats[LOADERS[name][1]]["files"]
                data.evict(files)
                resident[name] = max(resident.get(name, 0), data.resident_bytes(files) or 0)
            for kind in kinds:
                out = run_one(python, spec, logs / f"{name}.log")
                if name != "memory":  # (its records repeat: see _stream_peers.InMemory)
                    check(name, kind, out, samples, problems)
                runs[name][kind].append(out)
                print(
                    f"  {name:<15} {kind} {out['samples_s']:8,.0f} samples/s "
                    f"{out['mb_s']:7,.0f} MB/s first batch {out['first_batch_s']:.2f} s "
                    f"cpu {out['cpu_s']:.1f} s (others {out['others_cpu']:.0%} of the CPU)",
                    flush=True,
                )
        saved(
            {
                "runs": runs,
                "labels": {n: (LOADERS[n] if n in LOADERS else CEILINGS[n])[0] for n in names},
                "peers": list(PEERS),
                "reps": rep + 1,
                "disk_mb_s": disk,
                "disk4_mb_s": disk4,
                "resident_before_cold_bytes": resident,
                "problems": problems,
            }
        )


def all_files(formats: dict) -> list[str]:
    return sorted({p for info in formats.values() for p in info["files"]})


def summary(measured: dict) -> dict:
    """Medians and the ratios the targets ask for (the renderer formats them)."""
    med = {
        name: {
            kind: statistics.median(r["samples_s"] for r in got) for kind, got in by.items() if got
        }
        for name, by in measured["runs"].items()
    }
    out: dict = {"median_samples_s": med}
    for kind in ("cold", "warm"):
        best = max(PEERS, key=lambda p: med[p][kind])
        out[f"fastest_peer_{kind}"] = best
        out[f"stoker_vs_peer_{kind}"] = med["stoker"][kind] / med[best][kind]
        out[f"fastest_vs_peer_{kind}"] = med["stoker-fastest"][kind] / med[best][kind]
        out[f"dp_vs_stoker_{kind}"] = med["stoker-dp"][kind] / med["stoker"][kind]
    out["memory_ceiling_samples_s"] = med["memory"]["warm"]
    out["page_cache_ceiling_samples_s"] = med["page_cache"]["warm"]
    out["disk_ceiling_samples_s"] = statistics.median(measured["disk4_mb_s"]) * 1e6 / data.RECORD
    # Warm, the tighter of the two ceilings; cold, of the disk and memory.
    warm_ceiling = min(out["page_cache_ceiling_samples_s"], out["memory_ceiling_samples_s"])
    out["stoker_vs_ceiling_warm"] = med["stoker"]["warm"] / warm_ceiling
    cold_ceiling = min(out["disk_ceiling_samples_s"], out["memory_ceiling_samples_s"])
    out["stoker_vs_ceiling_cold"] = med["stoker"]["cold"] / cold_ceiling
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="runs per figure (default 3)")
    parser.add_argument("--samples", type=int, default=20000, help="records (default 20,000)")
    args = parser.parse_args()
    peer_python = sp.ensure_venv()
    formats = data.ensure_formats(args.samples, peer_python)
    import torch

    start = cpu_mark()
    fixed = {
        "samples": args.samples,
        "record_bytes": data.RECORD,
        "batch": BATCH,
        "workers": WORKERS,
        "versions": {"stoker torch": torch.__version__, **sp.peer_versions(peer_python)},
        "formats": {
            k: {"bytes": v["bytes"], "files": len(v["files"]), "shards": len(v["starts"] or [])}
            for k, v in formats.items()
        },
        "memcpy_mb_s": ceilings.memory_ceiling(),
    }

    def saved(measured: dict) -> None:
        results = fixed | {"load": load_since(start)} | measured
        results["summary"] = summary(results)
        print(f"saved {save('stream', results)}", flush=True)

    measure(formats, args.samples, args.reps, peer_python, saved)


if __name__ == "__main__":
    main()
