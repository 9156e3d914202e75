"""The tables of ``## checkpoint:``: blocking, until durable, training steps during a save and
peak memory, per state and tool, from ``bench/results/checkpoint.json``. ``C`` is the run's
settings (``_ckpt_config.as_dict()``, saved with the results)."""

from __future__ import annotations

import statistics

TOOLS = ("torch.save", "dcp.save", "dcp.async_save", "stoker")
ASYNC_TOOLS = ("dcp.async_save", "stoker")

NAMES = {
    "torch.save": "`torch.save`",
    "dcp.save": "DCP `save`",
    "dcp.async_save": "DCP `async_save`",
    "stoker": "stoker",
}
LABELS = {"tensor": "1 tensor", "model": "GPT model + Adam", "small": "small tensors + objects"}


def timed(entry: dict, field: str) -> float:
    return statistics.median(r[field] for r in entry["runs"] if not r["warmup"])


def first(entry: dict, field: str) -> str:
    found = [r[field] for r in entry["runs"] if r["warmup"]]
    return f"{_s(found[0])} s" if found else "-"  # none with --warmup 0


def has(st: dict, tool: str) -> bool:
    return tool in st["tools"] and "error" not in st["tools"][tool]


def _s(x: float) -> str:
    return f"{x:.3f}" if x < 1 else f"{x:.2f}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def cell(st: dict, tool: str, fn) -> str:
    if tool not in st["tools"]:
        return "-"
    if "error" in st["tools"][tool]:
        return "failed"
    return fn(st["tools"][tool])


def ceiling_s(st: dict) -> float | None:
    runs = [e["ceiling"]["seconds"] for e in st["tools"].values() if "ceiling" in e]
    return statistics.median(runs) if runs else None


def state_label(name: str, st: dict) -> str:
    return f"{LABELS[name]}, {st['bytes'] / 1e9:.2f} GB"


def blocking_table(states: dict, misses: list[str], C) -> str:
    out = (
        "| state | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker / `torch.save` | target | met | first save: `async_save`, stoker |\n"
        "|---|" + "---:|" * len(TOOLS) + "---:|---|---|---|\n"
    )
    for name, st in states.items():
        cells = [cell(st, t, lambda e: _s(timed(e, "blocking_s"))) for t in TOOLS]
        ratio = met = "-"
        if has(st, "stoker") and has(st, "torch.save"):
            r = timed(st["tools"]["stoker"], "blocking_s") / timed(
                st["tools"]["torch.save"], "blocking_s"
            )
            ratio, ok = f"{r:.3f}x", r <= C.TARGET_BLOCKING
            met = _yes(ok) if name != "small" else ("yes" if ok else "no (not a target)")
            if not ok and name != "small":
                misses.append(
                    f"blocking, {LABELS[name]}: {r:.3f}x `torch.save` (target {C.TARGET_BLOCKING}x)"
                )
        firsts = ", ".join(cell(st, t, lambda e: first(e, "blocking_s")) for t in ASYNC_TOOLS)
        out += (
            f"| {state_label(name, st)} | "
            + " | ".join(cells)
            + f" | {ratio} | <= {C.TARGET_BLOCKING}x | {met} | {firsts} |\n"
        )
    return out


def durable_table(states: dict, misses: list[str], C) -> str:
    out = (
        "| state | dd ceiling | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker `fast_s` | stoker `fast_s` / ceiling | target | met |\n"
        "|---|---:|" + "---:|" * len(TOOLS) + "---:|---:|---|---|\n"
    )
    for name, st in states.items():
        ceiling = ceiling_s(st)
        cells = [cell(st, t, lambda e: _s(timed(e, "durable_s"))) for t in TOOLS]
        fast = ratio = met = "-"
        if has(st, "stoker") and ceiling:
            f = timed(st["tools"]["stoker"], "stoker_fast_s")
            r = f / ceiling
            fast, ratio, ok = _s(f), f"{r:.2f}x", r <= C.TARGET_CEILING
            met = _yes(ok)
            if not ok:
                misses.append(
                    f"durable, {LABELS[name]}: stoker {f:.2f} s, {r:.2f}x the dd ceiling {ceiling:.2f} s (target {C.TARGET_CEILING}x)"
                )
        ceil = _s(ceiling) if ceiling else "-"
        out += (
            f"| {state_label(name, st)} | {ceil} | "
            + " | ".join(cells)
            + f" | {fast} | {ratio} | <= {C.TARGET_CEILING}x | {met} |\n"
        )
    return out


def interference_table(states: dict) -> str:
    out = (
        "| state | idle step | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | stoker rise vs `async_save` rise |\n|---|---:|"
        + "---:|" * len(TOOLS)
        + "---|\n"
    )

    def rise(e: dict) -> float | None:
        # each rep against the idle steps just before it: the machine's load drifts
        rows = [r for r in e["interference"]["runs"] if r["during_ms"]]
        return statistics.median(r["during_ms"] / r["idle_ms"] - 1 for r in rows) if rows else None

    for name, st in states.items():
        idles = [
            e["interference"]["idle_ms"]
            for t, e in st["tools"].items()
            if t in ASYNC_TOOLS and "interference" in e
        ]
        cells = []
        for t in TOOLS:
            if t not in ASYNC_TOOLS:
                cells.append(cell(st, t, lambda e: f"n/a (blocks {_s(timed(e, 'blocking_s'))} s)"))
            else:
                cells.append(
                    cell(
                        st,
                        t,
                        lambda e: (
                            f"{e['interference']['during_ms']:.1f} ms ({rise(e):+.0%}, {e['interference']['steps']} steps)"
                            if rise(e) is not None
                            else "no steps"
                        ),
                    )
                )
        versus = "-"
        if has(st, "stoker") and has(st, "dcp.async_save"):
            a, b = rise(st["tools"]["stoker"]), rise(st["tools"]["dcp.async_save"])
            if a is not None and b is not None:
                versus = f"{a:+.0%} vs {b:+.0%} ({100 * (a - b):+.0f} points)"
        idle = f"{statistics.median(idles):.1f} ms" if idles else "-"
        out += f"| {state_label(name, st)} | {idle} | " + " | ".join(cells) + f" | {versus} |\n"
    return out


def memory_table(states: dict, misses: list[str], C) -> str:
    out = (
        "| state | "
        + " | ".join(NAMES[t] for t in TOOLS)
        + " | target (stoker) | met |\n|---|"
        + "---:|" * len(TOOLS)
        + "---|---|\n"
    )

    def ratio(e: dict) -> float:
        return max(r["peak_extra_bytes"] for r in e["runs"]) / e["bytes"]

    for name, st in states.items():
        cells = [cell(st, t, lambda e: f"{ratio(e):.2f}x") for t in TOOLS]
        met = "-"
        if has(st, "stoker"):
            r = ratio(st["tools"]["stoker"])
            met = _yes(r <= C.TARGET_MEMORY)
            if r > C.TARGET_MEMORY:
                misses.append(
                    f"memory, {LABELS[name]}: stoker peaks at {r:.2f}x the state (target {C.TARGET_MEMORY}x)"
                )
        out += (
            f"| {state_label(name, st)} | "
            + " | ".join(cells)
            + f" | <= {C.TARGET_MEMORY}x | {met} |\n"
        )
    return out
