"""stoker stage: move datasets, models and checkpoints between Blob and the fast tiers.

``stoker.stage(src, dst, ...)`` is both this package and the function: the package is
callable, so the API twin of ``stoker stage`` reads naturally and ``import stoker.stage.x``
still works. Its options are ``StageOptions`` (stoker.stage.options), typed once.
``stage_async``, ``verify_async`` and ``cache_pull_async`` are the async twins.
"""

from .._callable_package import make_callable
from ._api import cache_pull_async, stage_async, verify_async
from ._cache import CacheResult, cache_pull
from ._progress import JsonReporter, Reporter, RichReporter, terminal_reporter
from ._stage import StageSummary, stage
from ._verify import VerifyReport, verify
from .options import StageOptions

__all__ = [
    "CacheResult",
    "JsonReporter",
    "Reporter",
    "RichReporter",
    "StageOptions",
    "StageSummary",
    "VerifyReport",
    "cache_pull",
    "cache_pull_async",
    "stage",
    "stage_async",
    "terminal_reporter",
    "verify",
    "verify_async",
]

make_callable(__name__, stage)
