"""Azure Managed Lustre: rated throughput by size, what a file system of that rating delivers
to reads and to writes, and the size that delivers a rate. Pure functions.

Rated (nominal) throughput is 2,000 MB/s per capacity step on every tier (the MLPerf Storage
v3.0 page; the tier's "MB/s per TiB" label is that over the step size). What a file system
delivers is a share of it that depends on the size: the share is read off the published
(nominal, delivered) results in the catalog, interpolated linearly in nominal throughput and
held at the last published share beyond it:

    reads   18.6 of 20 GB/s (93 %), 95.6 of 100 (95.6 %), 270.1 of 300 (90 %), 407.1 of 512 (79.5 %)
    writes  14.3 of 20 GB/s (71.5 %), 113.3 of 160 (70.8 %), 490.7 of 512 (95.8 %)
"""

from __future__ import annotations

import math

from ..catalog import LustreCommon, LustreSku

TIB = 2**40


def rated(size_bytes: float, sku: LustreSku) -> float:
    """Nominal bytes/s Azure rates a file system of this size at."""
    if sku.throughput_per_step:
        return size_bytes / sku.step * sku.throughput_per_step
    return size_bytes / TIB * sku.throughput_per_tib


def delivered_share(nominal_bps: float, common: LustreCommon, write: bool = False) -> float:
    """Share of the rating delivered at this nominal throughput; the catalog's single
    ``delivered_fraction`` where it lists no results."""
    points = common.delivered_write if write else common.delivered_read
    if not points:
        return common.delivered_fraction
    shares = [(n, d / n) for n, d in points]
    if nominal_bps <= shares[0][0]:
        return shares[0][1]
    for (n0, f0), (n1, f1) in zip(shares, shares[1:], strict=False):
        if nominal_bps <= n1:
            return f0 + (f1 - f0) * (nominal_bps - n0) / (n1 - n0)
    return shares[-1][1]


def delivered(
    size_bytes: float, sku: LustreSku, common: LustreCommon, write: bool = False
) -> float:
    nominal = rated(size_bytes, sku)
    return nominal * delivered_share(nominal, common, write)


def round_up(value: float, step: float) -> float:
    return math.ceil(value / step - 1e-9) * step


def size_for(
    capacity: float, rate_bps: float, sku: LustreSku, common: LustreCommon, write: bool = False
) -> float:
    """Smallest size on the SKU's step that holds ``capacity`` and delivers ``rate_bps``."""
    size = round_up(max(capacity, sku.min_size), sku.step)
    if rate_bps <= 0 or delivered(size, sku, common, write) >= rate_bps:
        return size
    per_byte = rated(sku.step, sku) / sku.step
    guess = rate_bps / per_byte  # then correct for the share at that size, a few times
    for _ in range(6):
        guess = rate_bps / (per_byte * delivered_share(guess * per_byte, common, write))
    size = max(size, round_up(guess, sku.step) - 2 * sku.step)
    while delivered(size, sku, common, write) < rate_bps:
        size += sku.step
    return size


def max_on_request(sku: LustreSku, common: LustreCommon) -> float:
    return sku.max_size_on_request or common.max_size_on_request
