"""All terminal output goes through here: data to stdout, messages to stderr, JSON on request,
and StokerError turned into one clear line with no traceback (``STOKER_DEBUG=1`` shows it).

Every character of text a name brought (a file, key, spec or blob name holding ESC, CR or
BEL) is shown as its escape, ``\\x1b``, never sent raw: it would drive the terminal."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment

from .._redact import printable
from ..errors import StokerError


class _PrintableConsole(Console):
    """A console that escapes the control characters of the text it prints, in tables, bars
    and lines alike, and leaves its own styling's (control segments and styles are rendered
    after this). rich strips only BEL, BS, VT, FF and CR from text, and passes ESC through."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control else Segment(printable(seg.text), seg.style) for seg in buffer
        )


stdout = _PrintableConsole(soft_wrap=False)
stderr = _PrintableConsole(stderr=True)


def emit_json(data: Any) -> None:
    # Strict JSON: Infinity and NaN are not JSON, and the library never hands them over.
    text = json.dumps(data, indent=2, default=str, sort_keys=False, allow_nan=False)
    sys.stdout.write(text + "\n")


def emit_text(text: str) -> None:
    text = printable(text)  # (Markdown: a spec's name may hold ESC)
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
