"""The stream benchmark's dataset, in every loader's format, and the page cache around it.

Two shapes (``SHAPES``): MLPerf Storage's resnet50 record (114,660 B), where the bytes decide,
and a small record (2,048 B: a tokenized text row, a feature vector), where the per-sample work
of each loader decides. For each, one file per sample is generated once (random bytes, fixed by
a seed; each record's first 8 bytes are its id, little endian) into
``.bench/stream/SHAPE-SAMPLES/files``; every other format is written from those files
(untimed), so every loader reads the same bytes. Formats, all ~64 MiB
per shard: stoker ``ShardWriter(shard_size="64MiB", codec="bytes")``; WebDataset tars; Mosaic
MDS (one ``bytes`` column); LitData ``optimize`` (one worker, so chunks keep the id order).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import subprocess
import time
from pathlib import Path

import _stream_peers as sp
import numpy as np

SEED = 20261201
# shape: (record bytes, samples by default). The small shape's samples make about as many shards
# (7 of 64 MiB) as a block of stoker's (8), and an epoch of a few seconds, as the large one's.
SHAPES = {"resnet50": (114_660, 20_000), "small": (2_048, 200_000)}
# Bumped when stoker's writer changes what it writes, so a saved stoker format is written again.
STOKER_WRITER = 2
FORMATS = ("files", "stoker", "wds", "mosaic", "litdata")


def data_dir(shape: str, samples: int) -> Path:
    return sp.BENCH / "stream" / f"{shape}-{samples}"


def generate(samples: int, record: int, root: Path) -> None:
    """One file per sample, random bytes with the id in front, fixed by the seed."""
    stamp = root.with_suffix(".json")
    want = json.dumps({"samples": samples, "record": record, "seed": SEED})
    if stamp.exists() and stamp.read_text() == want:
        return
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng([SEED, samples])
    for i, path in enumerate(sp.file_paths(str(root), samples)):
        data = bytearray(rng.bytes(record))
        data[: sp.ID_BYTES] = i.to_bytes(sp.ID_BYTES, "little")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    stamp.write_text(want)


def ensure_formats(shape: str, samples: int, peer_python: Path) -> dict[str, dict]:
    """Every format of ``shape``, written once from the files: {format: {dir, starts, files,
    bytes}}. ``starts``: the first id of each shard (to count the distinct shards of a batch)."""
    base = data_dir(shape, samples)
    files = base / "files"
    generate(samples, SHAPES[shape][0], files)
    key = hashlib.blake2b(files.with_suffix(".json").read_bytes(), digest_size=8).hexdigest()
    out: dict[str, dict] = {"files": {"dir": str(files), "starts": None}}
    for fmt in FORMATS[1:]:
        root = base / fmt
        stamp = root.with_suffix(".json")
        want = f"{key}-{STOKER_WRITER}" if fmt == "stoker" else key
        if stamp.exists() and json.loads(stamp.read_text())["key"] == want:
            out[fmt] = json.loads(stamp.read_text())
            continue
        shutil.rmtree(root, ignore_errors=True)
        print(f"  writing the {shape} dataset as {fmt}", flush=True)
        start = time.perf_counter()
        if fmt == "stoker":
            starts = write_stoker(samples, files, root)
        else:
            cmd = [str(peer_python), sp.__file__, "write", fmt, str(files), str(root), str(samples)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"writing {fmt} failed:\n{done.stderr[-3000:]}")
            starts = json.loads(done.stdout.strip().splitlines()[-1])
        info = {"dir": str(root), "starts": starts, "key": want}
        info["write_s"] = time.perf_counter() - start
        stamp.write_text(json.dumps(info))
        out[fmt] = info
    for info in out.values():
        info["files"] = sorted(str(p) for p in Path(info["dir"]).rglob("*") if p.is_file())
        info["bytes"] = sum(os.path.getsize(p) for p in info["files"])
    return out


def write_stoker(samples: int, files: Path, root: Path) -> list[int]:
    from stoker.stream import ShardWriter

    with ShardWriter(root, shard_size="64MiB", codec="bytes") as w:
        for path in sp.file_paths(str(files), samples):
            with open(path, "rb") as f:
                w.write(f.read())
    return [w.index.first(i) for i in range(len(w.index.shards))]


# --------------------------------------------------------------------------------- page cache
def evict(paths: list[str]) -> None:
    """Drop these files from the page cache (stoker's own eviction: written back, then
    dropped from every CPU)."""
    from stoker.measure.storage import evict as evict_one

    for path in paths:
        evict_one(Path(path))


def prime(paths: list[str]) -> float:
    """Read every file once with O_DIRECT, past this machine's page cache, so that every
    loader's cold run meets the host's cache of the virtual disk in the same state (the first
    read of freshly written data ran 10-50x slower than later cold reads, 2026-12-01). Returns
    the seconds it took."""
    start, buf = time.perf_counter(), mmap.mmap(-1, 16 << 20)  # (page-aligned, as O_DIRECT asks)
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            pos = 0
            while (n := os.preadv(fd, [buf], pos)) == len(buf):  # short: the end of the file
                pos += n
        finally:
            os.close(fd)
    return time.perf_counter() - start


def warm(paths: list[str]) -> None:
    """Read into the page cache whichever of ``paths`` is not wholly there already."""
    for path in paths:
        with open(path, "rb") as f:
            if resident_bytes([path]) != os.fstat(f.fileno()).st_size:
                while f.read(16 << 20):
                    pass


def resident_bytes(paths: list[str]) -> int | None:
    """Bytes of these files in the page cache (fincore; at most 200 files looked at)."""
    if not shutil.which("fincore"):
        return None
    step = max(1, len(paths) // 200)
    done = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES", *paths[::step]],
        capture_output=True,
        text=True,
    )
    return sum(int(v) for v in done.stdout.split()) * step if done.returncode == 0 else None
