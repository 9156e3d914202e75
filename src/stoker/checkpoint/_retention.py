"""Which checkpoints a tier may delete (pure: steps in, steps out), and deleting them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import CheckpointError

if TYPE_CHECKING:
    from ._tier import Tier

log = logging.getLogger("stoker.checkpoint")


def check_retention(keep_last: int, keep_every: int | None, durable_keep_last: int | None) -> None:
    """Refuse a policy that would keep nothing, or that reads as something it is not (a
    ``keep_every`` of 0 would keep no extra step, not every one)."""
    if keep_last < 1:
        raise CheckpointError(f"keep_last={keep_last}: keep at least the newest checkpoint (1)")
    if durable_keep_last is not None and durable_keep_last < 1:
        raise CheckpointError(
            f"durable_keep_last={durable_keep_last}: keep at least the newest checkpoint (1)"
        )
    if keep_every is not None and keep_every < 1:
        raise CheckpointError(
            f"keep_every={keep_every}: give a step interval of 1 or more, or leave it out to "
            "keep no extra steps"
        )


def to_delete(
    committed: list[int], keep_last: int, keep_every: int | None, protect: set[int] = frozenset()
) -> list[int]:
    """Committed steps outside the policy: not among the ``keep_last`` newest, not a multiple
    of ``keep_every``, not protected (e.g. still being uploaded), and never the newest one."""
    if not committed:
        return []
    ordered = sorted(committed)
    keep = set(ordered[-keep_last:]) if keep_last > 0 else set()
    keep.add(ordered[-1])
    if keep_every:
        keep |= {s for s in ordered if s % keep_every == 0}
    return [s for s in ordered if s not in keep and s not in protect]


def abandoned(incomplete: list[int], newest_committed: int | None, protect: set[int]) -> list[int]:
    """Incomplete steps older than the newest committed one: a writer died on them. Newer ones
    may still be in flight on another rank, so they wait for a later prune."""
    if newest_committed is None:
        return []
    return [s for s in sorted(incomplete) if s < newest_committed and s not in protect]


def prune_tier(
    tier: Tier, keep_last: int, keep_every: int | None, protect: set[int], dry_run: bool
) -> list[int]:
    """Delete the tier's steps outside the policy, and incomplete ones a writer died on;
    returns them (with ``dry_run``, only says which)."""
    steps = tier.steps()
    committed = [s for s, listing in steps.items() if listing.committed]
    doomed = to_delete(committed, keep_last, keep_every, protect)
    doomed += abandoned(
        [s for s, listing in steps.items() if not listing.committed],
        max(committed, default=None),
        protect,
    )
    for step in [] if dry_run else doomed:
        log.info("pruning step %d from %s", step, tier)
        tier.delete_step(steps[step])
    return doomed
