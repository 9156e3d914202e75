"""What the idle time costs, for ``guard``'s evidence: the deployment's own bill, as ``stoker
provision`` priced it from the catalog (``stoker-deployment.json``: the total per hour, what
stays billed once the scale sets are deallocated, each line's catalog source, and what the
catalog could not price). A guard that knows its deployment says what the idle GPUs have cost
so far and what tearing down saves each hour; without one it says nothing of cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._redact import printable
from ..errors import StokerError
from ._ownership import RECORD
from ._steps import load_json


@dataclass(frozen=True)
class IdleCost:
    per_hour_usd: float | None  # the whole deployment up, as provision priced it
    stopped_per_hour_usd: float | None  # what still bills with the scale sets deallocated
    unpriced: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)

    def of(self, idle_s: float) -> dict[str, Any]:
        """The cost of ``idle_s`` seconds idle, and the saving per hour of acting."""
        hour, stopped = self.per_hour_usd, self.stopped_per_hour_usd
        return {
            "per_hour_usd": hour,
            "idle_so_far_usd": None if hour is None else round(hour * idle_s / 3600, 2),
            "stopped_per_hour_usd": stopped,
            "saved_per_hour_by_deallocating_usd": (
                None if hour is None or stopped is None else round(hour - stopped, 2)
            ),
            # an unpriced line makes each figure the priced part only: named, never hidden
            "unpriced": self.unpriced,
            "sources": self.sources,
        }


def idle_cost(deployment: str | Path) -> IdleCost | None:
    """The bill of a ``stoker provision`` folder; None for anything else (a resource group
    name, a folder without a record): a guard without a bill reports no cost."""
    folder = Path(deployment)
    if not (folder / RECORD).is_file():
        return None
    record = load_json(folder / RECORD, "deployment record")
    resources = record.get("resources") or []
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        raise StokerError(f"{printable(str(folder / RECORD))}: resources must be a list of objects")
    unpriced = record.get("unpriced") or []
    return IdleCost(
        per_hour_usd=_usd(record, "cost_per_hour_usd", folder),
        stopped_per_hour_usd=_usd(record, "storage_only_per_hour_usd", folder),
        unpriced=[printable(str(u)) for u in unpriced] if isinstance(unpriced, list) else [],
        sources=sorted({printable(str(r["source"])) for r in resources if r.get("source")}),
    )


def _usd(record: dict[str, Any], key: str, folder: Path) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        where = printable(str(folder / RECORD))
        raise StokerError(f"{where}: {key} must be a price in USD, not {printable(repr(value))}")
    return float(value)
