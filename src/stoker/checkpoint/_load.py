"""Finding and loading the newest checkpoint that verifies, on whichever tier has it.

Every rank proposes the steps it can see committed; all try the newest of the union; the step
is taken only when every rank loaded and verified its shard, so ranks never resume from
different steps. A shard missing or corrupt on the fast tier is fetched again from the durable
tier (which repairs the fast copy) before the step is given up.

A step saved with ``replicated=`` (format /2) holds each replicated tensor in one rank's file
only: a rank reads its own file whole (checked against the manifest's XXH3 of the file), then
the replicated tensors other files hold, by range, each checked against the XXH3 of its bytes
that the manifest records (a ranged read cannot be checked against a whole file's hash, and
fetching whole files would read every rank's private part on every rank). Each range comes
from the fast tier when the file is there (another node's files are not, on local disks),
else from the durable tier. On another world size, the state comes from rank 0's file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import xxhash

from ..errors import CheckpointError, CorruptCheckpointError, StokerError, UntrustedStateError
from ..store import fetch_ranges
from ._group import Group
from ._manifest import CheckpointManifest, FileRecord, shard_name, step_dir
from ._shardfile import elsewhere, read_index, read_verified, restore
from ._tier import Tier

log = logging.getLogger("stoker.checkpoint")
RANGE = 16 << 20  # a ranged read's piece
IN_FLIGHT = 8


@dataclass
class Restored:
    step: int
    state: Any
    tier: str  # where this rank's shard was read: "fast" or "durable"
    skipped: dict[int, str] = field(default_factory=dict)  # newer steps that did not load: why
    files: dict[str, str] = field(default_factory=dict)  # each file read -> the tier it came from


def committed_steps(
    tiers: list[Tier], step: int | None = None, unreachable: list[tuple[Tier, str]] | None = None
) -> dict[int, list[Tier]]:
    """Step -> the tiers (fastest first) where it is committed. A tier that cannot be listed
    is left out (a durable tier out of reach must not block a local load), and added to
    ``unreachable`` with the reason when the caller keeps count."""
    found: dict[int, list[Tier]] = {}
    for tier in tiers:
        try:
            steps = tier.steps()
        except StokerError as exc:
            log.warning("%s; going on with the other tiers", exc)
            if unreachable is not None:
                unreachable.append((tier, str(exc)))
            continue
        for s, listing in steps.items():
            if listing.committed and (step is None or s == step):
                found.setdefault(s, []).append(tier)
    return found


def fetch(tier: Tier, fast: Tier, step: int, name: str, manifest: CheckpointManifest) -> None:
    """Copy one file of a committed step from ``tier`` into the fast tier, verified."""
    record = manifest.file(name)
    partial = fast.partial(step, name)
    tier.download(step, name, record.size, partial)
    read_verified(partial, record.size, record.xxh3)  # raises on a bad copy, before publishing
    fast.publish(step, name)


def load_newest(
    tiers: list[Tier],
    group: Group,
    step: int | None,
    *,
    fallback: bool,
    map_location: Any,
    trusted: bool,
    reshard: bool = False,
) -> Restored:
    found = committed_steps(tiers, step)
    proposals = group.all_gather(sorted(found), "load")
    candidates = sorted({s for p in proposals for s in p}, reverse=True)
    if not candidates:
        where = ", ".join(str(t) for t in tiers)
        what = f"step {step} is" if step is not None else "complete checkpoint is"
        raise CheckpointError(
            f"no {what} on {where} (a step without its manifest.json is incomplete)"
        )
    errors: list[CheckpointError] = []
    skipped: dict[int, str] = {}
    for s in candidates:
        restored, error = None, None
        try:
            restored = _load_step(s, found.get(s, []), tiers, group, map_location, trusted, reshard)
        except CheckpointError as exc:
            error = exc
            errors.append(exc)
        outcomes = group.all_gather(_outcome(error), "load")
        if all(o == "ok" for o in outcomes):
            assert restored is not None
            if restored.manifest.world_size == group.world_size:  # (else the files are not here)
                _repair_fast_manifest(tiers[0], restored.manifest, group)
            return Restored(restored.step, restored.state, restored.tier, skipped, restored.files)
        if "untrusted" in outcomes:  # not damage: an older step would not load either
            raise error or CheckpointError(
                f"step {s}: another rank's state needs load(trusted=True) (see its error)"
            )
        if not fallback and isinstance(error, CorruptCheckpointError):
            # the advice belongs to load; a pull of the same bytes says what it can do instead
            raise CorruptCheckpointError(
                f"{error} (load(fallback=True) takes the previous verified checkpoint)"
            ) from error
        if not fallback:
            raise error or CheckpointError(
                f"step {s}: another rank could not load its shard (see that rank's error)"
            )
        why = str(error) if error else "another rank could not load its shard"
        skipped[s] = why
        log.warning("step %d does not load (%s); trying the previous checkpoint", s, why)
    kind = (
        CorruptCheckpointError
        if errors and all(isinstance(e, CorruptCheckpointError) for e in errors)
        else CheckpointError
    )
    raise kind("no checkpoint loads: " + "; ".join(str(e) for e in errors))


def _repair_fast_manifest(fast: Tier, manifest: CheckpointManifest, group: Group) -> None:
    """Every rank's shard of the loaded step is now on the fast tier, verified (read there, or
    fetched from the durable tier); a fast manifest that is missing, unreadable or different
    is written again from the one the load used, so the next load reads the fast tier. The
    lowest rank on each fast tier writes it (rank 0 alone, on a tier every rank shares)."""

    def bad() -> bool:
        try:
            return fast.manifest(manifest.step) != manifest
        except CheckpointError:
            return True

    if not any(group.all_gather(bad(), "load")):
        return
    if group.node_leader and bad():
        fast.commit(manifest, pointer=False)
    group.all_gather(None, "load")


def _outcome(error: CheckpointError | None) -> str:
    if error is None:
        return "ok"
    # not damage: the same on every step, so no older step is tried
    return "untrusted" if isinstance(error, UntrustedStateError | _Refused) else "failed"


@dataclass
class _Loaded:
    step: int
    state: Any
    tier: str
    manifest: CheckpointManifest
    files: dict[str, str]


def _load_step(
    step: int,
    tiers: list[Tier],
    every: list[Tier],
    group: Group,
    map_location: Any,
    trusted: bool,
    reshard: bool,
) -> _Loaded:
    """This rank's state of ``step``: its shard (rank 0's on another world size) from the
    first tier whose manifest and shard verify, a damaged manifest or shard on the fast tier
    read again from the next tier; then the replicated tensors other ranks' files hold."""
    if not tiers:
        raise CheckpointError(f"step {step} is not committed on any tier this rank can see")
    fast = every[0]
    first: CheckpointError | None = None
    for tier in tiers:
        try:
            manifest = tier.manifest(step)
            if manifest is None:
                continue
            name = _base_file(step, tier, manifest, group, reshard)
            record = manifest.file(name)
            files: dict[str, str] = {}
            if manifest.world_size == group.world_size:
                if tier is not fast:  # bring it to the fast tier: this load and the next read it
                    fetch(tier, fast, step, name, manifest)
                path = fast.path(step, name)
                buffer = read_verified(path, record.size, record.xxh3)
                files[name] = tier.name
            else:  # another job's files: read, never published on this job's fast tier
                buffer, path = _read_whole(step, record, [t for t in every if t in tiers], files)
            needed = elsewhere(read_index(buffer, record.size, path))
            others = _read_replicated(step, manifest, needed, every, files)
            state = restore(
                buffer,
                record.size,
                path,
                map_location=map_location,
                trusted=trusted,
                others=others,
            )
            return _Loaded(step, state, tier.name, manifest, files)
        except (UntrustedStateError, _Refused):
            raise  # the same on every tier
        except CheckpointError as exc:
            first = first or exc
            log.warning("%s; trying the next tier", exc)
    raise first or CheckpointError(f"step {step}: no manifest could be read")


