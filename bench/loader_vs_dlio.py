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
        [--workloads resnet50,cosmoflow] [--cap-mbps 30] [--report-only]

About 15 minutes with 3 reps. DLIO installs into ``.bench/dlio-venv`` on the first run (see
``_dlio.py``); datasets live in ``.bench/dlio/``; raw results go to
``.bench/results/loader.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

from _machine import cpu_mark, others_cpu_share
from _markdown import publish, replace_section

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _dlio  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".bench" / "dlio"
RESULTS = ROOT / ".bench" / "results" / "loader.json"
TARGET_POINTS = 5.0
DLIO_BASE = {"resnet50": "resnet50_h100", "unet3d": "unet3d_h100", "cosmoflow": "cosmoflow_h100"}
# per workload: samples (a few hundred MB), the storage-bound row's longer compute time (AU near
# the middle at the cap), and whether to add one run of DLIO as shipped (it matters at 4,000 files)
WORKLOADS = {
    "resnet50": {"samples": 4000, "long_ms": 750.0, "as_shipped": True},
    "cosmoflow": {"samples": 150, "long_ms": 60.0, "as_shipped": False},
}
BLKIO = Path("/sys/fs/cgroup/blkio")


# ------------------------------------------------------------------------------- DLIO
def dlio_overrides(cfg: dict, *, compute_s: float, out: Path, generate: bool) -> list[str]:
    """DLIO's own workload config for the model, moved onto its PyTorch + NPZ path and set to
    the compared configuration (batch, compute time, reader threads, samples, sample size)."""
    p, w = cfg["preset"], "++workload"
    return [
        f"workload={DLIO_BASE[cfg['workload']]}",
        f"{w}.framework=pytorch",
        f"{w}.reader.data_loader=pytorch",
        f"{w}.dataset.format=npz",
        f"{w}.dataset.data_folder={cfg['dlio_data']}",
        f"{w}.dataset.num_files_train={cfg['samples']}",
        f"{w}.dataset.num_files_eval=0",
        f"{w}.dataset.num_samples_per_file=1",
        f"{w}.dataset.record_length={p['sample_bytes']}",
        f"{w}.dataset.record_length_stdev={p['sample_sd']}",
        f"{w}.dataset.record_length_resize={cfg['dlio_resize']}",
        f"{w}.reader.batch_size={cfg['batch']}",
        f"{w}.reader.read_threads={cfg['workers']}",
        # torch's DataLoader default, which stoker's run_loader keeps: 2 batches per worker
        f"{w}.reader.prefetch_size={2 * cfg['workers']}",
        f"{w}.train.computation_time={compute_s}",
        f"{w}.train.epochs=1",
        f"{w}.workflow.generate_data={generate}",
        f"{w}.workflow.train={not generate}",
        f"{w}.workflow.evaluation=False",
        f"{w}.workflow.checkpoint=False",
        f"{w}.workflow.profiling=False",
        f"hydra.run.dir={out}",
    ]


