"""The step ledger: where each training step's time goes.

    ledger = Ledger()
    ledger.attach(ddp_model)                  # optional: DDP's exposed communication
    for batch in ledger.wrap(loader):         # waiting for data
        with ledger.copy(): batch = batch.to(device, non_blocking=True)
        with ledger.compute(): loss = step(batch)     # forward, backward, optimizer
        with ledger.checkpoint(): ckpt.save(step, state)
    ledger.report()

A step runs from one ``next()`` on the wrapped iterable to the next; time in no phase is
``other``. Phases are wall-clock time on CPU and CUDA-event time on a GPU's current stream;
exposed communication runs from DDP's last gradient bucket to its latest all-reduce. What each
phase counts (threads, clocks, cost, FSDP): docs/ledger.md.
"""

from __future__ import annotations

import operator
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StokerError
from ._clocks import WallClock, pick_clock
from ._history import History

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

PHASES = ("data", "copy", "compute", "exposed_comm", "checkpoint", "other")
_DATA, _COPY, _COMPUTE, _COMM, _CKPT, _OTHER = range(6)
_BATCH, _BATCH_S = 16, 1.0  # ended steps are read every 16 steps or every second
_MAX_PENDING = 256  # GPU steps not yet read; past this the oldest is waited for


class _Phase:
    """A reusable ``with`` block that records one span of one phase in the open step. The open
    phase and its start are per thread: a checkpoint on a background thread does not collide
    with the loop's compute."""

    __slots__ = ("_ledger", "_index", "_mark", "_local")

    def __init__(self, ledger: Ledger, index: int) -> None:
        self._ledger, self._index, self._local = ledger, index, ledger._local
        self._mark = ledger._clock.mark  # bound once: this runs twice per phase per step

    def __enter__(self) -> None:
        local = self._local
        open_phase = getattr(local, "phase", None)
        if open_phase is not None:
            inner, outer = PHASES[self._index], PHASES[open_phase]
            raise StokerError(f"ledger phases do not nest: {inner} opened inside {outer}")
        local.phase, local.start = self._index, self._mark()

    def __exit__(self, *exc: object) -> None:
        local = self._local
        self._ledger._spans.append((self._index, local.start, self._mark()))  # append: atomic
        local.phase = None


@dataclass(frozen=True)
class PhaseStats:
    total_s: float
    mean_s: float  # per step
    share: float  # of step time


