"""BENCHMARKS.md's stream section, from bench/results/stream.json (bench/stream_bench.py)."""

from __future__ import annotations

import statistics

TARGET, CEILING_SHARE = 1.2, 0.9


def _med(runs: list[dict], field: str) -> float | None:
    values = [r[field] for r in runs if r.get(field) is not None]
    return statistics.median(values) if values else None


def _n(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def per_cpu_s(runs: list[dict]) -> float | None:
    """Median samples per CPU second (the loader's process and its workers): what a loader
    gets done when the machine's CPU, not the disk, is what it waits for."""
    return statistics.median(r["samples"] / r["cpu_s"] for r in runs) if runs else None


def _row(label: str, by: dict) -> str:
    cold, warm = by.get("cold", []), by.get("warm", [])
    cells = [label]
    for runs in (cold, warm):
        cells += [
            _n(_med(runs, "samples_s")),
            _n(_med(runs, "mb_s")),
            f"{_n(_med(runs, 'first_batch_s'), 2)} s" if runs else "-",
            _n(per_cpu_s(runs)),
        ]
    cells += [_n(_med(warm, "cpu_s"), 1), _n(_med(warm or cold, "distinct_shards"), 1)]
    return "| " + " | ".join(cells) + " |"


def _verdict(ratio: float, of_ceiling: float, target_above_ceiling: bool, peer_above: bool) -> str:
    if ratio >= TARGET:
        return "met"
    if peer_above:  # a ceiling that a peer passed was not one: the noise of this run
        return "**missed** (the peer ran above the measured ceiling: the rule cannot apply)"
    if target_above_ceiling and of_ceiling >= CEILING_SHARE:
        return f"met by the ceiling rule ({of_ceiling:.2f}x of the ceiling, >= {CEILING_SHARE}x)"
    return "**missed**"


def shapes_of(r: dict) -> dict[str, dict]:
    """Each shape's results; a results file from before the shapes holds the resnet50 one."""
    if "shapes" in r:
        return r["shapes"]
    return {"resnet50": r | {"formats": r.get("formats", {})}}


def render(doc: dict) -> str:
    r, m = doc["results"], doc["machine"]
    shapes = shapes_of(r)
    load = r["load"]
    others = [
        x["others_cpu"]
        for got in shapes.values()
        for by in got["runs"].values()
        for k in by.values()
        for x in k
    ]
    versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
    resident = max(
        (v for got in shapes.values() for v in got["resident_before_cold_bytes"].values()),
        default=0,
    )
    sizes = "; ".join(
        f"{g['samples']:,} records of {g['record_bytes']:,} B ({name})"
        for name, g in shapes.items()
    )
    lines = [
        f"## stream: the drop-in DataLoader path beside a map-style Dataset over files, Mosaic "
        f"Streaming, LitData and WebDataset, each used its own way (target: stoker {TARGET}x the "
        "fastest, cold and warm, on both shapes)",
        "",
        f"{sizes}. stoker and the map-style Dataset inside torch's own "
        f"`DataLoader(ds, batch_size={r['batch']}, num_workers={r['workers']}, "
        "collate_fn=collate)`, per sample, shuffled; each peer the way its documentation shows "
        "(LitData's `StreamingDataLoader`; WebDataset's pipeline with `.shuffle(1000)`, batched "
        "in the workers, read by `WebLoader`; Mosaic's `StreamingDataset` in torch's DataLoader, "
        "as its Quick Start; their defaults otherwise), with the same batch, workers, shuffling "
        "and collate function (bytes to one uint8 `(batch, record)` tensor); stoker's fastest "
        "path (`StreamingLoader`, `dtype=torch.uint8`, reader threads, no worker processes) "
        "hands over the same tensor. One epoch per fresh process, timed from building the "
        "loader (after the library's import and a `gc.collect()`) to the last batch; medians "
        f"of {r['reps']} rounds, the loaders' order rotated each round and reversed every other; "
        f"cold: the format's files evicted from the page cache (at most {resident / 1e6:,.1f} "
        "MB of any left, by fincore), warm: the same run again at once. bench/stream_bench.py's "
        "docstring has the details.",
        "",
        f"Machine: {m['cores']} cores, {m['memory_bytes'] / 2**30:.0f} GiB, Python "
        f"{m['python']}; {versions}. Load: other processes took "
        f"{min(others, default=0):.0%}-{max(others, default=0):.0%} of the CPU during the runs "
        f"({load['others_cpu']:.0%} over the whole benchmark, load average "
        f"{load['loadavg_1m']:.1f} at its end): the machine is shared, so the ratios of "
        "loaders run side by side are the figures to read, not the rates alone. The disk "
        f"(`dd iflag=direct bs=16M`, 4 at once, median): {_n(statistics.median(r['disk4_mb_s']))} "
        f"MB/s (one dd: {_n(statistics.median(r['disk_mb_s']))} MB/s); one core's memory copy: "
        f"{_n(r['memcpy_mb_s'])} MB/s.",
    ]
    for name, got in shapes.items():
        lines += ["", *_shape_lines(name, got)]
    return "\n".join(lines) + "\n"


def _shape_lines(shape: str, r: dict) -> list[str]:
    s, labels = r["summary"], r["labels"]
    names = ("memory", "page_cache", "pread_cache", "memory_peer_torch")
    ceilings = [n for n in names if n in r["runs"]]
    rows = [_row(labels[name], r["runs"][name]) for name in r["runs"] if name not in ceilings]
    mem = s["memory_ceiling_samples_s"]
    cached = s.get("page_cache_ceiling_samples_s")
    disk = s["disk_ceiling_samples_s"]
    warm_ceiling = s.get("warm_ceiling_samples_s") or (min(mem, cached) if cached else mem)
    reading = s.get("reading_ceilings_samples_s") or {"page_cache": cached}
    lines = [
        f"### {shape}: {r['samples']:,} records of {r['record_bytes']:,} B",
        "",
        "| loader | cold samples/s | cold MB/s | cold first batch | cold samples per CPU s "
        "| warm samples/s | warm MB/s | warm first batch | warm samples per CPU s | warm CPU s "
        "| distinct shards per batch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        *[_row(labels[name], r["runs"][name]) for name in ceilings],
        "",
        "Ceilings of the drop-in path, on stoker's own torch (as the map-style Dataset; the other "
        "peers run on theirs): torch's "
        "DataLoader fed from memory (the same DataLoader, collate and consumer, records already "
        f"in memory): {_n(mem)} samples/s; "
        + (_reading_sentence(reading, s) if cached else "")
        + f"the disk: {_n(disk)} samples/s.",
        "",
        "| target | measured | wanted | |",
        "|---|---|---|---|",
    ]
    for kind in ("cold", "warm"):
        ratio, peer = s[f"stoker_vs_peer_{kind}"], labels[s[f"fastest_peer_{kind}"]]
        ceiling = s.get(f"{kind}_ceiling_samples_s") or (
            warm_ceiling if kind == "warm" else min(warm_ceiling, disk)
        )
        best_peer = s["median_samples_s"][s[f"fastest_peer_{kind}"]][kind]
        above = TARGET * best_peer > ceiling
        of_ceiling = s[f"stoker_vs_ceiling_{kind}"]
        lines.append(
            f"| {kind}: stoker drop-in / fastest peer ({peer}) | {ratio:.2f}x; "
            f"{of_ceiling:.2f}x of the ceiling ({_n(ceiling)} samples/s); {TARGET}x the peer "
            f"would be {TARGET * best_peer / ceiling:.2f}x of it | >= {TARGET}x, or >= "
            f"{CEILING_SHARE}x the ceiling where {TARGET}x is above it | "
            f"{_verdict(ratio, of_ceiling, above, best_peer > ceiling)} |"
        )
    for kind in ("cold", "warm"):
        mine = per_cpu_s(r["runs"]["stoker"][kind])
        best = max(r["peers"], key=lambda p: per_cpu_s(r["runs"][p][kind]) or 0)
        theirs = per_cpu_s(r["runs"][best][kind])
        lines.append(
            f"| {kind}: stoker drop-in / most CPU-thrifty peer ({labels[best]}), samples per "
            f"CPU second | {mine / theirs:.2f}x ({_n(mine)} vs {_n(theirs)}) | (on a machine "
            "whose CPU is taken by others, the rate a loader gets follows this) | |"
        )
    for kind in ("cold", "warm"):
        own = s.get(f"stoker_vs_peer_{kind}_of_own_ceiling")
        if own is not None:
            lines.append(
                f"| {kind}: the same, each as a share of its own torch's memory ceiling "
                f"({_n(s['memory_ceiling_samples_s'])} samples/s on stoker's, "
                f"{_n(s['memory_ceiling_peer_torch_samples_s'])} on the peers') | {own:.2f}x | "
                "(torch's version set aside) | |"
            )
    for kind in ("cold", "warm"):
        lines.append(
            f"| {kind}: stoker's fastest path / fastest peer | "
            f"{s[f'fastest_vs_peer_{kind}']:.2f}x | (for reference) | |"
        )
    for kind in ("cold", "warm"):
        dp = s[f"dp_vs_stoker_{kind}"]
        lines.append(
            f"| {kind}: stoker with dp_size given / without | {dp:.2f}x | nil overhead "
            f"(within the runs' spread) | {_spread_note(r, kind)} |"
        )
    if r["problems"]:
        lines += ["", "Problems found in the runs:", *[f"- {p}" for p in r["problems"]]]
    return lines


def _reading_sentence(reading: dict, s: dict) -> str:
    """What the least reads of a sample from the page cache ran at, and which ceiling holds."""
    ways = {
        "page_cache": "one copy a sample out of maps of stoker's shards",
        "pread_cache": "one pread a sample from stoker's open shards",
    }
    said = "; ".join(f"{ways[n]}: {_n(v)} samples/s" for n, v in reading.items() if v)
    text = (
        "the same DataLoader reading each sample from the page cache the least way a loader "
        f"reading files can (no lookup, no check, no counter): {said}; the faster of them is the "
        "warm ceiling where it is below memory's, and the cold one where the disk is faster (a "
        "cold loader also copies each sample out of the page cache); "
    )
    taken = s.get("warm_ceiling_from")
    if taken and taken != "least reads":
        text += (
            f"this run's fastest peer read the same samples warm at {_n(s['warm_ceiling_samples_s'])}"
            " samples/s, above both: that is taken as the warm ceiling (the higher, so the harder"
            " for stoker); "
        )
    return text


def _spread_note(r: dict, kind: str) -> str:
    """The runs of plain stoker, min-max: the noise the groups' figure is read against."""
    plain = [x["samples_s"] for x in r["runs"]["stoker"][kind]]
    dp = [x["samples_s"] for x in r["runs"]["stoker-dp"][kind]]
    return (
        f"stoker {min(plain):,.0f}-{max(plain):,.0f}, with groups {min(dp):,.0f}-"
        f"{max(dp):,.0f} samples/s"
    )
