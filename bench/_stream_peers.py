"""The loaders that ``stream_bench.py`` measures, one run per process, and the peers' environment.

The peers (WebDataset, Mosaic Streaming, LitData) live in their own virtual environment,
``.bench/stream-venv`` (Mosaic pins numpy < 2.2 and pulls torchvision), made on the first run
with the system python3.11 and ``pip install torch==2.14.1 torchvision==0.29.1
mosaicml-streaming litdata webdataset`` (the torch wheels lie on this machine's package index).
stoker runs in the project's ``.venv``. This file is run as a script by either interpreter:

    python bench/_stream_peers.py run SPEC_JSON          one loader, one epoch; prints a JSON line
    python bench/_stream_peers.py write FORMAT SRC DST N  one dataset in a peer's format

It imports only torch and numpy at the top, so both interpreters can load it; each loader's
library is imported inside its own function.

stoker is used the way most people first try one: its dataset inside torch's own
``DataLoader(ds, batch_size=64, num_workers=2, collate_fn=collate)``, per sample, shuffled
(``drop_in``), and so is the map-style Dataset over files (with ``shuffle=True``). Each peer is
used its own way, as its documentation shows (``own_way``), with the same batch size, workers,
``collate`` (through the hook each offers) and shuffling on:

* LitData: ``ld.StreamingDataset(dir, shuffle=True, drop_last=True, seed=...)`` read by
  ``ld.StreamingDataLoader(ds, batch_size=64, num_workers=2, collate_fn=collate)`` (the README's
  "Load the data by replacing the PyTorch Dataset and DataLoader with the StreamingDataset and
  StreamingDataLoader", litdata 0.2.76; its other options at their defaults).
* WebDataset: ``wds.WebDataset(urls, shardshuffle=100).shuffle(1000).to_tuple("bin")
  .batched(64, collation_fn=collate)`` read by ``wds.WebLoader(ds, batch_size=None,
  num_workers=2)``: the README's fluid interface ("pick something bigger, like 1000" for the
  shuffle buffer; ``shardshuffle`` a number, as webdataset 1.0 asks) with batching in the
  workers, as its pipeline example (``wds.batched(16)``) and its resnet50 training notebook
  do (https://github.com/webdataset/webdataset, README). No ``.decode()``: it has no decoder
  for raw bytes (``.bin``) and would only pass them on.
* Mosaic Streaming: ``StreamingDataset(local=dir, shuffle=True, batch_size=64)`` inside torch's
  ``DataLoader(ds, batch_size=64, num_workers=2, collate_fn=collate)``, as its Quick Start
  does (https://docs.mosaicml.com/projects/streaming/en/stable/getting_started/quick_start.html);
  its shuffle algorithm (py1e), predownload and cache at their defaults.

``collate`` is the same for all: ``torch.frombuffer`` views of the samples' bytes, stacked by
``default_collate`` (inside a worker, straight into shared memory): one copy per sample in the
worker, none in the training process. stoker's fastest path (``StreamingLoader``, reader
threads into the batch) is run beside them (``stoker_fastest``).
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

# Installing the peers lives with every other peer's install, in _peers.py.
from _peers import STREAM_PACKAGES as PEER_PACKAGES  # noqa: F401
from _peers import STREAM_VENV as VENV  # noqa: F401
from _peers import ensure_stream_venv as ensure_venv  # noqa: F401
from torch.utils.data import DataLoader, Dataset, default_collate

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / ".bench"
SHARD_BYTES = 64 << 20  # every format's shard / chunk / tar size
ID_BYTES = 8  # each record starts with its id, little endian
WDS_SHUFFLE = 1000  # WebDataset's README: "pick something bigger, like 1000"
WDS_SHARD_SHUFFLE = 100  # what webdataset 1.0 sets for shardshuffle=True

# torch.frombuffer warns that bytes are read-only; the consumer only reads them.
warnings.filterwarnings("ignore", message="The given buffer is not writable")


# --------------------------------------------------------------------------------- environment
def peer_versions(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; print(json.dumps({p: m.version(p) for p in "
        "('torch', 'mosaicml-streaming', 'litdata', 'webdataset', 'numpy')}))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# --------------------------------------------------------------------------------- the batch
def collate(samples: list[Any], key: str | int | None = None) -> torch.Tensor:
    """The batch every loader hands over: one uint8 tensor ``(batch, record)``. ``key`` picks
    the bytes out of a dict (Mosaic) or tuple (WebDataset) sample. Inside a DataLoader worker
    ``default_collate`` stacks straight into shared memory: one copy per sample, for all."""
    if key is not None:
        samples = [s[key] for s in samples]
    return default_collate([torch.frombuffer(s, dtype=torch.uint8) for s in samples])


def batch_ids(batch: torch.Tensor) -> np.ndarray:
    """The consumer's touch: each sample's id, from its first 8 bytes."""
    return batch[:, :ID_BYTES].numpy().copy().view("<i8").reshape(-1)


# --------------------------------------------------------------------------------- datasets
class Files(Dataset):
    """The baseline: one file per sample, read whole by ``__getitem__``."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> bytes:
        with open(self.paths[i], "rb") as f:
            return f.read()


