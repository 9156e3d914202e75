"""Plain command-line values read without pydantic: a quarter of every command's start-up.

Typer 0.29 turns each parameter's value into its type through a pydantic ``TypeAdapter``,
built when the command runs: importing pydantic and building the adapters cost ~0.08 CPU s of
a ~0.3 s ``stoker stage`` (a 1-file copy, 9 runs: 0.294 -> 0.213 s), on every command,
whichever verb. Most of stoker's parameters are plain: text, a flag, a whole number (perhaps
bounded), a number, a path, a list of those, or text read by a parser of stoker's own (sizes,
durations). Those are read here, in the ways typer reads them; anything else (choices, dates,
clamped numbers, paths with checks, files) still goes to typer's own. Typer has no public hook
for this, so one function is replaced, once, as ``_help`` replaces the help's; a version of
typer without it is left as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

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


def install() -> None:
    """Read plain values without pydantic from now on (idempotent)."""
    try:
        import typer.core as typer_core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # another typer: its own way stands
        return
    if getattr(typer_core.build_runtime_param, "stoker", False):
        return

    class PlainParam(RuntimeParam):  # type: ignore[misc]
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            annotation = self.annotation
            try:
                if get_origin(annotation) is list:
                    return [self._read(get_args(annotation)[0], item) for item in value]
                return self._read(annotation, value)
            except ValueError as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from None

        def _read(self, kind: type, value: Any) -> Any:
            info = self.parameter_info
            out = info.parser(value) if info.parser is not None else _one(kind, value)
            low, high = info.min, info.max
            if (low is not None and out < low) or (high is not None and out > high):
                bounds = [
                    f"x>={low}" if low is not None else "",
                    f"x<={high}" if high is not None else "",
                ]
                raise ValueError(f"{out} is not in the range {' and '.join(filter(None, bounds))}")
            return out

    def build(descriptor: Any) -> Any:
        if _plain(descriptor):
            return PlainParam(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
        return build_runtime_param(descriptor)

    build.stoker = True  # type: ignore[attr-defined]
    typer_core.build_runtime_param = build
