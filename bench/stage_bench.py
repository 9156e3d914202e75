"""``stoker stage`` against AzCopy, rclone, the plain SDK and ``cp -r``, on one machine, one run.

Dataset shapes (random bytes, generated once into .bench/data): A) 2 x 1 GiB, B) 2,000 files
log-normal around 1 MiB, C) 2,000 x 64 KiB (``--quick``: 2 x 256 MiB, 500, 2,000), D) A's files
uploaded in blocks without Content-MD5 (import only, rclone with its defaults too:
_stage_no_md5). For each shape a fresh in-memory Azurite holds the dataset (uploaded once by
stoker, untimed; D's by the SDK), and:

* ceilings: everything read to memory with obstore (the better of 32 and 8 requests in flight,
  16 MiB ranges of large objects), written from memory the same way into a fresh emulator, and
  the disk's own rates (dd, O_DIRECT) (_stage_ceilings);
* import Blob -> local: stoker, rclone, AzCopy, the plain SDK (16 threads);
* export local -> Blob: stoker, rclone, AzCopy, each into a fresh emulator and container;
* POSIX -> POSIX: stoker against ``cp -r`` (C at the issue's 20,000 files).

Each run goes into an empty destination after ``sync`` and dropping the page cache; its time is
the tool's process from start to exit plus a ``sync`` after it (stoker makes every file durable
before it names it, the others do not: the ``sync`` makes the figures compare data on disk).
Medians of 3 runs (2 with ``--quick``); ``--bound-reps`` sets them apart for C. Every stoker
copy is checked (sizes of all files, MD5 of a sample); every peer's copy is counted (files and
bytes). Also: how much a resumed import re-sends after ``kill -9`` at half way, and the peak
memory of a 1,000,000-key listing (_stage_extras); ``--sync``: re-runs over an unchanged tree
(_stage_sync, its own results ``stage-sync``).

    .venv/bin/python bench/stage_bench.py [--quick] [--shapes A,B,C]
                                          [--parts import,export,posix] [--write BENCHMARKS.md]

Measure, then render: the figures go to bench/results/stage.json (``stage-quick`` with
``--quick``) through _results.save, after every shape, and bench/_render_stage.py writes the
section from that file (``python bench/render.py --write BENCHMARKS.md stage``). A shape or a
part run alone replaces only its own figures; the others are kept from the saved file.
A full run takes about 30 minutes; the section says how much CPU other processes took.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _peers  # noqa: E402
import _results  # noqa: E402
import _stage_no_md5  # noqa: E402
import render  # noqa: E402
from _machine import PRIME_GIB, cpu_mark, others_cpu_share, page_cache_fill  # noqa: E402
from _markdown import publish  # noqa: E402
from _peers import BENCH, Azurite, Peers  # noqa: E402
from _results import RESULTS  # noqa: E402
from _stage_ceilings import (  # noqa: E402
    CEILING_INFLIGHT,
    CEILING_RANGE,
    disk_ceilings,
    read_ceiling_s,
    request_bound,
    write_ceiling_s,
)
from _stage_data import (  # noqa: E402
    C_NOTE,
    C_OBJECTS,
    ISSUE_C_OBJECTS,
    GiB,
    MiB,
    Shape,
    ensure_dataset,
    posix_shape,
    shapes,
)
from _stage_extras import LISTING_KEYS, measure_listing, measure_resume  # noqa: E402
from _stage_tools import (  # noqa: E402
    DST_CONTAINER,
    PEER_STREAMS,
    SRC_CONTAINER,
    Run,
    Tools,
    check_blob_copy,
    check_count,
    check_local_copy,
    checkout_commit,
    drop_caches,
    fresh_dir,
    run_tool,
)

# The issue's bars: >= 1.0x the faster peer (aim 1.2x); where that is above what the machine
# can do (the emulator, the disk), >= 0.9x that ceiling; resume re-sends < 5 %; a listing of
# 1M keys under 300 MB.
TARGETS = {"peer": 1.0, "aim": 1.2, "ceiling": 0.9, "rss_mb": 300, "resend": 0.05}


def mb_s(shape: Shape, seconds: float) -> float:
    return shape.nbytes / seconds / 1e6


def setup_source(shape: Shape, data: Path, az: Azurite) -> None:
    """Upload the dataset once with stoker (untimed) and check that it all arrived."""
    from stoker.stage import stage

    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = az.connection_string
    az.create_container(SRC_CONTAINER)
    if not shape.md5:  # (as AzCopy and the SDKs upload large files: see _stage_no_md5)
        return _stage_no_md5.upload_in_blocks(shape, data, az, SRC_CONTAINER)
    with tempfile.TemporaryDirectory(dir=BENCH) as state:
        summary = stage(
            str(data),
            f"az://{SRC_CONTAINER}/{shape.name}",
            state_dir=Path(state),
            allow_http=True,
        )
    if not summary.ok:
        raise RuntimeError(f"setup upload failed: {summary.failed[:3]}")
    problem = check_blob_copy(shape, data, az, SRC_CONTAINER, f"{shape.name}/", hash_sample=False)
    if problem:
        raise RuntimeError(f"setup upload incomplete: {problem}")


class Recorder:
    """Per-tool lists of runs for one direction of one shape, and the problems found."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.runs: dict[str, list[dict]] = {}
        self.problems: list[str] = []

    def add(self, tool: str, run: Run, problem: str | None, extra: dict | None = None) -> None:
        row = {
            "seconds": run.seconds,
            "sync_s": run.sync_s,
            "rss_mib": run.rss_mib,
            "cpu_s": run.cpu_s,
            "kernel_s": run.kernel_s,
            "mb_s": mb_s(self.shape, run.total_s),
            **(extra or {}),
        }
        self.runs.setdefault(tool, []).append(row)
        if problem:
            self.problems.append(f"{tool}: {problem}")
        print(
            f"  {self.shape.name} {tool:<14} {row['mb_s']:9.1f} MB/s  "
            f"({run.seconds:.2f} s + sync {run.sync_s:.2f} s, {run.rss_mib:.0f} MiB, "
            f"{run.cpu_s:.1f} s CPU)" + (f"  PROBLEM {problem}" if problem else ""),
            flush=True,
        )

    def ceiling(self, name: str, seconds: float) -> None:
        self.runs.setdefault(name, []).append(
            {"seconds": seconds, "mb_s": mb_s(self.shape, seconds)}
        )
        print(f"  {self.shape.name} {name:<14} {mb_s(self.shape, seconds):9.1f} MB/s", flush=True)

    def result(self) -> dict:
        return {"runs": self.runs, "problems": self.problems}