@dataclass(frozen=True)
class LedgerSummary:
    steps: int  # counted steps (after skip_first)
    skipped: int
    step_total_s: float
    step_mean_s: float
    phases: dict[str, PhaseStats]  # data, copy, compute, exposed_comm, checkpoint, other
    last_step: dict[str, float]  # the latest step's seconds per phase, "step" included
    clock: str  # "wall clock" or "CUDA events"
    comm_buckets: int  # all-reduces seen by attach()'s hook in counted steps
    comm_bytes: int
    pending: int  # steps ended but not read yet (snapshot only; docs/ledger.md "Cost")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Ledger:
    """Per-step time accounting for a training loop; see docs/ledger.md."""

    def __init__(self, device: Any = None, *, skip_first: int = 1) -> None:
        """``device``: a CUDA device times with events on its current stream; None picks CUDA
        when available; "cpu" the wall clock. ``skip_first``: steps left out at the start."""
        if isinstance(skip_first, bool) or not isinstance(skip_first, int) or skip_first < 0:
            raise StokerError(f"Ledger(skip_first={skip_first!r}): use a whole number >= 0")
        self._clock = pick_clock(device)
        self._wall = isinstance(self._clock, WallClock)
        self.skip_first = skip_first
        self._lock = threading.Lock()  # totals (read by snapshot) and the comm lists
        self._local = threading.local()  # each thread's open phase
        self._phases = [_Phase(self, i) for i in range(len(PHASES))]
        self._wrapping = False
        self._start: Any = None  # the open step's first mark; None when no step is open
        self._spans: list[tuple[int, Any, Any]] = []
        self._launches: list[Any] = []
        self._dones: list[Any] = []
        self._nbytes = 0
        self._pending: deque[Any] = deque()  # steps ended but not yet read
        self._resolved_at = time.perf_counter()
        self._seen = 0
        self._totals = [0.0] * len(PHASES)
        self._step_total = 0.0
        self._buckets = self._bytes = 0
        self._last, self._last_step = [0.0] * len(PHASES), 0.0
        self._history = History()  # the totals over time, for save_json's series

    # ------------------------------------------------------------------ the loop's side

    def wrap(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Yield from ``iterable``, starting a step at each ``next()`` and timing it as data."""
        it, mark = iter(iterable), self._clock.mark
        self._wrapping = True
        try:
            while True:
                start = mark()
                if self._start is not None:
                    self._close(start)
                self._start, self._spans = start, []
                try:
                    item = next(it)
                except StopIteration:
                    self._drop_open_step()  # the last next() ends the last step, not a new one
                    return
                self._spans.append((_DATA, start, mark()))
                yield item
        finally:
            self._wrapping = False
            self.end_step()  # left early (break, exception): the step in progress ends here

    def data(self) -> _Phase:
        return self._phases[_DATA]

    def copy(self) -> _Phase:
        return self._phases[_COPY]

    def compute(self) -> _Phase:
        return self._phases[_COMPUTE]

    def comm(self) -> _Phase:
        """A blocking collective you issue yourself (FSDP, a metrics all-reduce)."""
        return self._phases[_COMM]

    def checkpoint(self) -> _Phase:
        return self._phases[_CKPT]

    def next_step(self) -> None:
        """Without ``wrap``: end the step in progress and start the next one here."""
        if self._wrapping:  # wrap() starts each step already: this would split it in two
            raise StokerError("Ledger.next_step() inside ledger.wrap(): wrap() ends each step")
        self._boundary(self._clock.mark())

    def end_step(self) -> None:
        """End the step in progress (``wrap`` does this when the loop ends)."""
        if self._start is not None:
            self._close(self._clock.mark())

    def attach(self, model: Any, hook: Any = None, state: Any = None) -> Any:
        """Time ``model``'s gradient all-reduces (a DistributedDataParallel, before its first
        forward). ``hook``/``state``: a comm hook of your own to wrap; default DDP's all-reduce."""
        from torch.nn.parallel import DistributedDataParallel

        if not isinstance(model, DistributedDataParallel):
            raise StokerError(
                "Ledger.attach() takes a DistributedDataParallel model; for FSDP or collectives "
                "you issue yourself, time the blocking call with `with ledger.comm():`"
            )
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

            hook, state = allreduce_hook, model.process_group

        def timed(hook_state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
            buffer = bucket.buffer()
            mark = self._clock.mark()
            with self._lock:
                self._launches.append(mark)
                self._nbytes += buffer.numel() * buffer.element_size()
            return hook(hook_state, bucket).then(self._comm_done)

        model.register_comm_hook(state, timed)
        return model

    def _comm_done(self, fut: Any) -> Any:
        mark = self._clock.mark()  # on GPU: a stream that waits for the all-reduce
        with self._lock:
            self._dones.append(mark)
        return fut.value()

    # ------------------------------------------------------------------ step bookkeeping

    def _boundary(self, mark: Any) -> None:
        if self._start is not None:
            self._close(mark)
        else:
            self._spans = []  # phases run outside any step are not counted
        self._start = mark

    def _drop_open_step(self) -> None:
        # Its start mark is also the previous step's end, still to be read: not released.
        self._start, self._spans = None, []

    def _close(self, end: Any) -> None:
        launches: list[Any] = []
        dones: list[Any] = []
        nbytes = 0
        if self._launches or self._dones:  # only attach()'s hook fills these
            with self._lock:
                launches, dones, nbytes = self._launches, self._dones, self._nbytes
                self._launches, self._dones, self._nbytes = [], [], 0
        self._pending.append((self._start, end, self._spans, launches, dones, nbytes))
        self._start, self._spans = None, []
        # Read steps in batches: one warm pass over many costs less than a cold one per step.
        pending = len(self._pending)
        if pending >= _BATCH or time.perf_counter() - self._resolved_at > _BATCH_S:
            self._resolve(wait=pending > _MAX_PENDING)

    def _resolve(self, wait: bool = False, wait_all: bool = False) -> None:
        """Account every pending step whose marks have completed (oldest first)."""
        clock = self._clock
        self._resolved_at = time.perf_counter()
        while self._pending:
            start, end, spans, launches, dones, nbytes = rec = self._pending[0]
            marks = [end, *dones, *launches]  # launches may sit on autograd's stream
            if wait or wait_all:
                clock.wait(marks)
                wait = False
            elif not clock.ready(marks):
                return
            self._pending.popleft()
            self._account(rec)
            # The end mark is the next step's start: it is released with that step.
            if not self._wall:
                clock.release([start, *(m for s in spans for m in s[1:]), *launches, *dones])

    def _account(self, rec: tuple[Any, Any, list[Any], list[Any], list[Any], int]) -> None:
        """Add one ended step: (start, end, spans, bucket hand-overs, all-reduces done, bytes)."""
        start, end, spans, launches, dones, nbytes = rec
        el = self._clock.elapsed
        step = el(start, end)
        vals = [0.0] * len(PHASES)
        for index, a, b in spans:
            vals[index] += el(a, b)
        if launches and dones:
            last = launches[-1]  # the last bucket handed over: all gradients computed
            exposed = max(0.0, max(el(last, d) for d in dones))
            vals[_COMPUTE] -= min(exposed, vals[_COMPUTE])
            vals[_COMM] += exposed
        vals[_OTHER] = max(0.0, step - sum(vals))
        with self._lock:
            self._seen += 1
            self._last, self._last_step = vals, step
            if self._seen > self.skip_first:
                self._step_total += step
                self._totals = list(map(operator.add, self._totals, vals))
                self._buckets += len(launches)
                self._bytes += nbytes
                self._history.offer(self._seen - self.skip_first, self._step_total, *self._totals)

    # ------------------------------------------------------------------ figures

    def snapshot(self) -> LedgerSummary:
        """The figures so far, from any thread; never waits for the GPU."""
        with self._lock:
            steps = max(0, self._seen - self.skip_first)
            total, totals = self._step_total, list(self._totals)
            phases = {
                name: PhaseStats(v, v / steps if steps else 0.0, v / total if total else 0.0)
                for name, v in zip(PHASES, totals, strict=True)
            }
            return LedgerSummary(
                steps,
                min(self._seen, self.skip_first),
                total,
                total / steps if steps else 0.0,
                phases,
                dict(zip(PHASES, self._last, strict=True)) | {"step": self._last_step},
                self._clock.kind,
                self._buckets,
                self._bytes,
                len(self._pending),
            )

    def summary(self) -> LedgerSummary:
        """All steps ended so far (waits for the GPU's last events). Call from the loop's thread."""
        self._resolve(wait_all=True)
        return self.snapshot()

    def save_json(self, path: str | os.PathLike[str], name: str = "training loop") -> Path:
        """Write the summary and the step split over time as a ``stoker.measured/1`` record
        for ``stoker report --measured`` (docs/report.md). Call from the loop's thread."""
        from .records import ledger_record

        summary = self.summary()
        with self._lock:  # the run's end is the last point: the last window is not lost
            steps = max(0, self._seen - self.skip_first)
            self._history.offer(steps, self._step_total, *self._totals, force=True)
            points = list(self._history.points)
        return ledger_record(summary, points, name).save_json(path)

    def report(self, console: Console | None = None) -> Table:
        """Print the summary as a table on ``console`` (default: stdout) and return the table."""
        from rich.console import Console
        from rich.table import Table

        from ..units import format_duration

        s = self.summary()
        table = Table(title=f"step ledger: {s.steps} steps ({s.clock})", title_justify="left")
        for col, justify in (("phase", "left"), ("total", "right"), ("per step", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        table.add_column("share", justify="right")
        for name, p in s.phases.items():
            label = name.replace("_", " ")
            table.add_row(
                label, format_duration(p.total_s), format_duration(p.mean_s), f"{p.share:.1%}"
            )
        table.add_row(
            "step", format_duration(s.step_total_s), format_duration(s.step_mean_s), "100%"
        )
        (console or Console()).print(table)
        return table
