"""The report's files on disk (the page, its PDF and PNGs, a ``--record``): each place checked
before any work, then written whole or not at all (a temporary file of its own beside it, renamed
over it), so a Ctrl-C, a full disk or a second run writing the same path never leaves half a
file where the last good one was."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ._atomic import replaced, write_whole
from ._user_files import check_user_output
from .errors import ReportError


def check_out(path: str | os.PathLike[str], flag: str, *, folder: bool = False) -> Path:
    """``path`` if it can be written (a missing folder above it can be made), else ReportError
    naming ``flag`` and the path. ``folder``: the path is a folder to write files into."""
    path = Path(path)
    check_user_output(path, flag, ReportError)
    if path.is_dir() and not folder:
        raise ReportError(
            f"{flag} {path}: is a folder; give a file name, e.g. "
            f"{path / ('report.html' if flag == '--out' else 'out')}"
        )
    if folder and path.exists() and not path.is_dir():
        raise ReportError(f"{flag} {path}: is a file; give a folder for the PNG files")
    above = path if folder else path.parent
    while not above.exists() and above != above.parent:  # the nearest folder that exists
        above = above.parent
    if not above.is_dir():
        raise ReportError(f"{flag} {path}: {above} is a file, not a folder; choose another path")
    if not os.access(above, os.W_OK | os.X_OK):
        raise ReportError(f"{flag} {path}: the folder {above} is not writable; choose another path")
    return path


def write_atomic(path: Path, data: bytes, flag: str) -> Path:
    """Write ``data`` to ``path`` whole; the file there before stays whole on any failure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, data)
    except OSError as exc:
        raise _cannot(path, flag, exc) from exc
    return path


@contextlib.contextmanager
def atomic(path: Path, flag: str) -> Iterator[Path]:
    """A temporary path beside ``path``, of this writer alone, renamed over ``path`` when the
    block ends; removed on any error, Ctrl-C included. OSError becomes one ReportError line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced(path) as tmp:
            yield tmp
    except OSError as exc:
        raise _cannot(path, flag, exc) from exc


def _cannot(path: Path, flag: str, exc: OSError) -> ReportError:
    return ReportError(
        f"{flag} {path}: cannot write it ({exc.strerror or exc}); choose another path"
    )
