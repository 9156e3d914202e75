"""The drop-in DataLoader path: stoker's StreamingDataset inside torch's own DataLoader beside a
map-style Dataset over one file per sample and Mosaic Streaming, LitData and WebDataset each
used its own way, on the same bytes, side by side in one run; with stoker's fastest path,
stoker with a data-parallel group given, and the ceilings of this machine.

Two shapes (bench/_stream_data.py), each in every loader's format: 20,000 resnet50-shaped
records of 114,660 bytes (MLPerf Storage's record), and 200,000 small records of 2,048 bytes,
where per-sample overhead decides. stoker and the map-style Dataset: ``DataLoader(ds,
batch_size=64, num_workers=2, collate_fn=collate)``, per sample, shuffled; each peer as its
documentation shows it (LitData's ``StreamingDataLoader``, WebDataset's pipeline batched in the
workers and ``WebLoader``, Mosaic's ``StreamingDataset`` in torch's DataLoader; defaults
otherwise: bench/_stream_peers.py cites the pages), with the same batch size, workers, collate
and shuffling on. One epoch per fresh process, timed from building the loader (after imports,
and after a ``gc.collect()``: a full collection the imports left pending fired mid-epoch, ~0.1 s
of a ~2 s epoch, in whichever loader's imports had left the most) to the last batch; the
consumer reads every sample's id and the ids are checked (none twice, none out of range, none
missing beyond the partial batches dropped).

* cold: the format's files evicted from the page cache first (``sync``, then
  ``POSIX_FADV_DONTNEED``; checked with ``fincore``); every format is read once with
  ``O_DIRECT`` before the first run (this VM's host caches its disk: the first read of fresh
  data was 10-50x slower than later cold reads). warm: the same run again at once.
* rows: stoker (drop-in: no dtype, samples as bytes), stoker with ``dp_rank=0, dp_size=1``
  (the data-parallel groups' code, world 1: its overhead), stoker's fastest path
  (``StreamingDataset(dtype=torch.uint8)`` + ``StreamingLoader(num_workers=0)``: reader
  threads into the batch), and the four peers.
* the map-style Dataset runs on stoker's own torch (it needs nothing else), so that it and
  stoker differ by the loader alone; the other peers on theirs (.bench/stream-venv).
* ceilings of the drop-in path, run on stoker's own torch (the peers' newer torch fed from
  memory ran 1.17x faster): torch's DataLoader fed from memory (the same DataLoader, collate and
  consumer over records already in memory: no storage at all); the same DataLoader over one copy
  a sample out of maps of stoker's shards in the page cache, and over one ``os.pread`` a
  sample of them (the two least ways a loader reading files can take a sample: no lookup, no
  check, no counter; the faster is the page-cache ceiling, unless a peer reading the same
  files ran faster still, whose rate is then the ceiling); the memory ceiling again on the peers'
  torch (each loader's share of its own torch's ceiling sets torch's version aside); ``dd iflag=direct`` over a 1 GiB file (one stream and 4 at
  once), one core's memory copy.

Rounds alternate the loaders' order (rotated each round, reversed every other one), both
shapes in each round; medians of ``--reps`` (5). The machine's load (other processes' share of
the CPU, the load average) is recorded beside each run.

    .venv/bin/python bench/stream_bench.py [--reps 5] [--write BENCHMARKS.md]
    .venv/bin/python bench/stream_bench.py --reps 1 --scale 0.2     (a short look: not saved
                                                                      as the published results)
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
from _markdown import publish  # noqa: E402
from _results import save  # noqa: E402

BATCH, WORKERS = 64, 2
RUN_TIMEOUT_S = 900
# name: (label, format, spec overrides)
LOADERS: dict[str, tuple[str, str, dict]] = {
    "stoker": ("stoker, drop-in (torch DataLoader)", "stoker", {"dataset": "stoker"}),
    "stoker-dp": ("stoker, drop-in, dp_size=1 given", "stoker", {"dataset": "stoker", "dp": True}),
    "stoker-fastest": (
        "stoker, fastest path (StreamingLoader, dtype)",
        "stoker",
        {"dataset": "stoker", "fastest": True},
    ),
    "files": (
        "map-style Dataset, file per sample (torch DataLoader)",
        "files",
        {"dataset": "files"},
    ),
    "mosaic": (
        "Mosaic Streaming (its Quick Start: torch DataLoader)",
        "mosaic",
        {"dataset": "mosaic"},
    ),
    "litdata": ("LitData (its StreamingDataLoader)", "litdata", {"dataset": "litdata"}),
    "wds": ("WebDataset (batched in workers, WebLoader)", "wds", {"dataset": "wds"}),
}
PEERS = ("files", "mosaic", "litdata", "wds")
SAME_TORCH = ("files",)  # peers that need nothing but torch: run on stoker's
MEMORY = ("torch DataLoader from memory (ceiling)", "files", {"dataset": "memory"})
PAGE_CACHE = (
    "torch DataLoader, one copy a sample out of a map in the page cache (ceiling)",
    "stoker",
    {"dataset": "page_cache"},
)
# The memory ceiling again on the peers' torch (2.14.1 there, 2.13.0 stoker's): each loader's
# share of its own torch's ceiling is the figure that does not depend on torch's version.
MEMORY_PEER_TORCH = (
    "torch DataLoader from memory, on the peers' torch (ceiling)",
    "files",
    {"dataset": "memory"},
)
PREAD_CACHE = (
    "torch DataLoader, one pread a sample from the shards in the page cache (ceiling)",
    "stoker",
    {"dataset": "pread_cache"},
)
CEILINGS = {
    "memory": MEMORY,
    "page_cache": PAGE_CACHE,
    "pread_cache": PREAD_CACHE,
    "memory_peer_torch": MEMORY_PEER_TORCH,
}
READING = ("page_cache", "pread_cache")  # the two least ways to read a sample from a file
PUBLISHED_REPS = 3  # fewer rounds, or a scaled dataset, is a look, not a result to publish


def spec_for(name: str, formats: dict, samples: int) -> dict:
    _, fmt, over = LOADERS[name] if name in LOADERS else CEILINGS[name]
    info = formats[fmt]
    return {
        "source": info["dir"],
        "urls": [p for p in info["files"] if p.endswith(".tar")],
        "n": samples,
        "batch": BATCH,
        "workers": WORKERS,
        "seed": 0,
        "starts": info["starts"],
    } | over


def run_one(python: str, spec: dict, record: int, log: Path) -> dict:
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
    out["mb_s"] = out["samples"] * record / out["epoch_s"] / 1e6
    return out | load_since(mark)


def check(name: str, kind: str, out: dict, samples: int, problems: list[str]) -> None:
    short = samples - out["samples"]
    if out["duplicates"] or out["out_of_range"] or short >= BATCH * WORKERS:
        problems.append(
            f"{name} {kind}: {out['samples']} samples of {samples}, {out['duplicates']} "
            f"duplicates, {out['out_of_range']} ids out of range"
        )


def round_order(names: list[str], rep: int) -> list[str]:
    """The loaders' order in round ``rep``: rotated by one each round and reversed every other
    round, so that each loader runs both before and after each other one."""
    k = rep % len(names)
    order = names[k:] + names[:k]
    return order[::-1] if rep % 2 else order


def measure(shapes: dict, reps: int, saved: Any) -> None:
    """Every loader cold and warm on every shape, ``reps`` rounds; ``saved(result)`` after each
    round (a run stopped early keeps the rounds done). ``shapes``: {shape: (samples, formats)}."""
    logs = sp.BENCH / "stream" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    names = [*LOADERS, *CEILINGS]
    per_shape = {
        shape: {
            "samples": samples,
            "record_bytes": data.SHAPES[shape][0],
            "formats": {
                k: {"bytes": v["bytes"], "files": len(v["files"]), "shards": len(v["starts"] or [])}
                for k, v in formats.items()
            },
            "runs": {n: {"cold": [], "warm": []} for n in names},
            "labels": {n: (LOADERS[n] if n in LOADERS else CEILINGS[n])[0] for n in names},
            "peers": list(PEERS),
            "resident_before_cold_bytes": {},
            "problems": [],
        }
        for shape, (samples, formats) in shapes.items()
    }
    disk, disk4 = [], []
    every = sorted({p for _, f in shapes.values() for info in f.values() for p in info["files"]})
    print(f"  read every format once with O_DIRECT: {data.prime(every):.0f} s")
    for rep in range(reps):
        disk.append(ceilings.disk_read_ceiling(sp.BENCH / "stream"))
        disk4.append(ceilings.disk_read_ceiling(sp.BENCH / "stream", 4))
        print(f"  disk (dd O_DIRECT): {disk[-1]:,.0f} MB/s; 4 at once {disk4[-1]:,.0f} MB/s")
        for shape, (samples, formats) in shapes.items():
            measure_round(shape, samples, formats, round_order(names, rep), per_shape[shape])
            per_shape[shape]["reps"] = rep + 1
            per_shape[shape]["log_dir"] = str(logs)
        saved({"shapes": per_shape, "disk_mb_s": disk, "disk4_mb_s": disk4, "reps": rep + 1})


def measure_round(shape: str, samples: int, formats: dict, order: list[str], got: dict) -> None:
    """One round of one shape: every loader in ``order``, cold then warm (ceilings warm)."""
    logs, record = sp.BENCH / "stream" / "logs", got["record_bytes"]
    for name in order:
        spec = spec_for(name, formats, samples)
        # The ceilings run on stoker's own torch: its DataLoader is what they bound (the
        # peers' torch 2.14.1 fed from memory ran 1.17x torch 2.13.0, 6 interleaved pairs).
        # So does the map-style Dataset (torch alone, no library): beside stoker on the same
        # torch, the loaders are compared, not torch's versions.
        ours = name.startswith("stoker") or name in SAME_TORCH
        ours = ours or (name in CEILINGS and name != "memory_peer_torch")
        python = sys.executable if ours else str(sp.ensure_venv())
        kinds = ("warm",) if name in CEILINGS else ("cold", "warm")
        if name in READING:  # their files warm, as they are for every warm run
            data.warm(formats[CEILINGS[name][1]]["files"])
        if "cold" in kinds:
            files = formats[LOADERS[name][1]]["files"]
            data.evict(files)
            resident = got["resident_before_cold_bytes"]
            resident[name] = max(resident.get(name, 0), data.resident_bytes(files) or 0)
        for kind in kinds:
            out = run_one(python, spec, record, logs / f"{shape}-{name}.log")
            if name not in ("memory", "memory_peer_torch"):
                # (the memory ceilings' records repeat: see _stream_peers.InMemory)
                check(name, kind, out, samples, got["problems"])
            got["runs"][name][kind].append(out)
            print(
                f"  {shape:<8} {name:<15} {kind} {out['samples_s']:9,.0f} samples/s "
                f"{out['mb_s']:7,.0f} MB/s first batch {out['first_batch_s']:.2f} s "
                f"cpu {out['cpu_s']:.1f} s (others {out['others_cpu']:.0%} of the CPU)",
                flush=True,
            )


def summary(measured: dict, disk4_mb_s: list[float]) -> dict:
    """One shape's medians and the ratios the targets ask for (the renderer formats them)."""
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
    peer_ceiling = med["memory_peer_torch"]["warm"]
    out["memory_ceiling_peer_torch_samples_s"] = peer_ceiling
    for kind in ("cold", "warm"):  # each of its own torch's ceiling
        best = out[f"fastest_peer_{kind}"]
        theirs = med[best][kind] / (med["memory"]["warm"] if best in SAME_TORCH else peer_ceiling)
        out[f"stoker_vs_peer_{kind}_of_own_ceiling"] = (
            med["stoker"][kind] / med["memory"]["warm"] / theirs
        )
    # Reading from the page cache: the faster of a copy out of a map (first touches fault) and
    # a pread (a system call a sample), whichever suits the record's size here.
    reading = {n: med[n]["warm"] for n in READING if med.get(n, {}).get("warm")}
    out["reading_ceilings_samples_s"] = reading
    out["page_cache_ceiling_samples_s"] = max(reading.values())
    record = measured["record_bytes"]
    out["disk_ceiling_samples_s"] = statistics.median(disk4_mb_s) * 1e6 / record
    # Warm, the tighter of memory and reading; cold, the disk's as well: a cold loader reads the
    # files from the disk and then copies each sample out of the page cache as a warm one does,
    # so it runs at most at the warm ceiling. A peer that reads the same samples from files and
    # ran faster than both least ways showed this run's true ceiling: it is taken as the
    # ceiling then (the harder one for stoker), never a figure below what was measured.
    warm_ceiling = min(out["page_cache_ceiling_samples_s"], out["memory_ceiling_samples_s"])
    out["warm_ceiling_from"] = "least reads"
    best = out["fastest_peer_warm"]
    if med[best]["warm"] > warm_ceiling:
        warm_ceiling, out["warm_ceiling_from"] = med[best]["warm"], best
    out["warm_ceiling_samples_s"] = warm_ceiling
    out["stoker_vs_ceiling_warm"] = med["stoker"]["warm"] / warm_ceiling
    cold_ceiling = min(out["disk_ceiling_samples_s"], warm_ceiling)
    best = out["fastest_peer_cold"]
    out["cold_ceiling_from"] = "disk" if cold_ceiling < warm_ceiling else out["warm_ceiling_from"]
    if med[best]["cold"] > cold_ceiling:
        cold_ceiling, out["cold_ceiling_from"] = med[best]["cold"], best
    out["cold_ceiling_samples_s"] = cold_ceiling
    out["stoker_vs_ceiling_cold"] = med["stoker"]["cold"] / cold_ceiling
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--shapes", nargs="+", choices=sorted(data.SHAPES), default=list(data.SHAPES)
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="a share of each shape's samples (a short look)"
    )
    parser.add_argument("--write", type=Path, help="BENCHMARKS.md to render the section into")
    args = parser.parse_args(argv)
    look = args.reps < PUBLISHED_REPS or args.scale != 1.0 or set(args.shapes) != set(data.SHAPES)
    if look and args.write:
        parser.error(
            f"a look (--reps under {PUBLISHED_REPS}, --scale, or some shapes) is not published: "
            "run without --write"
        )
    peer_python = sp.ensure_venv()
    shapes = {}
    for shape in args.shapes:
        samples = max(BATCH * WORKERS * 4, int(data.SHAPES[shape][1] * args.scale))
        shapes[shape] = (samples, data.ensure_formats(shape, samples, peer_python))
    import torch

    start = cpu_mark()
    fixed = {
        "batch": BATCH,
        "workers": WORKERS,
        "versions": {"stoker torch": torch.__version__, **sp.peer_versions(peer_python)},
        "memcpy_mb_s": ceilings.memory_ceiling(),
    }
    folder = sp.BENCH / "stream" / "looks" if look else None

    def saved(measured: dict) -> None:
        results = fixed | {"load": load_since(start)} | measured
        for got in results["shapes"].values():
            got["summary"] = summary(got, results["disk4_mb_s"])
        where = save("stream", results, **({"folder": folder} if folder else {}))
        print(f"saved {where}", flush=True)

    measure(shapes, args.reps, saved)
    import render

    publish(render.render("stream", **({"folder": folder} if folder else {})), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
