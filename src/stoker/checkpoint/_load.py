"""Finding and loading the newest checkpoint that verifies, on whichever tier has it.

Every rank proposes the steps it can see committed; all try the newest of the union; the step
is taken only when every rank loaded and verified its shard, so ranks never resume from
different steps. A shard missing or corrupt on the fast tier is fetched again from the durable
tier (which repairs the fast copy) before the step is given up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointError, CorruptCheckpointError, StokerError, UntrustedStateError
from ._group import Group
from ._manifest import CheckpointManifest, shard_name
from ._shardfile import read_verified, restore
from ._tier import Tier

log = logging.getLogger("stoker.checkpoint")


@dataclass
class Restored:
    step: int
    state: Any
    tier: str  # where this rank's shard was read: "fast" or "durable"
    skipped: dict[int, str] = field(default_factory=dict)  # newer steps that did not load: why


def committed_steps(
    tiers: list[Tier], step: int | None = None, unreachable: list[tuple[Tier, str]] | None = None
) -> dict[int, list[Tier]]:
    """Step -> the tiers (fastest first) where it is committed. A tier that cannot be listed
    is left out (a durable tier out of reach must not block a local load), and added to
    ``unreachable`` with the reason when the caller keeps count."""
    found: dict[int, list[Tier]] = {}
    for tier in tiers:
        try:
            steps = tier.steps()
        except StokerError as exc:
            log.warning("%s; going on with the other tiers", exc)
            if unreachable is not None:
                unreachable.append((tier, str(exc)))
            continue
        for s, listing in steps.items():
            if listing.committed and (step is None or s == step):
                found.setdefault(s, []).append(tier)
    return found


def fetch(tier: Tier, fast: Tier, step: int, name: str, manifest: CheckpointManifest) -> None:
    """Copy one file of a committed step from ``tier`` into the fast tier, verified."""
    record = manifest.file(name)
    partial = fast.partial(step, name)
    tier.download(step, name, record.size, partial)
    read_verified(partial, record.size, record.xxh3)  # raises on a bad copy, before publishing
    fast.publish(step, name)


def load_newest(
    tiers: list[Tier],
    group: Group,
    step: int | None,
    *,
    fallback: bool,
    map_location: Any,
    trusted: bool,
) -> Restored:
    found = committed_steps(tiers, step)
    proposals = group.all_gather(sorted(found), "load")
    candidates = sorted({s for p in proposals for s in p}, reverse=True)
    if not candidates:
        where = ", ".join(str(t) for t in tiers)
        what = f"step {step} is" if step is not None else "complete checkpoint is"
        raise CheckpointError(
            f"no {what} on {where} (a step without its manifest.json is incomplete)"
        )
    errors: list[CheckpointError] = []
    skipped: dict[int, str] = {}
    for s in candidates:
        restored, error = None, None
        try:
            restored = _load_step(s, found.get(s, []), tiers[0], group, map_location, trusted)
        except CheckpointError as exc:
            error = exc
            errors.append(exc)
        outcomes = group.all_gather(_outcome(error), "load")
        if all(o == "ok" for o in outcomes):
            assert restored is not None
            _repair_fast_manifest(tiers[0], restored.manifest, group)
            return Restored(restored.step, restored.state, restored.tier, skipped)
        if "untrusted" in outcomes:  # not damage: an older step would not load either
            raise error or CheckpointError(
                f"step {s}: another rank's state needs load(trusted=True) (see its error)"
            )
        if not fallback and isinstance(error, CorruptCheckpointError):
            # the advice belongs to load; a pull of the same bytes says what it can do instead
            raise CorruptCheckpointError(
                f"{error} (load(fallback=True) takes the previous verified checkpoint)"
            ) from error
        if not fallback:
            raise error or CheckpointError(
                f"step {s}: another rank could not load its shard (see that rank's error)"
            )
        why = str(error) if error else "another rank could not load its shard"
        skipped[s] = why
        log.warning("step %d does not load (%s); trying the previous checkpoint", s, why)
    kind = (
        CorruptCheckpointError
        if errors and all(isinstance(e, CorruptCheckpointError) for e in errors)
        else CheckpointError
    )
    raise kind("no checkpoint loads: " + "; ".join(str(e) for e in errors))


def _repair_fast_manifest(fast: Tier, manifest: CheckpointManifest, group: Group) -> None:
    """Every rank's shard of the loaded step is now on the fast tier, verified (read there, or
    fetched from the durable tier); a fast manifest that is missing, unreadable or different
    is written again from the one the load used, so the next load reads the fast tier. Rank 0
    writes it, then, on a node-local tier, any rank that still sees a bad one."""

    def bad() -> bool:
        try:
            return fast.manifest(manifest.step) != manifest
        except CheckpointError:
            return True

    if not any(group.all_gather(bad(), "load")):
        return
    if group.leader:
        fast.commit(manifest, pointer=False)
    group.all_gather(None, "load")
    if not group.leader and bad():
        fast.commit(manifest, pointer=False)


def _outcome(error: CheckpointError | None) -> str:
    if error is None:
        return "ok"
    # not damage: the same on every step, so no older step is tried
    return "untrusted" if isinstance(error, UntrustedStateError | _Refused) else "failed"


@dataclass
class _Loaded:
    step: int
    state: Any
    tier: str
    manifest: CheckpointManifest


def _load_step(
    step: int, tiers: list[Tier], fast: Tier, group: Group, map_location: Any, trusted: bool
) -> _Loaded:
    """This rank's shard of ``step``, from the first tier whose manifest and shard verify;
    a damaged manifest or shard on the fast tier is read again from the next tier."""
    if not tiers:
        raise CheckpointError(f"step {step} is not committed on any tier this rank can see")
    name = shard_name(group.rank, group.world_size)
    first: CheckpointError | None = None
    for tier in tiers:
        try:
            manifest = tier.manifest(step)
            if manifest is None:
                continue
            _check_loadable(step, tier, manifest, group.world_size)
            record = manifest.file(name)
            if tier is not fast:  # bring it to the fast tier: this load and the next read it there
                fetch(tier, fast, step, name, manifest)
            path = fast.path(step, name)
            buffer = read_verified(path, record.size, record.xxh3)
            state = restore(buffer, record.size, path, map_location=map_location, trusted=trusted)
            return _Loaded(step, state, tier.name, manifest)
        except (UntrustedStateError, _Refused):
            raise  # the same on every tier
        except CheckpointError as exc:
            first = first or exc
            log.warning("%s; trying the next tier", exc)
    raise first or CheckpointError(f"step {step}: no manifest could be read")


class _Refused(CheckpointError):
    """A step this job cannot load from any tier (another kind or world size)."""


def _check_loadable(step: int, tier: Tier, manifest: CheckpointManifest, world_size: int) -> None:
    if manifest.kind != "stoker":
        raise _Refused(
            f"step {step} on {tier} was written through torch.distributed.checkpoint: load "
            "it with torch.distributed.checkpoint.load(state, storage_reader=ckpt.dcp_reader())"
        )
    if manifest.world_size != world_size:
        raise _Refused(
            f"step {step} on {tier} was saved by {manifest.world_size} ranks, this job has "
            f"{world_size}: use the same world size, or save through the DCP adapter "
            "(ckpt.dcp_writer()) to reshard"
        )
