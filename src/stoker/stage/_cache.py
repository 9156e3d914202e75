"""``cache_pull``: many pods on shared storage ask for one model; exactly one downloads it.

Layout under ``ROOT/NAME``::

    versions/<version>/...   complete models, published by one atomic rename
    current -> versions/<v>  the newest complete one (symlink swapped atomically)
    .incoming/<version>/     the download in progress (resumable by the next puller)
    .locks/<version>.lock    held by the puller; its mtime is a heartbeat

The version is a hash of the source listing (key, size, ETag), so a changed model is a new
version. A puller that dies stops touching its lock; after ``stale_after_s`` another pod takes
the lock over (by an atomic rename, so only one does) and resumes the download. The lock is an
``O_CREAT | O_EXCL`` file, which NFS v3+ (NetApp) and SMB (Azure Files) honour.

A local source's symbolic links are always followed (a Hugging Face snapshot,
``models--org--name/snapshots/<rev>/file -> ../../blobs/<sha>``, pulls whole): each becomes a
plain file in the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import StageError
from ..store import disk_error, fsync_dir, open_store, pause, run_sync
from ._guard import check_parent
from ._progress import Reporter
from ._stage import stage
from .options import StageOptions


@dataclass
class CacheResult:
    path: str
    version: str
    pulled: bool  # this call downloaded it (False: it was there, or another pod fetched it)
    waited_s: float

    def to_dict(self) -> dict:
        return asdict(self)


async def _version(url: str, allow_http: bool) -> str:
    store = open_store(url, allow_http=allow_http)
    store.follow_symlinks = True  # a Hugging Face snapshot: files are links into blobs/
    lines: list[str] = []
    try:
        async for batch in store.list():
            lines.extend(f"{o.key}\t{o.size}\t{o.etag}" for o in batch)
    finally:
        await store.close()
    if not lines:
        raise StageError(f"{store}: nothing to cache, the source lists no objects")
    return hashlib.blake2b("\n".join(sorted(lines)).encode(), digest_size=8).hexdigest()


def default_name(url: str) -> str:
    """The source's last path segment: never its query, which may hold a SAS."""
    path = urlsplit(url).path if "://" in url else url
    return path.rstrip("/").rsplit("/", 1)[-1]


def checked_name(name: str) -> str:
    """``name`` if it is one plain folder name: the model's folder stays inside the root."""
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise StageError(
            f"cache name {name!r} is not a plain folder name: pass --name with no '/', '\\' or '..'"
        )
    return name


def cache_pull(
    src: str,
    root: str | Path,
    *,
    name: str | None = None,
    stale_after_s: float = 60.0,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
    reporter: Reporter | None = None,
    options: StageOptions | None = None,
) -> CacheResult:
    """Make ``ROOT/NAME/versions/<version>`` hold the model at ``src``; see the module doc.
    ``options``: how the download copies (concurrency, block size, bwlimit, allow_http...);
    the cache takes every key, follows links and keeps its manifest under ``ROOT/NAME``."""
    opts = _whole(options or StageOptions())
    if not stale_after_s > 0:
        raise StageError(f"--stale-after {stale_after_s:g}: use more than 0 seconds")
    if timeout_s is not None and timeout_s < 0:
        raise StageError(f"--timeout {timeout_s:g}: use 0 or more seconds")
    base = Path(root) / checked_name(name or default_name(src))
    check_parent(Path(root))
    version = run_sync(_version(src, opts.allow_http))
    try:
        return _pull(src, base, version, stale_after_s, poll_s, timeout_s, reporter, opts)
    except OSError as exc:  # the cache's own folders: a full, read-only or forbidden root
        raise disk_error(exc, exc.filename or base) from exc