def file_paths(root: str, n: int) -> list[str]:
    return [os.path.join(root, f"d{i // 1000:03d}", f"{i:07d}.bin") for i in range(n)]


def files(spec: dict) -> tuple[Any, None]:
    return Files(file_paths(spec["source"], spec["n"])), None


def stoker(spec: dict) -> tuple[Any, None]:
    """stoker as a new user drops it in: no dtype, samples come as bytes; ``dp`` names a
    data-parallel group (rank 0 of 1: the same samples, through the groups' code)."""
    from stoker.stream import StreamingDataset

    groups = {"dp_rank": 0, "dp_size": 1} if spec.get("dp") else {}
    return StreamingDataset(spec["source"], shuffle=True, seed=spec["seed"], **groups), None


def wds(spec: dict) -> Any:
    """WebDataset its own way: the README's fluid pipeline, batched in the workers, read by
    ``WebLoader`` (see the module's docstring)."""
    import webdataset as wds

    ds = (
        wds.WebDataset(spec["urls"], shardshuffle=WDS_SHARD_SHUFFLE, seed=spec["seed"])
        .shuffle(WDS_SHUFFLE)
        .to_tuple("bin")
        .batched(spec["batch"], collation_fn=functools.partial(collate, key=0), partial=False)
    )
    return wds.WebLoader(ds, batch_size=None, num_workers=spec["workers"])


def mosaic(spec: dict) -> Any:
    """Mosaic Streaming its own way: its Quick Start's StreamingDataset in torch's DataLoader."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # what a killed run may have left
    ds = StreamingDataset(
        local=spec["source"],
        remote=None,
        shuffle=True,
        shuffle_seed=spec["seed"],
        batch_size=spec["batch"],
    )
    return DataLoader(
        ds,
        batch_size=spec["batch"],
        num_workers=spec["workers"],
        collate_fn=functools.partial(collate, key="x"),
        drop_last=True,
    )


def litdata(spec: dict) -> Any:
    """LitData its own way: its StreamingDataset read by its StreamingDataLoader."""
    import litdata as ld

    ds = ld.StreamingDataset(spec["source"], shuffle=True, drop_last=True, seed=spec["seed"])
    return ld.StreamingDataLoader(
        ds, batch_size=spec["batch"], num_workers=spec["workers"], collate_fn=collate
    )


def _my_share(n: int) -> list[int]:
    """This DataLoader worker's share of a shuffled order of ``n`` samples (every worker its
    own, none twice), as an iterable dataset's own order is split."""
    info = torch.utils.data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info else (0, 1)
    return np.random.default_rng(0).permutation(n)[worker::workers].tolist()


