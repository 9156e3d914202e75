"""The inputs ``write_shards`` converts (``_convert.py``, in parts: ``_parts.py``): the kinds,
the input files in sorted path order (so sample ``i`` is always the same input), and the
readers' errors named by file.

    files    each file is one sample: its bytes (codec "bytes"), or {"key", "data"} with keys
             (hidden files and folders, such as a stage's .stoker, are skipped)
    jsonl    each line of each *.jsonl file is one sample (codec "json")
    npy      each row (along axis 0) of each *.npy file is one sample (codec "array": every
             file's rows share one dtype and shape)
    parquet  each row of each *.parquet file is one sample, a dict (codec "pickle"; needs pyarrow)
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from ..errors import StreamError

ShardKind = Literal["files", "jsonl", "npy", "parquet"]  # what write_shards converts (above)
KINDS: dict[ShardKind, str] = {
    "files": "bytes",
    "jsonl": "json",
    "npy": "array",
    "parquet": "pickle",
}


def _listing(src: Path, suffix: str | None) -> list[tuple[str, os.stat_result]]:
    """The input files under ``src`` (or ``src`` itself) with their ``stat``, in path order
    (``Path``'s: folder by folder). One ``stat`` a file, hidden files and folders never
    entered, and paths as strings: ``rglob`` with ``is_file``, two more ``stat`` calls and a
    ``Path`` a file took 0.55 s of 20,000 files before any process could start converting."""
    if src.is_file():
        return [(str(src), src.stat())]
    if not src.is_dir():
        raise StreamError(f"{src} is neither a file nor a folder")
    found: list[tuple[tuple[str, ...], os.DirEntry[str]]] = []

    def walk(folder: str, parts: tuple[str, ...]) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("."):  # .stoker etc.
                    continue
                if entry.is_dir(follow_symlinks=False):  # (as rglob: not into linked folders)
                    walk(entry.path, (*parts, entry.name))
                elif entry.is_file() and (suffix is None or Path(entry.name).suffix == suffix):
                    found.append(((*parts, entry.name), entry))

    walk(str(src), ())
    if not found:
        raise StreamError(
            f"{src} holds no {'files' if suffix is None else '*' + suffix + ' files'}"
        )
    found.sort(key=lambda item: item[0])
    return [(entry.path, entry.stat()) for _, entry in found]


@contextmanager
def _reading(path: Path, kind: ShardKind) -> Iterator[None]:
    """Errors of the input's reader (numpy, pyarrow, a codec each raise their own) named by
    file."""
    try:
        yield
    except StreamError:
        raise
    except Exception as exc:
        raise StreamError(
            f"{path}: cannot be read as {kind} ({type(exc).__name__}: {exc}); fix or remove the "
            "file, or pick the matching --from"
        ) from exc
