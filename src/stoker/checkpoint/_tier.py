"""A checkpoint tier: any stoker store (a POSIX folder, Blob, S3, GCS) seen through the names of
_manifest.py, with a synchronous API for the checkpointer's background threads.

Store calls are async; they run on one IOLoop (store/_loop.py) that every tier of a
checkpointer shares.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import xxhash

from .._redact import printable
from ..errors import CheckpointError, CorruptCheckpointError, StokerError
from ..store import IOLoop, PosixStore, Store, disk_error, download, fsync_dir, open_store
from ._manifest import MANIFEST, POINTER, CheckpointManifest, step_dir, step_of

T = TypeVar("T")
RANGE = 16 << 20


@dataclass
class StepListing:
    step: int
    files: dict[str, int] = field(default_factory=dict)  # name in the step folder -> size
    etags: dict[str, str] = field(default_factory=dict)  # name -> version (ETag; mtime on POSIX)
    # whether its manifest names this tier's job (or none: an older stoker's); None when that
    # could not be read (no manifest, or one unreadable now), which retention never deletes
    owned: bool | None = None

    @property
    def committed(self) -> bool:
        return MANIFEST in self.files


class Tier:
    def __init__(self, name: str, url: str | os.PathLike[str], io: IOLoop) -> None:
        self.name, self.io = name, io
        self.store: Store = open_store(str(url))
        # The job whose steps this tier shows (set by the Checkpointer, see _claim.py): a step
        # whose manifest names another job is left out of ``steps`` and ``manifest``. None:
        # every step (a tier made without a Checkpointer).
        self.job_id: str | None = None
        self._owners: dict[int, tuple[str, bool | None]] = {}  # step -> (manifest ETag, owned)

    def __str__(self) -> str:
        return f"{self.name} tier {self.store}"

    @property
    def posix(self) -> PosixStore | None:
        # A store that is a folder here is a PosixStore (the store's own answer, not its class).
        return cast(PosixStore, self.store) if self.store.local_root is not None else None

    def _run(self, coro: Coroutine[Any, Any, T], what: str) -> T:
        try:
            return self.io.run(coro)
        except StokerError:
            raise
        except OSError as exc:
            raise disk_error(exc, Path(str(self.store))) from exc
        except Exception as exc:  # a store error we did not translate: name the tier
            raise CheckpointError(f"{self}: {what} failed: {exc}") from exc

    # ------------------------------------------------------------------ reading
    def steps(self) -> dict[int, StepListing]:
        async def collect() -> dict[int, StepListing]:
            found: dict[int, StepListing] = {}
            async for batch in self.store.list():
                for info in batch:
                    folder, _, name = info.key.partition("/")
                    step = step_of(folder)
                    if step is not None and name:
                        listing = found.setdefault(step, StepListing(step))
                        listing.files[name], listing.etags[name] = info.size, info.etag
            if self.posix is not None and self.posix.root.is_dir():
                # a killed writer's folder may hold only partial files, which listings skip
                for entry in os.scandir(self.posix.root):
                    step = step_of(entry.name)
                    if step is not None and entry.is_dir():
                        found.setdefault(step, StepListing(step))
            if self.job_id is not None:
                await self._judge_owners(found)
            return found

        return self._run(collect(), "listing")

    async def _judge_owners(self, found: dict[int, StepListing]) -> None:
        """Leave out the steps another job committed; mark each committed step ``owned`` (or
        None, its manifest unreadable). Each manifest version is read once per process."""
        gate = asyncio.Semaphore(16)

        async def judge(listing: StepListing) -> bool | None:
            etag = listing.etags.get(MANIFEST, "")
            known = self._owners.get(listing.step)
            if known is not None and known[0] == etag:
                return known[1]
            key = f"{step_dir(listing.step)}/{MANIFEST}"
            try:
                async with gate:
                    data = await self.read_small(key)
            except (StokerError, OSError):
                return None  # not known now; asked again at the next listing
            if data is None:  # deleted since the listing
                return None
            try:
                owner = CheckpointManifest.from_json(data, f"{self}/{key}").job_id
                owned: bool | None = owner is None or owner == self.job_id
            except CheckpointError:
                owned = None
            self._owners[listing.step] = (etag, owned)
            return owned

        committed = [listing for listing in found.values() if listing.committed]
        verdicts = await asyncio.gather(*(judge(listing) for listing in committed))
        for listing, owned in zip(committed, verdicts, strict=True):
            if owned is False:
                del found[listing.step]
            else:
                listing.owned = owned

    async def read_small(
        self, key: str, error: type[CheckpointError] = CheckpointError
    ) -> bytes | None:
        """A small object's bytes (a manifest, the claim), or None when there is none. In a
        folder, a FIFO or device planted at its name is ``error``: a plain open of a FIFO
        blocks until a writer comes, and a device never ends."""
        if self.posix is not None:
            path = self.posix.path(key)
            try:
                mode = path.stat().st_mode
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as exc:
                raise disk_error(exc, path) from exc
            if not stat.S_ISREG(mode):
                raise error(
                    f"{printable(str(path))}: not a regular file (a device, FIFO or socket); "
                    "stoker did not write it"
                )
        return await self.store.read_all(key)

    def manifest(self, step: int) -> CheckpointManifest | None:
        """The step's manifest; None when there is none, or it names another job (to this
        tier's job, another's step does not exist)."""
        key = f"{step_dir(step)}/{MANIFEST}"
        data = self._run(self.read_small(key, CorruptCheckpointError), f"reading {key}")
        if data is None:
            return None
        manifest = CheckpointManifest.from_json(data, f"{self}/{key}")
        foreign = manifest.job_id not in (None, self.job_id) and self.job_id is not None
        return None if foreign else manifest

    def run_within(self, coro: Coroutine[Any, Any, T], timeout_s: float, what: str) -> T:
        """``coro`` on this tier's loop, given up after ``timeout_s``: an endpoint that
        accepts connections and never answers would otherwise hold the caller for minutes
        (the store retries for two)."""

        async def bounded() -> T:
            try:
                return await asyncio.wait_for(coro, timeout_s)
            except TimeoutError:
                raise CheckpointError(
                    f"the {self} did not answer within {timeout_s:g} s ({what}): check the "
                    "endpoint, the network and the firewall"
                ) from None

        return self._run(bounded(), what)

    def path(self, step: int, name: str) -> Path:
        assert self.posix is not None
        return self.posix.path(f"{step_dir(step)}/{name}")

    def partial(self, step: int, name: str) -> Path:
        assert self.posix is not None
        path = self.posix.partial(f"{step_dir(step)}/{name}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def publish(self, step: int, name: str) -> None:
        """Rename a finished, fsynced partial file to its name and fsync the folder."""
        final = self.path(step, name)
        os.replace(self.partial(step, name), final)
        fsync_dir(final.parent)

    def hash(self, step: int, name: str, size: int) -> str:
        """XXH3-128 of a stored file (read in ranges; on POSIX straight from disk)."""
        key = f"{step_dir(step)}/{name}"

        async def digest() -> str:
            info = await self.store.head(key)
            if info is None:
                raise CheckpointError(f"{self}/{key} is missing")
            if info.size != size:
                raise CorruptCheckpointError(
                    f"{self}/{key}: {info.size} bytes, the manifest says {size}"
                )
            h = xxhash.xxh3_128()
            for start in range(0, size, RANGE):
                h.update(await self.store.read_range(key, start, min(start + RANGE, size)))
            return h.hexdigest()

        return self._run(digest(), f"reading {key}")

    def download(self, step: int, name: str, size: int, dest: Path) -> None:
        """Copy a stored file into ``dest`` (ranges in parallel), fsynced."""
        key = f"{step_dir(step)}/{name}"
        self._run(download(self.store, key, size, dest), f"downloading {key}")

    # ------------------------------------------------------------------ writing
    def check_writable(self) -> None:
        """Raise now, not at the first save's commit, if this tier cannot be written: a
        missing container, credentials that may read but not write, a read-only mount. A
        folder is probed with a file (or, not made yet, through its nearest existing parent,
        which is left as it was); a store with a small object, deleted again."""
        probe = f".stoker-write-check-{socket.gethostname()}-{os.getpid()}"
        try:
            if self.posix is not None:
                _probe_folder(self.posix.root, probe)
                return
            self._run(self.store.write_bytes(probe, b""), "a test write")
            self._run(self.store.delete(probe), "deleting its test write")
        except (StokerError, OSError) as exc:
            raise CheckpointError(
                f"the {self} cannot be written, so no checkpoint could be saved there: {exc}; "
                "fix the path, container or permissions"
            ) from exc

    def upload(self, step: int, name: str, source: Path, size: int) -> None:
        key = f"{step_dir(step)}/{name}"
        self._run(self.store.write_file(key, source, size, None), f"uploading {key}")

    def commit(self, manifest: CheckpointManifest, *, pointer: bool = True) -> None:
        """The manifest makes the step loadable; the pointer follows it (not for an older
        step pulled back from another tier)."""
        key = f"{step_dir(manifest.step)}/{MANIFEST}"
        self._run(self.store.write_bytes(key, manifest.to_json()), f"writing {key}")
        if not pointer:
            return
        pointer = f'{{"step": {manifest.step}}}\n'.encode()
        self._run(self.store.write_bytes(POINTER, pointer), f"writing {POINTER}")

    def delete_step(self, listing: StepListing) -> None:
        """Manifest first, so a crash half way leaves an incomplete step, never a broken one."""
        names = sorted(listing.files, key=lambda n: n != MANIFEST)
        for name in names:
            key = f"{step_dir(listing.step)}/{name}"
            self._run(self.store.delete(key), f"deleting {key}")
        if self.posix is not None:  # and the partial files of a killed writer
            shutil.rmtree(self.posix.path(step_dir(listing.step)), ignore_errors=True)

    def close(self) -> None:
        try:
            self.io.run(self.store.close())
        except Exception:  # noqa: BLE001 - closing connections must not hide the real result
            pass


def _probe_folder(root: Path, probe: str) -> None:
    if root.is_dir():
        path = root / probe
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        path.unlink()
        return
    parent = root
    while not parent.is_dir():
        if parent.exists():
            raise CheckpointError(f"{parent} is a file, not a folder")
        parent = parent.parent
    if os.statvfs(parent).f_flag & os.ST_RDONLY:
        raise OSError(30, "read-only file system", str(parent))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OSError(13, "permission denied", str(parent))
