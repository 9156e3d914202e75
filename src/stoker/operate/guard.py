"""``guard``: act once when a node's or a job's GPUs have idled, or no training step has been
recorded, for a set time (``stoker guard``).

    guard = Guard(GuardPolicy(idle_for_s=1800, util_below=5), gpus=nvml_source(),
                  steps=metrics_steps(["http://node0:9401/metrics"]), action=print_action())
    verdict = guard.run()        # samples until it acts once, then returns the evidence

**The decision is a pure function**, ``decide(samples, steps, policy, now)``, over the readings
kept for the last ``idle_for_s`` (and a little more):

- *GPUs idle*: every reading from the window's start to now is complete and valid (see
  ``_guard_evidence``: every GPU announced is reported, once, with values in range), no gap
  between readings is longer than ``gap_s`` (2 x the interval and a little), and every GPU read
  stayed under ``util_below`` percent in each.
- *No step*: valid step readings cover the whole window the same way and the count did not
  change.

**Missing data is never idleness.** No NVML (no driver, no GPU), a GPU that stopped answering or
was not reported, a value out of range, an endpoint that does not answer or answers garbage, a
gap in the readings, readings that do not yet cover the window: each makes the verdict "unknown"
with the reason (which GPU, which value, where the gap was), and the window starts again after
the data returns. A guard that cannot see the GPUs says so; it does not tear a running job down.
An idle verdict carries the readings it rests on (``samples``) and their count and span.

**An unhealthy node is never idle evidence.** Where the node set-up marked the node the guard
runs on unhealthy (``/run/stoker/unhealthy``, ``stoker.node_markers``), the verdict names the
reason (``node_unhealthy``), an idle one becomes "unknown", and the idle window starts again
once the marker is cleared.

**Once.** ``Guard.run`` acts on the first idle verdict and returns it; it never acts twice.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .._arg_types import NUMBER, check_args
from ..errors import StokerError
from ._guard_evidence import (
    GpuReading,
    GpuValue,
    NodeReading,
    StepReading,
    gpu_problem,
    gpu_samples,
    step_problem,
    summary,
    walk,
)
from ._guard_sources import node_health

__all__ = [
    "GpuReading",
    "GpuValue",
    "Guard",
    "GuardPolicy",
    "NodeReading",
    "StepReading",
    "Verdict",
    "decide",
]


@dataclass(frozen=True)
class GuardPolicy:
    idle_for_s: float = 1800.0  # how long the GPUs must idle (or steps stall) before acting
    util_below: float = 5.0  # percent: a GPU under this is idle
    watch_gpus: bool = True
    watch_steps: bool = True  # when a step source is given
    interval_s: float = 15.0  # between readings
    max_gap_s: float | None = None  # a longer gap between readings is missing data (gap_s)

    def __post_init__(self) -> None:
        maybe = (*NUMBER, type(None))
        check_args(
            StokerError,
            idle_for_s=(self.idle_for_s, NUMBER),
            util_below=(self.util_below, NUMBER),
            watch_gpus=(self.watch_gpus, bool),
            watch_steps=(self.watch_steps, bool),
            interval_s=(self.interval_s, NUMBER),
            max_gap_s=(self.max_gap_s, maybe),
        )
        if not self.idle_for_s > 0:
            raise StokerError(f"idle_for_s={self.idle_for_s}: give a duration above 0")
        if not 0 <= self.util_below <= 100:
            raise StokerError(f"util_below={self.util_below}: give a percentage from 0 to 100")
        if not self.interval_s > 0:
            raise StokerError(f"interval_s={self.interval_s}: give a duration above 0")
        if not (self.watch_gpus or self.watch_steps):
            raise StokerError("the guard watches nothing: keep the GPUs or give a step source")

    @property
    def gap_s(self) -> float:
        """The longest time between readings that still covers the window: 2 x the interval
        and a little for the time a reading takes (a tenth of it, at least 250 ms), unless
        ``max_gap_s`` says."""
        if self.max_gap_s is not None:
            return self.max_gap_s
        return 2 * self.interval_s + max(0.1 * self.interval_s, 0.25)


@dataclass
class Verdict:
    state: str  # "idle", "busy" or "unknown" (missing or invalid data: never acted on)
    reason: str  # what was found idle ("GPUs under 5 % for 31 min"), busy or missing
    idle_s: float = 0.0  # how long the idle condition has held
    gpus: list[str] = field(default_factory=list)  # the GPUs found idle
    peak_util: float | None = None  # highest GPU utilization in the idle window, %
    last_step: int | None = None
    last_step_age_s: float | None = None  # since the step count last changed
    at: float = 0.0
    samples: list[dict[str, Any]] = field(default_factory=list)  # what an idle verdict rests on
    span: dict[str, Any] = field(default_factory=dict)  # their count, first/last time, max gap
    node_unhealthy: str = ""  # the node set-up's reason, while it marks this node unhealthy
    cost: dict[str, Any] = field(default_factory=dict)  # the idle time's cost, from the bill

    @property
    def idle(self) -> bool:
        return self.state == "idle"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    gpus: Sequence[GpuReading],
    steps: Sequence[StepReading],
    policy: GuardPolicy,
    now: float,
    node: Sequence[NodeReading] = (),
) -> Verdict:
    """Idle, busy or unknown, from the readings (oldest first); see the module docstring."""
    return _with_node(_decide(gpus, steps, policy, now), node, policy, now)


def _with_node(v: Verdict, node: Sequence[NodeReading], policy: GuardPolicy, now: float) -> Verdict:
    """The verdict with the node's health marker weighed in.

    An unhealthy node is drained: its GPUs idle because the scheduler keeps work off them, not
    because the job is done, and its readings may be the fault's own. So the marker counts as
    missing data: it never makes a verdict idle, an idle verdict becomes "unknown", and idleness
    counts only from the first look after the marker went. Acting would also take the node from
    the health timer that may yet clear it, and from the operator who must see why it failed."""
    if not node:
        return v
    last = node[-1]
    if last.unhealthy:
        v.node_unhealthy = last.unhealthy
        note = f"node marked unhealthy: {last.unhealthy}"
        if not v.idle:
            v.reason = f"{v.reason}; {note}"
            return v
        return _not_idle(v, f"{note}; {v.reason}, which is not acted on")
    marked = [i for i, r in enumerate(node) if r.unhealthy]
    if v.idle and marked:
        cleared = node[marked[-1] + 1]  # the first look that found no marker
        if cleared.at > now - policy.idle_for_s:
            why = node[marked[-1]].unhealthy
            ago = _dur(now - cleared.at)
            return _not_idle(
                v, f"{v.reason}, but the node was marked unhealthy until {ago} ago ({why})"
            )
    return v


def _not_idle(v: Verdict, reason: str) -> Verdict:
    """``v`` as an "unknown" verdict: what was seen kept, the readings it rested on dropped."""
    return Verdict(
        "unknown", reason, v.idle_s, v.gpus, v.peak_util, v.last_step, v.last_step_age_s, v.at,
        node_unhealthy=v.node_unhealthy,
    )  # fmt: skip


def _decide(
    gpus: Sequence[GpuReading], steps: Sequence[StepReading], policy: GuardPolicy, now: float
) -> Verdict:
    gpu = _gpu_verdict(gpus, policy, now) if policy.watch_gpus else None
    step = _step_verdict(steps, policy, now) if policy.watch_steps and steps else None
    found = [v for v in (gpu, step) if v is not None]
    if not found:
        return Verdict("unknown", "no readings yet", at=now)
    for v in found:
        if v.idle:
            if v is gpu and step is not None:  # the last step is evidence too
                v.last_step, v.last_step_age_s = step.last_step, step.last_step_age_s
            return v
    unknown = [v for v in found if v.state == "unknown"]
    busy = [v for v in found if v.state == "busy"]
    first = busy[0] if busy else unknown[0]
    if busy and unknown:
        first.reason += f"; and {unknown[0].reason}"
    return first


def _fresh(last: Any, policy: GuardPolicy, now: float, what: str) -> str:
    """Why the newest reading is no evidence of now: "" when it is."""
    if not (math.isfinite(last.at) and math.isfinite(now)) or last.at > now:
        return f"the {what} reading's time {last.at!r} is not before now ({now!r})"
    if now - last.at > policy.gap_s:
        return f"no {what} reading for {_dur(now - last.at)}"
    return ""


def _gpu_verdict(readings: Sequence[GpuReading], policy: GuardPolicy, now: float) -> Verdict:
    if not readings:
        return Verdict("unknown", "no GPU reading yet", at=now)
    last = readings[-1]
    why = gpu_problem(last) or _fresh(last, policy, now, "GPU")
    if why:
        return Verdict("unknown", why, at=now)
    names = set(last.announced)

    def problem(r: GpuReading) -> str:
        bad = gpu_problem(r)
        if not bad and set(r.announced) != names:
            bad = f"the GPUs announced changed ({len(r.announced)}, now {len(names)})"
        return bad

    start = now - policy.idle_for_s
    run, busy, why = walk(
        readings, problem, lambda r: max(r.util.values()) >= policy.util_below,
        gap_s=policy.gap_s, start=start, now=now,
    )  # fmt: skip
    idle_s = (now - run[-1].at) if run else 0.0
    shown = sorted(names, key=_natural)
    peak = max((max(r.util.values()) for r in run), default=None)
    under = f"GPUs under {policy.util_below:g} % for {_dur(idle_s)}"
    if busy is not None and not run:
        top = max(busy.util.values())
        return Verdict("busy", f"GPUs busy (up to {top:.0f} %)", 0.0, [], top, at=now)
    if busy is not None:
        why = f"{under} of {_dur(policy.idle_for_s)}"
        return Verdict("busy", why, idle_s, shown, peak, at=now)
    if run[-1].at <= start:
        run = run[::-1]
        why = f"{len(names)} GPU(s) under {policy.util_below:g} % for {_dur(idle_s)}"
        return Verdict(
            "idle", why, idle_s, shown, peak, at=now, samples=gpu_samples(run), span=summary(run)
        )
    why = why or f"the readings cover {_dur(idle_s)} of the {_dur(policy.idle_for_s)} window"
    return Verdict("unknown", f"{under}, but {why}", idle_s, shown, peak, at=now)


def _step_verdict(readings: Sequence[StepReading], policy: GuardPolicy, now: float) -> Verdict:
    last = readings[-1]
    why = step_problem(last) or _fresh(last, policy, now, "step")
    if why:
        return Verdict("unknown", why, at=now)
    start = now - policy.idle_for_s
    run, changed, why = walk(
        readings, step_problem, lambda r: r.step != last.step,
        gap_s=policy.gap_s, start=start, now=now,
    )  # fmt: skip
    age = now - run[-1].at  # the step (or the data) has stood still since
    kept = {"last_step": last.step, "last_step_age_s": age, "at": now}
    if changed is not None:
        return Verdict("busy", f"step {last.step}, last changed {_dur(age)} ago", **kept)
    if run[-1].at <= start:
        run = run[::-1]
        why = f"no training step for {_dur(age)} (step {last.step})"
        samples = [{"at": r.at, "step": r.step} for r in run]
        return Verdict("idle", why, age, **kept, samples=samples, span=summary(run))
    why = why or f"the readings cover {_dur(age)} of the {_dur(policy.idle_for_s)} window"
    return Verdict("unknown", f"step {last.step} for {_dur(age)}, but {why}", **kept)


def _dur(seconds: float) -> str:
    from ..units import format_duration

    return format_duration(seconds)


def _natural(name: str) -> tuple[str, int]:
    head, _, tail = name.rpartition("/")
    return (head, int(tail)) if tail.isdigit() else (name, -1)


# ---------------------------------------------------------------------------------- the loop


class Guard:
    """Reads the sources every ``policy.interval_s``, decides, and acts once when idle.

    ``gpus`` and ``steps`` are callables returning one reading each (see ``_guard_sources``);
    ``node`` reads the health marker (None: this node's, ``node_health()``). ``action`` takes
    the idle Verdict. ``on_verdict`` sees every verdict (the CLI shows them)."""

    def __init__(
        self,
        policy: GuardPolicy,
        *,
        gpus: Callable[[float], GpuReading] | None,
        steps: Callable[[float], StepReading] | None = None,
        node: Callable[[float], NodeReading] | None = None,
        action: Callable[[Verdict], Any],
        on_verdict: Callable[[Verdict], None] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        cost: Any = None,
    ) -> None:
        if policy.watch_gpus and gpus is None:
            raise StokerError("the guard watches GPUs but has no GPU source")
        self.policy, self.gpus, self.steps, self.action = policy, gpus, steps, action
        self.node = node or node_health()
        self.on_verdict = on_verdict or (lambda v: None)
        self.clock, self.sleep = clock, sleep
        self.cost = cost  # an IdleCost (_guard_cost.py): an idle verdict says what it costs
        keep = int(policy.idle_for_s / policy.interval_s) + 8
        self.gpu_log: deque[GpuReading] = deque(maxlen=keep)
        self.step_log: deque[StepReading] = deque(maxlen=keep)
        self.node_log: deque[NodeReading] = deque(maxlen=keep)
        self.acted: Verdict | None = None

    def tick(self) -> Verdict:
        """One reading of each source and the verdict on all readings so far."""
        now = self.clock()
        if self.policy.watch_gpus and self.gpus is not None:
            self.gpu_log.append(_read(self.gpus, now, GpuReading))
        if self.policy.watch_steps and self.steps is not None:
            self.step_log.append(_read(self.steps, now, StepReading))
        self.node_log.append(_read_node(self.node, now))
        verdict = decide(
            list(self.gpu_log), list(self.step_log), self.policy, now, list(self.node_log)
        )
        if verdict.idle and self.cost is not None:
            verdict = replace(verdict, cost=self.cost.of(verdict.idle_s))
        self.on_verdict(verdict)
        return verdict

    def run(self, *, max_ticks: int | None = None, until: float | None = None) -> Verdict | None:
        """Tick every ``interval_s`` until idle, act once and return the verdict; None after
        ``max_ticks``, or once the clock reaches ``until``."""
        ticks = 0
        while self.acted is None:
            began = self.clock()
            verdict = self.tick()
            if verdict.idle:
                self.acted = verdict
                self.action(verdict)
                return verdict
            ticks += 1
            if max_ticks is not None and ticks >= max_ticks:
                return None
            if until is not None and self.clock() >= until:
                return None
            # a steady beat: the time a reading took comes out of the wait, not on top of it
            self.sleep(max(0.0, self.policy.interval_s - (self.clock() - began)))
        return self.acted


def _read(source: Callable[[float], Any], now: float, kind: type) -> Any:
    """One reading; a source that fails is missing data, never a crash or idleness."""
    try:
        return source(now)
    except Exception as exc:  # noqa: BLE001 - any failure of a source is missing data
        return kind(now, None, missing=f"the source failed ({type(exc).__name__})")


def _read_node(source: Callable[[float], NodeReading], now: float) -> NodeReading:
    """The node's marker; a look that fails counts as a marked node (no idle action on it)."""
    try:
        return source(now)
    except Exception as exc:  # noqa: BLE001 - a marker that cannot be read is no all-clear
        return NodeReading(now, f"its health marker could not be read ({type(exc).__name__})")
