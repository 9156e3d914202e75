"""The input of a conversion cut into parts: pieces of about one shard each, decided from the
input alone (paths, sizes, row counts), never from how many processes convert it. So a part's
shards are the same bytes whichever process, rank or run writes them, and a resumed conversion
redoes only the parts that have no record yet.

    files    consecutive files up to ``shard_size`` (the writer's own cut: a part is one shard)
    jsonl    a byte range of a file, ``shard_size`` long; a line belongs to the part it starts in
    npy      ceil(shard_size / row bytes) rows of a file
    parquet  consecutive row groups of a file up to ``shard_size`` (uncompressed)

Each part is read as a stream: a file at a time, a line at a time, a row group in record
batches. Nothing is loaded whole.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StreamError
from ._array import ArrayLayout, native
from ._sources import ShardKind, _listing, _reading  # the input listing and its error naming

SUFFIX: dict[ShardKind, str | None] = {
    "files": None,
    "jsonl": ".jsonl",
    "npy": ".npy",
    "parquet": ".parquet",
}
PARQUET_BATCH_ROWS = 1024  # rows per record batch: a row group is never converted to Python whole


@dataclass(frozen=True)
class Part:
    """``paths`` (files: several; else one) and, for one file, ``[start, stop)``: bytes (jsonl),
    rows (npy) or row groups (parquet); ``skip``: rows of the first group already written."""

    number: int
    paths: tuple[str, ...]
    start: int = 0
    stop: int = 0
    skip: int = 0


def plan_parts(
    src: Path, kind: ShardKind, shard_size: int, *, keys: bool = False, skip: int = 0
) -> tuple[list[Part], str]:
    """The parts of ``src`` after its first ``skip`` samples (a dataset being added to), and a
    fingerprint of the input and the plan (paths, sizes, modification times, cuts)."""
    listing = _listing(src, SUFFIX[kind])
    if kind == "files":
        parts = _plan_files(src, listing, shard_size, keys, skip)
    else:
        plan = {"jsonl": _plan_jsonl, "npy": _plan_npy, "parquet": _plan_parquet}
        parts = plan[kind](src, [Path(path) for path, _ in listing], shard_size, keys, skip)
    digest = hashlib.blake2b(digest_size=8)
    for path, st in listing:
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    digest.update(json.dumps([kind, keys, shard_size, skip]).encode())
    for part in parts:
        digest.update(
            f"{part.number} {len(part.paths)} {part.start} {part.stop} {part.skip}\n".encode()
        )
    return parts, digest.hexdigest()


def _cut(sizes: list[int], shard_size: int) -> list[tuple[int, int]]:
    """Runs ``[i, j)`` of items, each ending with the item that brings it to ``shard_size``
    (the rule ShardWriter flushes by)."""
    runs, first, total = [], 0, 0
    for i, size in enumerate(sizes):
        total += size
        if total >= shard_size:
            runs.append((first, i + 1))
            first, total = i + 1, 0
    if first < len(sizes):
        runs.append((first, len(sizes)))
    return runs


def _plan_files(
    src: Path, listing: list[tuple[str, os.stat_result]], shard_size: int, keys: bool, skip: int
) -> list[Part]:
    listing = listing[skip:]
    paths = [path for path, _ in listing]
    # keyed samples are pickled {"key", "data"}: the key and ~60 bytes of pickle beside the data
    sizes = [st.st_size + (len(_key(src, Path(p))) + 64 if keys else 0) for p, st in listing]
    return [Part(n, tuple(paths[i:j])) for n, (i, j) in enumerate(_cut(sizes, shard_size))]


def _plan_jsonl(src: Path, paths: list[Path], shard_size: int, keys: bool, skip: int) -> list[Part]:
    parts: list[Part] = []
    for path in paths:
        size, start = path.stat().st_size, 0
        if skip:
            start, skip = _after_lines(path, skip)
        for begin in range(start, size, shard_size):
            parts.append(Part(len(parts), (str(path),), begin, min(size, begin + shard_size)))
    return parts


def _after_lines(path: Path, samples: int) -> tuple[int, int]:
    """The byte offset after the first ``samples`` JSON lines of ``path`` (blank lines are no
    sample), and how many samples are left to skip in the files after it."""
    offset = 0
    with open(path, "rb") as f:
        for line in f:
            if not samples:
                break
            offset += len(line)
            samples -= bool(line.strip())
    return offset, samples


def _plan_npy(src: Path, paths: list[Path], shard_size: int, keys: bool, skip: int) -> list[Part]:
    import numpy as np

    parts: list[Part] = []
    first: tuple[Path, ArrayLayout] | None = None
    for path in paths:
        with _reading(path, "npy"):
            array = np.load(path, mmap_mode="r", allow_pickle=False)  # the header only
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
        row_bytes = max(1, array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64)))
        per_part = -(-shard_size // row_bytes)
        start = min(skip, len(array))
        skip -= start
        for begin in range(start, len(array), per_part):
            parts.append(Part(len(parts), (str(path),), begin, min(len(array), begin + per_part)))
    return parts


def _plan_parquet(
    src: Path, paths: list[Path], shard_size: int, keys: bool, skip: int
) -> list[Part]:
    pq = _pyarrow_parquet()
    parts: list[Part] = []
    for path in paths:
        with _reading(path, "parquet"):
            meta = pq.ParquetFile(path).metadata
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
        first = 0
        while first < len(groups) and skip >= groups[first].num_rows:
            skip -= groups[first].num_rows
            first += 1
        sizes = [g.total_byte_size for g in groups[first:]]
        for n, (i, j) in enumerate(_cut(sizes, shard_size)):
            rows_done = skip if n == 0 else 0
            parts.append(Part(len(parts), (str(path),), first + i, first + j, rows_done))
        if first < len(groups):
            skip = 0
    return parts


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise StreamError("reading Parquet needs pyarrow: pip install pyarrow") from exc
    return pq


def _key(src: Path, path: Path) -> str:
    return path.name if path == src else path.relative_to(src).as_posix()  # (src: one file)


# ---------------------------------------------------------------------- reading a part
def read_part(src: Path, part: Part, kind: ShardKind, keys: bool) -> Iterator[Any]:
    """The samples of ``part``, one at a time."""
    if kind == "files":
        for name in part.paths:
            path = Path(name)
            with _reading(path, "files"):
                data = path.read_bytes()
            yield {"key": _key(src, path), "data": data} if keys else data
        return
    path = Path(part.paths[0])
    if kind == "jsonl":
        yield from _jsonl_range(path, part.start, part.stop)
    elif kind == "npy":
        import numpy as np

        with _reading(path, "npy"):
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        for row in array[part.start : part.stop]:
            yield np.array(row)
    else:
        pq = _pyarrow_parquet()
        skip = part.skip
        with _reading(path, "parquet"):
            batches = pq.ParquetFile(path).iter_batches(
                batch_size=PARQUET_BATCH_ROWS, row_groups=range(part.start, part.stop)
            )
            for batch in batches:
                rows = batch.to_pylist()
                yield from rows[skip:]
                skip = max(0, skip - len(rows))


def _jsonl_range(path: Path, start: int, stop: int) -> Iterator[Any]:
    with _reading(path, "jsonl"), open(path, "rb") as f:
        pos = start
        if pos:  # the line under way at ``start`` is the previous part's
            f.seek(pos - 1)
            pos += len(f.readline()) - 1
        while pos < stop:
            line = f.readline()
            if not line:
                return
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise StreamError(
                        f"{path}:{_line_number(path, pos)}: not JSON ({exc.msg})"
                    ) from exc
            pos += len(line)


def _line_number(path: Path, offset: int) -> int:
    """The 1-based line that starts at byte ``offset`` (for an error message only)."""
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


def environment() -> dict[str, str]:
    """The variables a conversion process needs to reach the store (credentials, emulator)."""
    return {k: v for k, v in os.environ.items() if k.startswith(("AZURE_", "STOKER_"))}
