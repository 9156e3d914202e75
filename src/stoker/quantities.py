"""Pydantic field types that read quantities the way people write them (see units.py).

A field typed ``Bytes`` accepts ``"28 TiB"`` or a plain number of bytes and holds a float of
bytes; ``Rate`` holds bytes per second; ``Duration`` holds seconds.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from .units import parse_bytes, parse_count, parse_duration, parse_rate


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError("must be greater than zero")
    return value


def _not_negative(value: float) -> float:
    if value < 0:
        raise ValueError("must not be negative")
    return value


Bytes = Annotated[float, BeforeValidator(parse_bytes), AfterValidator(_positive)]
Rate = Annotated[float, BeforeValidator(parse_rate), AfterValidator(_positive)]
Duration = Annotated[float, BeforeValidator(parse_duration), AfterValidator(_not_negative)]
Count = Annotated[float, BeforeValidator(parse_count), AfterValidator(_positive)]