class InMemory(torch.utils.data.IterableDataset):
    """The ceiling of the per-sample path: samples already in memory (``distinct`` records
    read before the clock; sample ``i`` is record ``i % distinct``, so ids repeat and are not
    checked), so a run measures torch's DataLoader alone: each worker's samples, collate into
    shared memory, the hand-over to the training process. Iterable, as the drop-in path is (a
    map-style dataset's sampler and index queue would cost the training process more than
    stoker's path pays), and handed over by ``map``, with no Python frame a sample."""

    def __init__(self, paths: list[str], n: int) -> None:
        self.records = [memoryview(Files(paths)[i]) for i in range(len(paths))]
        self.n = n

    def __iter__(self) -> Iterator[memoryview]:
        distinct = len(self.records)
        return map(self.records.__getitem__, [i % distinct for i in _my_share(self.n)])


def memory(spec: dict) -> tuple[Any, None]:
    paths = file_paths(spec["source"], spec["n"])[: spec.get("distinct", 2000)]
    return InMemory(paths, spec["n"]), None


def _shard_offsets(root: str) -> list[tuple[Path, list[int]]]:
    """Each of stoker's shards under ``root`` with its samples' offsets (the last one the end)."""
    from stoker.stream._format import ShardReader

    out = []
    for path in sorted(Path(root).glob("*.stk")):
        fd = os.open(path, os.O_RDONLY)
        try:
            out.append((path, ShardReader(path.name, fd, os.fstat(fd).st_size).offsets.tolist()))
        finally:
            os.close(fd)
    return out


