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

Every loader hands the consumer the same thing: a batch of ``batch`` samples as uint8 tensors,
stacked into one ``(batch, record_bytes)`` tensor when the records have one size (resnet50),
else a list of one tensor per sample (unet3d). The same ``collate`` does it for every loader:
``torch.frombuffer`` views of the samples' bytes, stacked by ``default_collate`` (which, inside
a DataLoader worker, writes the stack straight into shared memory); a list of tensors is moved
into shared memory when the worker sends it. Either way: one copy per sample in the worker,
none in the training process.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import warnings
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
def collate(samples: list[Any], stack: bool = True, key: str | None = None) -> Any:
    """The batch every loader hands over: see the module docstring. ``key`` picks the bytes
    out of a dict sample (Mosaic)."""
    if key is not None:
        samples = [s[key] for s in samples]
    views = [torch.frombuffer(s, dtype=torch.uint8) for s in samples]
    return default_collate(views) if stack else views


def batch_ids(batch: Any) -> np.ndarray:
    """The consumer's touch: each sample's id, from its first 8 bytes."""
    if isinstance(batch, torch.Tensor):
        return batch[:, :ID_BYTES].numpy().copy().view("<i8").reshape(-1)
    return np.array([int(np.frombuffer(t[:ID_BYTES].numpy(), "<i8")[0]) for t in batch])


# --------------------------------------------------------------------------------- loaders
def _collate(spec: dict, key: str | None = None) -> Any:
    return functools.partial(collate, stack=spec["stack"], key=key)


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


def make_files(spec: dict) -> Any:
    ds = Files(file_paths(spec["source"], spec["n"]))
    return DataLoader(
        ds,
        batch_size=spec["batch"],
        shuffle=True,
        num_workers=spec["workers"],
        collate_fn=_collate(spec),
        drop_last=True,
    )


def make_stoker(spec: dict, workers: int = 0) -> Any:
    """stoker as its docs advise for raw records: ``dtype=torch.uint8`` reads each sample
    straight into the batch (a uint8 ``(batch, record)`` tensor, or a list of uint8 tensors when
    sizes differ: what ``collate`` builds for the others) on reader threads of the training
    process (``num_workers=0``); worker processes are for CPU-heavy transforms."""
    from stoker.stream import StreamingDataset, StreamingLoader

    ds = StreamingDataset(
        spec["source"], spec.get("cache"), shuffle=True, seed=spec["seed"], dtype=torch.uint8
    )
    return StreamingLoader(ds, spec["batch"], num_workers=workers)


def make_wds(spec: dict) -> Any:
    import webdataset as wds

    ds = (
        wds.WebDataset(
            spec["urls"],
            shardshuffle=len(spec["urls"]),
            seed=spec["seed"],
            nodesplitter=None,
            workersplitter=wds.split_by_worker,
            empty_check=False,
        )
        .shuffle(spec["wds_buffer"])
        .to_tuple("bin")
        .batched(spec["batch"], collation_fn=_wds_collate(spec), partial=True)
    )
    return wds.WebLoader(ds, batch_size=None, num_workers=spec["workers"])


def _wds_collate(spec: dict) -> Any:
    return functools.partial(_untuple, stack=spec["stack"])


def _untuple(samples: list[tuple[bytes]], stack: bool) -> Any:
    return collate([s[0] for s in samples], stack)


def make_mosaic(spec: dict) -> Any:
    from streaming import StreamingDataset

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
        collate_fn=_collate(spec, key="x"),
        drop_last=True,
    )


def make_litdata(spec: dict) -> Any:
    import litdata as ld

    ds = ld.StreamingDataset(
        spec["source"],
        cache_dir=spec.get("cache"),
        shuffle=True,
        seed=spec["seed"],
        storage_options=spec.get("storage_options"),
    )
    return ld.StreamingDataLoader(
        ds,
        batch_size=spec["batch"],
        num_workers=spec["workers"],
        collate_fn=_collate(spec),
        drop_last=True,
    )


LIBRARIES = {
    "stoker": "stoker.stream",
    "stoker-workers": "stoker.stream",
    "wds": "webdataset",
    "mosaic": "streaming",
    "litdata": "litdata",
}
MAKERS = {
    "stoker": make_stoker,
    "stoker-workers": lambda spec: make_stoker(spec, spec["workers"]),
    "files": make_files,
    "wds": make_wds,
    "mosaic": make_mosaic,
    "litdata": make_litdata,
}


