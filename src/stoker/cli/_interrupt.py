"""Ctrl-C, SIGTERM and an untranslated OSError end a long verb (stage, cache pull, report)
the same way: one line, what was kept, and the exit status a shell expects."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import typer

from ._output import stderr


@contextlib.contextmanager
def interruptible(
    json_lines: bool = False,
    kept: str = "what was copied is kept, and the same command continues from there",
) -> Iterator[None]:
    """Ctrl-C (SIGINT) ends the run with one line and exit status 130: the files finished
    are kept, the finished blocks of the others are recorded, and the same command resumes
    (``kept`` says so). SIGTERM (a pod or job being stopped) ends it the same way, with exit
    status 143. An OSError no layer below translated is one line too (exit 2), naming its
    file."""
    terminated: list[int] = []

    def on_term(signum: int, frame: Any) -> None:
        terminated.append(signum)  # then stop as Ctrl-C stops (the event loop's own handler)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # Started with Ctrl-C ignored (`nohup stoker stage ... &` from a script): no
            # handler would see the SIGINT, and SIGTERM must still stop the run.
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGINT)

    try:
        before = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # (not the main thread: leave SIGTERM as it is)
        before = None
    try:
        yield
    except KeyboardInterrupt:
        how = "stopped (SIGTERM)" if terminated else "interrupted"
        fatal(f"{how}: {kept}", json_lines)
        raise typer.Exit(143 if terminated else 130) from None
    except OSError as exc:
        if os.environ.get("STOKER_DEBUG"):
            raise
        where = f" {exc.filename}" if exc.filename else ""
        fatal(f"cannot go on:{where}: {exc.strerror or exc}", json_lines)
        raise typer.Exit(2) from None
    finally:
        if before is not None:
            signal.signal(signal.SIGTERM, before)


def fatal(message: str, json_lines: bool) -> None:
    if json_lines:
        sys.stdout.write(json.dumps({"event": "error", "fatal": True, "message": message}) + "\n")
        sys.stdout.flush()
    stderr.print(f"error: {message}", highlight=False, markup=False, soft_wrap=True)
