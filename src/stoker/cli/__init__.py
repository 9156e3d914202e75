"""The ``stoker`` command: one small module per verb, no logic the library lacks.

``main`` builds only the verb a run asks for: building every verb's command (their modules,
Typer's parameter adapters) cost ~0.1 s of CPU on each run, more than a small ``stoker stage``
spends copying. Help, a mistyped verb and ``app`` (the tests' handle) get the whole tree."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from ._command import StokerCommand, StokerGroup, adopt

# Verb -> (its module in this package, the attribute to register, a group of sub-verbs?), in
# the order help lists them.
VERBS: dict[str, tuple[str, str, bool]] = {
    "plan": ("plan", "plan", False),
    "simulate": ("simulate", "simulate", False),
    "provision": ("provision", "provision", False),
    "preflight": ("preflight", "preflight", False),
    "teardown": ("teardown", "teardown", False),
    "guard": ("guard", "guard", False),
    "report": ("report", "report", False),
    "catalog": ("catalog", "app", True),
    "stage": ("stage", "stage", False),
    "verify": ("stage", "verify", False),
    "cache": ("cache", "app", True),
    "checkpoint": ("checkpoint", "app", True),
    "shards": ("shards", "app", True),
    "bench": ("bench", "app", True),
    "watch": ("watch", "watch", False),
    "doctor": ("doctor", "doctor", False),
}
HELP = "Keep AI accelerators fed: plan, stage, stream, checkpoint and measure on Azure."


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"stoker {version('stoker')}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Keep AI accelerators fed: plan, stage, stream, checkpoint and measure on Azure."""


def build(verbs: list[str] | None = None) -> typer.Typer:
    """The ``stoker`` command with ``verbs`` (default: all of them)."""
    tree = typer.Typer(
        name="stoker",
        cls=StokerGroup,  # help as cli/_help.py lays it out, plain values read by cli/_coerce.py
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        # Plain help, as git and rclone print it: it reads at 80 columns and never cuts a word.
        rich_markup_mode=None,
    )
    tree.callback()(_root)  # (a callback keeps a one-verb tree a group: `stoker stage ...`)
    for name in verbs or VERBS:
        module, attribute, group = VERBS[name]
        handler = getattr(importlib.import_module(f".{module}", __name__), attribute)
        if group:
            tree.add_typer(adopt(handler), name=name, cls=StokerGroup)
        else:
            tree.command(name, cls=StokerCommand)(handler)
    return tree


def __getattr__(name: str) -> Any:
    if name == "app":  # built once, on first use
        globals()["app"] = tree = build()
        return tree
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    verb = sys.argv[1] if len(sys.argv) > 1 else None  # (`stoker --help stage`: every verb)
    build([verb] if verb in VERBS else None)()
