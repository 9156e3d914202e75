"""The ``## stage sync:`` section from bench/results/stage-sync.json (bench/_stage_sync.py):
each re-run's seconds, CPU and bytes moved against the target (< 2 s, 0 bytes; one more
``--include`` moves only the new files), and the machine's load meanwhile."""

from __future__ import annotations


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _cell(m: dict) -> str:
    return f"{m['s']:.2f} s ({m['cpu_s']:.2f} s CPU), {m['bytes'] / 1e6:.1f} MB"


def _floor(row: dict) -> str:
    """The bare start-up, and the unchanged re-run as a multiple of it (the machine's floor for
    any stoker process as it was loaded: a target under it cannot be met there)."""
    f = row.get("start_up")
    if not f:
        return "-"
    return (
        f"{f['s']:.2f} s ({f['cpu_s']:.2f} s CPU); the re-run {row['again']['s'] / f['s']:.2f}x, "
        f"{row['again']['cpu_s'] / f['cpu_s']:.2f}x its CPU"
    )


def render(doc: dict) -> str:
    r, machine = doc["results"], doc["machine"]
    target, files, new = r["target_s"], r["files"], r["new_files"]
    load = r["load"]
    out = (
        f"## stage sync: an unchanged {files:,}-file tree again (target < {target:g} s, "
        "0 bytes moved)\n\n"
        f"Measured {doc['measured']} on {machine['cores']} CPUs shared with other work "
        f"(load average {load['loadavg_1m']:.1f} at the end; other processes took "
        f"{load['others_cpu']:.0%} of the CPU meanwhile). Each figure is one "
        "`stoker stage ... --json` process, start-up included. The tree: "
        f"{files:,} files of 1-64 KiB in 20 folders taken by `--include 'd*'`, and {new} more "
        "in `new/` that the last run's second `--include 'new/*'` adds. Without its manifest the "
        "run compares what it lists with what the destination already has (size, and a copy "
        "newer than its source). CPU is stoker's process alone (user + system), what a busy "
        "machine does not change; to Blob the emulator's listing and writes (another process) "
        "come on top.\n\n"
        '"again, unchanged" is the median of '
        f"{r['repeats']} runs, each after a bare `stoker --help` (the CLI's start-up alone: the "
        "floor of any stoker process on this machine as it was loaded then, its median in the "
        "next column).\n\n"
        f"| path | first copy ({files:,} files) | again, unchanged | `stoker --help` alone "
        f"| again, manifest removed | one more --include ({new} new files) | target |\n"
        "|---|---:|---:|---:|---:|---:|---|\n"
    )
    for row in r["rows"]:
        ok = (
            row["again"]["s"] < target
            and row["again"]["bytes"] == 0
            and row["no_manifest"]["s"] < target
            and row["no_manifest"]["bytes"] == 0
            and row["wider"]["bytes"] == row["new_bytes"]
        )
        out += (
            f"| {row['path']} | {_cell(row['first'])} | {_cell(row['again'])} | "
            f"{_floor(row)} | "
            f"{_cell(row['no_manifest'])} | {_cell(row['wider'])} "
            f"({row['wider']['files']} files) | {_yes(ok)} |\n"
        )
    return out
