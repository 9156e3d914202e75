"""stoker keeps AI accelerators fed: plan the interconnect, storage, checkpoints and cost of GPU
work on Azure, stage data between Blob and the fast tiers, stream it into training, and
checkpoint without waiting.

Only re-exports live here, each documented where it is defined. They load on first use, so a
script that only stages data does not pay for the planner's imports (and the reverse).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_names

__version__ = "0.1.0"

_WHERE = {
    "Catalog": "catalog",
    "load_catalog": "catalog",
    "refresh_prices": "catalog",
    "CheckpointInfo": "checkpoint",
    "Checkpointer": "checkpoint",
    "Preemption": "checkpoint",
    "PreemptionWatcher": "checkpoint",
    "Restored": "checkpoint",
    "SaveStats": "checkpoint",
    "checkpoint_interval": "checkpoint",
    "AccessDeniedError": "errors",
    "CatalogError": "errors",
    "CheckpointError": "errors",
    "CorruptCheckpointError": "errors",
    "ChecksumError": "errors",
    "PriceError": "errors",
    "SourceChangedError": "errors",
    "SpecError": "errors",
    "StageError": "errors",
    "StokerError": "errors",
    "StoreError": "errors",
    "UnitError": "errors",
    "UnsafeKeyError": "errors",
    "NoContainerError": "errors",
    "UntrustedStateError": "errors",
    "StreamWarning": "errors",
    "JobSpec": "plan",
    "Plan": "plan",
    "load_spec": "plan",
    "make_plan": "plan",
    "markdown": "plan",
    "plan_job": "plan",
    "Simulation": "simulate",
    "simulate": "simulate",
    "Deployment": "provision",
    "provision": "provision",
    "ProvisionError": "errors",
    "ReportError": "errors",
    "Measured": "report",
    "report": "report",
    "CacheResult": "stage",
    "StageSummary": "stage",
    "VerifyReport": "stage",
    "cache_pull": "stage",
    "cache_pull_async": "stage",
    "stage": "stage",
    "stage_async": "stage",
    "verify": "stage",
    "verify_async": "stage",
    "Ledger": "measure",
    "ShardWriter": "stream",
    "StreamingDataset": "stream",
    "StreamingLoader": "stream",
    "StreamingMixture": "stream",
    "write_shards": "stream",
    "StreamError": "errors",
    "TeardownError": "errors",
    "ArchiveError": "errors",
    "TeardownReport": "operate",
    "PreflightReport": "operate",
    "preflight": "operate",
    "PreflightError": "errors",
    "Guard": "operate",
    "GuardPolicy": "operate",
    "expired": "operate",
    "teardown": "operate",
    "format_bytes": "units",
    "format_duration": "units",
    "format_rate": "units",
    "parse_bytes": "units",
    "parse_count": "units",
    "parse_duration": "units",
    "parse_rate": "units",
}

__all__ = sorted(_WHERE)


# stoker.stage, stoker.provision, stoker.report and stoker.simulate are subpackages, callable as
# the functions they name.
__getattr__ = lazy_names(__name__, _WHERE, modules=("stage", "provision", "report", "simulate"))


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .catalog import Catalog, load_catalog, refresh_prices
    from .checkpoint import (
        Checkpointer,
        CheckpointInfo,
        Preemption,
        PreemptionWatcher,
        Restored,
        SaveStats,
        checkpoint_interval,
    )
    from .errors import (
        AccessDeniedError,
        ArchiveError,
        CatalogError,
        CheckpointError,
        ChecksumError,
        CorruptCheckpointError,
        NoContainerError,
        PreflightError,
        PriceError,
        ProvisionError,
        ReportError,
        SourceChangedError,
        SpecError,
        StageError,
        StokerError,
        StoreError,
        StreamError,
        StreamWarning,
        TeardownError,
        UnitError,
        UnsafeKeyError,
        UntrustedStateError,
    )
    from .measure.ledger import Ledger
    from .operate import (
        Guard,
        GuardPolicy,
        PreflightReport,
        TeardownReport,
        expired,
        preflight,
        teardown,
    )
    from .plan import JobSpec, Plan, load_spec, make_plan, markdown, plan_job
    from .provision import Deployment, provision
    from .report import Measured, report
    from .simulate import Simulation, simulate
    from .stage import (
        CacheResult,
        StageSummary,
        VerifyReport,
        cache_pull,
        cache_pull_async,
        stage,
        stage_async,
        verify,
        verify_async,
    )
    from .stream import (
        ShardWriter,
        StreamingDataset,
        StreamingLoader,
        StreamingMixture,
        write_shards,
    )
    from .units import (
        format_bytes,
        format_duration,
        format_rate,
        parse_bytes,
        parse_count,
        parse_duration,
        parse_rate,
    )
