"""stoker keeps AI accelerators fed: plan the interconnect, storage, checkpoints and cost of GPU
work on Azure (and, as it grows, stage, stream, checkpoint and measure).

Only re-exports live here; every name below is documented where it is defined.
"""

from .catalog import Catalog, load_catalog, refresh_prices
from .errors import CatalogError, PriceError, SpecError, StokerError, UnitError
from .plan import JobSpec, Plan, load_spec, make_plan, markdown, plan_job
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
    "Catalog",
    "CatalogError",
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
