"""A file written whole or not at all: a temporary file beside it, of this writer alone, renamed
over it at the end and removed on any failure (Ctrl-C included), so a full disk or a second
writer of the same path never leaves half a file where the last good one was."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replaced(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed over ``path`` when the block ends."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()  # gone already after the rename


def write_whole(path: Path, data: bytes) -> None:
    """``data`` at ``path``, flushed to disk, with the umask's mode as a plain write gives."""
    with replaced(path) as tmp, open(tmp, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
