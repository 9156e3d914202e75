"""One checkpoint writer, timed as it really writes: ``torch.save`` of a state dict to a folder on
the tier (a file system: local NVMe, a Lustre or NetApp mount).

Two writers write the same bytes, one after the other, each with its file made durable (fsync)
before the clock stops:
- ``torch.save``: serialising. It pickles the dict and copies every tensor's bytes through
  Python's zip writer, one stream, through the page cache; its rate is what one process that
  calls ``torch.save`` gets (a DDP rank 0, a small job's lone writer).
- raw buffers: the tensors' own bytes, written as they lie in memory (as DCP and stoker's
  checkpoint format do), one stream, through the page cache;
- raw buffers, direct: the same with O_DIRECT, past the page cache (where the file system
  allows it), as a writer that must not fill the host's memory with dirty pages does.

The record (``stoker.measured/1``, source ``storage``, name ``single_writer``) carries both
rates; ``stoker plan --measured RECORD`` takes ``torch_save_write_bps`` as the VM's one
``torch.save`` stream (``torch_save_write``), the limit of a checkpoint written by one process.
The state lives in host memory: a GPU's state adds its device-to-host copy, which the plan
models apart.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from ..errors import StokerError
from .measured import Measured

CHUNK_BYTES = 256 * 2**20  # one tensor of the dict: a large layer's weights
NAME = "single_writer"


class WriterBenchError(StokerError):
    """The folder cannot take the test files, or torch is missing."""


def _state(size_bytes: int):  # type: ignore[no-untyped-def]
    """A state dict of ``size_bytes`` in bf16 tensors of CHUNK_BYTES (the last one smaller);
    random, so no file system or compression shortcut makes the write cheaper."""
    import torch

    g = torch.Generator().manual_seed(0)
    state, left, i = {}, size_bytes, 0
    while left > 0:
        n = min(CHUNK_BYTES, left) // 2
        state[f"layer{i}.weight"] = torch.randn(max(1, n), generator=g).to(torch.bfloat16)
        left -= CHUNK_BYTES
        i += 1
    return state


def _durable(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _raw(state: dict, path: Path) -> None:
    with open(path, "wb") as f:
        for tensor in state.values():
            f.write(tensor.view(-1).view(dtype=_uint8()).numpy().data)


def _raw_direct(state: dict, path: Path) -> None:
    """The same bytes with O_DIRECT: past the page cache, through one page-aligned buffer (the
    tail padded to a whole block, then the file cut back to its length)."""
    import mmap

    buf = mmap.mmap(-1, DIRECT_BUFFER_BYTES)  # anonymous maps are page-aligned
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_DIRECT", 0), 0o600)
    try:
        length, fill = 0, 0
        view = memoryview(buf)
        for tensor in state.values():
            data = memoryview(tensor.view(-1).view(dtype=_uint8()).numpy().data)
            while data:
                n = min(len(data), DIRECT_BUFFER_BYTES - fill)
                view[fill : fill + n] = data[:n]
                fill, data, length = fill + n, data[n:], length + n
                if fill == DIRECT_BUFFER_BYTES:
                    os.write(fd, view)
                    fill = 0
        if fill:
            block = -(-fill // DIRECT_BLOCK_BYTES) * DIRECT_BLOCK_BYTES
            os.write(fd, view[:block])
        os.ftruncate(fd, length)
    finally:
        os.close(fd)
        view.release()
        buf.close()


DIRECT_BUFFER_BYTES = 64 * 2**20
DIRECT_BLOCK_BYTES = 4096


def _uint8():  # type: ignore[no-untyped-def]
    import torch

    return torch.uint8


def bench_single_writer(folder: str | os.PathLike[str], size_bytes: int = 2 * 2**30) -> Measured:
    """Time one ``torch.save`` and one raw-buffer write of ``size_bytes`` into ``folder`` (each
    made durable) and return the record; the test files are removed after."""
    try:
        import torch
    except ImportError as exc:
        raise WriterBenchError("bench single-writer: needs torch (pip install torch)") from exc
    where = Path(folder)
    if not where.is_dir():
        raise WriterBenchError(
            f"bench single-writer: {where} is not a folder; give one on the tier"
        )
    if size_bytes < 2**20:
        raise WriterBenchError(f"bench single-writer: size {size_bytes} B; give at least 1 MiB")
    state = _state(size_bytes)
    written = sum(t.numel() * t.element_size() for t in state.values())
    rates: dict[str, float] = {}
    files = {
        "torch_save": where / ".stoker-single-writer.pt",
        "raw": where / ".stoker-raw.bin",
        "raw_direct": where / ".stoker-raw-direct.bin",
    }
    writers = {"torch_save": lambda p: torch.save(state, p), "raw": lambda p: _raw(state, p)}
    writers["raw_direct"] = lambda p: _raw_direct(state, p)
    try:
        for kind, path in files.items():
            start = time.perf_counter()
            try:
                writers[kind](path)
            except OSError as exc:
                # tmpfs and some FUSE mounts refuse O_DIRECT: that writer has no figure there
                if kind == "raw_direct" and exc.errno == errno.EINVAL:
                    continue
                raise
            _durable(path)
            rates[kind] = written / (time.perf_counter() - start)
    except OSError as exc:
        raise WriterBenchError(
            f"bench single-writer: cannot write {where}: {exc.strerror or exc}"
        ) from exc
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)
    return Measured(
        "storage",
        NAME,
        summary={
            "size_bytes": written,
            "torch_save_write_bps": rates["torch_save"],
            "raw_write_bps": rates["raw"],
            "raw_direct_write_bps": rates.get("raw_direct"),  # None: O_DIRECT refused there
            "torch_save_vs_raw": rates["torch_save"] / rates["raw"],
            "streams": 1,
        },
    )
