"""What every catalog entry shares: its sources (``Source``), the figures it holds and the
fields that are bookkeeping, and the refusal of a TOML slip (a boolean or quoted number) as a
figure."""

from __future__ import annotations

import datetime as dt
import types
from collections.abc import Iterator
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

_BOOKKEEPING = {"source", "cite", "note", "name", "family", "retail"}


def _plain_kinds(annotation: Any) -> set[Any]:
    """The plain types a field takes (``int | None`` -> {int}); empty where a quantity's
    parser reads the value (``Rate | None``), or the field is no plain type."""
    if get_origin(annotation) is Annotated:
        if any(isinstance(m, BeforeValidator) for m in get_args(annotation)[1:]):
            return set()
        return _plain_kinds(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        parts = [_plain_kinds(a) for a in get_args(annotation) if a is not type(None)]
        return set() if any(not p for p in parts) else set().union(*parts)
    return {annotation} if annotation in (int, float, bool, str) else set()


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    where: str
    published: dt.date | None = None
    retrieved: dt.date | None = None
    verified: bool = True

    @model_validator(mode="after")
    def _dated(self) -> Source:
        if self.published is None and self.retrieved is None:
            raise ValueError("a source needs a 'published' or a 'retrieved' date")
        return self

    @property
    def date(self) -> dt.date:
        return self.published or self.retrieved  # type: ignore[return-value]


class Entry(BaseModel):
    """Fields shared by every catalog entry: where its figures come from."""

    model_config = ConfigDict(extra="forbid")
    source: str
    cite: dict[str, str] = Field(default_factory=dict)
    note: str | None = None

    def source_of(self, field: str) -> str:
        return self.cite.get(field, self.source)

    @field_validator("*", mode="before")
    @classmethod
    def _as_toml_types_it(cls, value: object, info: ValidationInfo) -> object:
        # pydantic's lax mode reads an override's `price_per_hour = true` as $1/h and
        # `gpus = "8"` as 8: a slip in an override file must not become a figure. Quantities
        # ("400 Gb/s") read text, and refuse a boolean, in their own parser.
        field = cls.model_fields[str(info.field_name)]
        parsed = any(isinstance(m, BeforeValidator) for m in field.metadata)
        kinds = set() if parsed else _plain_kinds(field.annotation)
        if isinstance(value, bool) and kinds and bool not in kinds:
            raise ValueError(f"{str(value).lower()} is a boolean; write a number here")
        if isinstance(value, str) and kinds and kinds <= {int, float}:
            raise ValueError(f"{value!r} is text; write the number without quotes")
        return value

    def figures(self) -> Iterator[tuple[str, object]]:
        """(field, value) for each figure that is set, bookkeeping fields left out."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name not in _BOOKKEEPING and value is not None:
                yield name, value