def run_dlio(
    cfg: dict, *, compute_s: float, out: Path, generate: bool = False, as_shipped: bool = False
) -> dict:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = _dlio.command(dlio_overrides(cfg, compute_s=compute_s, out=out, generate=generate))
    env = _dlio.env() | ({"STOKER_BENCH_DLIO_AS_SHIPPED": "1"} if as_shipped else {})
    began = time.perf_counter()
    with open(out / "stdout.log", "w") as log:
        proc = subprocess.run(cmd, cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - began
    if proc.returncode:
        tail = (out / "stdout.log").read_text()[-3000:]
        raise RuntimeError(f"DLIO failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    if generate:
        return {"wall_s": wall}
    m = json.loads((out / "summary.json").read_text())["metric"]
    au = m["train_au_mean_percentage"] / 100
    # DLIO's own timeline: per step, load = waiting for the batch, proc = load + compute.
    # AU = sum(nominal compute[1:]) / T with T = block time - proc[0]; stoker's formula on the
    # same timeline counts as compute all that is not waiting: 1 - sum(load[1:]) / T.
    ep = json.loads((out / "0_output.json").read_text())["1"]
    load, nominal = ep["load"]["block1"], ep["compute"]["block1"]
    total = sum(nominal[1:]) / au if au > 0 else None
    return {
        "au": au,
        "au_stoker_formula": 1 - sum(load[1:]) / total if total else None,
        "steps": len(load),
        "samples_per_s": m["train_throughput_mean_samples_per_second"],
        "mb_per_s": m.get("train_io_mean_MB_per_second"),
        "wall_s": wall,
    }


# ------------------------------------------------------------------------------- stoker
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


# ------------------------------------------------------------------------------- data, disk
def ensure_data(cfg: dict) -> dict:
    """Both datasets, each generated by its own tool once (kept for later runs)."""
    from stoker.measure.loader import generate

    took: dict[str, float] = {}
    dlio, stoker = Path(cfg["dlio_data"]), Path(cfg["stoker_data"])
    if not (dlio / ".complete").exists():
        shutil.rmtree(dlio, ignore_errors=True)
        dlio.mkdir(parents=True)
        out = dlio.parent / "dlio-generate"
        took["dlio_generate_s"] = run_dlio(cfg, compute_s=0.0, out=out, generate=True)["wall_s"]
        (dlio / ".complete").touch()
    if not (stoker / ".complete").exists():
        shutil.rmtree(stoker, ignore_errors=True)
        began = time.perf_counter()
        generate(cfg["workload"], str(stoker), cfg["samples"])
        took["stoker_generate_s"] = time.perf_counter() - began
        (stoker / ".complete").touch()
    os.sync()
    return took


def data_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name != ".complete")


def evict(*paths: Path) -> None:
    """Drop these files' pages from the page cache (theirs only: the machine is shared)."""
    for root in paths:
        for p in data_files(root):
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def disk_read_mbps(path: Path) -> float:
    """Cold sequential read of stoker's shards, 1 MiB at a time: the disk as one reader sees it."""
    evict(path)
    began, n = time.perf_counter(), 0
    for p in data_files(path):
        with open(p, "rb", buffering=0) as f:
            while chunk := f.read(1 << 20):
                n += len(chunk)
    return n / (time.perf_counter() - began) / 1e6


def whole_disk(path: Path) -> str:
    """``major:minor`` of the block device holding ``path`` (the disk, not a partition)."""
    st = os.stat(path)
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if (dev / "partition").exists():
        dev = dev.resolve().parent
    return (dev / "dev").read_text().strip()


def read_cap_unavailable(path: Path) -> str | None:
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return "no cgroup v1 blkio hierarchy (blkio.throttle) on this machine"
    if os.geteuid() != 0:
        return "capping reads needs root (a blkio cgroup)"
    try:
        whole_disk(path)
    except OSError as e:
        return f"cannot find the block device under {path}: {e}"
    return None


@contextmanager
def read_cap(path: Path, mbps: float):
    """This process (and the processes it starts meanwhile) in a blkio cgroup that caps reads
    from the disk holding ``path`` at ``mbps`` MB/s; the cgroup goes away afterwards."""
    line = next(x for x in Path("/proc/self/cgroup").read_text().splitlines() if ":blkio:" in x)
    home = BLKIO / line.split(":", 2)[2].lstrip("/")
    group = BLKIO / f"stoker-bench-{os.getpid()}"
    group.mkdir(exist_ok=True)
    try:
        rule = f"{whole_disk(path)} {int(mbps * 1e6)}"
        (group / "blkio.throttle.read_bps_device").write_text(rule)
        (group / "cgroup.procs").write_text(str(os.getpid()))
        yield
    finally:
        (home / "cgroup.procs").write_text(str(os.getpid()))
        for _ in range(50):  # exited workers may take a moment to leave
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


# ------------------------------------------------------------------------------- measuring
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
                    r = run_dlio(cfg, compute_s=case["compute_s"], out=dlio_out)
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
            as_shipped = run_dlio(cfg, compute_s=case["compute_s"], out=dlio_out, as_shipped=True)
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


def machine() -> dict:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "nproc": os.cpu_count(),
        "ram_gib": mem / 2**30,
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


# ------------------------------------------------------------------------------- report
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.1f} %"