# --------------------------------------------------------------------------------- one run
def run(spec: dict) -> dict:
    """One epoch of one loader. The clock starts before the loader is built (after imports).

    The loop is a training loop's ``for batch in loader``: a batch is released when the next
    one replaces it, on the loop's thread (for a 46 MB batch in shared memory that takes
    ~15 ms here, for every loader alike), then the emulated step sleeps ``compute_s``."""
    compute_s = spec.get("compute_s", 0.0)
    starts = np.asarray(spec["starts"]) if spec.get("starts") else None
    if spec["loader"] in LIBRARIES:  # imports stay outside the clock
        __import__(LIBRARIES[spec["loader"]])
    if spec["loader"] == "mosaic":  # shared memory a killed run may have left
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    t0 = time.perf_counter()
    loader = MAKERS[spec["loader"]](spec)
    it = iter(loader)
    ids, distinct, sizes = [], [], []
    first_s = last_s = None
    sleep_s = 0.0  # emulated compute of batches 2..n
    done_first = done_last = 0.0  # end of the first and the last batch's compute
    while True:
        try:
            batch = next(it)
        except StopIteration:
            break
        got = time.perf_counter()
        got_ids = batch_ids(batch)
        ids.append(got_ids)
        sizes.append(len(got_ids))
        if starts is not None:
            distinct.append(len(np.unique(np.searchsorted(starts, got_ids, side="right"))))
        if compute_s:
            a = time.perf_counter()
            time.sleep(compute_s)
            if first_s is not None:
                sleep_s += time.perf_counter() - a
        done = time.perf_counter()
        if first_s is None:
            first_s, done_first = got - t0, done
        last_s, done_last = got - t0, done
    every = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    out = {
        "loader": spec["loader"],
        "samples": int(len(every)),
        "batches": len(sizes),
        "first_batch_s": first_s,
        "epoch_s": last_s,
        "duplicates": int(len(every) - len(np.unique(every))),
        "out_of_range": int(((every < 0) | (every >= spec["n"])).sum()),
        "distinct_shards": float(np.mean(distinct)) if distinct else None,
        "au": sleep_s / (done_last - done_first) if compute_s and len(sizes) > 1 else None,
    }
    if spec["loader"].startswith("stoker"):
        out["stoker_metrics"] = loader.metrics.to_dict()
    return out


# --------------------------------------------------------------------------------- writers
def write(fmt: str, src: str, dst: str, n: int) -> list[int]:
    """The dataset's ``n`` one-file samples under ``src`` in format ``fmt`` under ``dst``, in
    id order; returns the first id of each shard (to count distinct shards per batch)."""
    paths = file_paths(src, n)
    Path(dst).mkdir(parents=True, exist_ok=True)
    if fmt == "wds":
        return _write_wds(paths, dst)
    if fmt == "mosaic":
        return _write_mds(paths, dst)
    if fmt == "litdata":
        return _write_litdata(paths, dst)
    raise SystemExit(f"unknown format {fmt}")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write_wds(paths: list[str], dst: str) -> list[int]:
    import webdataset as wds

    starts: list[int] = []
    name = None
    with wds.ShardWriter(
        os.path.join(dst, "shard-%06d.tar"), maxsize=SHARD_BYTES, maxcount=1 << 30, verbose=0
    ) as sink:
        for i, path in enumerate(paths):
            sink.write({"__key__": f"{i:07d}", "bin": _read(path)})
            if sink.fname != name:  # this sample opened a new tar
                starts.append(i)
                name = sink.fname
    return starts


def _write_mds(paths: list[str], dst: str) -> list[int]:
    from streaming import MDSWriter

    with MDSWriter(out=dst, columns={"x": "bytes"}, size_limit=SHARD_BYTES) as w:
        for path in paths:
            w.write({"x": _read(path)})
    index = json.loads(Path(dst, "index.json").read_text())
    return _starts([s["samples"] for s in index["shards"]])


def _write_litdata(paths: list[str], dst: str) -> list[int]:
    import litdata as ld

    ld.optimize(
        fn=_read,
        inputs=paths,
        output_dir=dst,
        chunk_bytes=SHARD_BYTES,
        num_workers=1,
        mode="overwrite",
    )
    index = json.loads(Path(dst, "index.json").read_text())
    return _starts([c["chunk_size"] for c in index["chunks"]])


def _starts(counts: list[int]) -> list[int]:
    return [0, *np.cumsum(counts)[:-1].tolist()]


if __name__ == "__main__":
    if sys.argv[1] == "run":
        print(json.dumps(run(json.loads(sys.argv[2]))), flush=True)
    elif sys.argv[1] == "write":
        fmt, src, dst, n = sys.argv[2:6]
        print(json.dumps(write(fmt, src, dst, int(n))), flush=True)
    else:
        raise SystemExit(__doc__)
