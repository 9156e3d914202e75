"""One rank's shard file, laid out first in host memory (the snapshot), then written in one pass.

    [tensor 0][pad][tensor 1][pad] ... [skeleton][index][footer]

* tensors: raw bytes, each at a 64-byte offset so a load can view them in place;
* skeleton: the state with each tensor replaced by ``{"__stoker_tensor__": i}``, pickled by
  ``torch.save`` and read back with ``torch.load(weights_only=True)`` unless the caller trusts
  the file (arbitrary Python objects need that);
* index: JSON ``{"format": 2, "tensors": [[offset, nbytes, dtype, shape, device, name], ...],
  "skeleton": [offset, length]}``, one entry per tensor of the state, in the skeleton's order;
  ``name`` is the tensor's path in the state (``['model']['w']``), and ``offset`` is null for a
  replicated tensor that another rank's file holds (the manifest says where: _replicated.py).
  This file's replicated tensors come first, then its private ones. Format 1 (no names, every
  tensor here) is still read;
* footer: the index's length (8 bytes, little endian) and ``STKCKPT1``.

The whole file's XXH3-128 goes into the checkpoint manifest; a load checks it before it trusts
a single byte. Writing uses O_DIRECT where the file system allows it (the page cache would only
add a copy) and fsyncs before the rename that makes the file visible.
"""

from __future__ import annotations

import io
import json
import logging
import mmap
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from ..errors import CheckpointError, CorruptCheckpointError, UntrustedStateError
from . import _device_copy
from ._device_copy import DeviceCopies
from ._host_buffer import HostBuffer
from ._replicated import Plan

log = logging.getLogger("stoker.checkpoint")

MAGIC = b"STKCKPT1"
ALIGN = 64
CHUNK = 16 << 20  # a multiple of every O_DIRECT alignment
DIRECT_ALIGN = 4096
TENSOR_MARK = "__stoker_tensor__"


def _torch() -> Any:
    import torch

    return torch


# ------------------------------------------------------------------------------ skeleton
def flatten(state: Any) -> tuple[Any, list[tuple[str, Any]]]:
    """The state with tensors replaced by marks, and the tensors with their paths (for errors)."""
    torch = _torch()
    tensors: list[tuple[str, Any]] = []

    def walk(obj: Any, path: str) -> Any:
        if isinstance(obj, torch.Tensor):
            if type(obj).__name__ == "DTensor":  # torch.distributed.tensor's: global shape
                raise CheckpointError(
                    f"state{path}: a DTensor ({getattr(obj, 'placements', '?')}) cannot be "
                    "saved by save(): save it through torch.distributed.checkpoint "
                    "(ckpt.dcp_writer(step)), which reshards, or save its local part "
                    "(tensor.to_local()), naming what every rank holds alike in replicated="
                )
            if obj.is_sparse or obj.is_quantized or obj.layout != torch.strided:
                raise CheckpointError(
                    f"state{path}: a {obj.layout} tensor cannot be checkpointed; "
                    "save a dense copy (tensor.to_dense()) instead"
                )
            tensors.append((path, obj))
            return {TENSOR_MARK: len(tensors) - 1}
        if type(obj) in (dict, _ordered_dict()):
            out = type(obj)((k, walk(v, f"{path}[{k!r}]")) for k, v in obj.items())
            return _with_attributes(out, obj)
        if type(obj) in (list, tuple):
            return type(obj)(walk(v, f"{path}[{i}]") for i, v in enumerate(obj))
        return obj

    return walk(state, ""), tensors


def _ordered_dict() -> type:
    from collections import OrderedDict

    return OrderedDict


def _with_attributes(out: Any, like: Any) -> Any:
    """``out`` with ``like``'s attributes (a state_dict's ``_metadata``: module versions)."""
    for name, value in getattr(like, "__dict__", {}).items():  # (a plain dict has none)
        setattr(out, name, value)
    return out


