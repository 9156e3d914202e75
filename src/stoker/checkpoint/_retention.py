"""Which checkpoints a tier may delete (pure: steps in, steps out), and deleting them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CheckpointError

if TYPE_CHECKING:
    from ._health import StepChecker, StepHealth
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


@dataclass
class Pruned:
    """What one pass of retention did (or, dry, would do) on one tier."""

    deleted: list[int] = field(default_factory=list)
    damaged: dict[int, str] = field(default_factory=dict)  # kept for inspection: step -> why


def plan_prune(
    committed: list[int],
    incomplete: list[int],
    loads: Callable[[int], str],
    keep_last: int,
    keep_every: int | None,
    protect: set[int] = frozenset(),
    delete_damaged: bool = False,
) -> Pruned:
    """Which steps to delete (pure but for ``loads(step)``, which returns "" for a step that
    loads and else why not; it is asked newest first, and only until ``keep_last`` steps that
    load are found, so older steps are never read).

    Kept: the ``keep_last`` newest steps that load, multiples of ``keep_every``, protected
    steps (still being uploaded), and steps newer than the last kept one that do not load
    (damaged: kept for inspection unless ``delete_damaged``). If no step loads, no committed
    step is deleted. Incomplete steps (no manifest) older than the newest step that loads go:
    a writer died on them; newer ones may still be in flight."""
    out = Pruned()
    good: list[int] = []
    for step in sorted(committed, reverse=True):
        if len(good) >= keep_last:  # beyond the kept steps: judged by number alone
            if step not in protect and not (keep_every and step % keep_every == 0):
                out.deleted.append(step)
            continue
        why = loads(step)
        if not why:
            good.append(step)
            continue
        out.damaged[step] = why
        if delete_damaged and step not in protect:
            out.deleted.append(step)
    newest_good = good[0] if good else None
    if newest_good is not None:
        out.deleted += [s for s in incomplete if s < newest_good and s not in protect]
    out.deleted.sort()
    return out


def prune_tier(
    tier: Tier,
    checker: StepChecker,
    keep_last: int,
    keep_every: int | None,
    protect: set[int],
    dry_run: bool,
    delete_damaged: bool = False,
) -> Pruned:
    """Delete the tier's steps outside the policy (see ``plan_prune``); returns them (with
    ``dry_run``, only says which). Whether a step loads is judged across every tier."""
    checker.forget_listings()
    steps = checker.listing(tier)
    if steps is None:
        tier.steps()  # raises the listing's error
        return Pruned()

    def loads(step: int) -> str:
        health = checker.check(step)
        return "" if health.loads else _why(health)

    # Only this job's steps are deleted: the tier's listing leaves out those another job's
    # manifest names, and a committed step whose manifest cannot be read now (so neither can
    # its job) is kept. Incomplete steps (no manifest yet) are judged by the tier: the fast
    # folder is locked by this job, the durable prefix claimed by it (_claim.py).
    unknown = {s for s, listing in steps.items() if listing.committed and listing.owned is not True}
    if tier.job_id is None:
        unknown.clear()  # a tier with no job (made by hand): every step, as before job ids
    pruned = plan_prune(
        [s for s, listing in steps.items() if listing.committed],
        [s for s, listing in steps.items() if not listing.committed],
        loads,
        keep_last,
        keep_every,
        protect | unknown,
        delete_damaged,
    )
    for step in unknown & set(pruned.damaged):
        pruned.damaged[step] += (
            "; whose step it is cannot be read either, so it is never deleted by stoker "
            "(remove it by hand if it is this job's)"
        )
    for step, why in pruned.damaged.items():
        log.warning("step %d does not load, kept for inspection: %s", step, why)
    for step in [] if dry_run else pruned.deleted:
        log.info("pruning step %d from %s", step, tier)
        tier.delete_step(steps[step])
    return pruned


def _why(health: StepHealth) -> str:
    states = "; ".join(f"{name} {state}" for name, state in health.tiers.items())
    return f"{health.why} ({states})" if health.why else states
