"""The subsections of ``## checkpoint:`` past the tables: memory over repeated saves, crash
safety, the first save, a save on preemption and DDP. ``C`` is the run's settings
(``_ckpt_config.as_dict()``, saved with the results)."""

from __future__ import annotations

import statistics

from _ckpt_render_tables import LABELS, _s, _yes, state_label, timed


def growth_text(g: dict | None, misses: list[str], C) -> str:
    if not g:
        return "Not measured (needs stoker and the tensor state).\n"
    if "error" in g:
        return f"Failed: {g['error'].strip().splitlines()[-1][:300]}\n"
    after = g["rss_after"]
    grew = after[-1] - after[0]
    ok = grew <= C.TARGET_GROWTH * g["bytes"]
    if not ok:
        misses.append(f"growth: RSS rose {grew / C.MiB:,.0f} MiB over {len(after)} saves")
    return (
        f"stoker saving the {g['bytes'] / C.MiB:,.0f} MiB tensor {len(after)} times: RSS after the "
        f"first save {after[0] / C.MiB:,.0f} MiB, after the last {after[-1] / C.MiB:,.0f} MiB "
        f"({grew / C.MiB:+,.0f} MiB; highest {max(after) / C.MiB:,.0f} MiB; before the Checkpointer "
        f"existed {g['base_rss'] / C.MiB:,.0f} MiB). No growth (under {C.TARGET_GROWTH:.0%} of the "
        f"state): {_yes(ok)}.\n"
    )


def crash_text(c: dict | None, misses: list[str], C) -> str:
    if not c:
        return "Not run (`--crash 0`, or stoker was not importable).\n"
    rows = c["runs"]
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    with_commit = sum(1 for r in rows if r["last_committed"] is not None)
    bad = sum(n for v, n in verdicts.items() if not v.startswith(("ok", "failed, nothing")))
    corrupt = verdicts.get("corrupt", 0)
    survivors = sum(1 for r in rows if r["survivors"])
    if bad or survivors:
        misses.append(
            f"crash safety: {bad} bad loads of {len(rows)} ({corrupt} corrupt), {survivors} kills left processes behind"
        )
    loads = [r["load"]["seconds"] for r in rows if r["load"].get("ok")]
    damaged_n = sum(1 for r in rows if r.get("damaged"))
    prune_0 = sum(1 for r in rows if r.get("prune_exit") == 0)
    prune_1 = sum(1 for r in rows if r.get("prune_exit") == 1)
    prune_other = len(rows) - prune_0 - prune_1
    counts = ", ".join(f"{v}: {n}" for v, n in sorted(verdicts.items()))
    unready = [r for r in rows if not r["ready"]]
    unready_note = (
        f" **{len(unready)} children never said ready** (first: {unready[0]['child_error']})."
        if unready
        else ""
    )
    return (
        f"{len(rows)} kills of a child saving a {c['state_bytes'] / C.MiB:.0f} MiB state in a loop "
        f'(SIGKILL {C.CRASH_KILL_S[0]}-{C.CRASH_KILL_S[1]} s after "ready"; '
        f"{sum(len(r['committed']) for r in rows)} commits reported in all; one step committed "
        f"before the first kill). After each kill the "
        f"newest committed step is damaged (torn manifest and flipped shard byte, in turn; "
        f"{damaged_n} times: in the others the child had committed nothing since the last prune, "
        f"so no older whole step was left), `stoker checkpoint prune "
        f"--keep-last 1` runs (exit 1 when it kept a damaged step: {prune_1} times; exit 0: "
        f"{prune_0}; other: {prune_other}), and a fresh process loads, which must take the newest "
        f"step left whole; {with_commit} loads came after at least one commit.\n\n"
        f"| loads | ok | failed with a commit before | stale or lost the newest whole step | partial or corrupt | helpers outliving the kill | met |\n"
        f"|---:|---:|---:|---:|---:|---:|---|\n"
        f"| {len(rows)} | {verdicts.get('ok', 0)} | {verdicts.get('failed', 0)} | "
        f"{verdicts.get('stale', 0) + verdicts.get('from the future', 0) + verdicts.get('lost the newest whole step', 0)} | {corrupt} | {survivors} | "
        f"{_yes(not bad and not survivors)} |\n\n"
        f"Verdicts: {counts}.{unready_note} "
        f"Median load {statistics.median(loads):.2f} s. After all kills the folder held "
        f"{c['folder_bytes'] / C.MiB:,.0f} MiB in {c['folder_entries']} entries (keep_last=2 "
        f"means about {2 * c['state_bytes'] / C.MiB:,.0f} MiB).\n"
        if loads
        else f"No load succeeded. Verdicts: {counts}.\n"
    )


