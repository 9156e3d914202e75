"""The transfer flags of ``stoker stage``: how a source's symbolic links are read, a bandwidth
cap, and the access tier and content type of what is uploaded. Checked once, then set on the
two stores the run opened (the stores do the work: see store/_bwlimit.py and store/_blocks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import StageError, UnitError
from ..store import AccessTier, Bandwidth, Store, parse_bwlimit

TIERS: dict[str, AccessTier] = {"hot": "Hot", "cool": "Cool", "cold": "Cold", "archive": "Archive"}


@dataclass(frozen=True)
class Flags:
    follow_symlinks: bool = False
    bwlimit: float | None = None  # bytes per second, all transfers of the run together
    tier: AccessTier | None = None  # the service's spelling
    content_type: str | None = None  # None: guessed from each key's extension

    @classmethod
    def checked(
        cls,
        follow_symlinks: bool = False,
        bwlimit: float | str | None = None,
        tier: str | None = None,  # as typed: any case (options.Tier)
        content_type: str | None = None,
    ) -> Flags:
        rate = None
        if bwlimit is not None and bwlimit != "":
            try:
                rate = parse_bwlimit(bwlimit)
            except UnitError as exc:
                raise StageError(f"--bwlimit {bwlimit}: {exc}") from exc
        spelled = None
        if tier:
            spelled = TIERS.get(tier.strip().lower())
            if spelled is None:
                raise StageError(
                    f"--tier {tier}: use one of {', '.join(TIERS)} (Blob access tiers)"
                )
        if content_type is not None and (
            not content_type.strip() or "/" not in content_type or "\n" in content_type
        ):
            raise StageError(
                f"--content-type {content_type!r}: write a media type such as "
                "'application/octet-stream' or 'text/csv; charset=utf-8'"
            )
        return cls(follow_symlinks, rate, spelled, content_type)

    def apply(self, src: Store, dst: Store) -> None:
        """Set the flags on the run's stores: one bandwidth budget shared by both sides."""
        src.follow_symlinks = self.follow_symlinks  # (only a folder has links to follow)
        limiter = Bandwidth(self.bwlimit) if self.bwlimit else None
        for store in (src, dst):
            store.limiter = limiter
        dst.tier, dst.content_type = self.tier, self.content_type
