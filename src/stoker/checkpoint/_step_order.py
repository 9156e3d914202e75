"""The rule that save steps only grow: retention and resume go by step number, so a step below
one already saved would be pruned while the abandoned later ones are kept and resumed from, and
the same step twice would rewrite files under a committed manifest. After a rollback the caller
drops the later steps on purpose (``Checkpointer.discard_after``), which ``forget``s the newest."""

from __future__ import annotations

from ..errors import CheckpointError
from ._tier import Tier


class StepOrder:
    def __init__(self, fast: Tier) -> None:
        self.fast = fast
        self.newest: int | None = None  # the highest step on the fast tier or saved here

    def check(self, step: int) -> None:
        """Refuse ``step`` unless it is above every committed step; then it is the newest."""
        if self.newest is None:  # once, before any write of ours: no prune runs meanwhile
            committed = [s for s, listing in self.fast.steps().items() if listing.committed]
            self.newest = max(committed, default=-1)
        newest = self.newest if self.newest >= 0 else None
        if newest is not None and step == newest:
            raise CheckpointError(
                f"step {step} is already saved in {self.fast}: give each save a new step (a "
                "committed step rewritten in place could be left unloadable by a crash)"
            )
        if newest is not None and step < newest:
            raise CheckpointError(
                f"step {step} is before step {newest}, already saved in {self.fast}: a resume "
                f"would take {newest} and pruning would drop the new steps. After going back "
                "to an earlier step, call discard_after(that step) first"
            )
        self.newest = step

    def forget(self) -> None:
        """Look at the tier anew at the next save (steps were discarded, or a save failed and
        its step may be saved again)."""
        self.newest = None
