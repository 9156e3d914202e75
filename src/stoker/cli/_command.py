"""stoker's command and group classes, handed to typer through ``cls=``.

They carry ``_help``'s layout (conventional metavars, words never cut, whole command summaries)
and ``_coerce``'s plain reading of values to every verb, through methods typer's and click's
classes offer for overriding (``get_help_record``, ``get_usage_pieces``, ``format_commands``,
``get_runtime_param``, ``Context.formatter_class``): nothing of typer's is replaced, so typer
is not pinned to one minor version.

Typer builds each parameter itself, always as a ``TyperOption`` or ``TyperArgument``, and has
no hook for their class; so a command takes its parameters over once, when it is built, by
giving each the matching subclass below (methods only, and a cached reader)."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from . import _coerce, _help


def _runtime_param(param: Any, typers: Any) -> Any:
    """What reads ``param``'s values: ``_coerce``'s reader where they are plain, else typer's."""
    if param.stoker_reader is None:
        param.stoker_reader = _coerce.reader(param) or typers()
    return param.stoker_reader


class StokerOption(TyperOption):
    stoker_reader: Any = None

    def get_runtime_param(self) -> Any:
        return _runtime_param(self, super().get_runtime_param)

    def display_type_rich(self, ctx: Any) -> str | None:
        return _help.type_text(self, argument=False)


class StokerArgument(TyperArgument):
    stoker_reader: Any = None

    def get_runtime_param(self) -> Any:
        return _runtime_param(self, super().get_runtime_param)

    def display_type_rich(self, ctx: Any) -> str | None:
        return _help.type_text(self, argument=True)

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        return [_help.usage_name(self)]

    def get_help_record(self, ctx: Any) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        type_text = self.display_type_rich(ctx)
        name = self.metavar or self.name.upper()  # (typer's: the lower-case name, '...' on it)
        return (f"{name} {type_text}" if type_text else name), record[1]


_ADOPT = {TyperOption: StokerOption, TyperArgument: StokerArgument}


def _adopt(params: list[Any]) -> None:
    for param in params:
        if type(param) in _ADOPT:
            param.__class__ = _ADOPT[type(param)]


def _adopted(help_option: Any) -> Any:
    """``--help``, which click builds on first use: no type shown for this flag either."""
    _adopt([help_option] if help_option is not None else [])
    return help_option


class _Context(typer.Context):
    formatter_class = _help.Formatter


class _Plain:
    """What a verb and a group share: the help formatter, and stoker's parameter classes."""

    context_class = _Context
    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _adopt(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        return _adopted(super().get_help_option(ctx))  # type: ignore[misc]


class StokerCommand(_Plain, TyperCommand):
    """A verb: plain values, conventional help."""


class StokerGroup(_Plain, TyperGroup):
    """A group of verbs: as ``StokerCommand``, and each sub-verb's summary whole in its list."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [
            (name, _help.summary(command))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def adopt(group: typer.Typer) -> typer.Typer:
    """``group`` (a verb's own ``typer.Typer``) with its verbs built as ``StokerCommand``s."""
    for info in group.registered_commands:
        if info.cls in (None, TyperCommand):  # (a verb's own class is left as it is)
            info.cls = StokerCommand
    return group