def _pull(
    src: str,
    base: Path,
    version: str,
    stale_after_s: float,
    poll_s: float,
    timeout_s: float | None,
    reporter: Reporter | None,
    opts: StageOptions,
) -> CacheResult:
    final = base / "versions" / version
    lock = base / ".locks" / f"{version}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    while True:
        if final.is_dir():
            _point_current(base, version)  # (a puller killed after publishing left it behind)
            return CacheResult(str(final), version, False, time.monotonic() - t0)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            _break_if_stale(lock, stale_after_s)
            if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                raise StageError(
                    f"waited {timeout_s:.0f} s for another pod to pull {src} "
                    f"into {final}; its lock is {lock}"
                ) from None
            pause(poll_s)  # (an async twin's cancel ends it)
            continue
        token = uuid.uuid4().hex
        with os.fdopen(fd, "w") as f:
            json.dump({"host": socket.gethostname(), "pid": os.getpid(), "token": token}, f)
        waited = time.monotonic() - t0
        try:
            with _Heartbeat(lock, token, stale_after_s / 4):
                if not final.is_dir():  # someone may have published while we took the lock
                    _download(src, base, version, final, reporter, opts)
            return CacheResult(str(final), version, True, waited)
        finally:
            if _holds(lock, token):  # a pod that took over a stalled lock keeps it
                lock.unlink(missing_ok=True)
            for stale in lock.parent.glob(f"{lock.name}.stale-*"):
                stale.unlink(missing_ok=True)


def _whole(options: StageOptions) -> StageOptions:
    """The download's options: every key (never a torchrun rank's share: the version published
    is the whole model), links followed."""
    for name in ("include", "exclude", "rank", "world_size", "dry_run", "delete"):
        if getattr(options, name) not in ((), None, False):
            raise StageError(
                f"cache_pull: options.{name} does not apply: a cache pull copies the whole model"
            )
    # Links are always followed: a Hugging Face cache's snapshot files are links into blobs/.
    return dataclasses.replace(options, rank=0, world_size=1, follow_symlinks=True)


def _download(
    src: str,
    base: Path,
    version: str,
    final: Path,
    reporter: Reporter | None,
    opts: StageOptions,
) -> None:
    incoming = base / ".incoming" / version
    incoming.parent.mkdir(parents=True, exist_ok=True)
    opts = dataclasses.replace(opts, state_dir=base / ".state" / version)
    summary = stage(src, str(incoming), options=opts, reporter=reporter)
    if not summary.ok:
        raise StageError(
            f"pulling {src} failed; the partial copy stays in {incoming} and the "
            f"next pull resumes it: " + "; ".join(summary.failed + summary.refused)
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(incoming, final)  # the model appears whole or not at all
    fsync_dir(final.parent)
    _point_current(base, version)
    shutil.rmtree(base / ".state" / version, ignore_errors=True)  # the manifest is spent


def _point_current(base: Path, version: str) -> None:
    """``base/current`` -> ``versions/<version>``, replaced in one rename."""
    target = Path("versions") / version
    link = base / "current"
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = base / f".current-{uuid.uuid4().hex}"
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _break_if_stale(lock: Path, stale_after_s: float) -> None:
    """Take over a lock whose holder stopped its heartbeat. Breakers take turns through a guard
    file (O_EXCL), and each looks at the lock again inside it: otherwise a slow breaker could
    move aside the fresh lock that a faster one had just taken, and two pods would download
    into one folder."""
    if not _stale(lock, stale_after_s):
        return
    guard = lock.with_name(f"{lock.name}.breaking")
    try:
        os.close(os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        if _stale(guard, stale_after_s):  # a breaker died inside: its guard goes
            guard.unlink(missing_ok=True)
        return
    try:
        if _stale(lock, stale_after_s):  # still the stale lock, not a new holder's
            os.rename(lock, lock.with_name(f"{lock.name}.stale-{uuid.uuid4().hex}"))
    except FileNotFoundError:
        pass
    finally:
        guard.unlink(missing_ok=True)


def _stale(path: Path, stale_after_s: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > stale_after_s
    except FileNotFoundError:
        return False


def _holds(lock: Path, token: str) -> bool:
    try:
        return json.loads(lock.read_text()).get("token") == token
    except (FileNotFoundError, ValueError):
        return False


class _Heartbeat:
    """Touch the lock every ``every_s`` seconds while the download runs, as long as it is ours."""

    def __init__(self, lock: Path, token: str, every_s: float) -> None:
        self.lock, self.token, self.every_s = lock, token, max(0.05, every_s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        while not self.stop.wait(self.every_s):
            if not _holds(self.lock, self.token):
                return
            try:
                os.utime(self.lock)
            except FileNotFoundError:
                return

    def __enter__(self) -> _Heartbeat:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