def first_save_text(fs: dict | None, misses: list[str], C) -> str:
    if not fs:
        return "Not measured (`--parts first`).\n"
    out = (
        f"Each stoker process: a CPU MLP steps for {C.IDLE_S:.0f} s idle, the `Checkpointer` is "
        f"made (with `reserve_like=state` or without), the MLP steps until {C.FIRST_TRAIN_S:.0f} s "
        "after that (the training that runs before a first save), then come the first save and "
        "the later ones, each after the previous one was durable and `os.sync()`. Fresh "
        "processes in turns, several per row: first save = the median of their first saves, "
        "later = the median of all their later saves. `torch.save`: the same state's median "
        "blocking in its own process, just before.\n\n"
        "| state | stoker | first save, s | later saves, s | first / later | target "
        "| met | later / `torch.save` | target | met | training step while the pages go in |\n"
        "|---|---|---:|---:|---:|---|---|---:|---|---|---|\n"
    )
    notes = []
    for name, row in fs.items():
        torch_s = (
            timed(row["torch.save"], "blocking_s") if "runs" in row.get("torch.save", {}) else None
        )
        for variant, title in (("none", "no reserve"), ("reserve", "`reserve_like=state`")):
            runs = [e for e in row.get(variant, []) if "blocking_s" in e]
            if not runs:
                out += f"| {LABELS[name]} | {title} | failed | | | | | | | | |\n"
                misses.append(f"first save, {LABELS[name]}, {title}: the run failed")
                continue
            firsts = [e["blocking_s"][0] for e in runs]
            laters = [b for e in runs for b in e["blocking_s"][1:]]
            first_s, later = statistics.median(firsts), statistics.median(laters)
            r = first_s / later
            steady = later / torch_s if torch_s else None
            held = variant == "reserve"
            ok_first = r <= C.TARGET_FIRST
            ok_steady = steady is not None and steady <= C.TARGET_BLOCKING
            if held and not ok_first:
                misses.append(
                    f"first save, {LABELS[name]}: {first_s:.3f} s, {r:.2f}x the later saves' "
                    f"median {later:.3f} s (target {C.TARGET_FIRST}x)"
                )
            if held and not ok_steady:
                misses.append(
                    f"first save part, {LABELS[name]}: later saves {steady or 0:.3f}x `torch.save` "
                    f"(target {C.TARGET_BLOCKING}x)"
                )
            steps = "-"
            busy = [e for e in runs if e.get("prefaulting_ms")]
            if busy:
                steps = (
                    f"{statistics.median(e['prefaulting_ms'] for e in busy):.1f} ms "
                    f"({sum(e['prefaulting_steps'] for e in busy)} steps; idle "
                    f"{statistics.median(e['idle_ms'] for e in runs):.1f} ms, after "
                    f"{statistics.median(e['after_ms'] or 0 for e in busy):.1f} ms)"
                )
            out += (
                f"| {state_label(name, {'bytes': runs[0]['bytes']})} | {title} | {_s(first_s)} "
                f"({', '.join(_s(f) for f in firsts)}) | {_s(later)} ({len(laters)} saves) | "
                f"{r:.2f}x | {f'<= {C.TARGET_FIRST}x' if held else '-'} | "
                f"{_yes(ok_first) if held else '-'} | "
                f"{f'{steady:.3f}x of {_s(torch_s)} s' if steady else '-'} | <= {C.TARGET_BLOCKING}x | "
                f"{_yes(ok_steady)} | {steps} |\n"
            )
            faulted = [e for e in runs if e.get("prefault_s") is not None]
            if held and faulted:
                late = sum(1 for e in faulted if not e["ready_at_save"])
                notes.append(
                    f"{LABELS[name]}: the background thread faulted the buffer in "
                    f"({faulted[0]['method']}) in "
                    + ", ".join(f"{e['prefault_s']:.2f}" for e in faulted)
                    + " s, "
                    + (
                        "each done before the first save"
                        if not late
                        else f"**{late} not done by the first save**"
                    )
                    + f" (the `Checkpointer` was made in "
                    f"{statistics.median(1e3 * e['made_s'] for e in faulted):.0f} ms)"
                )
    others = [
        e.get("cpu_elsewhere", 0)
        for row in fs.values()
        for runs in row.values()
        for e in (runs if isinstance(runs, list) else [runs])
    ]
    if others:
        notes.append(
            f"other processes took up to {max(others):.0%} of the machine's CPU during these "
            "runs" + (" (the figures are skewed)" if max(others) >= 0.05 else "")
        )
    out += (
        "\nWhere the first save's time goes without a reservation (a profile of one save of the "
        "tensor state): nearly all of it is the page faults of the fresh host buffer; copying "
        "into the same buffer once faulted, and laying out and pickling the skeleton, are small "
        "beside them. "
        "With `reserve()`/`reserve_like=` the buffer is made when the `Checkpointer` is and "
        "faulted in (`MADV_POPULATE_WRITE`) by a background thread while training runs; that "
        "costs CPU time, which the training steps of the last column show on these 2 cores. "
        + ("; ".join(notes) + "." if notes else "")
        + "\n\nGPU tensors (issue 23 part 6) are copied into the buffer, pinned with "
        "`cudaHostRegister`, on a side CUDA stream that the writer waits on: the path is "
        "unit-tested on the CPU through a fake CUDA seam "
        "(tests/test_checkpoint_device_copy.py); this benchmark saves CPU tensors only.\n"
    )
    return out


