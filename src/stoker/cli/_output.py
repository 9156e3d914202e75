"""All terminal output goes through here: data to stdout, messages to stderr, JSON on request,
and StokerError turned into one clear line with no traceback (``STOKER_DEBUG=1`` shows it)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import StokerError

stdout = Console(soft_wrap=False)
stderr = Console(stderr=True)


def emit_json(data: Any) -> None:
    # Strict JSON: Infinity and NaN are not JSON, and the library never hands them over.
    text = json.dumps(data, indent=2, default=str, sort_keys=False, allow_nan=False)
    sys.stdout.write(text + "\n")


def emit_text(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


@contextmanager
def user_errors(*, json_lines: bool = False) -> Iterator[None]:
    """Print a StokerError as ``error: ...`` on stderr and exit 2; no traceback. With
    ``json_lines`` (a command whose --json prints JSON lines) it is also a last line on stdout,
    ``{"event": "error", "fatal": true, "message": ...}``, for the automation reading it."""
    try:
        yield
    except StokerError as exc:
        if os.environ.get("STOKER_DEBUG"):
            raise
        if json_lines:
            line = {"event": "error", "fatal": True, "message": str(exc)}
            sys.stdout.write(json.dumps(line) + "\n")
        stderr.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: run a CLI command inside ``user_errors``."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with user_errors():
            return fn(*args, **kwargs)

    return wrapper
