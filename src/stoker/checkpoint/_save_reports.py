"""What a save and a prune report: ``SaveStats`` (how long the training loop was held, and
until each tier had the step committed) and ``PruneReport`` (the steps each tier lost, and the
damaged ones kept for inspection)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class SaveStats:
    step: int
    bytes: int = 0
    blocking_s: float = 0.0  # how long save() held the training loop
    fast_s: float | None = None  # save() call -> committed on the fast tier
    durable_s: float | None = None  # save() call -> committed on the durable tier
    started: float = field(default_factory=time.perf_counter, repr=False)


class PruneReport(dict[str, list[int]]):
    """Tier name -> steps deleted (or, dry, to delete); ``damaged``: tier name -> {step: why}
    for the steps that do not load and were kept for inspection (or deleted, when asked)."""

    def __init__(self) -> None:
        super().__init__()
        self.damaged: dict[str, dict[int, str]] = {}
