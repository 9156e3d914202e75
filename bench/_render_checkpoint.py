"""The ``## checkpoint:`` section of BENCHMARKS.md, from ``bench/results/checkpoint.json``
(written by ``checkpoint_bench.py``; a run of some ``--parts`` updates only theirs, and each
part keeps the date and command it was measured with)."""

from __future__ import annotations

from types import SimpleNamespace

from _ckpt_render_parts import crash_text, ddp_text, first_save_text, growth_text, preempt_text
from _ckpt_render_tables import (
    LABELS,
    _s,
    blocking_table,
    durable_table,
    has,
    interference_table,
    memory_table,
    timed,
)

STATES = ("tensor", "model", "small")


def provenance(res: dict, doc: dict) -> str:
    """When and by which command each part was measured, where a part is older than the run
    that saved the file (a run of some ``--parts`` keeps the others' figures)."""
    parts = res.get("parts") or {}
    older = {p: w for p, w in parts.items() if w["measured"] != doc["measured"]}
    if not older:
        return "Every part below was measured by the command at the end of this section."
    return (
        "Parts measured by an earlier run, kept in the same results file: "
        + "; ".join(f"{p} on {w['measured']} (`{w['command']}`)" for p, w in sorted(older.items()))
        + "."
    )


def render(doc: dict) -> str:
    res = doc["results"]
    C = SimpleNamespace(**res["config"])
    misses: list[str] = []
    m = res["machine"]
    states = {k: res["states"][k] for k in STATES if "bytes" in res["states"].get(k, {})}
    skipped = (
        f"\n**stoker was not measured**: {res['stoker_skipped']}.\n"
        if res.get("stoker_skipped")
        else ""
    )
    others = [e.get("cpu_elsewhere", 0) for st in states.values() for e in st["tools"].values()]
    busy = max(others) if others else 0
    quiet = (
        f"Other processes used at most {busy:.0%} of the CPU during any tool's run."
        if busy < 0.05
        else f"**Other processes used up to {busy:.0%} of the machine's CPU during the runs**: the figures are skewed."
    )
    fast_vs_wait = []
    for name, st in states.items():
        if has(st, "stoker"):
            e = st["tools"]["stoker"]
            fast_vs_wait.append(
                f"{LABELS[name]} {_s(timed(e, 'stoker_fast_s'))} s vs {_s(timed(e, 'durable_s'))} s"
            )
    verified = []
    for name, st in states.items():
        if has(st, "stoker"):
            v = st["tools"]["stoker"]["verified"]
            said = "every tensor and object equal" if v["ok"] else f"**{v['problem']}**"
            verified.append(f"{LABELS[name]}: {said} (load {v['load_s']:.2f} s)")

    def rates(st: dict, buffered: bool) -> str:
        found = [e["ceiling"] for e in st["tools"].values() if "ceiling" in e]
        return ", ".join(f"{(c['buffered'] if buffered else c)['mb_s']:.0f}" for c in found)

    ceilings = "; ".join(f"{LABELS[n]} {rates(st, False)} MB/s" for n, st in states.items())
    buffered = "; ".join(f"{LABELS[n]} {rates(st, True)} MB/s" for n, st in states.items())
    direct = [
        e["ceiling"]["mb_s"]
        for st in states.values()
        for e in st["tools"].values()
        if "ceiling" in e
    ]
    spread = (
        f"dd with O_DIRECT ranged {min(direct):.0f}-{max(direct):.0f} MB/s over this run: compare "
        "each tool with the ceiling measured beside it rather than across states or runs."
        if direct
        else ""
    )
    errors = "".join(
        f"- {LABELS[n]}, {t}: {e['error'].strip().splitlines()[-1][:300]}\n"
        for n, st in states.items()
        for t, e in st["tools"].items()
        if "error" in e
    )
    tables = (
        f"### Blocking time, s (the training loop waits this long)\n\n{blocking_table(states, misses, C)}\n"
        f"### Until durable on the fast tier, s\n\n{durable_table(states, misses, C)}\n"
        f"stoker's own `last_save.fast_s` against the time until its `wait()` returned: "
        f"{'; '.join(fast_vs_wait) or '-'}. dd with O_DIRECT ran at (one run after each tool): {ceilings}; the same bytes through the page cache, then `fsync` (not the target's ceiling; the kernel's writeback keeps more requests in flight than dd's one direct write): {buffered}.\n\n"
        f"### Training steps during a background save (median step, rise over idle)\n\n{interference_table(states)}\n"
        f"### Peak extra memory during a save, over the state's tensor bytes\n\n{memory_table(states, misses, C)}\n"
    )
    growth = growth_text(res.get("growth"), misses, C)
    first_save = first_save_text(res.get("first_save"), misses, C)
    preempt = preempt_text(res.get("preempt"), misses, C)
    ddp = ddp_text(res.get("ddp"), misses, C)
    crash = crash_text(res.get("crash"), misses, C)
    missed = "".join(f"- {x}\n" for x in misses) or "- none\n"
    return f"""## checkpoint: async saves against `torch.save` and DCP (targets: blocking {C.TARGET_BLOCKING}x `torch.save`, durable {C.TARGET_CEILING}x the disk)

Machine: {m["nproc"]} cores, {m["ram_gib"]:.0f} GiB RAM, Python {m["python"]}, torch {m["torch"]};
checkpoints on the repository's disk ({m["dir"]}). {provenance(res, doc)}
{skipped}
How: every (state, tool) pair runs in a fresh process with `torch.set_num_threads(1)`: a
first save (shown apart), then {res["reps"]} more whose medians are shown, each after
`os.sync()` (the page cache cannot be dropped here). Blocking: the save call (`torch.save` into a
temporary file, flush, `fsync`, rename, `fsync` of the folder; DCP `save` with its
`FileSystemWriter` defaults, `sync_files=True`; `async_save` until it returns; stoker until
`save()` returns). Durable: from the call until the data is `fsync`'d (`future.result()` for
`async_save`, `wait()` for stoker, whose own `fast_s` is shown too and is the figure held to the
target). The ceiling is `dd if=/dev/zero oflag=direct conv=fsync bs=8M` writing the same bytes
to the same disk, once after each tool, median. Interference: a CPU MLP (2 x {C.MLP_WIDTH} wide,
batch {C.MLP_BATCH}) steps for {C.IDLE_S:.0f} s idle, then through the save until it is durable (a
helper thread waits on it; saves repeat back to back until {C.WINDOW_STEPS} steps fell inside
them), in {res["reps"]} rounds; the table gives the median step during the saves and the median over
the rounds of its rise over the idle second just before. Sync tools stop the loop for their
whole save instead. Memory: the peak resident memory during each save (VmHWM reset before it,
and a 5 ms sampler) less the process's memory before the tool was created, so buffers a tool
keeps between saves count; the worst save is shown. stoker's round trip after its saves:
{"; ".join(verified) or "-"}.

{tables}### First save: blocking time against the later saves

{first_save}
### Memory over repeated saves

{growth}
### Crash safety

{crash}
### Save on preemption: from the event to the step committed on the fast tier

{preempt}
### DDP on {C.DDP_RANKS} ranks: replicated state written once

{ddp}
### Where stoker misses a target

{missed}
{quiet} {spread}
{("Failed runs:" + chr(10) + errors) if errors else ""}"""
