"""Measured records (``stoker.measured/1``) from what stoker's measuring code keeps: a Ledger's
totals over time, a loader run, storage tests, a stage, a Checkpointer's saves. The measuring
modules call these from their ``save_json``/``--record``; the format is ``measured.py``'s."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from .measured import Measured

_PHASES = ("data", "copy", "compute", "exposed_comm", "checkpoint", "other")


def ledger_record(summary: Any, points: Sequence[tuple[float, ...]], name: str) -> Measured:
    """``points``: (t, steps seen, step seconds so far, seconds per phase so far...), cumulative;
    each window between two points becomes one share per phase."""
    m = Measured("ledger", name)
    m.summary = {
        "steps": summary.steps,
        "step_mean_s": summary.step_mean_s,
        "step_total_s": summary.step_total_s,
        "clock": summary.clock,
    }
    m.summary |= {f"{ph}_share": p.share for ph, p in summary.phases.items()}
    m.summary |= {f"{ph}_s": p.mean_s for ph, p in summary.phases.items()}
    for a, b in zip(points, points[1:], strict=False):
        steps, step_s = b[1] - a[1], b[2] - a[2]
        if steps <= 0 or step_s <= 0:
            continue
        for i, ph in enumerate(_PHASES):
            m.add(f"{ph}_share", "ratio", b[0], (b[3 + i] - a[3 + i]) / step_s)
        m.add("step_s", "s", b[0], step_s / steps)
    return m


def loader_record(result: Any, points: Sequence[tuple[float, ...]], name: str) -> Measured:
    """``points``: (t, steps done, bytes read), cumulative; AU per window is the emulated
    compute over the window's wall time, as MLPerf Storage counts it for the whole run."""
    m = Measured("loader", name)
    m.summary = {k: v for k, v in result.to_dict().items() if isinstance(v, int | float | str)}
    m.summary["throughput_bps"] = result.mb_per_s * 1e6
    for a, b in zip(points, points[1:], strict=False):
        dt = b[0] - a[0]
        if dt <= 0 or b[1] <= a[1]:  # no step ended in the window (the run's last point)
            continue
        m.add("utilization", "ratio", b[0], min(1.0, (b[1] - a[1]) * result.compute_s / dt))
        m.add("throughput_bps", "bytes/s", b[0], (b[2] - a[2]) / dt)
    return m


def storage_record(results: Iterable[Any], target: str) -> Measured:
    """One figure per test: ``{test}_{block}_x{jobs}_{cache}_bps`` (and ``_iops``)."""
    from ..units import format_bytes

    m = Measured("storage", target)
    for r in results:
        cache = "" if r.cache in ("", "-") else f"_{r.cache}"
        key = f"{r.test}_{format_bytes(r.block).replace(' ', '')}_x{r.jobs}{cache}"
        m.summary[f"{key}_bps"] = r.mb_per_s * 1e6
        m.summary[f"{key}_iops"] = r.iops
    return m


def stage_record(summary: Any, points: Sequence[tuple[float, ...]] = ()) -> Measured:
    """``points``: (t, bytes copied so far); a stage without points still has its totals."""
    from .._redact import shown

    m = Measured("stage", shown(f"{summary.src} -> {summary.dst}"))  # a SAS URL's token
    m.summary = {k: v for k, v in summary.to_dict().items() if isinstance(v, int | float)}
    m.summary["throughput_bps"] = summary.mb_per_s * 1e6
    for a, b in zip(points, points[1:], strict=False):
        if b[0] > a[0]:
            m.add("throughput_bps", "bytes/s", b[0], (b[1] - a[1]) / (b[0] - a[0]))
    return m


def checkpoint_record(saves: Sequence[Any], t0: float, name: str) -> Measured:
    """Each save's blocking time and its times to the fast and durable tiers, at the moment it
    started (``t0``: the perf_counter the run's time counts from)."""
    m = Measured("checkpoint", name)
    for s in saves:
        t = s.started - t0
        m.add("blocking_s", "s", t, s.blocking_s)
        if s.fast_s is not None:
            m.add("fast_s", "s", t, s.fast_s)
        if s.durable_s is not None:
            m.add("durable_s", "s", t, s.durable_s)
    blocking = [s.blocking_s for s in saves]
    m.summary = {
        "saves": len(saves),
        "bytes": saves[-1].bytes if saves else 0,
        "blocking_median_s": statistics.median(blocking) if blocking else None,
        "blocking_max_s": max(blocking, default=None),
    }
    return m


class RecordingReporter:
    """A stage Reporter that passes every call on to ``inner`` and keeps the bytes copied over
    time (``points``: (t, bytes so far)), for ``stoker stage --record``."""

    def __init__(self, inner: Any) -> None:
        from ._history import History

        self.inner, self.copied, self._history = inner, 0, History()
        self._history.offer(0)

    @property
    def points(self) -> list[tuple[float, ...]]:
        self._history.offer(self.copied, force=True)  # the run's end closes the last window
        return self._history.points

    def advance(self, nbytes: int) -> None:
        self.copied += nbytes
        self._history.offer(self.copied)
        self.inner.advance(nbytes)

    def __getattr__(self, name: str) -> Any:  # start, grow, listed, file_done, note, finish...
        return getattr(self.inner, name)