def stoker_extra(run: Run) -> dict:
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    return {"stage_seconds": summary["seconds"], "bytes_fetched": summary["bytes_fetched"]}


def measure_import(shape: Shape, data: Path, az: Azurite, tools: Tools, reps: int) -> dict:
    rec = Recorder(shape)
    src_az = f"az://{SRC_CONTAINER}/{shape.name}"
    commands = {
        "stoker": lambda dst: tools.stoker(src_az, dst),
        "stoker-cli": lambda dst: tools.stoker_cli(src_az, dst),
        "stoker-no-md5": lambda dst: tools.stoker(src_az, dst, "no-md5"),
        "rclone": lambda dst: tools.rclone(
            f":azureblob:{SRC_CONTAINER}/{shape.name}", dst, upload=False
        ),
        "azcopy": lambda dst: tools.azcopy(
            tools.blob_url(SRC_CONTAINER, shape.name), dst, upload=False
        ),
        "sdk": lambda dst: tools.sdk(f"{shape.name}/", dst),
    }
    if not shape.md5:  # nothing to verify: durability's cost, and rclone untuned, instead
        commands |= _stage_no_md5.commands(shape, tools, SRC_CONTAINER)
    if request_bound(shape) or not shape.md5:  # (no MD5 check to leave out, or none that costs)
        del commands["stoker-no-md5"]
    names = list(commands)
    for rep in range(reps):
        rec.ceiling("ceiling", read_ceiling_s(shape, az))
        # Each round in another order: the emulator warms up over a run (C's ceiling rose from
        # 70 to 95 MB/s in 5 rounds), which favoured whichever tool always ran last.
        for tool in names[rep % len(names) :] + names[: rep % len(names)]:
            dst = fresh_dir(f"import-{tool}")
            drop_caches()
            run = run_tool(*commands[tool](str(dst)), _log(shape, f"import-{tool}", rep))
            if tool.startswith("stoker"):
                extra = {} if tool == "stoker-cli" else stoker_extra(run)
                rec.add(tool, run, check_local_copy(shape, data, dst), extra)
            else:
                rec.add(tool, run, check_count(shape, dst))
            shutil.rmtree(dst)  # one copy on disk at a time: five would fill this disk
    shutil.rmtree(BENCH / "runs", ignore_errors=True)
    return rec.result()


