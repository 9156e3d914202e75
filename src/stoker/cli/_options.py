"""Option values read where typer reads them, so a bad one is named by its option ("Invalid
value for '--block-size': ...") and exits 2, like any other usage error. The library checks
the same values again for its Python callers."""

from __future__ import annotations

import typer


def size(value: str | int) -> int:
    """A size option ('8 MiB', '64MiB', 65536) in bytes; none of them can be 0."""
    from ..errors import StokerError
    from ..units import parse_bytes

    try:
        n = int(parse_bytes(value))
    except StokerError as exc:
        raise typer.BadParameter(str(exc)) from None
    if n < 1:
        raise typer.BadParameter(f"{value!r}: give a size above 0, e.g. '8 MiB'")
    return n
