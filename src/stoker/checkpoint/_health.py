"""Whether a step loads: its state on each tier, and across tiers.

A step *loads* when some tier holds a readable manifest and every file that manifest lists is
on some tier with the recorded size (and, when hashes are checked, the recorded XXH3): that is
exactly what ``load`` needs, since it fetches a file missing or damaged on the fast tier from
the durable one. Retention counts only steps that load, so a damaged newest step can never
cost the older steps that still do.

On node-local fast tiers (each node's own disk; the manifest's ``nodes`` says which ranks shared
each), a fast tier holds only its node's files: it is judged on those ("ok: this node's files"),
and the other nodes' files count as held by their nodes unless a tier that holds the step (the
durable one) finds them missing or damaged.

Hashing a step means reading it (and, on Blob, downloading it), so each verdict is kept, keyed
by the file's version (its ETag, or mtime and size on POSIX): a file that changes is read again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..errors import CheckpointError, StokerError
from ._manifest import CheckpointManifest, FileRecord, step_dir
from ._tier import StepListing, Tier

OK, DAMAGED, MISSING, INCOMPLETE = "ok", "damaged", "missing", "incomplete"


@dataclass
class TierState:
    state: str  # ok | damaged | missing | incomplete (a folder without its manifest)
    why: str = ""

    def __str__(self) -> str:
        return f"{self.state}: {self.why}" if self.why else self.state


@dataclass
class StepHealth:
    step: int
    tiers: dict[str, TierState] = field(default_factory=dict)
    manifest: CheckpointManifest | None = None  # a readable one (the fastest tier's first)
    loads: bool = False
    why: str = ""  # why it does not load

    @property
    def damaged(self) -> bool:
        """Committed somewhere, yet it does not load: kept for inspection, skipped by load."""
        return not self.loads and any(t.state == DAMAGED for t in self.tiers.values())


class StepChecker:
    """Judges steps across ``tiers``; ``hashes=False`` checks manifests and sizes only (what a
    listing can afford), ``True`` reads every byte once per file version."""

    def __init__(self, tiers: list[Tier], *, hashes: bool = True) -> None:
        self.tiers, self.hashes = tiers, hashes
        self._verdicts: dict[tuple[str, str, str, int, str], str] = {}  # -> "" ok, else why
        self._lock = threading.Lock()
        self._listings: dict[str, dict[int, StepListing] | None] = {}
        self.unreachable: dict[str, str] = {}  # tier name -> why it could not be listed

    def trust(self, tier: Tier, manifest: CheckpointManifest) -> None:
        """Record a step this process just wrote and hashed on the way (no need to read it
        back): its files, as listed now, are taken as matching their records."""
        listing = tier.steps().get(manifest.step)
        etags = listing.etags if listing else {}
        with self._lock:
            for record in manifest.files:
                if record.name in etags:
                    self._verdicts[self._key(tier, manifest.step, record, etags)] = ""

    def forget_listings(self) -> None:
        self._listings.clear()
        self.unreachable.clear()

    def listing(self, tier: Tier) -> dict[int, StepListing] | None:
        """The tier's steps, listed once per pass; None when it cannot be listed."""
        if tier.name not in self._listings:
            try:
                self._listings[tier.name] = tier.steps()
            except StokerError as exc:
                self._listings[tier.name] = None
                self.unreachable[tier.name] = str(exc)
        return self._listings[tier.name]

    def check(self, step: int) -> StepHealth:
        health = StepHealth(step)
        manifests: dict[str, CheckpointManifest] = {}
        for tier in self.tiers:
            steps = self.listing(tier)
            if steps is None or step not in steps:
                health.tiers[tier.name] = TierState(MISSING)
                continue
            if not steps[step].committed:
                health.tiers[tier.name] = TierState(INCOMPLETE, "no manifest.json")
                continue
            try:
                manifest = tier.manifest(step)
            except CheckpointError as exc:  # the cause alone: the state is shown per tier
                why = exc.__cause__ or exc
                health.tiers[tier.name] = TierState(DAMAGED, f"manifest unreadable ({why})")
                continue
            if manifest is None:  # deleted since the listing
                health.tiers[tier.name] = TierState(MISSING)
                continue
            manifests[tier.name] = manifest
        reference = next(iter(manifests.values()), None)
        health.manifest = reference
        good: dict[str, set[str]] = {}  # file name -> tiers where it matches the reference
        away: set[str] = set()  # other nodes' files, not expected on this node's fast tier
        judged: set[str] = set()  # files found missing or damaged on a tier that holds the step
        for tier in self.tiers:
            if tier.name in health.tiers:  # missing, incomplete or unreadable manifest
                if health.tiers[tier.name].state == DAMAGED and reference is not None:
                    self._files(tier, step, reference, good)  # its files may still be good
                continue
            own = manifests[tier.name]
            mine = self.node_files(tier, step, own)
            away |= {r.name for r in own.files} - {r.name for r in mine}
            bad = self._files(tier, step, own, good if own == reference else {}, mine, judged)
            if own != reference:
                bad.insert(0, "its manifest differs from the other tier's")
            ranks = sorted({r.rank for r in mine if r.rank is not None})
            local = len(mine) < len(own.files)
            note = f"this node's files (ranks {', '.join(map(str, ranks))})" if local else ""
            health.tiers[tier.name] = (
                TierState(DAMAGED, "; ".join(bad)) if bad else TierState(OK, note)
            )
        if reference is None:
            health.why = "no tier holds a readable manifest"
        else:
            lost = [
                r.name
                for r in reference.files
                if not good.get(r.name) and (r.name not in away or r.name in judged)
            ]
            health.loads = not lost
            if lost:
                health.why = f"no tier holds a good copy of {', '.join(lost[:3])}" + (
                    f" and {len(lost) - 3} more" if len(lost) > 3 else ""
                )
        return health

    def node_files(self, tier: Tier, step: int, manifest: CheckpointManifest) -> list[FileRecord]:
        """The files of ``manifest`` that ``tier`` should hold: all of them, except on a
        node-local fast tier, which holds those its node's ranks wrote (the nodes whose files
        it has; when it has none, all are expected and found missing)."""
        if tier.name != "fast" or not manifest.node_local:
            return manifest.files
        listing = (self.listing(tier) or {}).get(step)
        present = set(listing.files) if listing else set()
        nodes = {manifest.node_of(r.rank) for r in manifest.files if r.name in present}
        nodes.discard(None)
        if not nodes:
            return manifest.files
        return [r for r in manifest.files if manifest.node_of(r.rank) in nodes | {None}]

    def _files(
        self,
        tier: Tier,
        step: int,
        manifest: CheckpointManifest,
        good: dict[str, set[str]],
        records: list[FileRecord] | None = None,
        judged: set[str] | None = None,
    ) -> list[str]:
        """Check every file of ``manifest`` (or ``records`` of it) on ``tier``; add the good
        ones to ``good`` and the bad ones to ``judged``; return what is wrong, one phrase per
        file."""
        steps = self.listing(tier) or {}
        listing = steps.get(step)
        etags = listing.etags if listing else {}
        sizes = listing.files if listing else {}
        bad: list[str] = []
        for record in manifest.files if records is None else records:
            why = self._file(tier, step, record, sizes, etags)
            if why:
                bad.append(f"{record.name}: {why}")
                if judged is not None:
                    judged.add(record.name)
            else:
                good.setdefault(record.name, set()).add(tier.name)
        return bad

    def _file(
        self,
        tier: Tier,
        step: int,
        record: FileRecord,
        sizes: dict[str, int],
        etags: dict[str, str],
    ) -> str:
        if record.name not in sizes:
            return "missing"
        if sizes[record.name] != record.size:
            return f"{sizes[record.name]} bytes, the manifest says {record.size}"
        if not self.hashes:
            return ""
        key = self._key(tier, step, record, etags)
        with self._lock:
            known = self._verdicts.get(key)
        if known is not None:
            return known
        try:
            digest = tier.hash(step, record.name, record.size)
            why = "" if digest == record.xxh3 else "hash differs from the manifest"
        except StokerError as exc:
            why = str(exc)
        with self._lock:
            self._verdicts[key] = why
        return why

    @staticmethod
    def _key(
        tier: Tier, step: int, record: FileRecord, etags: dict[str, str]
    ) -> tuple[str, str, str, int, str]:
        where = f"{step_dir(step)}/{record.name}"
        return (tier.name, where, etags.get(record.name, ""), record.size, record.xxh3)
