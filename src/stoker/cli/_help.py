"""Help that reads like every other Unix tool's: ``PATH``, ``TEXT``, ``SPEC...``, at 80 columns.

Typer shows Python's types in help (``<list[Path]>``, ``<bool>``), wraps the usage line's
arguments in braces (``{specs}...``), cuts a command list's summaries at 45 characters and its
text wrapper splits words at hyphens (``teardown-`` / ``after``, ``--no-delete-`` /
``scale-sets``). A user reads none of that. This module holds what stoker shows instead: each
parameter's conventional metavar (a flag shows none) and a help formatter that wraps only at
spaces. ``_command`` puts them in place through typer's public classes; tests/test_cli_help.py
renders every verb to hold them."""

from __future__ import annotations

import datetime as _dt
import enum
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

import typer

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


def is_many(param: Any) -> bool:
    return param.nargs != 1 or getattr(param, "multiple", False)


def type_text(param: Any, *, argument: bool) -> str | None:
    """The help column's type: ``PATH``, ``a|b``, ``PATH...`` for several; none for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.metavar is not None:
        return param.metavar
    desc = param.type_descriptor
    if desc.is_choice:
        name = "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())  # what one types
    else:
        name = _metavar(desc.annotation)
    return name + ("..." if argument and is_many(param) else "")


def usage_name(param: Any) -> str:
    """``SPEC...`` for a required argument, ``[SPEC]...`` for an optional one, as click did."""
    name = param.metavar or param.name.upper()
    name = name if param.required else f"[{name}]"
    return name + ("..." if is_many(param) else "")


def _wrap(text: str, width: int, initial: str = "", subsequent: str = "") -> str:
    """``text`` wrapped at spaces only: a flag, a path or a hyphenated word is never cut in two.

    As click wraps help: paragraphs (split by an empty line) one by one, each at its first
    line's indent; one that opens with a ``\\b`` line is kept as written."""
    paragraphs: list[tuple[str, bool, list[str]]] = []  # (indent, kept as written?, lines)
    for line in text.expandtabs().splitlines():
        if not line:
            paragraphs.append(("", False, []))
        elif not paragraphs or not paragraphs[-1][2]:
            stripped = line.lstrip()
            paragraphs.append((line[: len(line) - len(stripped)], stripped == "\b", [stripped]))
        else:
            paragraphs[-1][2].append(line)
    out = []
    for indent, kept, lines in paragraphs:
        if not lines:
            continue
        if kept:
            body = lines[1:]
            out.append("\n".join((subsequent if i else initial) + indent + line
                                  for i, line in enumerate(body)))  # fmt: skip
            continue
        wrapper = textwrap.TextWrapper(
            width,
            initial_indent=initial + indent,
            subsequent_indent=subsequent + indent,
            replace_whitespace=False,
            break_on_hyphens=False,
            break_long_words=False,
        )
        out.append(wrapper.fill(" ".join(lines)))
    return "\n\n".join(out)


class Formatter(typer.Context.formatter_class):  # type: ignore[misc,name-defined]
    """Click's help layout with every line wrapped by ``_wrap``."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        prefix = "Usage: " if prefix is None else prefix
        head = f"{prefix:>{self.current_indent}}{prog} "
        width = self.width - self.current_indent
        if width >= len(head) + 20:  # the arguments fit right of the prefix
            self.write(_wrap(args, width, head, " " * len(head)))
        else:
            indent = " " * (max(self.current_indent, len(prefix)) + 4)
            self.write(f"{head}\n{_wrap(args, width, indent, indent)}")
        self.write("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(_wrap(text, self.width, indent, indent) + "\n")

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        if not rows:
            return
        first_col = min(max(len(first) for first, _ in rows), col_max) + col_spacing
        margin = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + margin)
            lines = _wrap(second, max(self.width - first_col - 2, 10)).splitlines() or [""]
            self.write(lines[0] + "\n")
            self.write("".join(f"{margin}{line}\n" for line in lines[1:]))


def summary(command: Any) -> str:
    """A command list shows each verb's first sentence whole (wrapped), never cut with '...'."""
    return command.get_short_help_str(limit=1_000)