def _export_once(
    shape: Shape, data: Path, peers: Peers, tool: str, rep: int
) -> tuple[Run, str | None, dict]:
    """One export into a fresh emulator and container; the run, what is wrong, stoker's extra."""
    prefix = f"{shape.name}/"
    with Azurite() as az, tempfile.TemporaryDirectory(dir=BENCH) as state:
        az.create_container(DST_CONTAINER)
        tools = Tools(peers, az, Path(state))
        drop_caches()
        if tool.startswith("stoker"):
            make = tools.stoker_cli if tool == "stoker-cli" else tools.stoker
            argv = make(str(data), f"az://{DST_CONTAINER}/{shape.name}")
        elif tool == "rclone":
            argv = tools.rclone(str(data), f":azureblob:{DST_CONTAINER}/{shape.name}", upload=True)
        else:
            argv = tools.azcopy(f"{data}/*", tools.blob_url(DST_CONTAINER, shape.name), upload=True)
        run = run_tool(*argv, _log(shape, f"export-{tool}", rep))
        stoker = tool.startswith("stoker")
        problem = check_blob_copy(shape, data, az, DST_CONTAINER, prefix, stoker)
        extra = stoker_extra(run) if tool == "stoker" else {}
    return run, problem, extra


def measure_export(shape: Shape, data: Path, peers: Peers, reps: int) -> dict:
    rec = Recorder(shape)
    for rep in range(reps):
        rec.ceiling("ceiling", write_ceiling_s(shape))
        for tool in ("stoker", "stoker-cli", "rclone", "azcopy"):
            run, problem, extra = _export_once(shape, data, peers, tool, rep)
            rec.add(tool, run, problem, extra)
    return rec.result()


def measure_posix(shape: Shape, data: Path, peers: Peers, reps: int) -> dict:
    rec = Recorder(shape)
    tools = Tools(peers, None, BENCH)  # no emulator: stoker's argv only
    for rep in range(reps):
        dst = fresh_dir("posix-stoker")
        drop_caches()
        run = run_tool(*tools.stoker(str(data), str(dst)), _log(shape, "posix-stoker", rep))
        rec.add("stoker", run, check_local_copy(shape, data, dst))
        shutil.rmtree(dst)
        dst = fresh_dir("posix-cp")
        drop_caches()
        run = run_tool(["cp", "-r", str(data), str(dst)], None, _log(shape, "posix-cp", rep))
        rec.add("cp -r", run, check_count(shape, dst))
        shutil.rmtree(dst)
    shutil.rmtree(BENCH / "runs", ignore_errors=True)
    return rec.result()


def _log(shape: Shape, what: str, rep: int) -> Path:
    return BENCH / "logs" / f"{shape.name}-{what}-{rep}"


PARTS = ("import", "export", "posix")


def measure_shape(
    shape: Shape, mode: str, peers: Peers, reps: int, parts: tuple[str, ...], saved: dict | None
) -> dict:
    """The shape's figures; with only some ``parts``, the others are kept from ``saved``."""
    parts = tuple(p for p in parts if shape.md5 or p == "import")  # (D's others are A's)
    print(f"shape {shape.name}: {shape.label}, {shape.nbytes / 1e9:.2f} GB", flush=True)
    start_cpu = cpu_mark()
    data = ensure_dataset(shape, mode)
    now = datetime.now(UTC).isoformat(timespec="minutes")
    result: dict = {
        "shape": shape.name,
        "label": shape.label,
        "files": shape.files,
        "bytes": shape.nbytes,
        "large": shape.large,
        "reps": reps,
        "when": now,
        "load_before": os.getloadavg()[0],
        "command": _results.own_command(),
        "commit": checkout_commit(),
    }
    if saved and set(parts) != set(PARTS):
        rerun = saved.get("parts_rerun", {}) | {part: now for part in parts}
        result = saved | {"parts_rerun": rerun}
    if "import" in parts:
        with Azurite() as az, tempfile.TemporaryDirectory(dir=BENCH) as state:
            setup_source(shape, data, az)
            tools = Tools(peers, az, Path(state))
            result["import"] = measure_import(shape, data, az, tools, reps)
            if shape.large and shape.md5:  # (D: the same files as A)
                result["resume"] = measure_resume(shape, data, az, tools)
            result["azurite_rss_mib"] = az.rss_mib()
    if "export" in parts:
        result["export"] = measure_export(shape, data, peers, reps)
    if "posix" in parts:
        on_disk = posix_shape(shape, mode == "quick")
        result["posix"] = measure_posix(on_disk, ensure_dataset(on_disk, mode), peers, reps)
        result["posix"]["label"] = on_disk.label
    result["cpu_elsewhere"] = others_cpu_share(start_cpu)
    return result


