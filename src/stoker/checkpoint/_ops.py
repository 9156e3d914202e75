"""What ``stoker checkpoint verify|pull|ls`` do beyond saving and loading: re-check every file
of every committed step, bring a step back from the durable tier, and price what is kept."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import CheckpointError, CorruptCheckpointError, StokerError
from ._health import StepChecker
from ._load import committed_steps, fetch
from ._manifest import MANIFEST
from ._tier import StepListing, Tier

Progress = Callable[[str, int], None]  # (what, bytes done with it)


@dataclass
class Problem:
    tier: str
    step: int | None  # None: the tier as a whole (it could not be listed)
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


@dataclass
class CheckpointInfo:
    step: int
    bytes: int
    world_size: int
    kind: str
    created: str
    # tier name -> "ok" | "damaged: why" | "missing" | "incomplete: no manifest.json"
    tiers: dict[str, str]
    loads: bool = False  # every file good on some tier: what load() would take
    why: str = ""  # why it does not load


class Listing(list[CheckpointInfo]):
    """Steps newest first; ``kept``: tier name -> bytes of every file it holds;
    ``unreachable``: tier name -> why it could not be listed (its steps are missing from the
    list, so a caller must not read the list as complete)."""

    def __init__(
        self, infos: list[CheckpointInfo], kept: dict[str, int], unreachable: dict[str, str]
    ) -> None:
        super().__init__(infos)
        self.kept, self.unreachable = kept, unreachable


def list_steps(tiers: list[Tier], *, hashes: bool = False) -> Listing:
    """Every step on any tier, newest first, with its state on each tier (ok, damaged and why,
    missing, incomplete) and whether it loads; ``hashes`` reads every byte (else manifests and
    sizes are checked). A tier out of reach (Blob down, credentials expired) does not hide
    what the others hold: it is named in the listing's ``unreachable``."""
    checker = StepChecker(tiers, hashes=hashes)
    kept: dict[str, int] = {}
    every: set[int] = set()
    for tier in tiers:
        steps = checker.listing(tier)
        if steps is None:
            continue
        kept[tier.name] = sum(sum(listing.files.values()) for listing in steps.values())
        every |= set(steps)
    infos = []
    for step in sorted(every, reverse=True):
        health = checker.check(step)
        info = CheckpointInfo(step, 0, 0, "", "", {}, health.loads, health.why)
        for tier in tiers:
            if tier.name not in checker.unreachable:
                info.tiers[tier.name] = str(health.tiers[tier.name])
        if health.manifest is not None:
            m = health.manifest
            info.bytes, info.world_size, info.kind, info.created = (
                m.bytes,
                m.world_size,
                m.kind,
                m.created,
            )
        else:  # what the folders hold
            info.bytes = max(
                sum((checker.listing(t) or {}).get(step, StepListing(step)).files.values())
                for t in tiers
            )
        infos.append(info)
    return Listing(infos, kept, checker.unreachable)


def verify_tiers(tiers: list[Tier], step: int | None, progress: Progress | None) -> CheckReport:
    """Hash every file of every committed step (or ``step``) on every tier; name each mismatch.
    A tier that cannot be listed is a problem too: what was not checked must not pass."""
    report = CheckReport()
    checker = StepChecker(tiers, hashes=False)  # (for which files a tier should hold)
    unreachable: list[tuple[Tier, str]] = []
    committed = committed_steps(tiers, step, unreachable)
    for tier, why in unreachable:
        report.problems.append(Problem(tier.name, None, "", f"not checked: {why}"))
    for s, holders in sorted(committed.items(), reverse=True):
        for tier in holders:
            report.steps += 1
            try:
                manifest = tier.manifest(s)
            except CheckpointError as exc:
                report.problems.append(Problem(tier.name, s, MANIFEST, str(exc)))
                continue
            if manifest is None:  # deleted since the listing
                continue
            # a node-local fast tier holds its node's files only; the others are not missing
            for record in checker.node_files(tier, s, manifest):
                report.files += 1
                try:
                    if tier.hash(s, record.name, record.size) != record.xxh3:
                        raise CheckpointError("hash differs from the manifest: the file is corrupt")
                    report.bytes += record.size
                except StokerError as exc:
                    report.problems.append(Problem(tier.name, s, record.name, str(exc)))
                if progress:
                    progress(f"{tier.name} step {s} {record.name}", record.size)
    if report.steps == 0 and not unreachable:  # a mistyped folder or step must not pass
        where = ", ".join(str(t) for t in tiers)
        if step is not None:
            raise CheckpointError(f"step {step} is not committed on {where}; check the step")
        raise CheckpointError(f"no committed checkpoint to verify on {where}; check the path")
    return report


def pull_step(
    durable: Tier, fast: Tier, step: int | None, progress: Progress | None
) -> tuple[int, int]:
    """Copy a committed step (the newest by default) from the durable tier to the fast tier,
    verified, and commit it there; returns (step, bytes). On any failure nothing of the step
    is left on the fast tier; a damaged durable copy raises ``CorruptCheckpointError``, which
    names the older committed steps."""
    try:
        listing = durable.steps()
    except StokerError as exc:
        raise CheckpointError(
            f"could not reach the {durable}, so nothing was pulled: {exc}"
        ) from exc
    committed = sorted(s for s, found in listing.items() if found.committed)
    if step is not None and step not in committed:
        raise CheckpointError(f"the {durable} holds no committed step {step}{_older(committed)}")
    if not committed:
        raise CheckpointError(f"the {durable} holds no committed checkpoint; check the path")
    s = step if step is not None else committed[-1]
    manifest = durable.manifest(s)
    if manifest is None:  # deleted between the listing and now (a prune elsewhere)
        raise CheckpointError(f"step {s} left the {durable} while it was being pulled")
    newest_fast = max(committed_steps([fast]), default=-1)
    assert fast.posix is not None
    had_root, had_step = fast.posix.root.is_dir(), fast.path(s, MANIFEST).parent.is_dir()
    try:
        for record in manifest.files:
            try:
                fetch(durable, fast, s, record.name, manifest)
            except CorruptCheckpointError as exc:
                raise CorruptCheckpointError(
                    f"step {s} on the {durable} is damaged: {record.name} does not match its "
                    f"manifest, so nothing of step {s} was kept on the {fast}"
                    f"{_older([c for c in committed if c < s])}"
                ) from exc
            if progress:
                progress(record.name, record.size)
        fast.commit(manifest, pointer=s > newest_fast)
    except BaseException:
        _drop_pulled(fast, s, had_root, had_step)
        raise
    return s, manifest.bytes


def _older(steps: list[int]) -> str:
    if not steps:
        return "; it holds no other committed step"
    shown = ", ".join(str(s) for s in sorted(steps, reverse=True)[:5])
    return f"; committed there: {shown} (pull one with step=N)"


def _drop_pulled(fast: Tier, step: int, had_root: bool, had_step: bool) -> None:
    """Remove what a failed pull wrote: its step folder (or, in a folder that was already
    there, the partial files), and the fast folder itself if the pull created it empty."""
    folder = fast.path(step, MANIFEST).parent
    if not had_step:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        for partial in folder.glob("*.stoker-partial"):
            partial.unlink(missing_ok=True)
    if not had_root:
        with contextlib.suppress(OSError):
            folder.parent.rmdir()  # only if empty
