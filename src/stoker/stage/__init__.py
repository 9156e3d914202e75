"""stoker stage: move datasets, models and checkpoints between Blob and the fast tiers."""

from ._cache import CacheResult, cache_pull
from ._progress import JsonReporter, Reporter, RichReporter
from ._stage import StageSummary, stage
from ._verify import VerifyReport, verify

__all__ = [
    "CacheResult",
    "JsonReporter",
    "Reporter",
    "RichReporter",
    "StageSummary",
    "VerifyReport",
    "cache_pull",
    "stage",
    "verify",
]
