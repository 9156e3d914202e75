"""``stoker bench loader`` against DLIO, MLPerf Storage's engine, side by side (target: AU within
5 points of DLIO's on the same workload configuration).

Workloads: the resnet50 preset (114,660-byte samples, batch 400; 4,000 samples) and the
cosmoflow preset (2.83 MB samples, batch 1; 150 samples), one emulated accelerator, 2 reader
workers. Each tool reads a dataset it generated itself on this machine's disk: DLIO
``++workload.workflow.generate_data=True`` (NPZ, one sample per file, its PyTorch path), stoker
``stoker.measure.loader.generate`` (shards). Per case the two run alternately, ``--reps`` times
each: DLIO's training run (``mpiexec -n 1``, one epoch, ``read_threads`` = stoker's workers, the
same batch and ``computation_time``) and stoker's ``run_loader`` over one epoch. Both datasets'
pages are dropped from the page cache before every run (``posix_fadvise`` DONTNEED on their
files only), so every epoch reads the disk. AU: DLIO's ``train_au_mean_percentage`` (its
``summary.json``) and stoker's ``LoaderResult.utilization``, compute / total with the first step
left out in both. Medians; difference = stoker - DLIO.

The cases, per workload:

* storage-bound (these carry the target): reads capped at ``--cap-mbps`` (30 MB/s) by a blkio
  cgroup holding this process, its loader workers and DLIO (cgroup v1 ``blkio.throttle``, root;
  nothing else on the machine is slowed). That is the situation MLPerf Storage measures: the
  storage, not the host's CPU, sets the pace. At the preset's compute time and at a longer one
  that puts AU near the middle.
* uncapped, at the preset's compute time: the local disk outruns both readers, so AU measures
  each tool's reader on this 2-core machine, not the storage (context).

Cross-checks from the same runs: stoker's run scored with DLIO's numerator (nominal compute x
steps after the first) and DLIO's own step timeline (``0_output.json``) scored as stoker scores
it; they show how much of a difference is the formula and how much the reading.

    .venv/bin/python bench/loader_vs_dlio.py [--write BENCHMARKS.md] [--reps 3]
        [--workloads resnet50,cosmoflow] [--cap-mbps 30]

About 15 minutes with 3 reps. DLIO installs into ``.bench/dlio-venv`` on the first run
(``_peers.ensure_dlio``; how it runs: ``_dlio.py``); datasets live in ``.bench/dlio/`` (the disk
and the read cap: ``_loader_disk.py``). Saves ``bench/results/loader.json``;
``bench/_render_loader.py`` writes the section (``python bench/render.py loader`` again from
the file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import _dlio
from _loader_disk import (
    data_files,
    disk_read_mbps,
    ensure_data,
    evict,
    read_cap,
    read_cap_unavailable,
    whole_disk,
)
from _machine import cpu_mark, others_cpu_share
from _markdown import publish
from _peers import ensure_dlio
from _results import save
from render import render

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".bench" / "dlio"
TARGET_POINTS = 5.0
# per workload: samples (a few hundred MB), the storage-bound row's longer compute time (AU near
# the middle at the cap), and whether to add one run of DLIO as shipped (it matters at 4,000 files)
WORKLOADS = {
    "resnet50": {"samples": 4000, "long_ms": 750.0, "as_shipped": True},
    "cosmoflow": {"samples": 150, "long_ms": 60.0, "as_shipped": False},
}


def run_stoker(cfg: dict, *, compute_s: float) -> dict:
    from stoker.measure.loader import run_loader

    began = time.perf_counter()
    r = run_loader(
        str(cfg["stoker_data"]),
        cfg["workload"],
        accelerators=1,
        workers=cfg["workers"],
        compute_s=compute_s,
    )
    wall = time.perf_counter() - began
    u = r.utilization or 0.0
    return {
        "au": u,
        # run_loader already scores as DLIO does (nominal compute of the steps after the
        # first over the wall time), so the cross-check is the figure itself
        "au_dlio_formula": u,
        "steps": r.steps,
        "samples_per_s": r.samples_per_s,
        "mb_per_s": r.mb_per_s,
        "first_batch_s": r.first_batch_s,
        "wait_s": r.wait_s,
        "wall_s": wall,
    }


def measure_case(cfg: dict, case: dict, reps: int) -> dict:
    runs: dict[str, list[dict]] = {"dlio": [], "stoker": []}
    dlio_out = WORK / f"{cfg['workload']}-{cfg['samples']}" / "dlio-runs" / "last"
    cap, label = case["cap_mbps"], f"{cfg['workload']} {case['name']}"
    mark = cpu_mark()
    with read_cap(WORK, cap) if cap else nullcontext():
        for rep in range(reps):
            for tool in ("dlio", "stoker") if rep % 2 == 0 else ("stoker", "dlio"):
                evict(Path(cfg["dlio_data"]), Path(cfg["stoker_data"]))
                if tool == "dlio":
                    r = _dlio.run_dlio(cfg, compute_s=case["compute_s"], out=dlio_out)
                else:
                    r = run_stoker(cfg, compute_s=case["compute_s"])
                runs[tool].append(r)
                print(
                    f"{label}: rep {rep + 1}/{reps} {tool:6s} AU {r['au'] * 100:6.2f} % "
                    f"{r['samples_per_s']:8.1f} samples/s",
                    file=sys.stderr,
                    flush=True,
                )
        as_shipped = None
        if case.get("as_shipped"):
            evict(Path(cfg["dlio_data"]), Path(cfg["stoker_data"]))
            as_shipped = _dlio.run_dlio(
                cfg, compute_s=case["compute_s"], out=dlio_out, as_shipped=True
            )
            print(f"{label}: DLIO as shipped AU {as_shipped['au'] * 100:.2f} %", file=sys.stderr)

    def med(tool: str, key: str) -> float | None:
        vals = [r[key] for r in runs[tool] if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    return case | {
        "dlio_au": med("dlio", "au"),
        "stoker_au": med("stoker", "au"),
        "diff_points": (med("stoker", "au") - med("dlio", "au")) * 100,
        "dlio_au_stoker_formula": med("dlio", "au_stoker_formula"),
        "stoker_au_dlio_formula": med("stoker", "au_dlio_formula"),
        "dlio_samples_per_s": med("dlio", "samples_per_s"),
        "stoker_samples_per_s": med("stoker", "samples_per_s"),
        "stoker_first_batch_s": med("stoker", "first_batch_s"),
        "stoker_wall_s": med("stoker", "wall_s"),
        "cpu_elsewhere": others_cpu_share(mark),
        "runs": runs,
        "dlio_as_shipped": as_shipped,
    }


def measure_workload(args: argparse.Namespace, workload: str, cap_unavailable: str | None) -> dict:
    from stoker.measure.loader import preset

    p, plan = preset(workload), WORKLOADS[workload]
    preset_s = p.compute_s[args.accelerator]
    samples = plan["samples"] if args.samples is None else args.samples
    tag = f"{workload}-{samples}"
    cfg = {
        "workload": workload,
        "accelerator": args.accelerator,
        "preset": {"sample_bytes": p.sample_bytes, "sample_sd": p.sample_sd, "batch": p.batch},
        "preset_compute_s": preset_s,
        "samples": samples,
        "batch": p.batch,
        "workers": args.workers,
        "reps": args.reps,
        "dlio_resize": args.dlio_resize,
        "dlio_data": str(WORK / tag / "dlio-data"),
        "stoker_data": str(WORK / tag / "stoker-data"),
    }
    generated = ensure_data(cfg)
    dfiles, sfiles = data_files(Path(cfg["dlio_data"])), data_files(Path(cfg["stoker_data"]))
    cfg |= {
        "dlio_files": len(dfiles),
        "dlio_mb": sum(f.stat().st_size for f in dfiles) / 1e6,
        "stoker_mb": sum(f.stat().st_size for f in sfiles) / 1e6,
        "stoker_shards": sum(f.suffix == ".stk" for f in sfiles),
    }
    cases = []
    if not cap_unavailable:
        long_s = plan["long_ms"] / 1e3
        cases += [
            {"name": "capped-preset", "cap_mbps": args.cap_mbps, "compute_s": preset_s},
            {"name": "capped-long", "cap_mbps": args.cap_mbps, "compute_s": long_s},
        ]
    as_shipped = plan["as_shipped"] and not args.skip_as_shipped
    cases.append(
        {"name": "uncapped-preset", "cap_mbps": 0, "compute_s": preset_s, "as_shipped": as_shipped}
    )
    for case in cases:
        case["target"] = bool(case["cap_mbps"])
        case["preset"] = abs(case["compute_s"] - preset_s) < 1e-9
    return {
        "config": cfg,
        "generated": generated,
        "cases": [measure_case(cfg, case, args.reps) for case in cases],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    parser.add_argument(
        "--workloads", default="resnet50,cosmoflow", help=f"of {', '.join(WORKLOADS)}"
    )
    parser.add_argument("--accelerator", default="h100")
    parser.add_argument("--samples", type=int, default=None, help="default: per workload")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cap-mbps", type=float, default=30.0, help="0: no storage-bound rows")
    parser.add_argument("--dlio-resize", type=int, default=1)
    parser.add_argument("--skip-as-shipped", action="store_true")
    args = parser.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            parser.error(f"workload {w!r}: use {', '.join(WORKLOADS)}")

    ensure_dlio()
    WORK.mkdir(parents=True, exist_ok=True)
    no_cap = read_cap_unavailable(WORK) if args.cap_mbps else "--cap-mbps 0"
    results, disk = [], None
    for w in workloads:
        results.append(measure_workload(args, w, no_cap))
        if disk is None:
            disk = disk_read_mbps(Path(results[-1]["config"]["stoker_data"]))
    try:
        ra = Path(f"/sys/dev/block/{whole_disk(WORK)}/queue/read_ahead_kb").read_text().strip()
    except OSError:
        ra = "?"
    res = {
        "target_points": TARGET_POINTS,
        "kernel": os.uname().release,
        "disk_mbps": disk,
        "read_ahead_kb": ra,
        "versions": _dlio.versions(),
        "cap_mbps": args.cap_mbps,
        "cap_unavailable": no_cap if args.cap_mbps else None,
        "workloads": results,
    }
    keys = ("name", "compute_s", "dlio_au", "stoker_au", "diff_points")
    summary = {
        w["config"]["workload"]: [{k: r[k] for k in keys} for r in w["cases"]] for w in results
    }
    print(json.dumps(summary, indent=2))
    save("loader", res)
    publish(render("loader"), args.write)


if __name__ == "__main__":
    main()
