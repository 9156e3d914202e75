"""What ``stoker checkpoint verify|pull|ls`` do beyond saving and loading: re-check every file
of every committed step, bring a step back from the durable tier, and price what is kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CheckpointError, StokerError
from ._load import committed_steps, fetch
from ._tier import Tier

Progress = Callable[[str, int], None]  # (what, bytes done with it)


@dataclass
class Problem:
    tier: str
    step: int
    file: str
    what: str


@dataclass
class CheckReport:
    steps: int = 0
    files: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_tiers(tiers: list[Tier], step: int | None, progress: Progress | None) -> CheckReport:
    """Hash every file of every committed step (or ``step``) on every tier; name each mismatch."""
    report = CheckReport()
    for s, holders in sorted(committed_steps(tiers, step).items(), reverse=True):
        for tier in holders:
            report.steps += 1
            manifest = tier.manifest(s)
            assert manifest is not None
            for record in manifest.files:
                report.files += 1
                try:
                    if tier.hash(s, record.name, record.size) != record.xxh3:
                        raise CheckpointError("hash differs from the manifest: the file is corrupt")
                    report.bytes += record.size
                except StokerError as exc:
                    report.problems.append(Problem(tier.name, s, record.name, str(exc)))
                if progress:
                    progress(f"{tier.name} step {s} {record.name}", record.size)
    if step is not None and report.steps == 0:
        raise CheckpointError(f"step {step} is not committed on any tier")
    return report


def pull_step(
    durable: Tier, fast: Tier, step: int | None, progress: Progress | None
) -> tuple[int, int]:
    """Copy a committed step (the newest by default) from the durable tier to the fast tier,
    verified, and commit it there; returns (step, bytes)."""
    found = committed_steps([durable], step)
    if not found:
        what = f"step {step}" if step is not None else "a committed checkpoint"
        raise CheckpointError(f"{durable} holds no {what}")
    s = max(found)
    manifest = durable.manifest(s)
    assert manifest is not None
    newest_fast = max(committed_steps([fast]), default=-1)
    for record in manifest.files:
        fetch(durable, fast, s, record.name, manifest)
        if progress:
            progress(record.name, record.size)
    fast.commit(manifest, pointer=s > newest_fast)
    return s, manifest.bytes


@dataclass
class TierCost:
    tier: str
    where: str
    bytes: int
    usd_per_gb_month: float | None
    basis: str  # where the price comes from, or why there is none

    @property
    def usd_per_month(self) -> float | None:
        if self.usd_per_gb_month is None:
            return None
        return self.bytes / 1e9 * self.usd_per_gb_month


def tier_price(tier: Tier, blob_tier: str, override: float | None) -> tuple[float | None, str]:
    """Price per GB-month of what a tier keeps: the caller's figure, else the catalog's Blob
    price for Blob, else none (a local disk or a mount is billed with its VM or volume)."""
    if override is not None:
        return override, "given"
    if str(tier.store).startswith("az://"):
        from ..catalog import load_catalog

        blob = load_catalog().blob["standard"]
        price = getattr(blob, f"price_{blob_tier}_gb_month", None)
        if price is None:
            return None, f"no catalog price for Blob {blob_tier}"
        source = blob.source_of("price_region")
        return price, f"catalog: Blob {blob_tier}, {blob.price_region} ({source})"
    return None, "a folder: billed with its VM or volume"
