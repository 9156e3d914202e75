"""Plain command-line values read without pydantic: a quarter of every command's start-up.

Typer turns each parameter's value into its type through a pydantic ``TypeAdapter``,
built when the command runs: importing pydantic and building the adapters cost ~0.08 CPU s of
a ~0.3 s ``stoker stage`` (a 1-file copy, 9 runs: 0.294 -> 0.213 s), on every command,
whichever verb. Most of stoker's parameters are plain: text, a flag, a whole number (perhaps
bounded), a number, a path, a list of those, or text read by a parser of stoker's own (sizes,
durations). Those are read here, in the ways typer reads them; anything else (choices, dates,
clamped numbers, paths with checks, files) still goes to typer's own. ``_command``'s parameter
classes hand typer a ``Reader`` where one fits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

import typer

PLAIN = (str, bool, int, float, Path)
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


def _one(kind: type, value: Any) -> Any:
    """``value`` as ``kind`` (one of PLAIN); ValueError with what is wrong."""
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    if kind is str:
        return str(value)
    if kind is Path:
        return Path(value)
    text = str(value).strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{value!r} is not a valid boolean (true or false)")
    try:
        return kind(text)
    except ValueError:
        what = "integer" if kind is int else "number"
        raise ValueError(f"{value!r} is not a valid {what}") from None


def _plain(descriptor: Any) -> bool:
    """Whether a parameter's value can be read here rather than by typer's pydantic adapter."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if descriptor.file_annotation is not None or (descriptor.is_ranged and info.clamp):
        return False
    args = get_args(annotation)
    kind = args[0] if get_origin(annotation) is list and len(args) == 1 else annotation
    if info.parser is not None:
        return True
    if kind is Path:  # typer's checks on paths (exists, readable, resolve, '-') stay its own
        return not (
            info.exists
            or not info.file_okay
            or not info.dir_okay
            or info.writable
            or not info.readable
            or info.resolve_path
            or info.allow_dash
            or info.path_type is not None
        )
    return kind in PLAIN


class Reader:
    """A parameter's values read in plain Python: typer asks it through ``get_runtime_param``."""

    def __init__(self, param: Any) -> None:
        self.info = param.type_descriptor.parameter_info
        annotation = param.type_descriptor.annotation
        self.many = get_origin(annotation) is list
        self.kind = get_args(annotation)[0] if self.many else annotation

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        """``value`` (click's text, a tuple of them, or a default) as the parameter's type."""
        several = param.multiple or param.nargs == -1
        if value is None:
            return () if several else None
        if several and isinstance(value, str):
            raise typer.BadParameter("Value must be an iterable.", ctx=ctx, param=param)
        try:
            return [self._read(item) for item in value] if self.many else self._read(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), ctx=ctx, param=param) from None

    def _read(self, value: Any) -> Any:
        info = self.info
        out = info.parser(value) if info.parser is not None else _one(self.kind, value)
        low, high = info.min, info.max
        if (low is not None and out < low) or (high is not None and out > high):
            bounds = [
                f"x>={low}" if low is not None else "",
                f"x<={high}" if high is not None else "",
            ]
            raise ValueError(f"{out} is not in the range {' and '.join(filter(None, bounds))}")
        return out


def reader(param: Any) -> Reader | None:
    """A plain reader for ``param`` (a typer parameter), or None where typer's own must read."""
    return Reader(param) if _plain(param.type_descriptor) else None
