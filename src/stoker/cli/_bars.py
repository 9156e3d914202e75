"""A bar of a long verb's steps (what runs now, done of all), fed by the library's
``progress=(what, done, total)`` callback; nothing when the output is JSON."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ._output import stderr

StepsCallback = Callable[[str, int, int], None]


@contextlib.contextmanager
def steps_bar(label: str, *, quiet: bool = False) -> Iterator[StepsCallback | None]:
    if quiet:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    columns = ["{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task(label)

        def show(what: str, done: int, total: int) -> None:
            bar.update(task, description=f"{label}: {what}", completed=done, total=total)

        yield show