def unflatten(skeleton: Any, tensors: list[Any]) -> Any:
    """``flatten`` undone. Only the dicts and lists it walked are rebuilt: other containers
    (a Counter, a defaultdict) were pickled whole and come back as they were."""
    if type(skeleton) in (dict, _ordered_dict()):
        if len(skeleton) == 1 and TENSOR_MARK in skeleton:
            return tensors[skeleton[TENSOR_MARK]]
        out = type(skeleton)((k, unflatten(v, tensors)) for k, v in skeleton.items())
        return _with_attributes(out, skeleton)
    if type(skeleton) in (list, tuple):
        return type(skeleton)(unflatten(v, tensors) for v in skeleton)
    return skeleton


# ------------------------------------------------------------------------------ snapshot
@dataclass
class Snapshot:
    """A state laid out exactly as its shard file in one anonymous mapping, reused across saves
    so that twenty saves do not need twenty buffers."""

    buffer: mmap.mmap
    size: int  # bytes of the file; the buffer may be larger
    host: HostBuffer | None = None  # the buffer's owner: its prefault thread, its pinning
    pending: DeviceCopies | None = None  # GPU copies into the buffer that may not have landed
    # the replicated tensors this file holds: name -> [offset, nbytes, dtype, shape, device]
    replicated: dict[str, list[Any]] | None = None
    plan: Plan | None = None  # save(replicated=...)'s split, or None (every tensor is here)

    @property
    def view(self) -> memoryview:
        return memoryview(self.buffer)[: self.size]

    def wait_copied(self) -> None:
        """Block until every byte is in the buffer (GPU copies run on after ``save`` returns)."""
        if self.pending is not None:
            self.pending.wait()


RESERVE_SLACK = 64 << 10  # for a skeleton that grows a little (a larger step number)


def _tensor_view(buffer: Any, offset: int, nbytes: int, dtype: Any, shape: list[int]) -> Any:
    torch = _torch()
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(buffer, dtype=torch.uint8, count=nbytes, offset=offset)
    return raw.view(dtype).view(shape)