class PageCache(torch.utils.data.IterableDataset):
    """The ceiling of the per-sample path reading files: each sample copied out of a map of
    stoker's shards in the page cache, with nothing else (no lookup, no check, no system call,
    no counter), the shards' places read before the clock. Any loader that reads samples from
    files in the page cache pays at least this copy (or a pread: ``PreadCache``); the memory
    ceiling pays none. Iterable, as ``InMemory``."""

    def __init__(self, root: str) -> None:
        import mmap

        self.maps, places = [], []
        for path, offsets in _shard_offsets(root):
            with open(path, "rb") as f:
                view = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            places += [(view, a, b) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
            self.maps.append(view)
        self.places = places

    def __iter__(self) -> Iterator[bytes]:
        places = self.places
        for i in _my_share(len(places)):
            view, start, end = places[i]
            yield view[start:end]


def page_cache(spec: dict) -> tuple[Any, None]:
    return PageCache(spec["source"]), None


class PreadCache(torch.utils.data.IterableDataset):
    """The other least way to read a sample out of a file in the page cache: one ``os.pread``
    of it from its open shard, with nothing else (no lookup, no check, no counter), the
    shards' places read before the clock. For large records a system call's fixed cost is
    small beside the faults of a first touch through a map (a worker maps each page once), so
    this is the faster of the two there; the page-cache ceiling is the faster of both."""

    def __init__(self, root: str) -> None:
        self.paths, places = [], []
        for k, (path, offsets) in enumerate(_shard_offsets(root)):
            self.paths.append(path)
            places += [(k, a, b - a) for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
        self.places = places

    def __iter__(self) -> Iterator[bytes]:
        fds = [os.open(path, os.O_RDONLY) for path in self.paths]  # this worker's own
        places, pread = self.places, os.pread
        for i in _my_share(len(places)):
            k, start, length = places[i]
            yield pread(fds[k], length, start)


def pread_cache(spec: dict) -> tuple[Any, None]:
    return PreadCache(spec["source"]), None


DATASETS = {
    "memory": memory,
    "page_cache": page_cache,
    "pread_cache": pread_cache,
    "files": files,
    "stoker": stoker,
}
OWN_WAY = {"wds": wds, "mosaic": mosaic, "litdata": litdata}  # each peer's loader, its way
CEILINGS = ("memory", "page_cache", "pread_cache")
MAP_STYLE = ("files",)
# What each loader imports, then the names it takes from it: stoker.stream loads a name's
# module on its first use, which would otherwise fall inside the clock (~45 ms).
LIBRARIES = {
    "stoker": ("stoker.stream", "StreamingDataset", "StreamingLoader"),
    "wds": ("webdataset",),
    "mosaic": ("streaming",),
    "litdata": ("litdata",),
}


def drop_in(spec: dict) -> Any:
    """A dataset inside torch's own DataLoader: per-sample, batch ``batch``, ``workers`` worker
    processes, one collate function; the map-style ones shuffled by the DataLoader, stoker's
    by itself."""
    ds, key = DATASETS[spec["dataset"]](spec)
    return DataLoader(
        ds,
        batch_size=spec["batch"],
        shuffle=True if spec["dataset"] in MAP_STYLE else None,
        num_workers=spec["workers"],
        collate_fn=functools.partial(collate, key=key),
        drop_last=True,
    )


def stoker_fastest(spec: dict) -> Any:
    """stoker as its docs advise for raw records: ``dtype=torch.uint8`` reads each sample
    straight into the batch (the same uint8 ``(batch, record)`` tensor) on reader threads of
    the training process, ``StreamingLoader(num_workers=0)``."""
    from stoker.stream import StreamingDataset, StreamingLoader

    ds = StreamingDataset(spec["source"], shuffle=True, seed=spec["seed"], dtype=torch.uint8)
    return StreamingLoader(ds, spec["batch"], num_workers=0)


# --------------------------------------------------------------------------------- one run
def run(spec: dict) -> dict:
    """One epoch of one loader, as a training loop's ``for batch in loader``. The clock starts
    before the loader is built (after the library's import) and stops at the last batch."""
    if spec["dataset"] in LIBRARIES:  # imports stay outside the clock
        library, *names = LIBRARIES[spec["dataset"]]
        for name in names:
            getattr(importlib.import_module(library), name)
    starts = np.asarray(spec["starts"]) if spec.get("starts") else None
    # The ceilings read their records (or places) before the clock: they are no part of it.
    built = drop_in(spec) if spec["dataset"] in CEILINGS else None
    # The imports' garbage is collected before the clock: left pending, it set off a full
    # collection in the middle of the epoch (~100-150 ms here, walking all of torch), in the
    # runs of the libraries whose imports had left the most.
    gc.collect()
    t0 = time.perf_counter()
    if built is not None:
        loader = built
    elif spec["dataset"] in OWN_WAY:
        loader = OWN_WAY[spec["dataset"]](spec)
    else:
        loader = stoker_fastest(spec) if spec.get("fastest") else drop_in(spec)
    ids, distinct = [], []
    first_s = last_s = None
    for batch in loader:
        last_s = time.perf_counter() - t0
        first_s = last_s if first_s is None else first_s
        got = batch_ids(batch)
        ids.append(got)
        if starts is not None:
            distinct.append(len(np.unique(np.searchsorted(starts, got, side="right"))))
        del batch  # released here, as a training step releases its batch
    every = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return {
        "samples": int(len(every)),
        "batches": len(ids),
        "first_batch_s": first_s,
        "epoch_s": last_s,
        "duplicates": int(len(every) - len(np.unique(every))),
        "out_of_range": int(((every < 0) | (every >= spec["n"])).sum()),
        "distinct_shards": float(np.mean(distinct)) if distinct else None,
    }


if __name__ == "__main__":
    if sys.argv[1] == "run":
        print(json.dumps(run(json.loads(sys.argv[2]))), flush=True)
    elif sys.argv[1] == "write":
        from _stream_writers import write

        fmt, src, dst, n = sys.argv[2:6]
        print(json.dumps(write(fmt, src, dst, int(n))), flush=True)
    else:
        raise SystemExit(__doc__)
