"""Async, atomic, tiered checkpoints: ``Checkpointer`` (see _checkpointer.py for the flow and
_manifest.py for the names and the commit protocol)."""

from __future__ import annotations

from ._checkpointer import Checkpointer
from ._costs import TierCost
from ._interval import checkpoint_interval
from ._load import Restored
from ._ops import CheckpointInfo, CheckReport, Problem
from ._preempt import Preemption, PreemptionWatcher
from ._save_reports import SaveStats

__all__ = [
    "CheckReport",
    "CheckpointInfo",
    "Checkpointer",
    "Preemption",
    "PreemptionWatcher",
    "Problem",
    "Restored",
    "SaveStats",
    "TierCost",
    "checkpoint_interval",
]
