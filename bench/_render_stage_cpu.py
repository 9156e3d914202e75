"""The ``## stage cpu:`` section from bench/results/stage-cpu.json (bench/stage_cpu.py): CPU
seconds per GiB of an import, each stoker variant against rclone, medians of the interleaved
rounds, and how much of the machine other processes took meanwhile."""

from __future__ import annotations

import statistics

MiB = 1 << 20
NAMES = {"rclone": "rclone's", "rclone-defaults": "rclone's with its defaults"}
FLOORS = {
    "floor-obstore": "obstore's ranged streams, each piece written at its offset",
    "floor-httpclient": "http.client's readinto into one reused buffer, then pwrite",
}
PEERS_AND_FLOORS = ("rclone", "floor-")


def render(doc: dict) -> str:
    r = doc["results"]
    runs, gib, streams = r["runs"], r["gib"], r["streams"]
    mb = gib * 1024 * MiB / 1e6

    def med(tool: str, key: str) -> float:
        return _median(runs, tool, key)

    rows = [
        f"| {tool} | {len(runs[tool])} | {med(tool, 'cpu') / gib:.2f} | "
        f"{med(tool, 'user') / gib:.2f} | {med(tool, 'sys') / gib:.2f} | "
        f"{mb / med(tool, 'wall'):.0f} | {mb / (med(tool, 'wall') + med(tool, 'sync')):.0f} | "
        f"{med(tool, 'rss_mib'):.0f} | {100 * med(tool, 'others'):.0f} % |"
        for tool in runs
    ]
    ratios = [
        f"- {tool}: CPU per GiB {med(tool, 'cpu') / med(peer, 'cpu'):.2f}x {NAMES[peer]} "
        f"(target <= 1.00x: {'yes' if med(tool, 'cpu') <= med(peer, 'cpu') else '**no**'}), "
        f"MB/s {med(peer, 'wall') / med(tool, 'wall'):.2f}x {NAMES[peer]}"
        for tool in runs
        if not tool.startswith(PEERS_AND_FLOORS)
        for peer in NAMES
        if peer in runs
    ]
    floors = [
        f"- {tool} ({FLOORS[tool]}): CPU per GiB {med(tool, 'cpu') / med(peer, 'cpu'):.2f}x "
        f"{NAMES[peer]}"
        for tool in runs
        if tool in FLOORS
        for peer in NAMES
        if peer in runs
    ]
    floor_note = (
        "\nThe floors of a Python import (`--floors`, bench/_stage_floors.py): the same blobs "
        "into files by a program that does nothing stoker adds (no listing, no journal, no "
        "hash, no sync, no progress), as the least any Python data path pays here:\n\n"
        + "\n".join(floors)
        + "\n"
        if floors
        else ""
    )
    pairs = _pairs(runs) + _with_kernel_threads(runs, gib)
    variants = "; ".join(f"{k}: `{v}`" for k, v in r["variants"].items())
    load = r["load"]
    primed = (
        f" Before each run {r['prime_gib']:g} GiB of memory is filled and freed (`prime_memory` in "
        "`bench/_machine.py`: this VM makes memory freed a few seconds ago dear to take again, "
        "which charged each tool by how soon after the last run's deletion it wrote)."
        if r.get("prime_gib")
        else " **Memory not primed before the runs** (`--prime-gib 0`): system time varies by round."
    )
    blobs = (
        'every blob with a correct Content-MD5, which both tools check (see "## stage hashes")'
        if r.get("md5", True)
        else "the large blobs uploaded in blocks with no Content-MD5, as the SDKs and AzCopy "
        "leave them (nothing to check: stoker records a hash list of each as it arrives)"
    )
    untuned = " (and with its defaults: rclone-defaults)" if "rclone-defaults" in runs else ""
    return f"""## stage cpu: CPU seconds per GiB of an import, stoker against rclone

Measured {doc["measured"]} against one Azurite (in memory) on this machine
({doc["machine"]["cores"]} cores, load average {load["loadavg_1m"]:.1f} at the end; other
processes took {load["others_cpu"]:.0%} of the CPU over the run): {r["data"]}, {blobs}. Each round runs every tool
once, in a rotating order, into a fresh folder; CPU is the child's own user + sys (wait4's
rusage), MB/s is the process's wall time (then `sync`, timed apart: "with sync").{primed}
{r["rclone"]}, `--transfers {streams} --checkers {streams} --multi-thread-streams {streams}`{untuned};
stoker with its defaults, {variants}. Medians of the rounds; peak MiB is the
process's peak resident memory (/usr/bin/time). **Other processes share the cores**: the last
column is the share of the machine's CPU they took while each tool ran (Azurite's own CPU is
counted there too), so MB/s is noisy; CPU seconds per GiB much less so.

| tool | runs | CPU s / GiB | user | sys | MB/s | MB/s with sync | peak MiB | others' CPU |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

{chr(10).join(ratios)}
{floor_note}{pairs}"""


def _pairs(runs: dict[str, list[dict]]) -> str:
    """Round by round, each variant's CPU against the first variant's (an A/B in pairs)."""
    stokers = [t for t in runs if not t.startswith(PEERS_AND_FLOORS)]
    if len(stokers) < 2:
        return ""
    base = stokers[0]
    lines = []
    for tool in stokers[1:]:
        pairs = list(zip(runs[base], runs[tool], strict=False))
        wins = sum(b["cpu"] < a["cpu"] for a, b in pairs)
        lines.append(f"- {tool} used less CPU than {base} in {wins} of {len(pairs)} rounds")
    return "\n" + "\n".join(lines) + "\n"


def _with_kernel_threads(runs: dict[str, list[dict]], gib: float) -> str:
    """Each tool's own CPU plus what the kernel's threads used from its start to the end of
    the ``sync`` after it: rclone leaves its written pages for the kernel's flusher threads
    to write back, on no process's rusage; stoker starts the writeback of each block and
    fsyncs each file itself, so that work is in its own system time. (Runs before
    2026-12-03 did not record it.)"""
    if not all("kernel_threads" in x for tool in runs.values() for x in tool):
        return ""
    both = {
        tool: statistics.median(x["cpu"] + x["kernel_threads"] for x in runs[tool]) for tool in runs
    }
    lines = [
        f"- {tool}: its own {_median(runs, tool, 'cpu') / gib:.2f} CPU s / GiB, the kernel's "
        f"threads {_median(runs, tool, 'kernel_threads') / gib:.2f} meanwhile (through the "
        f"`sync`): {both[tool] / gib:.2f} together"
        for tool in runs
    ]
    lines += [
        f"- {tool} with the kernel's threads against rclone with them: "
        f"{both[tool] / both['rclone']:.2f}x"
        for tool in runs
        if not tool.startswith(PEERS_AND_FLOORS) and "rclone" in runs
    ]
    return (
        "\nWho writes the pages back (rclone leaves them to the kernel's flusher threads, on no "
        "process's rusage; stoker starts each block's writeback and fsyncs each file itself, "
        "in its own system time):\n\n" + "\n".join(lines) + "\n"
    )


def _median(runs: dict[str, list[dict]], tool: str, key: str) -> float:
    return statistics.median(x[key] for x in runs[tool])
