"""stoker keeps AI accelerators fed: plan the interconnect, storage, checkpoints and cost of GPU
work on Azure (and, as it grows, stage, stream, checkpoint and measure).

Only re-exports live here; every name below is documented where it is defined.
"""

from .catalog import Catalog, load_catalog, refresh_prices
from .errors import (
    CatalogError,
    ChecksumError,
    PriceError,
    SourceChangedError,
    SpecError,
    StageError,
    StokerError,
    StoreError,
    UnitError,
    UnsafeKeyError,
)
from .plan import JobSpec, Plan, load_spec, make_plan, markdown, plan_job
from .stage import CacheResult, StageSummary, VerifyReport, cache_pull, stage, verify
from .units import (
    format_bytes,
    format_duration,
    format_rate,
    parse_bytes,
    parse_count,
    parse_duration,
    parse_rate,
)

__version__ = "0.1.0"

__all__ = [
    "CacheResult",
    "Catalog",
    "CatalogError",
    "ChecksumError",
    "SourceChangedError",
    "StageError",
    "StageSummary",
    "StoreError",
    "UnsafeKeyError",
    "VerifyReport",
    "cache_pull",
    "stage",
    "verify",
    "JobSpec",
    "Plan",
    "PriceError",
    "SpecError",
    "StokerError",
    "UnitError",
    "format_bytes",
    "format_duration",
    "format_rate",
    "load_catalog",
    "load_spec",
    "make_plan",
    "markdown",
    "parse_bytes",
    "parse_count",
    "parse_duration",
    "parse_rate",
    "plan_job",
    "refresh_prices",
]
