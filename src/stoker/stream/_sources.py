"""``write_shards``: a folder of files, JSON lines, NumPy arrays or Parquet into a shard dataset.

Inputs are read in sorted path order, so sample ``i`` is always the same input, and a resumed
run (``resume=True``) skips the samples the dataset already holds.

    files    each file is one sample: its bytes (codec "bytes"), or {"key", "data"} with keys
             (hidden files and folders, such as a stage's .stoker, are skipped)
    jsonl    each line of each *.jsonl file is one sample (codec "json")
    npy      each row (along axis 0) of each *.npy file is one sample (codec "array": every
             file's rows share one dtype and shape)
    parquet  each row of each *.parquet file is one sample, a dict (codec "pickle"; needs pyarrow)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any

from ..errors import StreamError
from ._array import ArrayLayout, native
from ._index import DatasetIndex
from ._writer import ShardWriter

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


def _files(src: Path, keys: bool) -> Iterator[Any]:
    for path in _paths(src, None):
        with _reading(path, "files"):
            data = path.read_bytes()
        key = path.name if path == src else path.relative_to(src).as_posix()  # (src: one file)
        yield {"key": key, "data": data} if keys else data


def _jsonl(src: Path) -> Iterator[Any]:
    for path in _paths(src, ".jsonl"):
        with _reading(path, "jsonl"), open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise StreamError(f"{path}:{number}: not JSON ({exc.msg})") from exc


def _npy(src: Path) -> Iterator[Any]:
    import numpy as np

    first: tuple[Path, ArrayLayout] | None = None
    for path in _paths(src, ".npy"):
        with _reading(path, "npy"):
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        if array.ndim == 0:
            raise StreamError(f"{path}: a 0-d array has no rows; save samples along axis 0")
        if array.dtype.names is not None:
            raise StreamError(
                f"{path}: a structured (record) array; save each field as an array of its own, "
                "or write the rows with ShardWriter(codec='pickle')"
            )
        rows = ArrayLayout(native(array.dtype).str, array.shape[1:])  # stored native
        first = first or (path, rows)
        if rows != first[1]:
            raise StreamError(
                f"{path}: rows are {rows}, but those of {first[0]} are {first[1]}; one dataset "
                "holds rows of one dtype and shape: write the others to a dataset of their own"
            )
        for row in array:
            yield np.array(row)


def _parquet(src: Path) -> Iterator[Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise StreamError("reading Parquet needs pyarrow: pip install pyarrow") from exc
    for path in _paths(src, ".parquet"):
        with _reading(path, "parquet"):
            for batch in pq.ParquetFile(path).iter_batches():
                yield from batch.to_pylist()


def write_shards(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    kind: str = "files",
    keys: bool = False,
    shard_size: int | str = "64MiB",
    compression: str | None = None,
    resume: bool = False,
    progress: Callable[[int], None] | None = None,
) -> DatasetIndex:
    """Write ``src`` as shards to ``out`` (a folder or any stoker URL); returns the index."""
    if kind not in KINDS:
        raise StreamError(f"kind {kind!r}: use one of {', '.join(KINDS)}")
    if compression == "none":  # the CLI's spelling of None
        compression = None
    root = Path(src)
    samples: Iterator[Any] = {
        "files": lambda: _files(root, keys),
        "jsonl": lambda: _jsonl(root),
        "npy": lambda: _npy(root),
        "parquet": lambda: _parquet(root),
    }[kind]()
    codec = "pickle" if kind == "files" and keys else KINDS[kind]
    with ShardWriter(
        out, shard_size=shard_size, codec=codec, compression=compression, resume=resume
    ) as writer:
        for sample in islice(samples, writer.samples_written, None):
            writer.write(sample)
            if progress:
                progress(1)
    return writer.index
