"""NFS volumes the plan chose: Azure NetApp Files or Azure Files (premium, NFS), for the data,
the checkpoints or a model cache. Pure: plan in, typed volumes out."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import Catalog
from ..errors import ProvisionError
from ..plan import Plan

GiB, TiB = 2**30, 2**40
ANF_REGULAR_MAX = 100 * TiB  # the most a regular volume holds
ANF_LARGE_MAX = 2400 * TiB
FILES_MAX_GIB = 102_400  # a premium share: 100 TiB


@dataclass(frozen=True)
class Volume:
    kind: str  # "netapp" or "files"
    role: str  # "data", "checkpoints" or "models"
    level: str  # catalog key: netapp service level or files tier
    size_gib: int  # what the share or volume is provisioned at
    price_per_hour: float | None
    mount_path: str

    large: bool = False  # a NetApp large volume: the throughput the plan's figures assume

    @property
    def pool_tib(self) -> int:
        """A NetApp capacity pool is sized in whole TiB and holds the volume."""
        return max(1, math.ceil(self.size_gib / 1024))


def _key(section: dict, display: str, where: str) -> str:
    for key, entry in section.items():
        if entry.name == display:
            return key
    raise ProvisionError(f"{where}: the plan chose {display!r}, which no catalog entry names")


def _price(kind: str, level: str, size_gib: int, cat: Catalog) -> float | None:
    if kind == "netapp":
        month = cat.netapp[level].price_per_tib_month
        return None if month is None else month * size_gib / 1024 / 730
    month = cat.files[level].price_per_gib_month
    return None if month is None else month * size_gib / 730


def _volume(
    kind: str,
    role: str,
    level: str,
    size_bytes: float,
    cat: Catalog,
    where: str,
    plan_price: float | None = None,
) -> Volume:
    size_gib = max(1, math.ceil(size_bytes / GiB))
    if kind == "files":
        if level != "premium_v1":
            raise ProvisionError(
                f"{where}: the plan chose Azure Files {level}; stoker provision writes premium "
                "(provisioned v1) NFS shares only"
            )
        if size_gib > FILES_MAX_GIB:
            raise ProvisionError(f"{where}: a {size_gib:,} GiB share exceeds Azure Files' 100 TiB")
        size_gib = max(size_gib, 100)  # a premium share's minimum
    elif size_gib * GiB > ANF_LARGE_MAX:
        raise ProvisionError(
            f"{where}: a {size_gib / 1024:,.0f} TiB NetApp volume exceeds 2,400 TiB, the most "
            "a large volume holds even on request"
        )
    # The plan's own hourly price where it priced this volume, so the totals agree to the cent.
    price = plan_price if plan_price is not None else _price(kind, level, size_gib, cat)
    # The catalog's NetApp figures are those of large volumes (from its min_size, 50 TiB); a
    # volume the plan sized there is made large so it delivers them. (The 2025-12-01 API text
    # still says large volumes start at 100 TiB; Microsoft's current page says 50.)
    large = kind == "netapp" and (
        size_gib * GiB >= cat.netapp[level].min_size or size_gib * GiB > ANF_REGULAR_MAX
    )
    return Volume(kind, role, level, size_gib, price, f"/mnt/{role}", large)


def plan_volumes(plan: Plan, cat: Catalog) -> list[Volume]:
    """One volume per role the plan put on NetApp or Azure Files."""
    out = []
    data = plan.data.chosen if plan.data else None
    if data and data.tier in ("netapp", "files"):
        section = cat.netapp if data.tier == "netapp" else cat.files
        level = _key(section, data.name, "data.tier")
        out.append(
            _volume(
                data.tier,
                "data",
                level,
                data.size_bytes or 0.0,
                cat,
                "data.tier",
                data.price_per_hour_usd,
            )
        )
    ckpt = plan.checkpoints.volume if plan.checkpoints else None
    if ckpt and ckpt.tier in ("netapp", "files"):
        section = cat.netapp if ckpt.tier == "netapp" else cat.files
        level = _key(section, ckpt.name, "checkpoints.tier")
        out.append(
            _volume(
                ckpt.tier,
                "checkpoints",
                level,
                ckpt.size_bytes or 0.0,
                cat,
                "checkpoints.tier",
                ckpt.price_per_hour_usd,
            )
        )
    inf = plan.inference
    if inf and inf.chosen in ("netapp", "files"):
        # The plan sizes the model cache as inference.py does: NetApp Premium, Files premium v1.
        if inf.chosen == "netapp":
            out.append(_volume("netapp", "models", "Premium", inf.netapp_volume_bytes, cat,
                               "inference"))  # fmt: skip
        else:
            out.append(_volume("files", "models", "premium_v1", inf.files_share_bytes, cat,
                               "inference"))  # fmt: skip
    return out
