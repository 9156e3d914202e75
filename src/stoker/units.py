"""One parser and formatter for sizes, rates and durations, written as people write them.

Inside stoker every quantity is a float in base units: bytes, bytes per second, seconds.
Parsing happens once, at the edge (job specs, catalog files, CLI flags).

    >>> parse_bytes("28 TiB") == 28 * 2**40
    True
    >>> parse_rate("400 Gb/s")        # bits: 400e9 / 8 bytes per second
    50000000000.0
    >>> parse_duration("90 s"), parse_duration("14 min"), parse_duration("3.1 h")
    (90.0, 840.0, 11160.0)

``Gb`` is gigabits and ``GB`` gigabytes; binary prefixes are written ``Ki Mi Gi Ti Pi``, and
duration units in lower case (``s``, ``min``, ``h``, ``d``).
"""

from __future__ import annotations

import math
import re

from .errors import UnitError

_DECIMAL = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}

_TIME = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
}

# Commas only as thousands separators ("1,000 GB"); "1,5 TB" is refused, not read as 15 TB.
_NUMBER = r"(?P<num>[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_SIZE_RE = re.compile(
    _NUMBER + r"\s*(?P<prefix>Ki|Mi|Gi|Ti|Pi|Ei|[kKMGTPE])?(?P<unit>B|b|bit|bits|byte|bytes)?$"
)
_RATE_RE = re.compile(
    _NUMBER
    + r"\s*(?P<prefix>Ki|Mi|Gi|Ti|Pi|Ei|[kKMGTPE])?(?P<unit>B|b|bit|bits|bps|Bps|byte|bytes)"
    + r"(?:\s*/\s*(?P<per>s|sec|second|h|hr|hour))?$"
)
_DURATION_RE = re.compile(_NUMBER + r"\s*(?P<unit>[a-zµ]+)?$")


def _number(text: str) -> float:
    value = float(text.replace("_", "").replace(",", ""))
    if not math.isfinite(value):
        raise UnitError(f"expected a finite number, got {text!r}")
    return value


def _scale(prefix: str | None) -> float:
    if not prefix:
        return 1.0
    return _BINARY.get(prefix) or _DECIMAL[prefix]


def _coerce(value: object, kind: str) -> float | None:
    """Numbers pass through as base units; bools and other types are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UnitError(f"expected a {kind} such as {_EXAMPLES[kind]}, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise UnitError(f"expected a finite {kind}, got {value!r}")
        return float(value)
    return None


_EXAMPLES = {
    "size": "'28 TiB', '2.5 PB' or '512 MB'",
    "rate": "'400 Gb/s', '10 GB/s' or '125 MiB/s'",
    "duration": "'90 s', '14 min' or '3 h'",
    "count": "'405B', '15T', '2.5M' or 1e9",
}


def parse_bytes(value: object) -> float:
    """A size in bytes. Bare numbers are bytes; ``b``/``bit`` suffixes are bits."""
    number = _coerce(value, "size")
    if number is not None:
        return number
    match = _SIZE_RE.match(str(value).strip())
    if not match:
        raise UnitError(f"cannot read {value!r} as a size; write it like {_EXAMPLES['size']}")
    bits = match["unit"] in ("b", "bit", "bits")
    return _number(match["num"]) * _scale(match["prefix"]) / (8 if bits else 1)


def parse_rate(value: object) -> float:
    """A throughput in bytes per second. ``Gb/s`` and ``Gbps`` are bits; ``GB/s`` bytes."""
    number = _coerce(value, "rate")
    if number is not None:
        return number
    match = _RATE_RE.match(str(value).strip())
    if not match or (match["per"] is None and match["unit"] not in ("bps", "Bps")):
        raise UnitError(f"cannot read {value!r} as a rate; write it like {_EXAMPLES['rate']}")
    bits = match["unit"] in ("b", "bit", "bits", "bps")
    per_second = 3600.0 if match["per"] in ("h", "hr", "hour") else 1.0
    return _number(match["num"]) * _scale(match["prefix"]) / (8 if bits else 1) / per_second


def parse_duration(value: object) -> float:
    """A duration in seconds. Bare numbers are seconds."""
    number = _coerce(value, "duration")
    if number is not None:
        return number
    match = _DURATION_RE.match(str(value).strip())
    unit = (match["unit"] or "s") if match else None
    if not match or unit not in _TIME:
        raise UnitError(
            f"cannot read {value!r} as a duration; write it like {_EXAMPLES['duration']}"
        )
    return _number(match["num"]) * _TIME[unit]


_COUNT_RE = re.compile(_NUMBER + r"\s*(?P<suffix>[kKMBGT])?$")
_COUNT_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def parse_count(value: object) -> float:
    """A plain count: ``"405B"`` parameters, ``"15T"`` tokens, ``"2.5M"`` samples."""
    number = _coerce(value, "count")
    if number is not None:
        return number
    match = _COUNT_RE.match(str(value).strip())
    if not match:
        raise UnitError(f"cannot read {value!r} as a count; write it like {_EXAMPLES['count']}")
    return _number(match["num"]) * _COUNT_SCALE.get(match["suffix"] or "", 1.0)


def format_bytes(size_bytes: float, binary: bool = True) -> str:
    """``format_bytes(28 * 2**40) == '28 TiB'``; decimal units with ``binary=False``."""
    base, units = (
        (1024.0, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"])
        if binary
        else (1000.0, ["B", "kB", "MB", "GB", "TB", "PB", "EB"])
    )
    value = float(size_bytes)
    for unit in units[:-1]:
        if abs(_round3(value)) < base:  # round first: 1023.9 KiB prints as 1 MiB
            return f"{_trim(value)} {unit}"
        value /= base
    return f"{_trim(value)} {units[-1]}"


def format_rate(bytes_per_s: float) -> str:
    """Decimal bytes per second, the way storage and NIC vendors quote them: ``'12.5 GB/s'``."""
    return format_bytes(bytes_per_s, binary=False) + "/s"


def format_duration(seconds: float) -> str:
    """``'14 min'``, ``'6.2 h'``, ``'38 d'``, ``'450 ms'``."""
    if not math.isfinite(seconds):
        return "∞"
    if seconds == 0:
        return "0 s"
    units = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3))
    for unit, size in units:
        if abs(_round3(seconds / size)) >= 1:  # round first: 59.99 s prints as 1 min
            return f"{_trim(seconds / size)} {unit}"
    return f"{_trim(seconds * 1e6)} us"


def _round3(value: float) -> float:
    """``value`` rounded as ``_trim`` prints it (three significant figures, whole numbers kept)."""
    if value == 0:
        return 0.0
    return round(value, max(0, 2 - int(math.floor(math.log10(abs(value))))))


def _trim(value: float) -> str:
    """Three significant figures, no trailing zeros."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(math.floor(math.log10(abs(value)))))
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
