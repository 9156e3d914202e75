"""Help that reads like every other Unix tool's: ``PATH``, ``TEXT``, ``SPEC...``, at 80 columns.

Typer 0.29 shows Python's types in help (``<list[Path]>``, ``<bool>``), wraps the usage line's
arguments in braces (``{specs}...``) and its text wrapper splits words at hyphens
(``teardown-`` / ``after``, ``--no-delete-`` / ``scale-sets``). A user reads none of that. One
place turns each parameter's annotation into the conventional metavar (a flag shows none) and
wraps help only at spaces. Typer has no public hook for either, so the two methods and the
wrapper are replaced here, once (with the command list's summaries, which it cuts short at
45 characters), and tests/test_cli_help.py renders every verb to hold them."""

from __future__ import annotations

import datetime as _dt
import enum
from pathlib import Path
from typing import Any, get_args, get_origin

from typer._click import _textwrap
from typer._click import core as _click_core
from typer.core import TyperArgument, TyperOption

_NAMES: dict[Any, str] = {
    str: "TEXT",
    int: "INTEGER",
    float: "NUMBER",
    Path: "PATH",
    _dt.datetime: "DATETIME",
    _dt.date: "DATE",
}


def _metavar(annotation: Any) -> str:
    """The conventional name of one value of ``annotation`` (``list[Path]`` -> ``PATH``)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (list, tuple) or (args and get_origin(annotation) is not None):
        return _metavar(args[0]) if args else "VALUE"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "|".join(str(m.value) for m in annotation)
    return _NAMES.get(annotation, "VALUE")


def _is_many(param: Any) -> bool:
    return param.nargs != 1 or getattr(param, "multiple", False)


def _type_text(param: Any, ctx: Any) -> str | None:
    """The help column's type: ``PATH``, ``a|b``, ``PATH...`` for several; none for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar is not None:
        return param.metavar
    desc = param.type_descriptor
    if desc.is_choice:
        name = "|".join(str(c) for c in desc.choices or ())
    else:
        name = _metavar(desc.annotation)
    return name + ("..." if _is_many(param) and isinstance(param, TyperArgument) else "")


def _usage_name(param: TyperArgument) -> str:
    """``SPEC...`` for a required argument, ``[SPEC]...`` for an optional one, as click did."""
    name = param.metavar or param.name.upper()
    name = name if param.required else f"[{name}]"
    return name + ("..." if _is_many(param) else "")


def _rich_name(param: TyperArgument) -> str:
    return param.metavar or param.name.upper()


class _WholeWords(_textwrap.TextWrapper):
    """Wrap at spaces only: a flag, a path or a hyphenated word is never cut in two."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(break_on_hyphens=False, break_long_words=False)
        super().__init__(*args, **kwargs)


_short_help = _click_core.Command.get_short_help_str


def _whole_summary(self: _click_core.Command, limit: int = 45) -> str:
    """A command list shows each verb's first sentence whole (wrapped), never cut with '...'."""
    return _short_help(self, limit=1_000)


def install() -> None:
    """Make every stoker verb's help use conventional metavars and whole words (idempotent)."""
    _click_core.Command.get_short_help_str = _whole_summary  # type: ignore[method-assign]
    _textwrap.TextWrapper = _WholeWords  # type: ignore[misc]  # wrap_text imports it per call
    for cls in (TyperArgument, TyperOption):
        cls.display_type_rich = _type_text  # type: ignore[method-assign]
    TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]
    TyperArgument._rich_display_name = _rich_name  # type: ignore[method-assign]
