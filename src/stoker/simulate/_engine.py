"""One simulated run: SimPy processes for the failures and the job, the rest in closed form.

Two processes share one SimPy environment. ``failures`` waits for the fleet's next failing part
and interrupts ``job``. ``job`` alternates a training stretch (which waits only for that
interrupt) and a restart (a timeout a further failure can cut short). The saves, steps and
epochs inside a stretch are not events of their own: when the stretch ends, its saves (every
``interval`` of training, each blocking ``blocking``), the last one safe before the failure,
and its steps' straggler waits (drawn in bulk) are worked out at once. So a run costs a few
SimPy events per failure, whatever the number of GPUs, steps or saves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from ..units import format_duration
from ._fleet import Fleet
from ._inputs import Inputs
from ._stragglers import Stragglers

CAUSES = (
    "checkpoint",
    "rework",
    "restart",
    "restart_contention",
    "restaging",
    "stragglers",
    "upload_contention",
    "hsm_first_reads",
)
TIMELINE_MAX = 2000


class TooManyFailures(Exception):
    """A run passed its failure budget (simulate() says what to change)."""


@dataclass
class Tally:
    useful_s: float = 0.0  # nominal training seconds kept (the plan's step, no waits)
    lost_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0.0))
    failures: int = 0
    gpu_failures: int = 0
    swaps: int = 0
    restarts: int = 0
    saves: int = 0
    epochs: int = 0
    simpy_events: int = 0
    timeline: list[dict[str, Any]] | None = None

    @property
    def events(self) -> int:
        """Modelled events: failures, swaps, restarts, saves and epochs."""
        return self.failures + self.swaps + self.restarts + self.saves + self.epochs


class _Job:
    """The job's state between events, and the arithmetic of each stretch and restart."""

    def __init__(self, inp: Inputs, rng: np.random.Generator, tally: Tally, st: Stragglers):
        self.inp, self.rng, self.tally, self.st = inp, rng, tally, st
        self.committed_s = 0.0  # nominal training seconds a restart resumes from
        self.phase = "train"
        self.t0 = 0.0
        self.swapped = 0  # VMs swapped since the last restart finished
        self.restart_parts: dict[str, float] = {}

    def log(self, t: float, event: str, detail: str) -> None:
        tl = self.tally.timeline
        if tl is None:
            return
        if len(tl) < TIMELINE_MAX:
            tl.append({"t_hours": t / 3600, "event": event, "detail": detail})
        elif len(tl) == TIMELINE_MAX:
            tl.append(
                {"t_hours": t / 3600, "event": "truncated", "detail": "later events left out"}
            )

    # ------------------------------------------------------------------ a training stretch
    def end_stretch(self, now: float, failed: bool) -> tuple[float, int]:
        """Account the stretch since ``t0``; returns (work lost, saves made)."""
        inp, lost = self.inp, self.tally.lost_s
        tau = now - self.t0
        period = inp.interval_s + inp.blocking_s
        n = math.floor(tau / period) if period > 0 else 0
        rem = tau - n * period
        blocking = n * inp.blocking_s + max(0.0, rem - inp.interval_s)
        saves = n + (1 if rem > inp.interval_s else 0)
        training = tau - blocking
        if failed:
            safe = math.floor((tau - inp.in_flight_s) / period) if tau >= inp.in_flight_s else 0
            kept = min(training, max(0, safe) * inp.interval_s)
        else:
            kept = training
        lost["checkpoint"] += blocking
        lost["rework"] += training - kept
        self.tally.saves += saves
        self._progress(kept)
        return training - kept, saves

    def _progress(self, kept: float) -> None:
        """Split kept training time into nominal progress and the waits the plan leaves out."""
        inp, lost = self.inp, self.tally.lost_s
        if kept <= 0:
            return
        up = min(1.0, inp.upload_stall_per_cycle_s / inp.interval_s) if inp.interval_s else 0.0
        mu = self.st.mean_excess_s(self.rng, kept / inp.base_step_s) / inp.base_step_s
        h = inp.hsm_stall_frac
        a = 1.0 - up
        r1, r2 = a / (1 + mu + h), a / (1 + mu)  # nominal s per training s: first reads, after
        first_left = max(0.0, inp.first_reads_nominal_s - self.committed_s)
        x1 = min(kept, first_left / r1) if (h > 0 and first_left > 0) else 0.0
        x2 = kept - x1
        lost["upload_contention"] += up * kept
        lost["stragglers"] += a * (x1 * mu / (1 + mu + h) + x2 * mu / (1 + mu))
        lost["hsm_first_reads"] += a * x1 * h / (1 + mu + h)
        before = self.committed_s
        self.committed_s += r1 * x1 + r2 * x2
        self.tally.useful_s += r1 * x1 + r2 * x2
        epoch = inp.epoch_nominal_s
        if math.isfinite(epoch) and epoch > 0:
            done = int(self.committed_s // epoch) - int(before // epoch)
            for k in range(done):
                self.tally.epochs += 1
                number = int(before // epoch) + k + 1
                self.log(self.t0 + kept, "epoch", f"epoch {number} done (time approximate)")

    # ----------------------------------------------------------------------- a restart
    def plan_restart(self) -> float:
        inp = self.inp
        parts = {"restart": inp.restart_s, "restart_contention": inp.restart_contention_s}
        restage = 0.0
        if inp.restage_shard_bytes > 0 and self.swapped > 0 and inp.load is not None:
            load = inp.load
            loaded = load.contended_s if inp.knobs.contention else load.baseline_s
            per_vm = min(inp.vm_nic_bps, inp.blob_bps or inp.vm_nic_bps)
            alone = inp.restage_shard_bytes / per_vm
            through = 0.0
            if inp.knobs.contention and inp.blob_bps:
                through = (load.blob_bytes + self.swapped * inp.restage_shard_bytes) / inp.blob_bps
            restage = max(0.0, max(loaded, alone, through) - loaded)
        parts["restaging"] = restage
        self.restart_parts = parts
        return sum(parts.values())

    def end_restart(self, now: float) -> float:
        elapsed = now - self.t0
        total = sum(self.restart_parts.values())
        for cause, planned in self.restart_parts.items():
            self.tally.lost_s[cause] += elapsed * planned / total if total else 0.0
        return elapsed


def _failures(
    env: simpy.Environment, fleet: Fleet, job: simpy.Process, state: _Job, max_failures: int
):
    inp = state.inp
    while True:
        when, part = fleet.next_failure()
        if when >= inp.duration_s:
            return
        if state.tally.failures >= max_failures:  # e.g. infant mortality feeding on its swaps
            raise TooManyFailures(f"{max_failures:,} failures by {format_duration(env.now)}")
        yield env.timeout(when - env.now)
        state.tally.simpy_events += 2  # the timeout and the interrupt
        node = fleet.node_of(part)
        gpu = part < fleet.gpus
        swap = gpu or state.rng.random() < inp.knobs.node_replace_share
        if swap:
            fleet.swap(node, env.now)
        else:
            fleet.renew(part, env.now)
        job.interrupt((gpu, part, node, swap))


def _job(env: simpy.Environment, state: _Job):
    tally = state.tally
    while True:
        state.phase, state.t0 = "train", env.now
        try:
            yield env.event()  # training until a failure interrupts it
        except simpy.Interrupt as failure:
            lost, saves = state.end_stretch(env.now, failed=True)
            _failed(
                state,
                env.now,
                failure.cause,
                lambda lost=lost, saves=saves: (
                    f"{format_duration(lost)} lost; {saves} saves in this stretch"
                ),
            )
        while True:
            state.phase, state.t0 = "restart", env.now
            tally.simpy_events += 1
            try:
                yield env.timeout(state.plan_restart())
            except simpy.Interrupt as failure:
                took = state.end_restart(env.now)
                _failed(
                    state,
                    env.now,
                    failure.cause,
                    lambda took=took: f"during a restart, {format_duration(took)} in",
                )
                continue
            took = state.end_restart(env.now)
            tally.restarts += 1
            if tally.timeline is not None:
                p = state.restart_parts
                state.log(
                    env.now,
                    "restart",
                    f"training again after {format_duration(took)} (restart "
                    f"{format_duration(p['restart'])}, every VM loading at once "
                    f"+{format_duration(p['restart_contention'])}, re-staging "
                    f"+{format_duration(p['restaging'])})",
                )
            state.swapped = 0
            break


def _failed(state: _Job, now: float, cause: tuple, detail: Callable[[], str]) -> None:
    gpu, part, node, swap = cause
    tally = state.tally
    tally.failures += 1
    tally.gpu_failures += int(gpu)
    if swap:
        tally.swaps += 1
        state.swapped += 1
    if tally.timeline is not None:
        what = f"GPU {part} on VM {node}" if gpu else f"VM {node}"
        then = "VM swapped" if swap else "restarted in place"
        state.log(now, "failure", f"{what} failed, {then}; {detail()}")


def run_once(
    inp: Inputs,
    st: Stragglers,
    rng: np.random.Generator,
    timeline: bool,
    max_failures: int = 10**9,
) -> Tally:
    tally = Tally(timeline=[] if timeline else None)
    state = _Job(inp, rng, tally, st)
    fleet = Fleet(
        inp.gpus, inp.nodes, inp.gpu_part_mtbf_s, inp.node_part_mtbf_s, inp.knobs.failure_shape, rng
    )
    env = simpy.Environment()
    state.log(
        0.0,
        "start",
        f"{inp.gpus:,} GPUs on {inp.nodes:,} VMs; a save every "
        f"{format_duration(inp.interval_s)}, blocking {format_duration(inp.blocking_s)}, "
        f"safe {format_duration(inp.in_flight_s)} later",
    )
    job = env.process(_job(env, state))
    env.process(_failures(env, fleet, job, state, max_failures))
    env.run(until=inp.duration_s)
    if state.phase == "train":
        state.end_stretch(inp.duration_s, failed=False)
    else:
        state.end_restart(inp.duration_s)
    state.log(
        inp.duration_s,
        "end",
        f"{tally.failures} failures, {tally.saves:,} saves, {tally.epochs} epochs",
    )
    return tally
