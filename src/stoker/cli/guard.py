"""``stoker guard``: watch the GPUs (and the training step) and act once when they idle.

Exit codes: 0 acted, 3 watched until ``--timeout`` without acting (busy, or no complete and
valid data), 2 a usage error or an action that failed."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from rich.markup import escape

from ._output import command, stderr, stdout

ACTIONS = ("print", "command", "webhook", "teardown")


@command
def guard(
    idle_for: Annotated[
        str, typer.Option(help="How long GPUs idle (or steps stall) before acting, e.g. 30m.")
    ] = "30m",
    util_below: Annotated[float, typer.Option(help="A GPU under this % is idle.")] = 5.0,
    interval: Annotated[str, typer.Option(help="Time between readings, e.g. 15s.")] = "15s",
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            help="A Prometheus endpoint to read instead of this node's NVML: `stoker watch` "
            "on a node (GPUs), a training process serving its Ledger (steps). Repeatable.",
        ),
    ] = None,
    step_file: Annotated[
        str | None, typer.Option(help="A file the training loop writes its step into.")
    ] = None,
    no_gpus: Annotated[
        bool, typer.Option("--no-gpus", help="Watch the training step only.")
    ] = False,
    action: Annotated[str, typer.Option(help="print, command, webhook or teardown.")] = "print",
    run: Annotated[
        str | None,
        typer.Option("--command", help="Shell command; $STOKER_GUARD_EVIDENCE."),
    ] = None,
    webhook: Annotated[str | None, typer.Option(help="URL to POST the evidence to.")] = None,
    deployment: Annotated[
        str | None,
        typer.Option(
            help="A provision folder: its bill prices the idle time in the evidence; for "
            "--action teardown, what to tear down (as for stoker teardown)."
        ),
    ] = None,
    resource_group: Annotated[str | None, typer.Option("--resource-group", "-g")] = None,
    subscription: Annotated[str | None, typer.Option()] = None,
    timeout: Annotated[
        str | None, typer.Option(help="Stop watching after this long without acting (exit 3).")
    ] = None,
    scrape_timeout: Annotated[
        str, typer.Option(help="Longest a --metrics endpoint may take to answer in all.")
    ] = "5s",
    json_out: Annotated[
        bool, typer.Option("--json", help="JSON lines: each change of verdict, then the act.")
    ] = False,
) -> None:
    """Act once (print, command, webhook, teardown) when GPUs idle or training stops stepping."""
    import time

    from .. import operate as acts
    from ..errors import StokerError
    from ..operate import Guard, GuardPolicy, Metrics, nvml_gpus
    from ..operate import step_file as step_source
    from ..units import parse_duration

    if action not in ACTIONS:
        raise StokerError(f"--action {action}: choose one of {', '.join(ACTIONS)}")
    urls = list(metrics or [])
    source = Metrics(urls, timeout_s=parse_duration(scrape_timeout)) if urls else None
    steps = step_source(step_file) if step_file else (source.steps if source else None)
    policy = GuardPolicy(
        idle_for_s=parse_duration(idle_for),
        util_below=util_below,
        interval_s=parse_duration(interval),
        watch_gpus=not no_gpus,
        watch_steps=steps is not None,
    )
    gpus = None if no_gpus else (source.gpus if source else nvml_gpus())

    def emit(evidence: dict[str, Any]) -> None:
        if json_out:
            _line(evidence)
        else:
            stdout.print(_evidence_text(evidence), highlight=False)

    if action == "command":
        if not run:
            raise StokerError("--action command needs --command 'CMD'")
        act = acts.command_action(run)
    elif action == "webhook":
        if not webhook:
            raise StokerError("--action webhook needs --webhook URL")
        act = acts.webhook_action(webhook)
    elif action == "teardown":
        if not deployment:
            raise StokerError("--action teardown needs --deployment (a provision folder or group)")
        if not urls and not no_gpus:
            raise StokerError(
                "--action teardown with this node's GPUs: the guard would deallocate its own VM "
                "before the Lustre archive. Run it outside the scale set, reading the nodes' "
                "`stoker watch` with --metrics http://NODE:19400/metrics"
            )
        act = acts.teardown_action(deployment, resource_group=resource_group,
                                   subscription=subscription)  # fmt: skip
    else:
        act = acts.print_action(emit)
    shown = _Changes(json_out)
    cost = acts.idle_cost(deployment) if deployment else None
    g = Guard(policy, gpus=gpus, steps=steps, action=act, on_verdict=shown, clock=time.time,
              cost=cost)  # fmt: skip
    what = [] if no_gpus else [f"the GPUs stay under {util_below:g} %"]
    what += ["no training step is recorded"] if steps else []
    stderr.print(f"guard: {action} once {' or '.join(what)} for {idle_for}", highlight=False)
    verdict = g.run(until=time.time() + parse_duration(timeout) if timeout else None)
    if verdict is None:
        last = escape(shown.last)
        stderr.print(f"guard: {timeout} passed without acting ({last})", highlight=False)
        raise typer.Exit(3)
    if action != "print":
        emit(acts.evidence(verdict) | {"action": action, "done": True})


class _Changes:
    """A verdict line on stderr (or a JSON line) each time the state or the kind of reason
    changes; the same state with new figures is not repeated."""

    def __init__(self, json_out: bool) -> None:
        self.json_out, self.key, self.last = json_out, None, ""

    def __call__(self, verdict: Any) -> None:
        key = (verdict.state, re.split(r"\d", verdict.reason)[0])  # figures aside
        self.last = f"{verdict.state}: {verdict.reason}"
        if key == self.key:
            return
        self.key = key
        if self.json_out:
            _line({"event": "verdict", "state": verdict.state, "reason": verdict.reason})
        else:
            unknown = verdict.state == "unknown"
            note = " (incomplete or invalid data is not idle: no action)" if unknown else ""
            stderr.print(escape(self.last + note), highlight=False)


def _line(data: dict[str, Any]) -> None:
    import json
    import sys

    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def _evidence_text(e: dict[str, Any]) -> str:
    from ..units import format_duration

    parts = [f"IDLE on {e['host']}: {e['reason']}"]
    if e.get("gpus"):
        parts.append(f"GPUs {', '.join(e['gpus'])}, peak {e.get('peak_util') or 0:.0f} %")
    if e.get("last_step") is not None:
        age = e.get("last_step_age_s") or 0
        parts.append(f"last step {e['last_step']} ({format_duration(age)} ago)")
    cost = e.get("cost") or {}
    if cost.get("idle_so_far_usd") is not None:
        parts.append(
            f"${cost['idle_so_far_usd']:,.2f} idle so far at ${cost['per_hour_usd']:,.2f}/h"
            + (" (priced part)" if cost.get("unpriced") else "")
        )
    span = e.get("span") or {}
    if span.get("count"):
        parts.append(
            f"{span['count']} readings over {format_duration(span['span_s'])} "
            f"(largest gap {format_duration(span['max_gap_s'])})"
        )
    return escape("; ".join(parts))