def _read_whole(
    step: int, record: FileRecord, tiers: list[Tier], files: dict[str, str]
) -> tuple[Any, Any]:
    """A file of ``step`` in memory, checked against its whole-file hash, from the first tier
    that holds a good copy (a POSIX tier is read in place; a store by ranges)."""
    errors: list[str] = []
    for tier in tiers:
        try:
            if tier.posix is not None:
                path = tier.path(step, record.name)
                buffer = read_verified(path, record.size, record.xxh3)
            else:
                path = f"{tier}/{step_dir(step)}/{record.name}"
                data = read_range(tier, step, record.name, 0, record.size)
                digest = xxhash.xxh3_128(data).hexdigest()
                if digest != record.xxh3:
                    raise CorruptCheckpointError(
                        f"{path}: hash {digest} does not match the manifest's {record.xxh3}"
                    )
                buffer = data
            files[record.name] = tier.name
            return buffer, path
        except CheckpointError as exc:
            errors.append(str(exc))
    raise CheckpointError(
        f"step {step}: no tier holds a good copy of {record.name} ({'; '.join(errors)})"
    )


def _read_replicated(
    step: int,
    manifest: CheckpointManifest,
    names: list[str],
    tiers: list[Tier],
    files: dict[str, str],
) -> dict[str, Any]:
    """The replicated tensors ``names`` that other files hold: name -> their bytes, each
    checked against the XXH3 the manifest records for it. Each file's share is one contiguous
    range (its replicated tensors come first), read from the first tier where it verifies."""
    if not names:
        return {}
    where: dict[str, FileRecord] = {}
    for record in manifest.files:
        for name in record.tensors:
            where[name] = record
    unknown = [n for n in names if n not in where]
    if unknown:
        raise CorruptCheckpointError(
            f"step {step}: the manifest says no file holds the replicated tensor "
            f"{unknown[0]} ({len(unknown)} in all); the step is damaged"
        )
    wanted: dict[str, list[str]] = {}
    for n in names:
        wanted.setdefault(where[n].name, []).append(n)
    out: dict[str, Any] = {}
    for file_name, tensor_names in wanted.items():
        record = manifest.file(file_name)
        errors: list[CheckpointError] = []
        for tier in tiers:
            try:
                out.update(_read_tensors(tier, step, record, tensor_names))
                files[file_name] = tier.name
                break
            except CheckpointError as exc:
                errors.append(exc)
        else:
            corrupt = any(isinstance(e, CorruptCheckpointError) for e in errors)
            advice = (
                "; on node-local fast tiers another node's files are read from the durable "
                "tier, so give the Checkpointer one (durable=URL)"
                if manifest.node_local and len(tiers) == 1
                else ""
            )
            raise (CorruptCheckpointError if corrupt else CheckpointError)(
                f"step {step}: the replicated tensors in {file_name} (written by rank "
                f"{record.rank}) could be read from no tier "
                f"({'; '.join(str(e) for e in errors)}){advice}"
            )
    return out


