"""Save on preemption: Azure announces a Spot eviction, a deletion, a reboot or a redeploy through
Scheduled Events; the job saves, makes the step durable, acknowledges, and stops.

    poller thread (local rank 0 of each node)   GET Scheduled Events every poll_s; an event of
                      type Preempt/Terminate/Reboot/Redeploy naming this VM, not seen before,
                      is queued and ``stop_requested`` set; others are ignored
    should_stop(step) (every rank, every step, in the training loop)
                      ranks take the earliest NotBefore of their queued events (one 8-byte
                      all-reduce on the Checkpointer's gloo group; none in a one-process job); if
                      any rank has one, every rank: saves ``step`` (a save in flight is
                      finished first), waits for the fast tier's commit, waits for the
                      durable tier's when the notice leaves time for the measured upload,
                      gathers again, and then each poller acknowledges its events
                      (StartRequests) and every rank returns True

The save happens in the training loop, at a step boundary, and never in the poller thread: only
there is the state whole (not half an optimizer step) and only there do all ranks meet for the
collective save. A loop that does not reach ``should_stop`` before NotBefore is not saved and
the event is not acknowledged: Azure starts it at NotBefore, and the newest committed step is
what loads. The acknowledgement comes after the commit, so a VM that goes early never takes an
unsaved step with it; a notice shorter than a save still saves (to the fast tier) and says so,
and the commit protocol leaves either the new step or the previous one, never a torn one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._dist_env import torchrun_env
from ..errors import CheckpointError
from ..measure import ImdsUnreachable
from ._scheduled_events import IMDS, EventsClient, ScheduledEvent

if TYPE_CHECKING:
    from ._checkpointer import Checkpointer
    from ._save_reports import SaveStats

log = logging.getLogger("stoker.checkpoint")

ACK_MARGIN_S = 2.0  # the durable wait stops this long before NotBefore, to acknowledge in time
SETTLE_S = 0.005  # how often a wait looks at the save's progress


@dataclass
class Preemption:
    """What ``should_stop`` did about a Scheduled Event; ``note`` says it in words."""

    events: tuple[ScheduledEvent, ...]  # this node's events (none on the other ranks)
    step: int | None  # the step saved (or finished) for it; None when nothing could be
    notice_s: float  # from the gather to the earliest NotBefore in the job (<= 0: started)
    fast: bool = False  # committed on the fast tier (every rank)
    durable: bool = False  # committed on the durable tier before the acknowledgement
    acknowledged: bool = False  # this node's events were acknowledged
    seen_at: float | None = None  # time.perf_counter() when this node's poller saw the event
    fast_at: float | None = None  # time.perf_counter() of the fast tier's commit here
    note: str = ""
    _notes: list[str] = field(default_factory=list, repr=False)

    def say(self, text: str, level: int = logging.INFO) -> None:
        self._notes.append(text)
        self.note = "; ".join(self._notes)
        log.log(level, "preemption: %s", text)


class PreemptionWatcher:
    """Watches Azure Scheduled Events for this VM; see ``Checkpointer.watch_preemption``."""

    def __init__(
        self,
        ckpt: Checkpointer,
        state_fn: Callable[[], Any] | None = None,
        *,
        on_preempt: Callable[[Preemption], Any] | None = None,
        endpoint: str | None = None,
        vm_name: str | None = None,
        poll_s: float = 1.0,
        replicated: Any = None,
    ) -> None:
        if poll_s <= 0:
            raise CheckpointError(f"poll_s={poll_s}: give seconds above 0 (Azure suggests 1)")
        self.ckpt, self.state_fn, self.on_preempt = ckpt, state_fn, on_preempt
        self.poll_s, self.replicated = poll_s, replicated  # as save()'s, for the save made here
        self.stop_requested = False  # set as soon as this rank knows the job must stop
        self.last: Preemption | None = None  # what the newest handled event came to
        self._lock = threading.Lock()
        self._queued: list[tuple[ScheduledEvent, float]] = []  # (event, perf_counter seen)
        self._seen: set[str] = set()  # every EventId queued once (handled or not)
        self._ignored: set[str] = set()  # other VMs' events and other types, logged once
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: EventsClient | None = None
        self.vm_name: str | None = None
        self.polls = 0  # answers read (a test's and a doctor's view of the poller)
        if _is_poller(ckpt):
            self._client = EventsClient(endpoint or IMDS)
            try:
                self.vm_name = vm_name or self._client.vm_name()
            except ImdsUnreachable as exc:
                self._client.close()
                raise CheckpointError(
                    f"watch_preemption: cannot learn this VM's name ({exc}); on an Azure VM "
                    "check that IMDS is reachable, elsewhere give vm_name= and endpoint="
                ) from exc
            self._thread = threading.Thread(
                target=self._poll_loop, name="stoker-ckpt-preempt", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ the poller thread
    def _poll_loop(self) -> None:
        assert self._client is not None
        failing: str | None = None
        while not self._stop.is_set() and not self.ckpt._closed:
            try:
                _, events = self._client.poll()
            except ImdsUnreachable as exc:
                if str(exc) != failing:  # once per kind of failure, not once a second
                    log.warning("preemption watch: %s; trying again every %g s", exc, self.poll_s)
                failing = str(exc)
            else:
                if failing is not None:
                    log.info("preemption watch: %s answers again", self._client.where)
                failing = None
                self._take(events)
                self.polls += 1
            self._stop.wait(self.poll_s)

    def _take(self, events: list[ScheduledEvent]) -> None:
        now = time.perf_counter()
        for event in events:
            with self._lock:
                if event.event_id in self._seen or event.event_id in self._ignored:
                    continue
                assert self.vm_name is not None
                if not event.aims_at(self.vm_name):
                    self._ignored.add(event.event_id)
                    log.debug(
                        "preemption watch: ignoring %s %s for %s",
                        event.event_type,
                        event.event_id,
                        ", ".join(event.resources) or "no resource",
                    )
                    continue
                self._seen.add(event.event_id)
                self._queued.append((event, now))
                self.stop_requested = True
            left = _notice_words(
                None if event.not_before is None else event.not_before - time.time()
            )
            log.warning(
                "preemption watch: %s event %s for %s (%s): the next should_stop() saves and stops",
                event.event_type,
                event.event_id,
                self.vm_name,
                left,
            )

    # ------------------------------------------------------------------ the training loop
    def should_stop(self, step: int, state: Any = None) -> bool:
        """Call on every rank after every training step (or every N steps, the same on every
        rank): False while no event aims at any of the job's VMs. Otherwise save ``step``
        (``state``, else ``state_fn()``; a step already saved is not saved again), make it
        durable as far as the notice allows, acknowledge the event, call ``on_preempt`` and
        return True: the loop should end. True again on later calls."""
        with self._lock:
            mine = list(self._queued)
        deadline = min((_deadline(e, seen) for e, seen in mine), default=math.inf)
        earliest = self.ckpt.group.min(deadline, "load")  # the job's, from every node
        if earliest == math.inf:
            return self.last is not None
        report = self._save_for(step, state, earliest, [e for e, _ in mine])
        report.seen_at = min((seen for _, seen in mine), default=None)
        handled = {e.event_id for e in report.events}
        with self._lock:
            self._queued = [(e, s) for e, s in self._queued if e.event_id not in handled]
        self.stop_requested = True
        self.last = report
        if self.on_preempt is not None:
            self.on_preempt(report)
        return True

    def _save_for(
        self, step: int, state: Any, deadline: float, events: list[ScheduledEvent]
    ) -> Preemption:
        ckpt, group = self.ckpt, self.ckpt.group
        notice = deadline - time.time()
        report = Preemption(tuple(events), None, notice)
        kinds = ", ".join(sorted({e.event_type for e in events})) or "an event on another node"
        measured = ckpt._pipeline.measured  # the newest save whose write has finished
        report.say(
            f"{kinds}: {_notice_words(notice)}; saving step {step}",
            logging.WARNING,
        )
        if measured is not None and measured.fast_s is not None and measured.fast_s > notice:
            report.say(
                f"the notice is shorter than a save ({measured.fast_s:.1f} s the last time): "
                f"saving step {step} anyway; if the VM goes first, step {measured.step} "
                "(committed) is the newest that loads, and no part of step "
                f"{step} is taken for a checkpoint",
                logging.WARNING,
            )
        stats = self._save(step, state, report)
        if stats is not None:
            while stats.fast_s is None and ckpt.busy:
                time.sleep(SETTLE_S)
            report.fast = stats.fast_s is not None
            if report.fast:
                report.step = stats.step
                report.fast_at = stats.started + (stats.fast_s or 0.0)
            if report.fast and ckpt.durable is not None:
                self._wait_durable(stats, measured, deadline, report)
        # Every rank is done before any node acknowledges (a node-local fast tier has its own
        # manifest copy; the durable manifest is written by rank 0).
        views = [(report.fast, report.durable)]
        if group.world_size > 1:
            views = group.all_gather(views[0], "load")
        report.fast = all(fast for fast, _ in views)
        report.durable = views[0][1]  # rank 0 commits on the durable tier
        if not report.fast:
            report.say(
                f"step {step} was not committed on every rank (the error is raised at the next "
                "save or wait); the event is not acknowledged: Azure starts it at NotBefore",
                logging.ERROR,
            )
            return report
        report.say(
            f"step {report.step} committed on the fast tier"
            + (" and the durable tier" if report.durable else "")
        )
        self._acknowledge(report)
        return report

    def _save(self, step: int, state: Any, report: Preemption) -> SaveStats | None:
        """Start the save of ``step``, or take the save in flight when it is this step (or a
        later one), or when there is no state to save."""
        last = self.ckpt.last_save
        if last is not None and last.step >= step:
            report.say(f"step {last.step} is saved already: finishing that save")
            return last
        if state is None and self.state_fn is None:
            if last is None:
                report.say(
                    "no state given (state_fn or should_stop(step, state)) and nothing "
                    "saved: nothing to save",
                    logging.ERROR,
                )
                return None
            report.say(f"no state given: finishing the save of step {last.step}", logging.WARNING)
            return last
        state = state if state is not None else self.state_fn()  # type: ignore[misc]
        return self.ckpt.save(step, state, replicated=self.replicated)

    def _wait_durable(
        self, stats: SaveStats, measured: SaveStats | None, deadline: float, report: Preemption
    ) -> None:
        """Wait for the durable commit when the notice leaves time for the measured upload
        (or when no upload was measured yet), until ACK_MARGIN_S before NotBefore."""
        left = deadline - ACK_MARGIN_S - time.time()
        upload = None
        if measured is not None and measured.durable_s is not None and measured.fast_s is not None:
            upload = measured.durable_s - measured.fast_s
        if left <= 0 or (upload is not None and upload > left):
            took = f" (an upload took {upload:.1f} s the last time)" if upload is not None else ""
            report.say(
                f"{max(left, 0):.1f} s left before NotBefore{took}: not waiting for the "
                "durable tier; its upload goes on in the background",
                logging.WARNING,
            )
            return
        until = time.time() + left
        while stats.durable_s is None and self.ckpt.busy and time.time() < until:
            time.sleep(SETTLE_S)
        report.durable = stats.durable_s is not None
        if not report.durable:
            why = "did not finish in time" if self.ckpt.busy else "failed (raised at the next wait)"
            report.say(
                f"the upload to the durable tier {why}; the step is on the fast tier (lost "
                "with the VM's local disks on Preempt and Redeploy)",
                logging.WARNING,
            )

    def _acknowledge(self, report: Preemption) -> None:
        if self._client is None or not report.events:
            return
        ids = [e.event_id for e in report.events]
        try:
            self._client.acknowledge(ids)
        except ImdsUnreachable as exc:
            report.say(
                f"could not acknowledge {', '.join(ids)} ({exc}): Azure starts the event "
                "at NotBefore",
                logging.WARNING,
            )
            return
        report.acknowledged = True
        report.say(f"acknowledged {', '.join(ids)}")

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Stop polling (also when the Checkpointer closes)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> PreemptionWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _notice_words(left: float | None) -> str:
    if left is None:
        return "already started"
    return f"{left:.1f} s of notice" if left > 0 else "no notice left (started or past NotBefore)"


def _deadline(event: ScheduledEvent, seen: float) -> float:
    """Epoch seconds by which the event may start: NotBefore, or when it was seen if it has
    already started."""
    if event.not_before is not None:
        return event.not_before
    return time.time() - (time.perf_counter() - seen)


def _is_poller(ckpt: Checkpointer) -> bool:
    """Local rank 0 polls its node's IMDS (torchrun's LOCAL_RANK); without LOCAL_RANK, rank 0
    (a job on one node)."""
    env = torchrun_env(error=CheckpointError)
    if "LOCAL_RANK" in env.given:
        return env.local_rank == 0
    return ckpt.group.rank == 0