def _layout(
    state: Any, split: Any = None
) -> tuple[list[tuple[str, Any]], list[list[Any]], int, bytes, Plan | None]:
    """The tensors, their index entries, where the tensors end, the bytes after them
    (skeleton, index, footer): the shard file without its tensor bytes; and the plan. With
    ``split`` (``split(tensors) -> Plan`` from flatten's tensors), a replicated tensor that
    another rank writes gets an entry with offset None; this rank's replicated ones come first."""
    torch = _torch()
    skeleton, tensors = flatten(state)
    plan = split(tensors) if split is not None else None
    entries: list[list[Any]] = [[] for _ in tensors]
    order = list(range(len(tensors)))
    if plan is not None:  # replicated first: one contiguous range for the other ranks to read
        order.sort(key=lambda i: tensors[i][0] not in plan.owner)
    offset = 0
    for i in order:
        path, t = tensors[i]
        nbytes = t.numel() * t.element_size()
        here = plan is None or plan.holds(path)
        if here:
            offset = -(-offset // ALIGN) * ALIGN
        dtype = str(t.dtype).removeprefix("torch.")
        entries[i] = [offset if here else None, nbytes, dtype, list(t.shape), str(t.device), path]
        if here:
            offset += nbytes
    skel_io = io.BytesIO()
    torch.save(skeleton, skel_io)
    skel = skel_io.getvalue()
    index = json.dumps(
        {"format": 2, "tensors": entries, "skeleton": [offset, len(skel)]}, separators=(",", ":")
    ).encode()
    return tensors, entries, offset, skel + index + len(index).to_bytes(8, "little") + MAGIC, plan


def reserve_snapshot(like: Any, reuse: Snapshot | None = None) -> Snapshot:
    """An empty snapshot whose buffer fits a state shaped like ``like`` (its tensors may be on
    the meta device: only shapes and dtypes count), faulted in on a background thread, and
    pinned when ``like`` holds CUDA tensors. ``reuse`` is kept when it fits already."""
    tensors, _, offset, tail, _ = _layout(like)
    size = offset + len(tail) + RESERVE_SLACK
    if reuse is not None and len(reuse.buffer) >= size:
        return reuse
    cuda = _device_copy.backend()
    on_device = [t for _, t in tensors if cuda.available() and cuda.is_device(t)]
    pinner = cuda.pinner(cuda.device(on_device[0])) if on_device else None
    host = HostBuffer(size, prefault=True, pin=pinner)
    return Snapshot(host.mmap, 0, host)


def take_snapshot(state: Any, reuse: Snapshot | None = None, split: Any = None) -> Snapshot:
    """Copy every tensor of ``state`` into host memory (so the caller may change the state as
    soon as this returns) and lay the shard file out around them. CPU tensors are copied
    before this returns; CUDA tensors on a side stream (_device_copy.py), which the writer
    waits for (``Snapshot.wait_copied``) and the caller's later GPU work is ordered after.
    ``split(tensors) -> Plan`` (save(replicated=...)): only the tensors this rank writes."""
    torch = _torch()
    tensors, entries, offset, tail, plan = _layout(state, split)
    size = offset + len(tail)
    if reuse is not None and len(reuse.buffer) >= size:
        buffer, host = reuse.buffer, reuse.host
        if host is not None:
            host.wait()  # a reserve() still faulting pages in: the rest is ours to wait for
    else:
        if reuse is not None and reuse.host is not None and reuse.size == 0:
            log.info(
                "the state (%d bytes laid out) outgrew the reserved host buffer (%d): a new "
                "one is made now, and this save pays for its page faults",
                size,
                len(reuse.buffer),
            )
        host = HostBuffer(size, prefault=False)  # the copy below faults its pages in
        buffer = host.mmap
    cuda = _device_copy.backend()
    copies = DeviceCopies(cuda) if cuda.available() else None
    if copies is not None and host is not None and not host.pinned:
        on_device = [t for _, t in tensors if cuda.is_device(t)]
        if on_device:  # once per buffer (reserve() does it ahead, in the background)
            host.pin(cuda.pinner(cuda.device(on_device[0])))
    with torch.no_grad():
        for (_, t), (off, nbytes, _, shape, _, _) in zip(tensors, entries, strict=True):
            if not nbytes or off is None:
                continue
            dst = _tensor_view(buffer, off, nbytes, t.dtype, shape)
            if copies is not None and cuda.is_device(t):
                copies.copy(dst, t)
            else:
                dst.copy_(t)
    buffer[offset:size] = tail
    pending = copies.finish() if copies is not None else None
    replicated = None
    if plan is not None:
        replicated = {e[5]: e[:5] for e in entries if e[0] is not None and e[5] in plan.owner}
    return Snapshot(buffer, size, host, pending, replicated, plan)


# ------------------------------------------------------------------------------ write
def _open_direct(path: Path) -> tuple[int, bool]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    try:
        return os.open(path, flags | getattr(os, "O_DIRECT", 0), 0o644), True
    except OSError:  # tmpfs and some network file systems refuse O_DIRECT
        return os.open(path, flags, 0o644), False


def write_snapshot(snapshot: Snapshot, partial: Path) -> str:
    """Write the snapshot to ``partial`` and fsync it; returns the file's XXH3-128 (hex)."""
    snapshot.wait_copied()  # GPU copies may still be landing in the buffer
    view, digest = snapshot.view, xxhash.xxh3_128()
    fd, direct = _open_direct(partial)
    try:
        aligned = (snapshot.size // DIRECT_ALIGN) * DIRECT_ALIGN if direct else snapshot.size
        done = 0
        while done < aligned:
            chunk = view[done : min(done + CHUNK, aligned)]
            written = os.write(fd, chunk)
            digest.update(chunk[:written])
            done += written
        if done < snapshot.size:  # the unaligned tail goes through the page cache
            with open(partial, "r+b") as tail:
                tail.seek(done)
                tail.write(view[done:])
                digest.update(view[done:])
                tail.flush()
                os.fsync(tail.fileno())
        os.fsync(fd)
    finally:
        os.close(fd)
    return digest.hexdigest()


def tensor_hashes(snapshot: Snapshot) -> dict[str, list[Any]]:
    """The replicated tensors of a written snapshot with the XXH3-128 of each one's bytes, as
    the manifest records them (other ranks read them by range and check these)."""
    out: dict[str, list[Any]] = {}
    view = snapshot.view
    for name, (offset, nbytes, dtype, shape, device) in (snapshot.replicated or {}).items():
        digest = xxhash.xxh3_128(view[offset : offset + nbytes]).hexdigest()
        out[name] = [offset, nbytes, dtype, shape, device, digest]
    return out


# ------------------------------------------------------------------------------ read
def hash_file(path: Path, size: int) -> str:
    """XXH3-128 of a file, read in chunks into one reused buffer; checks the size first."""
    actual = path.stat().st_size
    if actual != size:
        raise CorruptCheckpointError(f"{path}: {actual} bytes, the manifest says {size}")
    digest, buf = xxhash.xxh3_128(), bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            digest.update(memoryview(buf)[:n])
    return digest.hexdigest()


def read_verified(path: Path, size: int, xxh3: str) -> mmap.mmap:
    """The file's bytes in host memory, after its size and hash matched the manifest."""
    try:
        actual = path.stat().st_size
        if actual != size:
            raise CorruptCheckpointError(
                f"{path}: {actual} bytes, the manifest says {size}; the file is damaged"
            )
        buffer, digest = mmap.mmap(-1, max(size, 1)), xxhash.xxh3_128()
        view, done = memoryview(buffer), 0
        with open(path, "rb", buffering=0) as f:
            while done < size:
                n = f.readinto(view[done : min(done + CHUNK, size)])
                if not n:
                    break
                digest.update(view[done : done + n])
                done += n
    except FileNotFoundError as exc:
        raise CheckpointError(f"{path} is missing") from exc
    if digest.hexdigest() != xxh3:
        raise CorruptCheckpointError(
            f"{path}: hash {digest.hexdigest()} does not match the manifest's {xxh3}; the file "
            "is corrupt"
        )
    return buffer


def read_index(buffer: Any, size: int, path: Path) -> dict[str, Any]:
    """A verified shard's index (format 1 or 2)."""
    if size < 16 or buffer[size - len(MAGIC) : size] != MAGIC:
        raise CorruptCheckpointError(f"{path}: not a stoker checkpoint shard (no footer)")
    index_len = int.from_bytes(buffer[size - 16 : size - 8], "little")
    return json.loads(buffer[size - 16 - index_len : size - 16])


def elsewhere(index: dict[str, Any]) -> list[str]:
    """The names of the replicated tensors the state needs that another rank's file holds."""
    return [e[5] for e in index["tensors"] if len(e) > 5 and e[0] is None]


def restore(
    buffer: mmap.mmap,
    size: int,
    path: Path,
    *,
    map_location: Any,
    trusted: bool,
    others: dict[str, Any] | None = None,
) -> Any:
    """Rebuild the state from a verified shard; tensors view ``buffer`` unless moved.
    ``others``: name -> the raw bytes (verified) of each tensor that other files hold."""
    torch = _torch()
    index = read_index(buffer, size, path)
    skel_off, skel_len = index["skeleton"]
    try:
        skeleton = torch.load(
            io.BytesIO(buffer[skel_off : skel_off + skel_len]), weights_only=not trusted
        )
    except pickle.UnpicklingError as exc:  # torch's advice names its own knobs, not ours
        if trusted:
            raise
        found = re.search(r"GLOBAL (\S+)", str(exc))
        raise UntrustedStateError(
            f"{path}: the state holds {found.group(1) if found else 'an object'}, not only "
            "tensors and plain containers; if you trust this checkpoint, load it with "
            "load(trusted=True) (unpickling runs code)"
        ) from exc
    tensors = []
    for offset, nbytes, dtype, shape, device, *name in index["tensors"]:
        if offset is None:  # a replicated tensor held by another rank's file
            t = _tensor_view((others or {})[name[0]], 0, nbytes, getattr(torch, dtype), shape)
        else:
            t = _tensor_view(buffer, offset, nbytes, getattr(torch, dtype), shape)
        target = map_location if map_location is not None else _available(device)
        tensors.append(t.to(target) if str(target) != "cpu" else t)
    return unflatten(skeleton, tensors)


def _available(device: str) -> str:
    torch = _torch()
    if device.startswith("cuda") and torch.cuda.is_available():
        return device
    return "cpu"