def _read_tensors(tier: Tier, step: int, record: FileRecord, names: list[str]) -> dict[str, Any]:
    """Tensors ``names`` of the file ``record`` on ``tier``, read in one range and checked."""
    if tier.posix is not None:
        path = tier.path(step, record.name)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise CheckpointError(f"{path} is missing") from None
        if size != record.size:
            raise CorruptCheckpointError(
                f"{path}: {size} bytes, the manifest says {record.size}; the file is damaged"
            )
    entries = [record.tensors[n] for n in names]
    start = min(e[0] for e in entries)
    end = max(e[0] + e[1] for e in entries)
    data = memoryview(read_range(tier, step, record.name, start, end))
    out = {}
    for name, (offset, nbytes, _dtype, _shape, _device, digest) in zip(names, entries, strict=True):
        piece = data[offset - start : offset - start + nbytes]
        actual = xxhash.xxh3_128(piece).hexdigest()
        if actual != digest:
            raise CorruptCheckpointError(
                f"{tier}/{step_dir(step)}/{record.name}: the bytes of {name} hash to {actual}, "
                f"the manifest says {digest}; the file is damaged"
            )
        out[name] = piece
    return out


def read_range(tier: Tier, step: int, name: str, start: int, end: int) -> bytearray:
    """Bytes ``[start, end)`` of a stored file, in ranges of 16 MiB, 8 at a time."""
    key = f"{step_dir(step)}/{name}"
    buf = bytearray(end - start)

    async def go() -> bytearray:
        def sink(pos: int, piece: bytes | memoryview) -> None:
            buf[pos - start : pos - start + len(piece)] = piece

        # store's one ranged-read component (stage's and the stream's too)
        await fetch_ranges(
            tier.store, key, end, sink, start=start, range_size=RANGE, in_flight=IN_FLIGHT
        )
        return buf

    return tier._run(go(), f"reading {key}")  # noqa: SLF001 - the tiers' one loop


class _Refused(CheckpointError):
    """A step this job cannot load from any tier (another kind or world size)."""


def _base_file(
    step: int, tier: Tier, manifest: CheckpointManifest, group: Group, reshard: bool
) -> str:
    """The file whose skeleton and private entries this rank loads: its own shard, or on
    another world size rank 0's (refused when private state would be dropped unasked)."""
    if manifest.kind != "stoker":
        raise _Refused(
            f"step {step} on {tier} was written through torch.distributed.checkpoint: load "
            "it with torch.distributed.checkpoint.load(state, storage_reader=ckpt.dcp_reader())"
        )
    saved, world_size = manifest.world_size, group.world_size
    if saved == world_size:
        return shard_name(group.rank, world_size)
    if manifest.private == [] or reshard:  # all replicated, or rank 0's private part asked for
        return shard_name(0, saved)
    what = (
        "its whole state is each rank's own (saved without replicated=)"
        if manifest.private is None
        else f"its keys {manifest.private!r} are each rank's own (not in replicated=)"
    )
    raise _Refused(
        f"step {step} on {tier} was saved by {saved} ranks, this job has {world_size}, and "
        f"{what}: load on {saved} ranks; or load(reshard=True), which gives every rank the "
        "replicated part and rank 0's own entries (as a DDP start would); or, for state sharded "
        "across ranks, save through the DCP adapter (ckpt.dcp_writer()), which reshards"
    )