def setup_info(peers: Peers, quick: bool) -> dict:
    """The machine, the tools' versions, the disk's own rates, and the settings the section
    quotes (a renderer holds no number of its own)."""
    mem = Path("/proc/meminfo").read_text().split()[1]
    return {
        "nproc": os.cpu_count(),
        "ram_gib": int(mem) / (1 << 20),
        "drop_caches": drop_caches(),
        "memory": {**page_cache_fill(BENCH / "fill"), "prime_gib": PRIME_GIB},
        "disk": disk_ceilings(256 * MiB if quick else GiB),
        "python": sys.version.split()[0],
        "versions": peers.versions,
        "notes": peers.notes,
        "settings": {
            "ceiling_inflight": list(CEILING_INFLIGHT),
            "ceiling_range_mib": CEILING_RANGE // MiB,
            "peer_streams": PEER_STREAMS,
            "targets": TARGETS,
            "issue_c_objects": ISSUE_C_OBJECTS,
            "c_note": C_NOTE,
            "parts": list(PARTS),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller datasets, 2 runs each")
    parser.add_argument("--shapes", default="A,B,C,D", help="which shapes to run (A,B,C,D)")
    parser.add_argument("--reps", type=int, help="runs per figure (default 3, 2 with --quick)")
    parser.add_argument(
        "--bound-reps",
        type=int,
        help="runs per figure on request-bound shapes (C) (default: as --reps)",
    )
    parser.add_argument(
        "--c-objects",
        type=int,
        help=f"objects in shape C (default {C_OBJECTS:,}; the issue names "
        f"{ISSUE_C_OBJECTS:,}, where the emulator slows down: see _stage_data.C_NOTE)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help="which copies to run (import,export,posix); the others keep their saved figures",
    )
    parser.add_argument("--write", type=Path, help="replace the '## stage:' section of this file")
    parser.add_argument(
        "--render", action="store_true", help="only write the section from the saved results"
    )
    parser.add_argument(
        "--sync", action="store_true", help="only measure re-runs over an unchanged tree"
    )
    args = parser.parse_args()
    if args.sync:
        from _stage_sync import measure_sync

        _results.save("stage-sync", measure_sync())
        publish(render.render("stage-sync"), args.write)
        return
    # A --quick run is not published: its results stay under .bench/ (smaller shapes).
    name = "stage"
    folder, reps = (BENCH / "results", args.reps or 2) if args.quick else (RESULTS, args.reps or 3)
    if args.render:
        publish(render.render(name, folder), args.write)
        return
    bound_reps = args.bound_reps or reps
    peers = _peers.install()
    # stoker's own bytecode, as an installed package has it: with PYTHONDONTWRITEBYTECODE set
    # (as on the machines here), an editable install would compile every module in every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(_peers.ROOT / "src")], check=True)
    try:
        earlier = _results.load(name, folder)
        saved = earlier["results"]["shapes"]
        for kept in saved.values():  # each shape names the run that measured it
            kept.setdefault("command", earlier["command"])
    except FileNotFoundError:
        saved = {}
    info = setup_info(peers, args.quick)
    info["listing"] = measure_listing(LISTING_KEYS)
    shapes_now = {s: saved[s] for s in sorted(saved)}
    for shape in shapes(args.quick, args.c_objects):
        if shape.name in args.shapes.split(","):
            parts = tuple(args.parts.split(","))
            n = bound_reps if request_bound(shape) else reps
            mode = "quick" if args.quick else "full"  # (the dataset's folder)
            result = measure_shape(shape, mode, peers, n, parts, saved.get(shape.name))
            shapes_now[shape.name] = result
            # each shape as it ends
            _results.save(name, {"info": info, "shapes": shapes_now}, folder=folder)
    publish(render.render(name, folder), args.write)


if __name__ == "__main__":
    main()
