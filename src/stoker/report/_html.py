"""The page: one HTML file with its style and its charts inline (SVG), no script, no link to
anything outside it, so it opens offline, from a mail attachment or a file share."""

from __future__ import annotations

import datetime as dt
from html import escape
from typing import TYPE_CHECKING

from ..measure.measured import Measured
from ._figure import Chart, duration, money

if TYPE_CHECKING:
    from ..plan import PlanJson
    from ..simulate import SimulationJson

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #3b6ea5; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin: 0 0 0.2em; font-size: 1.05em; }
.meta { color: #666; font-size: 0.9em; }
table.facts { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.92em; }
table.facts td, table.facts th { padding: 0.2em 0.9em 0.2em 0; text-align: left;
                                 vertical-align: top; }
table.facts th { color: #555; font-weight: 600; }
figure.chart { margin: 1.4em 0; padding: 0.8em 1em; border: 1px solid #e3e3e3;
               border-radius: 6px; break-inside: avoid; }
figure.chart svg { width: 100%; height: auto; display: block; }
p.reading { margin: 0 0 0.6em; }
.warnings li { color: #8a4b00; }
"""


def page(
    charts: dict[str, list[Chart]],
    plan: PlanJson | None,
    sim: SimulationJson | None,
    measured: list[Measured],
    version: str,
) -> str:
    """The whole HTML document. ``charts``: section ("Plan", "Simulation", "Measured runs")
    -> its charts, in order; each section opens with its inputs' facts."""
    title = "stoker report" + (f": {plan['name']}" if plan and plan.get("name") else "")
    made = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="meta">Written by stoker {escape(version)} on {made}. '
        f"{_what(plan, sim, measured)}</p>",
    ]
    facts = {
        "Plan": _plan_facts(plan) if plan else "",
        "Simulation": _sim_facts(sim) if sim else "",
        "Measured runs": _measured_facts(measured) if measured else "",
    }
    for section, head in facts.items():
        items = charts.get(section) or []
        if head or items:
            parts.append(f"<section><h2>{escape(section)}</h2>{head}")
            parts += [_figure(c) for c in items]
            parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _what(plan: PlanJson | None, sim: SimulationJson | None, measured: list[Measured]) -> str:
    have = [w for w, x in (("a plan", plan), ("a simulation", sim)) if x]
    if measured:
        have.append(f"{len(measured)} measured run{'s' if len(measured) > 1 else ''}")
    return "From " + (", ".join(have) or "nothing") + "."


def _figure(c: Chart) -> str:
    return (
        f'<figure class="chart" id="{escape(c.key)}"><figcaption><h3>{escape(c.title)}</h3>'
        f'<p class="reading">{escape(c.reading)}</p></figcaption>\n{c.svg()}</figure>'
    )


def _rows(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{cells}</table>'


def _plan_facts(plan: PlanJson) -> str:
    rows = [
        ("job", f"{plan.get('name', '?')} ({plan.get('kind', '?')})"),
        (
            "cluster",
            f"{plan.get('nodes', '?')} x {plan.get('vm_size', '?')}, "
            f"{plan.get('gpus', '?')} GPUs, {plan.get('region', '?')}",
        ),
        ("catalog", f"as of {plan.get('catalog_as_of', '?')}"),
    ]
    run = plan.get("run") or {}
    if isinstance(run.get("wall_s"), int | float):
        rows.append(
            ("run", f"{duration(run['wall_s'])} wall clock, {run.get('steps', 0):,.0f} steps")
        )
    cost = plan.get("cost") or {}
    if (total := cost.get("total_usd")) is not None:
        rows.append(("cost", money(total)))
    elif cost.get("known_total_usd") is not None:
        rows.append(
            (
                "cost",
                f"{money(cost['known_total_usd'])} priced; no price for "
                f"{', '.join(cost.get('unknown') or [])}",
            )
        )
    warnings = plan.get("warnings") or []
    out = _rows(rows)
    if warnings:
        items = "".join(f"<li>{escape(str(w))}</li>" for w in warnings)
        out += f'<ul class="warnings">{items}</ul>'
    return out


def _sim_facts(sim: SimulationJson) -> str:
    from ._sim_charts import days

    rows = [
        (
            "simulated",
            f"{sim.get('runs', '?')} runs of {days(sim)} days on "
            f"{sim.get('gpus', '?')} GPUs, seed {sim.get('seed', '?')}",
        ),
        ("spec", str(sim.get("spec", "?"))),
    ]
    return _rows(rows)


def _measured_facts(measured: list[Measured]) -> str:
    rows = [
        (
            m.name,
            f"{m.source}, recorded {m.recorded or '?'}"
            + (f", from {m.path}" if m.path else "")
            + (f"; {m.dropped:,} values not finite or negative left out" if m.dropped else ""),
        )
        for m in measured
    ]
    return _rows(rows)
