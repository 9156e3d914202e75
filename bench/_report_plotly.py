"""The report bench's peer: the same seven charts of the 2,048-VM plan and its simulation as
stoker report draws, made with plotly and written as one self-contained HTML page (plotly.js
inline once, as ``include_plotlyjs=True`` does), each chart in a ``figure.chart`` so the same
browser check reads both pages. Runs in ``.bench/report-venv`` (``_peers.ensure_report_venv``).

    python _report_plotly.py PLAN.json SIM.json OUT.html
"""

from __future__ import annotations

import json
import sys
import time


def charts(plan: dict, sim: dict) -> list[tuple[str, object]]:
    import plotly.graph_objects as go

    step = plan["step"]
    phases = ("compute_s", "exposed_comm_s", "data_stall_s", "checkpoint_s")
    split = go.Figure(
        [
            go.Bar(name=p, y=["plan"], x=[step[p] / step["total_s"] * 100], orientation="h")
            for p in phases
        ]
    )
    split.update_layout(
        barmode="stack", title="Where a step's time goes", xaxis_title="share of the step (%)"
    )
    opts = [o for o in plan["data"]["options"] if o["stall_per_step_s"] is not None]
    tiers = go.Figure(
        go.Bar(
            y=[o["tier"] for o in opts],
            orientation="h",
            x=[o["stall_per_step_s"] * 1e3 for o in opts],
        )
    )
    tiers.update_layout(
        title="Storage tiers: stall against cost", xaxis_title="GPU stall per step (ms)"
    )
    ck = plan["checkpoints"]
    c, m, r, t0 = ck["blocking_s"], ck["job_mtbf_s"], ck["restart_s"], ck["interval_s"]
    lost = max(0.0, (1 - ck["goodput"] - c / t0) * m - t0 / 2 - r)
    xs = [t0 / 20 * 400 ** (i / 199) for i in range(200)]
    ys = [100 * (1 - min(1.0, c / x + (x / 2 + lost + r) / m)) for x in xs]
    goodput = go.Figure(
        [
            go.Scatter(x=[x / 60 for x in xs], y=ys, name="goodput"),
            go.Scatter(
                x=[t0 / 60], y=[ck["goodput"] * 100], mode="markers", name="the plan's interval"
            ),
        ]
    )
    goodput.update_layout(
        title="Goodput against checkpoint interval",
        xaxis_type="log",
        xaxis_title="interval (minutes)",
        yaxis_title="goodput (%)",
    )
    items = plan["cost"]["items"]
    bill = go.Figure(
        go.Bar(y=[i["item"] for i in items], x=[i["usd"] or 0 for i in items], orientation="h")
    )
    bill.update_layout(title="The bill by item", xaxis_title="USD")
    dist = go.Figure(
        [
            go.Scatter(
                x=[sim[k]["p5"] * 100, sim[k]["p95"] * 100], y=[k, k], mode="lines+markers", name=k
            )
            for k in ("goodput", "gpu_busy")
        ]
    )
    dist.update_layout(title="Goodput across simulated runs", xaxis_title="%")
    causes = sim["lost_hours"]
    lost_chart = go.Figure(
        go.Bar(y=list(causes), x=[v["p50"] for v in causes.values()], orientation="h")
    )
    lost_chart.update_layout(title="Time lost by cause", xaxis_title="hours")
    events = sim["timeline"]
    timeline = go.Figure(
        go.Scatter(
            x=[e["t_hours"] / 24 for e in events],
            y=[e["event"] for e in events],
            mode="markers",
            marker_symbol="line-ns-open",
        )
    )
    timeline.update_layout(title="Timeline of one simulated run", xaxis_title="days")
    return [
        ("step-split", split),
        ("tier-options", tiers),
        ("goodput-interval", goodput),
        ("bill", bill),
        ("sim-goodput", dist),
        ("sim-lost", lost_chart),
        ("sim-timeline", timeline),
    ]


def main() -> None:
    start = time.perf_counter()
    plan_path, sim_path, out = sys.argv[1:4]
    plan, sim = json.loads(open(plan_path).read()), json.loads(open(sim_path).read())
    parts = []
    for i, (key, fig) in enumerate(charts(plan, sim)):
        div = fig.to_html(full_html=False, include_plotlyjs=(i == 0))  # the library once
        parts.append(f'<figure class="chart" id="{key}"><h3>{key}</h3>{div}</figure>')
    html = "<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" + "".join(parts)
    with open(out, "w") as f:
        f.write(html + "</body></html>")
    print(json.dumps({"elapsed_s": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
