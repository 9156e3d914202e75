"""The dataset in each peer's own format (``python bench/_stream_peers.py write FORMAT SRC DST
N`` runs ``write`` in the peers' environment): WebDataset tars, Mosaic's MDS, LitData's chunks,
each shard about SHARD_BYTES, samples in id order."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
from _stream_peers import SHARD_BYTES, file_paths


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
