"""How the stage benchmark runs each tool: one timed process (then a ``sync``), its command
line and environment against one emulator, and the checks of what it copied."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _peers
from _machine import kernel_thread_ticks, prime_memory
from _peers import ACCOUNT, BENCH, Azurite, Peers
from _stage_data import Shape

SRC_CONTAINER, DST_CONTAINER = "src", "dst"
PEER_STREAMS = 16  # rclone --transfers / --multi-thread-streams, SDK threads


@dataclass
class Run:
    seconds: float  # the process, start to exit
    sync_s: float  # the sync after it
    rss_mib: float  # its peak resident memory
    cpu_s: float  # user + system CPU it used (the emulator competes for the same cores)
    stdout: str
    # What the kernel's own threads used from its start to the end of the sync: the writeback of
    # a tool that leaves its pages to the kernel is there, on no process's rusage.
    kernel_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.seconds + self.sync_s


def drop_caches() -> bool:
    """sync, drop the page cache (root only), then prime the memory (_machine.prime_memory:
    every run starts alike); False where the kernel refuses the drop."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        dropped = True
    except OSError:
        dropped = False
    prime_memory()
    return dropped


def run_tool(argv: list[str], env: dict[str, str] | None, log: Path) -> Run:
    """Time one tool's process, then a ``sync``; its output goes to ``log``.*

    Peak memory and CPU come from /usr/bin/time: a child's own ru_maxrss would start from this
    process's, which a fork hands down.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    out_path, err_path, rss_path = (log.with_suffix(s) for s in (".out", ".err", ".rss"))
    timed = ["/usr/bin/time", "-f", "%M %U %S", "-o", str(rss_path), *argv]
    kernel = kernel_thread_ticks()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        code = subprocess.run(timed, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
    start = time.perf_counter()
    os.sync()
    sync_s = time.perf_counter() - start
    kernel_s = (kernel_thread_ticks() - kernel) / os.sysconf("SC_CLK_TCK")
    if code.returncode:
        tail = err_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{Path(argv[0]).name} exited {code.returncode}; {err_path}:\n{tail}")
    rss_kib, user_s, sys_s = rss_path.read_text().split("\n")[-2].split()
    stdout = out_path.read_text(errors="replace")
    cpu_s = float(user_s) + float(sys_s)
    return Run(seconds, sync_s, int(rss_kib) / 1024, cpu_s, stdout, kernel_s)


def fresh_dir(name: str) -> Path:
    path = BENCH / "runs" / name
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# The stoker runs: stage() in its own process, as a user's script would call it. Its reads
# (whole and streamed) are wrapped to count the bytes actually fetched from the source (the
# resume test needs them). A
# third argument "no-md5" turns verification off (hash_files=False), to show what it costs.
STOKER = r"""
import json, sys
from stoker.store import _azure
fetched = 0
_whole, _stream = _azure.BlobStore.read_range, _azure.BlobStore.read_chunks
async def whole(self, key, start, end, etag=None):
    global fetched
    data = await _whole(self, key, start, end, etag)
    fetched += len(data)
    return data
async def stream(self, key, start, end, etag=None):
    global fetched
    async for chunk in _stream(self, key, start, end, etag):
        # (a range of one piece is read by read_range, counted there)
        fetched += len(chunk) if end - start > _azure.STREAM_CHUNK else 0
        yield chunk
_azure.BlobStore.read_range, _azure.BlobStore.read_chunks = whole, stream
from stoker.stage import stage
flags = dict(a.partition("=")[::2] for a in sys.argv[3:])  # "no-md5", "durability=fsync"
hash_files = False if "no-md5" in flags else None
s = stage(sys.argv[1], sys.argv[2], allow_http=True, hash_files=hash_files,
          durability=flags.get("durability"))
print(json.dumps({**s.to_dict(), "bytes_fetched": fetched}))
sys.exit(0 if s.ok else 1)
"""

SDK_IMPORT = r"""
import os, sys
from concurrent.futures import ThreadPoolExecutor
from azure.storage.blob import ContainerClient
conn, container, prefix, dst, threads = sys.argv[1:6]
cc = ContainerClient.from_connection_string(conn, container)
blobs = [(b.name, b.size) for b in cc.list_blobs(name_starts_with=prefix)]
def get(item):
    name, size = item
    path = os.path.join(dst, name[len(prefix):])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        cc.get_blob_client(name).download_blob(
            max_concurrency=int(threads) if size > 64 << 20 else 1).readinto(f)
with ThreadPoolExecutor(int(threads)) as pool:
    list(pool.map(get, blobs))
