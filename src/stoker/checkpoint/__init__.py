"""Async, atomic, tiered checkpoints: ``Checkpointer`` (see _checkpointer.py for the flow and
_manifest.py for the names and the commit protocol)."""

from __future__ import annotations

from ._checkpointer import Checkpointer, CheckpointInfo, SaveStats
from ._load import Restored

__all__ = ["CheckpointInfo", "Checkpointer", "Restored", "SaveStats"]
