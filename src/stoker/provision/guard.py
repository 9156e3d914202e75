"""``guard``: act once when a node's or a job's GPUs have idled, or no training step has been
recorded, for a set time (``stoker guard``).

    guard = Guard(GuardPolicy(idle_for_s=1800, util_below=5), gpus=nvml_source(),
                  steps=metrics_steps(["http://node0:9401/metrics"]), action=print_action())
    verdict = guard.run()        # samples until it acts once, then returns the evidence

**The decision is a pure function**, ``decide(samples, steps, policy, now)``, over the readings
kept for the last ``idle_for_s`` (and a little more):

- *GPUs idle*: every reading in the window has data, the readings cover the whole window with no
  gap longer than ``max_gap_s``, and every GPU read stayed under ``util_below`` percent in each.
- *No step*: step readings with data cover the whole window and the step count did not change.

**Missing data is never idleness.** No NVML (no driver, no GPU), a GPU that stopped answering,
a metrics endpoint that does not answer, a gap in the readings: each makes the verdict
"unknown" with the reason, and the window starts again after the data returns. A guard that
cannot see the GPUs says so; it does not tear a running job down.

**Once.** ``Guard.run`` acts on the first idle verdict and returns it; it never acts twice.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import StokerError


@dataclass(frozen=True)
class GuardPolicy:
    idle_for_s: float = 1800.0  # how long the GPUs must idle (or steps stall) before acting
    util_below: float = 5.0  # percent: a GPU under this is idle
    watch_gpus: bool = True
    watch_steps: bool = True  # when a step source is given
    interval_s: float = 15.0  # between readings
    max_gap_s: float | None = None  # a longer gap between readings is missing data; 3 x interval

    def __post_init__(self) -> None:
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
        return self.max_gap_s if self.max_gap_s is not None else 3 * self.interval_s


@dataclass(frozen=True)
class GpuReading:
    """One reading of the GPUs watched: utilization % by GPU (``"node/gpu"`` or ``"0"``), or
    ``None`` with why there is no data."""

    at: float
    util: dict[str, float] | None
    missing: str = ""


@dataclass(frozen=True)
class StepReading:
    """One reading of the training step count; ``None`` with why there is none."""

    at: float
    step: int | None
    missing: str = ""


@dataclass
class Verdict:
    state: str  # "idle", "busy" or "unknown" (missing data: never acted on)
    reason: str  # what was found idle ("GPUs under 5 % for 31 min"), busy or missing
    idle_s: float = 0.0  # how long the idle condition has held
    gpus: list[str] = field(default_factory=list)  # the GPUs found idle
    peak_util: float | None = None  # highest GPU utilization in the idle window, %
    last_step: int | None = None
    last_step_age_s: float | None = None  # since the step count last changed
    at: float = 0.0

    @property
    def idle(self) -> bool:
        return self.state == "idle"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(
    gpus: Sequence[GpuReading], steps: Sequence[StepReading], policy: GuardPolicy, now: float
) -> Verdict:
    """Idle, busy or unknown, from the readings (oldest first); see the module docstring."""
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


def _trailing(readings: Sequence[Any], ok: Callable[[Any], bool], gap_s: float) -> list[Any]:
    """The newest run of readings that have data and no gap longer than ``gap_s``."""
    run: list[Any] = []
    for r in reversed(readings):
        if not ok(r) or (run and run[-1].at - r.at > gap_s):
            break
        run.append(r)
    return run[::-1]


def _gpu_verdict(readings: Sequence[GpuReading], policy: GuardPolicy, now: float) -> Verdict:
    if not readings:
        return Verdict("unknown", "no GPU reading yet", at=now)
    last = readings[-1]
    if last.util is None:
        return Verdict("unknown", f"no GPU data: {last.missing or 'unknown why'}", at=now)
    if now - last.at > policy.gap_s:
        return Verdict("unknown", f"no GPU reading for {now - last.at:.0f} s", at=now)
    if not last.util:
        return Verdict("unknown", "no GPU data: the reading named no GPU", at=now)
    names = set(last.util)
    run = _trailing(readings, lambda r: bool(r.util) and set(r.util) == names, policy.gap_s)
    busy = [r for r in run if max(r.util.values()) >= policy.util_below]
    if busy:
        run = run[run.index(busy[-1]) + 1 :]  # idle only since the last busy reading
    idle_s = (now - run[0].at) if run else 0.0
    peak = max((max(r.util.values()) for r in run), default=None)
    shown = sorted(names, key=_natural)
    if run and idle_s >= policy.idle_for_s:
        why = f"{len(names)} GPU(s) under {policy.util_below:g} % for {_dur(idle_s)}"
        return Verdict("idle", why, idle_s, shown, peak, at=now)
    if busy and not run:
        top = max(last.util.values())
        return Verdict("busy", f"GPUs busy (up to {top:.0f} %)", 0.0, [], top, at=now)
    why = f"GPUs under {policy.util_below:g} % for {_dur(idle_s)} of {_dur(policy.idle_for_s)}"
    return Verdict("busy", why, idle_s, shown, peak, at=now)


def _step_verdict(readings: Sequence[StepReading], policy: GuardPolicy, now: float) -> Verdict:
    last = readings[-1]
    if last.step is None:
        return Verdict("unknown", f"no step data: {last.missing or 'unknown why'}", at=now)
    if now - last.at > policy.gap_s:
        return Verdict("unknown", f"no step reading for {now - last.at:.0f} s", at=now)
    run = _trailing(readings, lambda r: r.step is not None, policy.gap_s)
    changed = [i for i in range(1, len(run)) if run[i].step != run[i - 1].step]
    since = run[changed[-1]].at if changed else run[0].at  # the step (or the data) began here
    age = now - since
    if age >= policy.idle_for_s:
        why = f"no training step for {_dur(age)} (step {last.step})"
        return Verdict("idle", why, age, last_step=last.step, last_step_age_s=age, at=now)
    why = f"step {last.step}, last changed {_dur(age)} ago"
    return Verdict("busy", why, 0.0, last_step=last.step, last_step_age_s=age, at=now)


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
    ``action`` takes the idle Verdict. ``on_verdict`` sees every verdict (the CLI shows them)."""

    def __init__(
        self,
        policy: GuardPolicy,
        *,
        gpus: Callable[[float], GpuReading] | None,
        steps: Callable[[float], StepReading] | None = None,
        action: Callable[[Verdict], Any],
        on_verdict: Callable[[Verdict], None] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if policy.watch_gpus and gpus is None:
            raise StokerError("the guard watches GPUs but has no GPU source")
        self.policy, self.gpus, self.steps, self.action = policy, gpus, steps, action
        self.on_verdict = on_verdict or (lambda v: None)
        self.clock, self.sleep = clock, sleep
        keep = int(policy.idle_for_s / policy.interval_s) + 8
        self.gpu_log: deque[GpuReading] = deque(maxlen=keep)
        self.step_log: deque[StepReading] = deque(maxlen=keep)
        self.acted: Verdict | None = None

    def tick(self) -> Verdict:
        """One reading of each source and the verdict on all readings so far."""
        now = self.clock()
        if self.policy.watch_gpus and self.gpus is not None:
            self.gpu_log.append(self.gpus(now))
        if self.policy.watch_steps and self.steps is not None:
            self.step_log.append(self.steps(now))
        verdict = decide(list(self.gpu_log), list(self.step_log), self.policy, now)
        self.on_verdict(verdict)
        return verdict

    def run(self, *, max_ticks: int | None = None) -> Verdict | None:
        """Tick until idle, act once and return the verdict; None after ``max_ticks``."""
        ticks = 0
        while self.acted is None:
            verdict = self.tick()
            if verdict.idle:
                self.acted = verdict
                self.action(verdict)
                return verdict
            ticks += 1
            if max_ticks is not None and ticks >= max_ticks:
                return None
            self.sleep(self.policy.interval_s)
        return self.acted