def workload_markdown(w: dict) -> str:
    c = w["config"]
    p = c["preset"]
    rows = []
    for r in w["cases"]:
        d = r["diff_points"]
        where = f"capped {r['cap_mbps']:g} MB/s" if r["cap_mbps"] else "uncapped"
        preset = " (preset)" if r["preset"] else ""
        ok = "yes" if abs(d) <= TARGET_POINTS else "**no**"
        rows.append(
            f"| {where}, {r['compute_s'] * 1e3:g} ms{preset} | {_pct(r['dlio_au'])} "
            f"| {_pct(r['stoker_au'])} | {d:+.1f} | {ok if r['target'] else f'({ok}; context)'} "
            f"| {_pct(r['stoker_au_dlio_formula'])} | {_pct(r['dlio_au_stoker_formula'])} "
            f"| {r['dlio_samples_per_s']:,.1f} | {r['stoker_samples_per_s']:,.1f} "
            f"| {r['stoker_first_batch_s']:.2f} of {r['stoker_wall_s']:.1f} s "
            f"| {r['cpu_elsewhere'] * 100:.0f} % |"
        )
    table = "\n".join(rows)
    blocks = -(-c["stoker_shards"] // 8)
    spread = "; ".join(
        f"{'capped' if r['cap_mbps'] else 'uncapped'} {r['compute_s'] * 1e3:g} ms: DLIO "
        + ", ".join(f"{x['au'] * 100:.1f}" for x in r["runs"]["dlio"])
        + " / stoker "
        + ", ".join(f"{x['au'] * 100:.1f}" for x in r["runs"]["stoker"])
        for r in w["cases"]
    )
    shipped = "".join(
        f" DLIO as shipped (without the `read_index` fix), {r['compute_s'] * 1e3:g} ms uncapped, "
        f"one run: AU {r['dlio_as_shipped']['au'] * 100:.1f} %, "
        f"{r['dlio_as_shipped']['samples_per_s']:,.0f} samples/s."
        for r in w["cases"]
        if r.get("dlio_as_shipped")
    )
    return f"""### {c["workload"]}-shaped: {c["samples"]:,} samples of {p["sample_bytes"]:,} bytes, batch {c["batch"]}

{c["stoker_mb"]:,.0f} MB in {c["stoker_shards"]} stoker shards ({blocks} shuffle block{"s" if blocks > 1 else ""} of up to 8 shards); {c["dlio_files"]:,} DLIO NPZ files,
{c["dlio_mb"]:,.0f} MB. {c["samples"] // c["batch"]} steps per epoch, the first left out of AU by both.

| case, compute per step | DLIO AU | stoker AU | difference (points) | within {TARGET_POINTS:.0f} | stoker's run, DLIO's numerator | DLIO's run, stoker's formula | DLIO samples/s | stoker samples/s | stoker's first batch, of its run | CPU taken by other work |
|---|---:|---:|---:|:-:|---:|---:|---:|---:|---:|---:|
{table}

Single runs (AU %): {spread}.{shipped}
"""


def markdown(res: dict) -> str:
    v, m = res["versions"], res["machine"]
    targets = [r for w in res["workloads"] for r in w["cases"] if r["target"]]
    met = [r for r in targets if abs(r["diff_points"]) <= TARGET_POINTS]
    verdict = (
        f"**Target not met**: {len(met)} of {len(targets)} storage-bound rows "
        f"{'is' if len(met) == 1 else 'are'} within "
        f"{TARGET_POINTS:.0f} points of DLIO."
        if len(met) < len(targets) or not targets
        else f"Target met: all {len(targets)} storage-bound rows are within {TARGET_POINTS:.0f} points."
    )
    if res.get("cap_unavailable"):
        verdict += f" No storage-bound rows: {res['cap_unavailable']}."
    c0 = res["workloads"][0]["config"]
    gaps = [
        (abs(r["stoker_au"] - r["stoker_au_dlio_formula"]) * 100, r["compute_s"], w["config"])
        for w in res["workloads"]
        for r in w["cases"]
        if r["stoker_au_dlio_formula"] is not None
    ]
    formula_gap = "; ".join(
        f"{g:.1f} points ({cw['workload']}, {cs * 1e3:g} ms)" for g, cs, cw in gaps
    )
    dlio_gap = "; ".join(
        f"{(r['dlio_au_stoker_formula'] - r['dlio_au']) * 100:+.1f} ({w['config']['workload']}, "
        f"{r['compute_s'] * 1e3:g} ms)"
        for w in res["workloads"]
        for r in w["cases"]
        if r["dlio_au_stoker_formula"] is not None
    )
    sections = "\n".join(workload_markdown(w) for w in res["workloads"])
    return f"""## loader: `bench loader` against DLIO's AU (target: within {TARGET_POINTS:.0f} points)

Reproduce: `.venv/bin/python bench/loader_vs_dlio.py --write BENCHMARKS.md` (installs DLIO into
`.bench/dlio-venv` on the first run; the read cap needs root). Measured {res["when"]} on
{m["nproc"]} cores (shared with other work: see the last column), {m["ram_gib"]:.0f} GiB RAM, local disk (cold
sequential read {res["disk_mbps"]:,.0f} MB/s, read-ahead {res["read_ahead_kb"]} KiB), Python {m["python"]}. DLIO
{v["dlio-benchmark"]} from PyPI (`--no-deps`, then torch {v["torch"]}, hydra-core, pandas, psutil,
pydftracer 1.0.2, mpi4py {v["mpi4py"]} with PyPI's MPICH {v["mpich"]}: `bench/_dlio.py`), run as
`mpiexec -n 1`.

Method. The same configuration for both: 1 accelerator, the preset's sample size and batch,
{c0["workers"]} reader workers (DLIO `read_threads`) with 2 batches each in flight (DLIO
`prefetch_size={2 * c0["workers"]}`), one epoch per run, the compute time per step in the table
(DLIO `computation_time`, stoker `run_loader(compute_s=...)`). Each tool reads data it generated
itself on this disk: DLIO `generate_data=True` from its `*_h100` config moved to
`framework=pytorch`, `data_loader=pytorch`, `format=npz`, one sample per file (TFRecord needs
TensorFlow), `record_length_resize={c0["dlio_resize"]}` (the emulated accelerator gets a 1x1 array per
sample, as stoker's gets the sample sizes; DLIO's resnet50 config would collate 387x387 images,
0.3-1.7 s of `torch.stack` per batch here); stoker `stoker.measure.loader.generate`. Both
datasets are dropped from the page cache before every run (`posix_fadvise`, their files only).
The tools alternate, {c0["reps"]} runs each per row; medians; difference = stoker - DLIO. AU:
DLIO's `train_au_mean_percentage`, stoker's `LoaderResult.utilization`.

"Capped": reads from this disk limited to {res["cap_mbps"]:g} MB/s for the benchmark's processes only (a
blkio cgroup; nothing else is slowed), below what either reader takes, so that storage sets the
pace as in an MLPerf Storage run: these rows carry the target. "Uncapped": the disk outruns both
readers, so AU measures each reader's CPU on {m["nproc"]} shared cores (context). Two cross-checks
on the same runs: stoker's run scored with DLIO's numerator (nominal compute x steps after the
first, over the same wall time) and DLIO's own step timeline scored as stoker scores (all the
loop did between batches counts as compute).

{verdict}

{sections}
What the rows say:

- The formula: stoker's `utilization` counts as compute everything the training loop did
  between batches (sleep overshoot, its own bookkeeping), DLIO (and MLPerf Storage) only the
  nominal compute time. Scored with DLIO's numerator, stoker's runs move by {formula_gap}.
  DLIO's own runs scored as stoker scores move by (points) {dlio_gap}: DLIO's training loop
  logs every step and waits at an MPI barrier, time that its formula counts as not computing,
  which weighs at short steps.
- One shuffle block absorbed by the excluded first step: stoker reads shards in place through a
  memory map, and the kernel's read-around ({res["read_ahead_kb"]} KiB per fault) over a shuffled block of 8
  x 64 MiB shards reads most of the block while the first batch is gathered. MLPerf's rule
  leaves the first step out, so on a dataset of one block (resnet50 here) nearly all of the
  epoch's I/O falls outside AU (stoker's first batch takes most of its run in the capped rows).
  On an MLPerf-sized dataset (many blocks) the bias shrinks to one block in N; each later block
  then stalls the loop as a whole, while DLIO reads one file per sample as it goes.
- Bursty reads: with batch 1 (cosmoflow) the first step is one sample and the formulas agree,
  but the read-around makes stoker's reads come in bursts followed by page-cache hits, and with
  2 batches per worker in flight the disk idles while the queue is full: at a compute time near
  the read time per sample stoker keeps the disk less busy than DLIO, and reports a lower AU.
- Uncapped, DLIO's NPZ reader is CPU-bound here (about 1 ms of CPU per sample before any I/O:
  zip directory, CRC, header parse, per-sample Python), so DLIO's figure is its reader's, not
  the disk's. One fix to DLIO is applied in all runs (`bench/_dlio.py`): 2.0.0 formats its
  whole sample map into a debug string for every sample read (about 10 ms per sample at 4,000
  files).
"""


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
    parser.add_argument(
        "--report-only", action="store_true", help=f"rewrite the section from {RESULTS.name}"
    )
    args = parser.parse_args()
    if args.report_only:
        section = markdown(json.loads(RESULTS.read_text()))
        if args.write:
            replace_section(args.write, section)
        else:
            print(section)
        return
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    for w in workloads:
        if w not in WORKLOADS:
            parser.error(f"workload {w!r}: use {', '.join(WORKLOADS)}")

    _dlio.ensure()
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
        "when": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": machine(),
        "disk_mbps": disk,
        "read_ahead_kb": ra,
        "versions": _dlio.versions(),
        "cap_mbps": args.cap_mbps,
        "cap_unavailable": no_cap if args.cap_mbps else None,
        "workloads": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2))
    keys = ("name", "compute_s", "dlio_au", "stoker_au", "diff_points")
    summary = {
        w["config"]["workload"]: [{k: r[k] for k in keys} for r in w["cases"]] for w in results
    }
    print(json.dumps(summary, indent=2))
    publish(markdown(res), args.write)


if __name__ == "__main__":
    main()
