"""The background half of a save: the writer thread and the upload thread (the flow is drawn
in _checkpointer.py).

Every write and upload is a pending future until ``check`` collects it, so that a failure is
raised in the training loop (never dropped). Every delete on a tier goes through here too, under
one lock, and spares the steps still being uploaded.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import CheckpointError, StokerError
from ._group import Group
from ._health import StepChecker
from ._manifest import CheckpointManifest, FileRecord, shard_name
from ._retention import Pruned, prune_tier
from ._shardfile import Snapshot, tensor_hashes, write_snapshot
from ._tier import Tier

if TYPE_CHECKING:
    from ._save_reports import SaveStats

log = logging.getLogger("stoker.checkpoint")


class SavePipeline:
    """Writes saves to ``fast``, uploads them to ``durable`` and applies the retention policy
    after each commit."""

    def __init__(
        self,
        fast: Tier,
        durable: Tier | None,
        group: Group,
        *,
        keep_last: int,
        keep_every: int | None,
        durable_keep_last: int,
    ) -> None:
        self.fast, self.durable, self.group = fast, durable, group
        self.keep_last, self.keep_every = keep_last, keep_every
        self.durable_keep_last = durable_keep_last
        self.measured: SaveStats | None = None  # the newest save whose write has finished
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="stoker-ckpt-write")
        self._uploader = ThreadPoolExecutor(1, thread_name_prefix="stoker-ckpt-upload")
        self._pending: list[Future[None]] = []
        self._uploading: set[int] = set()  # steps the fast tier must keep until uploaded
        self._lock = threading.Lock()
        self._prune_lock = threading.Lock()
        # what retention judged of each file, kept across passes (a step is read once)
        self.checker = StepChecker(self.tiers)

    @property
    def tiers(self) -> list[Tier]:
        return [self.fast] + ([self.durable] if self.durable is not None else [])

    # ------------------------------------------------------------------ queueing
    def refuse_split_without_durable(self, step: int) -> None:
        """A split (``replicated=``) on node-local fast tiers needs a durable tier."""
        if self.group.node_local and self.durable is None:
            raise CheckpointError(
                f"step {step}: replicated= on node-local fast tiers (ranks "
                f"{self.group.nodes} each share one) needs a durable tier: each node's disk "
                "holds only its own ranks' files, so no load could read the replicated tensors "
                "the other nodes wrote; give the Checkpointer durable=URL, or a fast tier "
                "every rank shares"
            )

    def write(self, stats: SaveStats, snapshot: Snapshot) -> None:
        """Write ``snapshot`` to the fast tier in the background, then upload it."""
        if snapshot.plan is not None:
            self.refuse_split_without_durable(stats.step)
        future = self._writer.submit(self._write_fast, stats, snapshot)
        with self._lock:
            self._pending.append(future)

    def upload_external(self, stats: SaveStats, manifest: CheckpointManifest) -> None:
        """Time and prune a step that another writer (DCP's coordinator) committed on the fast
        tier; its upload is queued on every rank by ``upload_files`` (the coordinator's, with
        this manifest, which it commits on the durable tier)."""
        stats.bytes = manifest.bytes
        stats.fast_s = time.perf_counter() - stats.started
        self.measured = stats
        if self.group.node_leader:
            self.prune(self.fast)

    def upload_files(
        self, stats: SaveStats, names: list[str], manifest: CheckpointManifest | None
    ) -> None:
        """Upload the files this rank wrote of a DCP step, in the background; the rank that
        holds the ``manifest`` (DCP's coordinator, after its ``finish``) also uploads the files
        it lists and no rank wrote (``.metadata``), and commits on the durable tier once every
        rank has uploaded. Each rank uploads from its own fast tier, so node-local fast tiers
        work. Every rank then has the manifest: on a node-local tier its node's lowest rank
        commits it there too."""
        if self.durable is None:
            return
        with self._lock:
            self._uploading.add(stats.step)
        future = self._uploader.submit(self._upload_files, stats, names, manifest)
        future.stoker_upload = True  # type: ignore[attr-defined]
        with self._lock:
            self._pending.append(future)

    def _upload_files(
        self, stats: SaveStats, names: list[str], manifest: CheckpointManifest | None
    ) -> None:
        assert self.durable is not None
        error: BaseException | None = None
        try:
            try:
                for name in names:
                    source = self.fast.path(stats.step, name)
                    self.durable.upload(stats.step, name, source, source.stat().st_size)
            except (OSError, StokerError) as exc:
                error = exc
            gathered = self.group.all_gather(
                (manifest if error is None else None, None if error is None else str(error)),
                "upload",
            )
            failed = [(rank, why) for rank, (_, why) in enumerate(gathered) if why]
            if failed:
                rank, why = failed[0]
                raise CheckpointError(
                    f"step {stats.step}: rank {rank} could not upload its DCP files to the "
                    f"{self.durable} ({why}), so the step was not committed there; the fast "
                    "tier keeps it"
                )
            committed = next((m for m, _ in gathered if m is not None), None)
            if committed is None:
                raise CheckpointError(
                    f"step {stats.step}: DCP's coordinator did not commit the step, so it was "
                    f"not committed on the {self.durable} either"
                )
            if self.group.leader:
                self.durable.commit(committed)
                self.checker.trust(self.durable, committed)
                self.prune(self.durable)
            elif self.group.node_local and self.group.node_leader:
                self.fast.commit(committed)  # this node's files, with the step's manifest
            stats.durable_s = time.perf_counter() - stats.started
        finally:
            with self._lock:
                self._uploading.discard(stats.step)
        if self.group.node_leader:
            self.prune(self.fast)

    @property
    def busy(self) -> bool:
        with self._lock:
            return any(not f.done() for f in self._pending)

    def check(self, *, wait_for_writes: bool = False, wait_for_uploads: bool = False) -> None:
        """Collect the finished writes and uploads (waiting for those asked); raise the first
        failure among them."""
        errors: list[BaseException] = []
        while True:  # a finished write may queue an upload meanwhile: look again
            with self._lock:
                pending = list(self._pending)
            waited = False
            for future in pending:
                is_upload = getattr(future, "stoker_upload", False)
                if not future.done() and not (wait_for_uploads if is_upload else wait_for_writes):
                    continue
                waited = True
                if (exc := future.exception()) is not None:
                    errors.append(exc)
                with self._lock:
                    self._pending.remove(future)
            if not waited:
                break
        if errors:
            first = errors[0]
            shown = str(first) if isinstance(first, StokerError) else repr(first)
            # Always a CheckpointError (a store's or a disk's error inside), so that one
            # `except CheckpointError` catches every failed save.
            kind = type(first) if isinstance(first, CheckpointError) else CheckpointError
            raise kind(f"a background checkpoint save failed: {shown}") from first

    def wait_for_uploads(self, most: int) -> None:
        """Hold the caller until at most ``most`` uploads are unfinished. The fast tier keeps
        every step until its upload is done, so with a durable tier slower than the saves it
        would fill (and the durable copy fall ever further behind) without this."""
        while True:
            with self._lock:
                uploads = [
                    f for f in self._pending if getattr(f, "stoker_upload", False) and not f.done()
                ]
            if len(uploads) <= most:
                return
            uploads[0].exception()  # wait for the oldest (an error is reported by check)

    def shutdown(self) -> None:
        self._writer.shutdown()
        self._uploader.shutdown()

    # ------------------------------------------------------------------ the threads
    def _write_fast(self, stats: SaveStats, snapshot: Snapshot) -> None:
        name = shard_name(self.group.rank, self.group.world_size)
        record, error = None, None
        try:
            partial = self.fast.partial(stats.step, name)
            digest = write_snapshot(snapshot, partial)
            # for the other ranks' ranged reads (alone, a rank's file holds every tensor)
            tensors = tensor_hashes(snapshot) if self.group.world_size > 1 else {}
            record = FileRecord(name, snapshot.size, digest, self.group.rank, tensors)
            self.fast.publish(stats.step, name)
        except OSError as exc:
            error = _write_error(exc, stats.step, self.fast)
        # Every rank reports, failed or not, so that no rank waits forever for a dead one.
        plan = snapshot.plan  # the same on every rank (made from names and sizes alone)
        layout = plan.layout if plan else ""
        gathered = self.group.all_gather((record, layout), "write")
        records = [r for r, _ in gathered]
        if error is not None:
            raise error
        if None in records:
            failed = [rank for rank, r in enumerate(records) if r is None]
            raise CheckpointError(
                f"step {stats.step}: rank(s) {failed} could not write their shard, so the step "
                "was not committed; the previous checkpoint is intact"
            )
        differ = [rank for rank, (_, other) in enumerate(gathered) if other != gathered[0][1]]
        if differ:  # each would have written its share of another split: tensors lost
            raise CheckpointError(
                f"step {stats.step}: rank(s) {differ} hold other replicated tensors (names, "
                f"sizes or keys) than rank 0 under replicated=, so the step was not committed "
                "(the previous checkpoint is intact): every rank must pass the same replicated= "
                "and hold the same names and shapes under it"
            )
        manifest = CheckpointManifest(
            stats.step,
            self.group.world_size,
            records,
            replicated=plan.replicated if plan else None,
            private=plan.private if plan else None,
            nodes=self.group.nodes if self.group.node_local else None,
            job_id=self.fast.job_id,
        )
        self._commit(self.fast, manifest)
        self.checker.trust(self.fast, manifest)  # every rank hashed its shard as it wrote it
        self._after_fast_commit(stats, manifest, [name], gather=True)
        if self.group.node_leader:  # each node's fast tier is pruned by a rank on it
            self.prune(self.fast)

    def _after_fast_commit(
        self, stats: SaveStats, manifest: CheckpointManifest, names: list[str], *, gather: bool
    ) -> None:
        """A step is committed on the fast tier: time it, and queue its upload."""
        stats.fast_s = time.perf_counter() - stats.started
        self.measured = stats
        if self.durable is None:
            return
        with self._lock:
            self._uploading.add(stats.step)
        future = self._uploader.submit(self._upload, stats, manifest, names, gather)
        future.stoker_upload = True  # type: ignore[attr-defined]
        with self._lock:
            self._pending.append(future)

    def _commit(self, tier: Tier, manifest: CheckpointManifest) -> None:
        """Commit on the fast tier: its lowest rank on each node writes the manifest (rank 0
        alone on a tier every rank shares; on node-local tiers one copy per node), and every
        rank waits until all are written."""
        if self.group.node_leader:
            tier.commit(manifest)
        self.group.all_gather(None, "write" if tier is self.fast else "upload")

    def _upload(
        self, stats: SaveStats, manifest: CheckpointManifest, names: list[str], gather: bool
    ) -> None:
        assert self.durable is not None
        try:
            for name in names:
                source = self.fast.path(stats.step, name)
                self.durable.upload(stats.step, name, source, manifest.file(name).size)
            if gather:
                self.group.all_gather(None, "upload")  # every shard is up before the commit
            if self.group.leader:
                self.durable.commit(manifest)
                self.checker.trust(self.durable, manifest)  # copied from files just verified
                self.prune(self.durable)
            stats.durable_s = time.perf_counter() - stats.started
        finally:
            with self._lock:
                self._uploading.discard(stats.step)
        if self.group.node_leader:  # the fast tier kept this step for the upload; now it may go
            self.prune(self.fast)

    # ------------------------------------------------------------------ deleting
    def prune(self, tier: Tier, dry_run: bool = False, delete_damaged: bool = False) -> Pruned:
        """Apply the retention policy to ``tier``: what it deleted (or, dry, would delete), and
        the steps that do not load, kept for inspection."""
        keep_last = self.keep_last if tier is self.fast else self.durable_keep_last
        with self._prune_lock:  # the writer and the uploader both prune the fast tier
            with self._lock:
                protect = set(self._uploading) if tier is self.fast else set()
            return prune_tier(
                tier, self.checker, keep_last, self.keep_every, protect, dry_run, delete_damaged
            )

    def delete_after(self, step: int) -> list[int]:
        """Delete every step after ``step`` on every tier, and forget a measured save among
        them; returns the steps deleted."""
        gone: set[int] = set()
        with self._prune_lock:
            for tier in self.tiers:
                for later, listing in tier.steps().items():
                    unknown = listing.committed and listing.owned is not True  # whose is it?
                    if later > step and not (unknown and tier.job_id is not None):
                        log.info("discarding step %d from %s", later, tier)
                        tier.delete_step(listing)
                        gone.add(later)
        if self.measured and self.measured.step > step:
            self.measured = None
        return sorted(gone)


def _write_error(exc: OSError, step: int, tier: Tier) -> CheckpointError:
    """Name the tier and say that nothing committed was touched; drop the partial file."""
    if tier.posix is not None:
        for partial in tier.path(step, "x").parent.glob("*.stoker-partial"):
            partial.unlink(missing_ok=True)  # give the space back
    why = "no space left" if exc.errno in (28, 122) else (exc.strerror or str(exc))
    return CheckpointError(
        f"step {step} was not saved: {why} on {tier} ({exc.filename or 'its folder'}); the "
        "previous checkpoint is intact; free space (or lower keep_last) and save again"
    )
