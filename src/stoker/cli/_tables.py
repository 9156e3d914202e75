"""Tables that stay readable at 80 columns: each column at least as wide as its longest word
(so rich wraps cells at spaces and never cuts a word), and when that does not fit, the least
needed columns dropped first, named under the table so a reader knows where to find them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

# A word longer than this (a URL, a path, a command) folds rather than widen its column.
LONGEST_WHOLE_WORD = 28


@dataclass(frozen=True)
class Column:
    header: str
    drop_order: int = 0  # 0: always shown; higher numbers are dropped first
    whole: bool = False  # its words never fold (names a reader greps for)
    justify: str = "left"


@dataclass(frozen=True)
class Heading:
    """A row that names the group of rows below it, in the first column."""

    text: str


def _longest_word(cells: Sequence[str]) -> int:
    words = (w for c in cells for w in str(c).split())
    return min(LONGEST_WHOLE_WORD, max((len(w) for w in words), default=1))


def fit(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Text] | Heading],
    *,
    width: int,
    title: str | None = None,
) -> tuple[Table, list[str]]:
    """A rich Table of ``rows`` that fits ``width`` columns, and the headers it had to drop."""
    cells = [r for r in rows if not isinstance(r, Heading)]
    mins = [
        max(_longest_word([c.header]), _longest_word([str(r[i]) for r in cells]))
        for i, c in enumerate(columns)
    ]
    shown = list(range(len(columns)))

    def needed() -> int:  # cells, plus one border and two spaces of padding per column
        return sum(mins[i] for i in shown) + 3 * len(shown) + 1

    for i in sorted(shown, key=lambda i: -columns[i].drop_order):
        if needed() <= width or columns[i].drop_order == 0:
            break
        shown.remove(i)
    # Still too wide: the widest column's longest words fold, never a heading nor a column
    # whose words stay whole (an entry name a reader greps for), and never below 8 characters.
    floors = [mins[i] if c.whole else 8 for i, c in enumerate(columns)]
    floors[0] = max([floors[0], *(len(r.text) for r in rows if isinstance(r, Heading))])
    mins[0] = max(mins[0], floors[0])
    while needed() > width:
        foldable = [i for i in shown if mins[i] > floors[i]]
        if not foldable:
            break
        mins[max(foldable, key=lambda i: mins[i] - floors[i])] -= 1
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    # rich shrinks the columns with the longest words first; a cap on the columns that may fold
    # keeps it from folding the whole ones instead.
    foldable = [i for i in shown if not columns[i].whole]
    slack = max(0, width - needed()) // max(1, len(foldable))
    for i in shown:
        table.add_column(
            columns[i].header,
            min_width=mins[i],
            max_width=None if columns[i].whole else mins[i] + slack,
            overflow="fold",
            justify=columns[i].justify,
        )
    for row in rows:
        if isinstance(row, Heading):
            table.add_section()
            table.add_row(Text(row.text, style="bold"), *([""] * (len(shown) - 1)))
        else:
            table.add_row(*(row[i] for i in shown))
    dropped = [columns[i].header for i in range(len(columns)) if i not in shown]
    return table, dropped


def print_fitted(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str | Text] | Heading],
    *,
    title: str | None = None,
    dropped_hint: str = "",
) -> None:
    """Print ``rows`` fitted to the console's width; say which columns did not fit and where
    to see them (``dropped_hint``, e.g. ``--json``)."""
    table, dropped = fit(columns, rows, width=console.width, title=title)
    console.print(table)
    if dropped:
        hint = f"; {dropped_hint}" if dropped_hint else ""
        console.print(
            f"(not shown at {console.width} columns: {', '.join(dropped)}{hint})",
            highlight=False,
            style="dim",
        )
