"""stoker stage: move datasets, models and checkpoints between Blob and the fast tiers."""

from ._progress import JsonReporter, Reporter, RichReporter
from ._stage import StageSummary, stage

__all__ = ["JsonReporter", "Reporter", "RichReporter", "StageSummary", "stage"]
