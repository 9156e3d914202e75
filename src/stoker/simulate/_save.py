"""The simulation's JSON on disk: the place checked before minutes of simulating, then written
whole or not at all (a temporary file beside it, renamed over it), so a Ctrl-C, a full disk or a
second run never leaves half a document where the last good one was."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._atomic import write_whole
from .._user_files import check_user_output
from ..errors import SpecError


def check_out(path: str | Path, inputs: Iterable[object] = ()) -> Path:
    """``path`` if a file can be written there, else SpecError naming it and what to do.
    ``inputs`` (the spec, catalog files): an out naming one would replace it with the JSON."""
    path = Path(path)
    for given in inputs:
        if isinstance(given, str | Path) and _same(path, Path(given)):
            raise SpecError(
                f"--out {path}: is an input ({given}); writing the JSON there would replace it, "
                "so give another file"
            )
    check_user_output(path, "--out", SpecError)
    if path.is_dir():
        raise SpecError(f"--out {path}: is a folder; give a file name, e.g. {path / 'sim.json'}")
    folder = path.parent
    if not folder.is_dir():
        raise SpecError(f"--out {path}: the folder {folder} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SpecError(f"--out {path}: the folder {folder} is not writable; pick another")
    return path


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def write_json(path: str | Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically; the file there before stays whole on any failure."""
    path = check_out(path)
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    try:
        write_whole(path, text.encode("utf-8"))
    except OSError as exc:
        raise SpecError(f"--out {path}: cannot write it: {exc.strerror or exc}") from exc