"""


class Tools:
    """Each tool's command line and environment against one emulator: (argv, env)."""

    def __init__(self, peers: Peers, az: Azurite | None, state: Path) -> None:
        self.peers, self.az, self.state = peers, az, state

    def stoker(self, src: str, dst: str, *flags: str) -> tuple[list[str], dict[str, str]]:
        env = dict(os.environ, XDG_CACHE_HOME=str(self.state))  # export manifests: fresh each
        if self.az:
            env["AZURE_STORAGE_CONNECTION_STRING"] = self.az.connection_string
        return [sys.executable, "-c", STOKER, src, dst, *flags], env

    def stoker_cli(self, src: str, dst: str) -> tuple[list[str], dict[str, str]]:
        """The drop-in path: the installed ``stoker stage`` command, its defaults (the emulator's
        plain HTTP on loopback needs no flag)."""
        _, env = self.stoker(src, dst)
        return [str(Path(sys.executable).parent / "stoker"), "stage", src, dst], env

    def rclone(
        self, src: str, dst: str, upload: bool, tuned: bool = True
    ) -> tuple[list[str], dict[str, str]]:
        """rclone copy, ``tuned`` (PEER_STREAMS transfers and streams) or with its defaults."""
        env = dict(
            os.environ,
            RCLONE_CONFIG=str(BENCH / "rclone.conf"),
            RCLONE_AZUREBLOB_ACCOUNT=ACCOUNT,
            RCLONE_AZUREBLOB_KEY=_peers.KEY,
            RCLONE_AZUREBLOB_ENDPOINT=self.az.endpoint,
        )
        (BENCH / "rclone.conf").touch()
        tune = ["--transfers", str(PEER_STREAMS), "--checkers", str(PEER_STREAMS)]
        if upload:
            tune += [
                "--azureblob-upload-concurrency",
                str(PEER_STREAMS),
                "--azureblob-chunk-size",
                "8M",
            ]
        else:
            tune += ["--multi-thread-streams", str(PEER_STREAMS)]
        return [str(self.peers.rclone), "copy", src, dst, "-q", *(tune if tuned else [])], env

    def azcopy(self, src: str, dst: str, upload: bool) -> tuple[list[str], dict[str, str]]:
        shutil.rmtree(BENCH / "azcopy" / "plans", ignore_errors=True)
        direction = (
            ["--from-to", "LocalBlob", "--put-md5"] if upload else ["--from-to", "BlobLocal"]
        )
        argv = [
            str(self.peers.azcopy),
            "copy",
            src,
            dst,
            "--recursive",
            *direction,
            "--output-level",
            "quiet",
            "--log-level",
            "ERROR",
        ]
        return argv, _peers.azcopy_env()

    def sdk(self, prefix: str, dst: str) -> tuple[list[str], dict[str, str]]:
        argv = [
            str(self.peers.python),
            "-c",
            SDK_IMPORT,
            self.az.connection_string,
            SRC_CONTAINER,
            prefix,
            dst,
            str(PEER_STREAMS),
        ]
        return argv, dict(os.environ)

    def blob_url(self, container: str, prefix: str) -> str:
        """AzCopy's form: path-style URL with a container SAS."""
        return f"{self.az.endpoint}/{container}/{prefix}?{self.az.container_sas(container)}"


# --------------------------------------------------------------------------------- checking
def tree_stats(root: Path) -> tuple[int, int]:
    """(files, bytes) under ``root``, leaving out stoker's state folder."""
    files = nbytes = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".stoker"]
        for name in names:
            files += 1
            nbytes += os.stat(os.path.join(folder, name)).st_size
    return files, nbytes


def allocated_bytes(root: Path) -> int:
    """Bytes on disk under ``root`` (partial files are sparse: their size says nothing)."""
    total = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".stoker"]
        for name in names:
            try:
                total += os.stat(os.path.join(folder, name)).st_blocks * 512
            except FileNotFoundError:  # renamed from .stoker-partial meanwhile
                pass
    return total


def sample_keys(shape: Shape, count: int = 8) -> list[str]:
    if shape.large:
        return list(shape.keys)
    rng = random.Random(7)
    return sorted({shape.keys[0], shape.keys[-1], *rng.sample(shape.keys, count)})


def md5_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def check_count(shape: Shape, root: Path) -> str | None:
    """None when ``root`` holds as many files and bytes as the dataset, else what differs."""
    files, nbytes = tree_stats(root)
    if (files, nbytes) != (shape.files, shape.nbytes):
        return f"{root}: {files} files, {nbytes:,} B; expected {shape.files}, {shape.nbytes:,} B"
    return None


def check_local_copy(shape: Shape, src: Path, dst: Path) -> str | None:
    """Every file's size, and the MD5 of a sample, against the source; None when all match."""
    for key, size in zip(shape.keys, shape.sizes, strict=True):
        got = (dst / key).stat().st_size if (dst / key).exists() else None
        if got != size:
            return f"{dst / key}: size {got}, expected {size}"
    for key in sample_keys(shape):
        if md5_file(dst / key) != md5_file(src / key):
            return f"{dst / key}: MD5 differs from the source"
    return check_count(shape, dst)


def check_blob_copy(
    shape: Shape, src: Path, az: Azurite, container: str, prefix: str, hash_sample: bool
) -> str | None:
    """Every blob's size (and the MD5 of a sample when asked) against the local source."""
    from azure.storage.blob import ContainerClient

    with ContainerClient.from_connection_string(az.connection_string, container) as cc:
        found = {b.name[len(prefix) :]: b.size for b in cc.list_blobs(name_starts_with=prefix)}
        want = dict(zip(shape.keys, shape.sizes, strict=True))
        if found != want:
            wrong = sorted(set(found.items()) ^ set(want.items()))[:3]
            return (
                f"{container}/{prefix}: {len(found)} blobs, {sum(found.values()):,} B; "
                f"first differences {wrong}"
            )
        for key in sample_keys(shape) if hash_sample else []:
            data = cc.get_blob_client(prefix + key).download_blob(max_concurrency=8).readall()
            if hashlib.md5(data).hexdigest() != md5_file(src / key):
                return f"{container}/{prefix}{key}: MD5 differs from the source"
    return None


def checkout_commit() -> str:
    """The checkout's commit, and whether the stage and store sources differed from it."""
    git = ["git", "-C", str(_peers.ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "diff", "--quiet", "HEAD", "--", "src/stoker/stage", "src/stoker/store"]
    ).returncode
    return head.stdout.strip() + (" + changes to stage or store" if dirty else "")
