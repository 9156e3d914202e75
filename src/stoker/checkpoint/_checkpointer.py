"""``Checkpointer``: save blocks only for a copy to host memory; the rest happens behind.

    save(step, state)  snapshot tensors into one reused host buffer   (the only blocking part)
      writer thread    buffer -> fast tier shard (O_DIRECT, fsync, rename); all ranks' records
                       gathered; rank 0 writes manifest.json, then latest.json; prune fast tier
      upload thread    fast shard -> durable tier; gathered; rank 0 commits there; prune durable

A failure in either thread is kept and raised at the next ``save`` or ``wait`` (never dropped).
The next save waits for the previous write to release the buffer, so one save is in flight
and memory stays at one copy of the state. The threads are in _pipeline.py.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import Any

from .._arg_types import NUMBER, PATH, check_args
from ..errors import CheckpointError
from ..store import IOLoop
from . import _writers
from ._at_exit import close_at_exit
from ._costs import TierCost, check_prices, tier_costs
from ._interval import checkpoint_interval
from ._load import Restored, load_newest
from ._manifest import CheckpointManifest, step_dir
from ._open_tiers import open_tiers
from ._ops import CheckReport, Listing, Progress, list_steps, pull_step, verify_tiers
from ._pipeline import SavePipeline
from ._preempt import PreemptionWatcher
from ._replicated import Replicated, normalise, plan
from ._retention import check_retention
from ._save_reports import PruneReport, SaveStats
from ._shardfile import Snapshot, reserve_snapshot, take_snapshot
from ._step_order import StepOrder
from ._tier import Tier

UPLOADS_BEHIND = 1  # unfinished uploads a save may leave behind it (besides its own)


class Checkpointer:
    """Async, atomic, tiered checkpoints.

    ``fast`` is a POSIX folder (local NVMe, a Lustre or NetApp mount); ``durable`` is any
    stoker store URL (``az://container/prefix``, a path). Keeps the ``keep_last`` newest
    checkpoints that load and every step that is a multiple of ``keep_every`` on each tier,
    and never deletes the newest one that loads. Each tier is probed for a write when the
    Checkpointer is made, so a missing container or a read-only mount fails here, not at a
    later save; ``check_writable=False`` skips it (to list, verify, load or pull only).

    The durable prefix is claimed for ``job_id`` (else torchrun's run id, else one derived
    from the fast folder; see _claim.py): a job with another id is refused here, and load,
    list and retention see only this job's steps. A durable folder that is the fast folder,
    or whose parent is missing (an unmounted volume), is refused; an endpoint that does not
    answer fails here within seconds.
    """

    def __init__(
        self,
        fast: str | os.PathLike[str],
        durable: str | os.PathLike[str] | None = None,
        *,
        keep_last: int = 3,
        keep_every: int | None = None,
        durable_keep_last: int | None = None,
        mtbf: float | str | None = None,
        reserve_like: Any = None,
        check_writable: bool = True,
        job_id: str | None = None,
    ) -> None:
        check_args(
            CheckpointError,
            fast=(fast, PATH),
            durable=(durable, (*PATH, type(None))),
            keep_last=(keep_last, int),
            keep_every=(keep_every, (int, type(None))),
            durable_keep_last=(durable_keep_last, (int, type(None))),
            mtbf=(mtbf, (*NUMBER, str, type(None))),
            check_writable=(check_writable, bool),
            job_id=(job_id, (str, type(None))),
        )
        check_retention(keep_last, keep_every, durable_keep_last)
        self.mtbf = mtbf
        self._io = IOLoop("stoker-checkpoint-io")
        try:
            tiers = open_tiers(fast, durable, job_id, check_writable, self._io)
        except BaseException:
            self._io.close()
            raise
        self.fast, self.durable, self.group, self.job_id = (
            tiers.fast,
            tiers.durable,
            tiers.group,
            tiers.job_id,
        )
        # which ranks share a fast tier: one folder for all, or one per node (local NVMe)
        self.group.find_nodes(self.fast.posix.root, create=check_writable)
        self._lock = _writers.FastLock(self.fast, self.group.rank)
        if check_writable and self.fast.posix.root.is_dir():
            self._lock.take()
        self.last_save: SaveStats | None = None
        self.saves: deque[SaveStats] = deque(maxlen=10_000)  # this run's, for save_json
        # Running totals for the exporter's counters, which must never go down (``saves``
        # forgets its oldest past 10,000).
        self.totals = {"saves": 0, "bytes": 0, "blocking_s": 0.0}
        self._started = time.perf_counter()
        self._snapshot: Snapshot | None = None
        self._pipeline = SavePipeline(
            self.fast,
            self.durable,
            self.group,
            keep_last=keep_last,
            keep_every=keep_every,
            durable_keep_last=durable_keep_last or keep_last,
        )
        self._closed = False
        self._order = StepOrder(self.fast)  # save steps only grow (_step_order.py)
        close_at_exit(self)
        if reserve_like is not None:  # the first save then copies into ready memory
            self.reserve(reserve_like)

    # ------------------------------------------------------------------ saving
    def save(self, step: int, state: Any, *, replicated: Replicated = None) -> SaveStats:
        """Snapshot ``state`` (tensors copied to host memory) and return; writing goes on in
        the background. Raises here if an earlier background save failed. The returned stats
        are filled in as the save proceeds (``fast_s``, ``durable_s``); keep them, since
        ``last_save`` moves on to the next save.

        ``replicated``: the top-level keys of ``state`` whose values every rank holds
        identically (``("model", "optim")`` under DDP), or True for the whole state. Their
        tensors are split among the ranks so that each is written once (every rank must pass
        the same keys, and hold the same names and shapes under them); the other keys are
        written by their own rank. See docs/checkpoint.md, "Many nodes"."""
        self._open()
        self.group.refuse_unstarted()
        step_dir(step)  # a bad step is the caller's error, raised here and not in the background
        normalise(replicated, state, step)  # a misnamed key is refused before anything moves
        if replicated is not None and replicated is not False:  # before the step is taken
            self._pipeline.refuse_split_without_durable(step)
        self._lock.take()
        self._order.check(step)
        stats = SaveStats(step)
        try:
            self._check(wait_for_writes=True)  # the buffer is about to be reused
        except CheckpointError as exc:
            raise type(exc)(f"{exc}; step {step} was not saved either: save it again") from exc
        self._pipeline.wait_for_uploads(UPLOADS_BEHIND)
        split = None
        if replicated is not None and replicated is not False:
            rank, world = self.group.rank, self.group.world_size

            def split(tensors: Any) -> Any:
                return plan(tensors, replicated, state, rank, world, step)

        self._snapshot = take_snapshot(state, reuse=self._snapshot, split=split)
        stats.bytes = self._snapshot.size
        stats.blocking_s = time.perf_counter() - stats.started
        self.last_save = stats
        self.saves.append(stats)
        self.totals["saves"] += 1
        self.totals["bytes"] += stats.bytes
        self.totals["blocking_s"] += stats.blocking_s
        self._pipeline.write(stats, self._snapshot)
        return stats

    def save_json(self, path: str | os.PathLike[str], name: str = "checkpoints") -> Any:
        """Write this run's saves (blocking, to the fast and durable tiers) as a
        ``stoker.measured/1`` record for ``stoker report --measured`` (docs/report.md)."""
        from ..measure.records import checkpoint_record

        return checkpoint_record(list(self.saves), self._started, name).save_json(path)

    def reserve(self, like: Any) -> None:
        """Make the host buffer for a state shaped like ``like`` now (its tensors may be on the
        meta device) and fault its pages in on a background thread while training runs, so
        that the first save blocks no longer than the others. A save that comes first waits
        for what is left of it. Also ``Checkpointer(..., reserve_like=state)``."""
        self._open()
        self._snapshot = reserve_snapshot(like, reuse=self._snapshot)
        self._pipeline._writer.submit(int)  # start the writer thread now, not in the first save

    def discard_after(self, step: int) -> list[int]:
        """Delete every checkpoint after ``step`` on every tier (the branch a rollback to
        ``step`` abandoned); returns the steps deleted."""
        self._open()
        self.wait()
        gone = self._pipeline.delete_after(step)
        if self.last_save and self.last_save.step > step:
            self.last_save = None
        self._order.forget()
        return gone

    @property
    def interval_s(self) -> float | None:
        """Young/Daly's interval from the newest finished save's measured blocking and write
        times and ``mtbf``; None until a save has finished, or without an MTBF."""
        done = self._pipeline.measured
        if self.mtbf is None or done is None or done.fast_s is None:
            return None
        return checkpoint_interval(done.blocking_s, done.durable_s or done.fast_s, mtbf=self.mtbf)

    def maybe_save(
        self, step: int, state: Any, *, replicated: Replicated = None
    ) -> SaveStats | None:
        """Save when the interval has passed since the last save began; else do nothing and
        return None. The first call always saves: it measures what a save costs, and until
        that save is written the interval is not known, so no other save starts.
        ``replicated``: as for ``save``."""
        last = self.last_save
        if last is None:
            return self.save(step, state, replicated=replicated)
        if self.mtbf is None:
            raise CheckpointError("maybe_save needs Checkpointer(..., mtbf=...)")
        interval = self.interval_s
        if interval is not None and time.perf_counter() - last.started >= interval:
            return self.save(step, state, replicated=replicated)
        return None

    def watch_preemption(self, state_fn: Any = None, **options: Any) -> PreemptionWatcher:
        """Watch Azure Scheduled Events for this VM (a Spot eviction, a deletion, a reboot or a
        redeploy); the training loop calls ``watcher.should_stop(step)`` every step, which saves,
        makes the step durable, acknowledges the event and returns True. Options:
        ``on_preempt``, ``endpoint``, ``vm_name``, ``poll_s``, ``replicated`` (as ``save``'s;
        see docs/checkpoint.md)."""
        self._open()
        return PreemptionWatcher(self, state_fn, **options)

    @property
    def busy(self) -> bool:
        """Whether a save is still being written or uploaded (does not block, raises nothing)."""
        return self._pipeline.busy

    def wait(self) -> None:
        """Block until every save so far is committed on every tier; raise what failed."""
        self._check(wait_for_writes=True, wait_for_uploads=True)

    def _check(self, *, wait_for_writes: bool = False, wait_for_uploads: bool = False) -> None:
        try:
            self._pipeline.check(wait_for_writes=wait_for_writes, wait_for_uploads=wait_for_uploads)
        except CheckpointError:
            self._order.forget()  # a failed step may be saved again
            raise

    # ------------------------------------------------------------------ DCP
    def dcp_writer(self, step: int, **options: Any) -> Any:
        """A torch.distributed.checkpoint StorageWriter that writes step ``step`` to the fast
        tier, commits it with stoker's manifest and uploads it to the durable tier."""
        self._open()
        self.group.refuse_unstarted()
        from ._dcp import DCPWriter

        step_dir(step)
        self.last_save = SaveStats(step)
        return DCPWriter(self, step, **options)

    def dcp_reader(self, step: int | None = None) -> Any:
        """A StorageReader for the newest (or the given) step saved through ``dcp_writer``,
        every file verified first; DCP reshards it to this job's world size."""
        self._open()
        from ._dcp import DCPReader

        self.wait()
        return DCPReader(self, step)

    def commit_external(self, manifest: CheckpointManifest) -> None:
        """Commit a step whose files another writer (DCP's coordinator) put on the fast tier."""
        self.fast.commit(manifest)
        stats = self.last_save if self.last_save and self.last_save.step == manifest.step else None
        self._pipeline.upload_external(stats or SaveStats(manifest.step), manifest)

    # ------------------------------------------------------------------ retention
    def prune(self, *, dry_run: bool = False, delete_damaged: bool = False) -> PruneReport:
        """Apply the retention policy to every tier now; returns the steps deleted (or, dry, to
        delete) per tier. Only steps that load count towards ``keep_last`` (each of the newest
        is verified: manifest readable, every file's size and hash as recorded, on some tier),
        so the newest step that loads is never deleted. A newer step that does not load is
        kept for inspection and named in the report's ``damaged``, unless ``delete_damaged``.
        Incomplete steps older than the newest one that loads go too."""
        self._open()
        self.wait()
        self._require_checkpoints()
        report = PruneReport()
        for tier in self.tiers:
            pruned = self._pipeline.prune(tier, dry_run, delete_damaged)
            report[tier.name] = pruned.deleted
            if pruned.damaged:
                report.damaged[tier.name] = pruned.damaged
        return report

    def verify(self, step: int | None = None, progress: Progress | None = None) -> CheckReport:
        """Re-hash every file of every committed step (or ``step``) on every tier. Raises
        ``CheckpointError`` when there is nothing to verify (a mistyped path must not pass)."""
        self._open()
        self.wait()
        self._require_checkpoints()
        return verify_tiers(self.tiers, step, progress)

    def pull(self, step: int | None = None, progress: Progress | None = None) -> tuple[int, int]:
        """Bring the newest (or ``step``) checkpoint from the durable tier to the fast tier,
        verified, e.g. on a new VM before training resumes; returns (step, bytes)."""
        self._open()
        if self.durable is None:
            raise CheckpointError("pull needs a durable tier (durable=URL)")
        return pull_step(self.durable, self.fast, step, progress)

    def costs(
        self,
        *,
        blob_tier: str = "hot",
        fast_usd_per_gb_month: float | None = None,
        durable_usd_per_gb_month: float | None = None,
        listing: Listing | None = None,
    ) -> list[TierCost]:
        """What the kept checkpoints cost per month on each tier: the catalog's Blob price for
        the access tier ``blob_tier`` (hot, cool, cold or archive), or the USD per GB-month
        given for a tier. ``listing``: a ``list()`` to price, so no tier is listed again; a
        tier it could not list has ``bytes`` None."""
        check_prices(
            blob_tier,
            fast_usd_per_gb_month=fast_usd_per_gb_month,
            durable_usd_per_gb_month=durable_usd_per_gb_month,
        )
        kept = (listing if listing is not None else list_steps(self.tiers)).kept
        return tier_costs(
            [(self.fast, fast_usd_per_gb_month), (self.durable, durable_usd_per_gb_month)],
            blob_tier,
            kept,
        )

    # ------------------------------------------------------------------ reading
    @property
    def tiers(self) -> list[Tier]:
        return self._pipeline.tiers

    def list(self, *, hashes: bool = False) -> Listing:
        """Every step on any tier, newest first, with its state on each tier (ok, damaged and
        why, missing, incomplete) and whether it loads; ``hashes=True`` reads every byte (else
        manifests and sizes are checked, which finds torn and truncated files, not a flipped
        byte). A fast folder that
        does not exist is an error (a mistyped path), unless the durable tier holds steps; an
        existing empty folder lists nothing. A tier that cannot be listed is named in the
        result's ``unreachable`` (tier -> why), and the other tiers are listed all the same."""
        self._open()
        self._require_checkpoints()
        return list_steps(self.tiers, hashes=hashes)

    def load(
        self,
        step: int | None = None,
        *,
        fallback: bool = True,
        map_location: Any = None,
        trusted: bool = False,
        reshard: bool = False,
    ) -> Restored:
        """The newest checkpoint that loads (or ``step``), from the fastest tier that has it,
        every byte checked against the manifest; a damaged manifest or shard on the fast tier
        is read again from the durable tier. A step that loads from no tier is skipped, with a
        warning, for the previous one (named with why in ``Restored.skipped``);
        ``fallback=False`` raises instead. ``trusted=True`` allows
        arbitrary Python objects in the state (it unpickles them).

        A step saved by another number of ranks loads when its state is all replicated
        (``save(replicated=True)``); one with private keys is refused, naming them, unless
        ``reshard=True``, which gives every rank the replicated part and rank 0's private
        entries (as DDP would start)."""
        self._open()
        self.wait()
        return load_newest(
            self.tiers,
            self.group,
            step,
            fallback=fallback,
            map_location=map_location,
            trusted=trusted,
            reshard=reshard,
        )

    def _require_checkpoints(self) -> None:
        """Refuse to read or prune a fast folder that does not exist: it is a mistyped path,
        not an empty tier. Not once this Checkpointer has saved (the save creates the folder),
        nor with a durable tier that holds steps (a new VM, before ``pull``)."""
        assert self.fast.posix is not None
        if self.last_save is not None or self.fast.posix.root.is_dir():
            return
        if self.durable is not None and self.durable.steps():
            return
        also = " and the durable tier holds no step" if self.durable is not None else ""
        raise CheckpointError(
            f"{self.fast}: no such folder{also}, so no checkpoint here; check the path"
        )

    def _open(self) -> None:
        if self._closed:
            raise CheckpointError("this Checkpointer is closed: make a new one to go on")

    def close(self) -> None:
        """Wait for every save, then release the threads (again: nothing to do)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.wait()
        finally:
            self._pipeline.shutdown()
            for tier in self.tiers:
                tier.close()
            self._io.close()
            self._lock.release()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
