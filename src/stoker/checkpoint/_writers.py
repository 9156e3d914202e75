"""Who may write a checkpoint folder: every rank able to write its tiers, found before the
first save (all ranks raise together), and one job at a time in a fast folder (a flock per
rank, held while its Checkpointer lives, naming its holder when refused)."""

from __future__ import annotations

import os

from .. import _flock
from ..errors import CheckpointError
from ._group import Group
from ._tier import Tier


def check_writable(tiers: list[Tier], group: Group) -> None:
    """Every rank probes its tiers; all raise together if any rank cannot write (one rank
    raising alone would leave the others waiting for it at the first save)."""
    error: CheckpointError | None = None
    try:
        for tier in tiers:
            tier.check_writable()
    except CheckpointError as exc:
        error = exc
    failed = group.all_gather(None if error is None else str(error), "write")
    if error is not None:
        raise error
    bad = [(rank, why) for rank, why in enumerate(failed) if why]
    if bad:
        rank, why = bad[0]
        raise CheckpointError(f"rank {rank} cannot save: {why}")


class FastLock:
    """This rank's lock in the fast folder: a second job (a restart while the old one still
    runs), or ``stoker checkpoint prune`` during a run, would write or delete under the same
    names. Taken once (``take``), released by ``release`` or by the process's end."""

    def __init__(self, fast: Tier, rank: int) -> None:
        self.fast, self.rank = fast, rank
        self.held = False  # taken (or there is no flock on this file system: run unlocked)
        self._fd: int | None = None

    def take(self) -> None:
        if self.held:
            return
        root = self.fast.posix.root  # type: ignore[union-attr]
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._fd = _flock.take(root / f".stoker-writer-{self.rank:05d}.lock")
        except _flock.Held as held:
            raise CheckpointError(
                f"another process{held.holder} is saving or pruning in the {self.fast} as rank "
                f"{self.rank}: stop it first, or give this job a folder of its own"
            ) from None
        except OSError as exc:
            raise CheckpointError(f"the {self.fast} cannot be locked ({exc}): check it") from exc
        self.held = True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock
            self._fd = None