def preempt_text(p: dict | None, misses: list[str], C) -> str:
    if not p:
        return "Not measured (`--parts preempt`).\n"

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    out = (
        f"A local Scheduled Events server (stoker.checkpoint._events_server, the documented "
        f"documents) posts a Preempt with {C.PREEMPT_NOTICE_S:.0f} s of notice at a random moment "
        f"of the watcher's {C.PREEMPT_POLL_S:g} s poll cycle; the training loop steps every "
        f"{C.PREEMPT_STEP_S * 1e3:.0f} ms and calls `watcher.should_stop(step)`, which saves the "
        f"{p['bytes'] / C.GiB:.2f} GiB state, waits for the fast tier's commit and acknowledges. "
        f"Before each run a periodic save of the same state was made (the buffer exists, as in "
        f"steady training); 'during a save' posts the event right after a periodic save started, "
        f"so that save's write is finished before the new one. Medians of {p['runs']} runs each "
        f"(measured {p['when']}); the ceiling is dd writing the same bytes with O_DIRECT and "
        "`fsync` to the same disk after each run. Target: the event served to the fast commit "
        f"within {C.TARGET_PREEMPT_S:.0f} s, half the Spot notice.\n\n"
        "| the event comes | served -> fast commit, s | posted -> fast commit, s | target | met "
        "| poll wait | loop to save | save blocks | write | dd ceiling, s | write / ceiling "
        "| ack after commit |\n"
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    for variant, title in (("idle", "between saves"), ("in_flight", "during a save")):
        rows = p.get(variant) or []
        if not rows:
            continue
        total = med(rows, "served_to_fast_s")
        ceiling = statistics.median(r["ceiling"]["seconds"] for r in rows)
        ok = total <= C.TARGET_PREEMPT_S
        if not ok:
            misses.append(
                f"preemption {title}: {total:.1f} s from the event to the fast commit "
                f"(target {C.TARGET_PREEMPT_S:.0f} s)"
            )
        out += (
            f"| {title} | {_s(total)} | {_s(med(rows, 'posted_to_fast_s'))} | "
            f"<= {C.TARGET_PREEMPT_S:.0f} | {_yes(ok)} | {_s(med(rows, 'poll_wait_s'))} | "
            f"{_s(med(rows, 'loop_s'))} | {_s(med(rows, 'blocking_s'))} | "
            f"{_s(med(rows, 'write_s'))} | {_s(ceiling)} | "
            f"{med(rows, 'write_s') / ceiling:.2f}x | {1e3 * med(rows, 'ack_after_commit_s'):.0f} ms |\n"
        )
    acked = all(r["acknowledged"] for v in ("idle", "in_flight") for r in p.get(v) or [])
    out += (
        "\n'save blocks' includes, during a save, the wait for the write in flight. Every event was "
        + ("acknowledged after its commit" if acked else "**not always acknowledged**")
        + ". With a durable tier the watcher also waits for the upload when the notice leaves "
        "time for the upload measured last (not measured here: the durable tier's rate is the "
        "stage and storage benches'). "
        + (
            f"Other processes used {p['cpu_elsewhere']:.0%} of the CPU during these runs."
            if p.get("cpu_elsewhere") is not None
            else ""
        )
        + "\n"
    )
    return out


def ddp_text(d: dict | None, misses: list[str], C) -> str:
    if not d:
        return "Not measured (`--parts ddp`).\n"
    rows = []
    for variant, label in (
        ("each", "`save(step, state)`"),
        ("once", "`save(..., replicated=True)`"),
    ):
        e = d.get(variant) or {}
        if "error" in e or not e:
            rows.append(f"| {label} | failed | | | | | |")
            continue
        ratio = e["written"] / e["tensor_bytes"]
        vs = e["fast_s"] / e["ceiling"]["seconds"]
        rows.append(
            f"| {label} | {ratio:.2f}x | {e['blocking_s']:.2f} | {e['fast_s']:.2f} | "
            f"{e['ceiling']['seconds']:.2f} | {vs:.2f}x | {e.get('durable_s', 0.0):.2f} |"
        )
        if variant == "once":
            if ratio > C.TARGET_DDP_BYTES + 0.01:
                misses.append(
                    f"DDP bytes per save {ratio:.2f}x the model's (target {C.TARGET_DDP_BYTES}x)"
                )
            if vs > C.TARGET_DDP_DURABLE:
                misses.append(
                    f"DDP durable on the fast tiers {vs:.2f}x dd's ceiling (target "
                    f"{C.TARGET_DDP_DURABLE}x)"
                )
    once = d.get("once") or {}
    size = once.get("tensor_bytes") or (d.get("each") or {}).get("tensor_bytes") or 0
    other = d.get("cpu_elsewhere")
    return (
        f"{d['ranks']} ranks under torchrun (gloo, CPU) as two emulated nodes of two, each node's "
        f"fast tier its own folder on the same disk; every rank holds the same "
        f"{size / C.MiB:.0f} MiB of model and optimizer tensors (DDP) and saves it; medians of the "
        "saves after the first. The durable tier is a folder on the same disk (a node-local "
        "fast tier needs one for `replicated=`); each save is waited for before the next. "
        "Written: the bytes of the step's shard files on both fast tiers, over the model's "
        "tensor bytes. Durable: from the `save()` call until the step is committed on the fast "
        "tiers (every rank's file fsynced), slowest rank: the figure held to the target. "
        "Ceiling: `dd oflag=direct conv=fsync` writing the model's bytes once to the same "
        "disk, right after each variant. Last column: until committed on the durable tier "
        "too (the same bytes copied once more on the same disk).\n\n"
        "| save | written per save | blocking, s | durable, s | dd ceiling, s | durable / ceiling | on the durable tier too, s |\n"
        "|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + (
            f"Other processes used {other:.0%} of the CPU during these runs.\n"
            if other is not None
            else ""
        )
    )
