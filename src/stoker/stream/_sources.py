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

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StreamError

KINDS = {"files": "bytes", "jsonl": "json", "npy": "array", "parquet": "pickle"}


def _paths(src: Path, suffix: str | None) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        raise StreamError(f"{src} is neither a file nor a folder")
    found = sorted(
        p
        for p in src.rglob("*")
        if p.is_file()
        and (suffix is None or p.suffix == suffix)
        and not any(part.startswith(".") for part in p.relative_to(src).parts)  # .stoker etc.
    )
    if not found:
        raise StreamError(
            f"{src} holds no {'files' if suffix is None else '*' + suffix + ' files'}"
        )
    return found


@contextmanager
def _reading(path: Path, kind: str) -> Iterator[None]:
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
