"""stage flags: --bwlimit against its cap, and a server-side copy between accounts (Put Block
From URL) against the relay through a local spool file.

Reproduce: `.venv/bin/python bench/stage_flags.py --write BENCHMARKS.md` (needs Azurite 3.37+,
the first with Put Block From URL: `npm install --prefix .bench/azurite-next --no-audit
--no-fund azurite@3.37.0`). One emulator on loopback holds two accounts; its data lives on disk
under .bench/. Both copies run side by side in one run, alternating, so that the machine's load
weighs on each alike; the figures are medians. The emulator's own rate for the service-side
copy (Put Block From URL straight from the SDK) is measured beside them: its ceiling. Measure,
then render: bench/results/stage-flags.json, formatted by bench/_render_stage_flags.py.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

import _results  # noqa: E402
import render  # noqa: E402
from _machine import cpu_mark, load_since  # noqa: E402
from _markdown import publish  # noqa: E402

import azurite as azurite_module  # noqa: E402
from azurite import ACCOUNT, ACCOUNT_KEY, Azurite  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
NEWER = ROOT / ".bench" / "azurite-next" / "node_modules" / ".bin" / "azurite-blob"
OTHER = "otheracct"
CAPS = {"capped": ("100M", 100e6), "capped20": ("20M", 20e6)}  # --bwlimit, and in bytes/s
COPY_BLOCK, COPY_IN_FLIGHT = 8 * MiB, 32  # stage's defaults: --block-size, --concurrency
# The bars: the copy 1.5x the spool (or 0.9x the emulator's own rate, where that is
# lower), a capped rate within 10 % of the cap.
TARGETS = {"copy": 1.5, "ceiling": 0.9, "cap_band": [0.9, 1.1]}


def _other_url(server: Azurite, name: str) -> str:
    from azure.storage.blob import (
        BlobServiceClient,
        ContainerSasPermissions,
        generate_container_sas,
    )

    endpoint = f"http://127.0.0.1:{server.port}/{OTHER}"
    service = BlobServiceClient(
        endpoint,
        credential={"account_name": OTHER, "account_key": ACCOUNT_KEY},
        api_version=azurite_module.API_VERSION,
    )
    service.create_container(name)
    sas = generate_container_sas(
        OTHER,
        name,
        account_key=ACCOUNT_KEY,
        permission=ContainerSasPermissions(read=True, write=True, list=True, create=True, add=True),
        expiry=dt.datetime.now(dt.UTC) + dt.timedelta(hours=6),
    )
    return f"{endpoint}/{name}?{sas}"


def _count_reads() -> list[int]:
    """Bytes read through stoker's Blob data path, for the whole process."""
    from stoker.store._azure import BlobStore

    read = [0]
    real_chunks, real_range = BlobStore.read_chunks, BlobStore.read_range

    async def chunks(self: Any, *args: Any, **kwargs: Any) -> Any:
        async for chunk in real_chunks(self, *args, **kwargs):
            read[0] += len(chunk)
            yield chunk

    async def whole(self: Any, *args: Any, **kwargs: Any) -> Any:
        data = await real_range(self, *args, **kwargs)
        read[0] += len(data)
        return data

    BlobStore.read_chunks = chunks  # type: ignore[method-assign]
    BlobStore.read_range = whole  # type: ignore[method-assign]
    return read


def measure(files: int, size: int, reps: int) -> dict[str, Any]:
    from stoker.stage import stage
    from stoker.store import _blob_copy

    os.environ["AZURITE_ACCOUNTS"] = f"{ACCOUNT}:{ACCOUNT_KEY};{OTHER}:{ACCOUNT_KEY}"
    azurite_module.AZURITE_BIN = NEWER
    azurite_module.START_TIMEOUT_S = 180.0  # Node starts slowly on a loaded machine
    work = ROOT / ".bench" / "stage-flags"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = Azurite(location=work / "azurite").start()
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
    read = _count_reads()
    out: dict[str, Any] = {
        "bytes": files * size,
        "files": files,
        "size": size,
        "copy": [],
        "spool": [],
        "free": [],
        "ceiling": [],
        "caps": CAPS,
        "copy_block": COPY_BLOCK,
        "copy_in_flight": COPY_IN_FLIGHT,
        "targets": TARGETS,
    }
    out.update({how: [] for how in CAPS})
    try:
        src = server.container("src").container_name
        local = work / "files"
        local.mkdir()
        piece = os.urandom(16 * MiB)
        for i in range(files):
            with open(local / f"f{i}.bin", "wb") as f:
                for _ in range(size // len(piece)):
                    f.write(piece[:8] + os.urandom(8) + piece[16:])
        loaded = stage(str(local), f"az://{src}")
        assert loaded.ok, f"loading the source failed: {loaded.failed[:3]}"
        shutil.rmtree(local)
        real_reach = _blob_copy.copies_by_blocks
        marks = cpu_mark()
        for rep in range(reps):
            for how in ("copy", "spool"):
                _blob_copy.copies_by_blocks = (  # type: ignore[assignment]
                    real_reach if how == "copy" else (lambda src, dst: False)
                )
                dst = _other_url(server, f"{how}-{rep}")
                before = read[0]
                t0 = time.perf_counter()
                summary = stage(f"az://{src}", dst, state_dir=work / f"state-{how}-{rep}")
                seconds = time.perf_counter() - t0
                assert summary.ok and summary.files_copied == files, summary.failed
                out[how].append({"s": seconds, "read": read[0] - before})
            dst = _other_url(server, f"ceiling-{rep}")
            out["ceiling"].append({"s": asyncio.run(_copy_ceiling(server, src, dst, files, size))})
            for how, limit in [*((how, cap) for how, (cap, _) in CAPS.items()), ("free", None)]:
                into = work / f"{how}-{rep}"
                t0 = time.perf_counter()
                summary = stage(f"az://{src}", str(into), include=("f0.bin",), bwlimit=limit)
                seconds = time.perf_counter() - t0
                assert summary.ok, summary.failed
                out[how].append({"s": seconds, "bytes": summary.bytes_copied})
                shutil.rmtree(into)
        # A local copy (to a Lustre or NFS mount, say) under the cap: the file system is
        # faster than the emulator, so the cap is well under the ceiling.
        local = work / "local-src"
        local.mkdir()
        with open(local / "f0.bin", "wb") as f:
            for _ in range(size // len(piece)):
                f.write(piece[:8] + os.urandom(8) + piece[16:])
        out["local"], out["local_free"] = [], []
        for rep in range(reps):
            for how, limit in (("local", CAPS["capped"][0]), ("local_free", None)):
                into = work / f"{how}-{rep}"
                t0 = time.perf_counter()
                summary = stage(str(local), str(into), bwlimit=limit)
                seconds = time.perf_counter() - t0
                assert summary.ok, summary.failed
                out[how].append({"s": seconds, "bytes": summary.bytes_copied})
                shutil.rmtree(into)
        out["load"] = load_since(marks)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


async def _copy_ceiling(server: Azurite, src: str, dst_url: str, files: int, size: int) -> float:
    """Seconds for the emulator to copy the blobs with Put Block From URL driven straight from
    the SDK (stoker's block size and requests in flight, then Put Block List): what the
    emulator itself can serve for a service-side copy, the ceiling of stoker's."""
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas
    from azure.storage.blob.aio import ContainerClient

    sas = generate_container_sas(
        ACCOUNT,
        src,
        account_key=ACCOUNT_KEY,
        permission=ContainerSasPermissions(read=True),
        expiry=dt.datetime.now(dt.UTC) + dt.timedelta(hours=6),
    )
    source = f"http://127.0.0.1:{server.port}/{ACCOUNT}/{src}"
    gate = asyncio.Semaphore(COPY_IN_FLIGHT)
    async with ContainerClient.from_container_url(
        dst_url, api_version=azurite_module.API_VERSION
    ) as dst:

        async def one(name: str) -> None:
            blob = dst.get_blob_client(name)
            ids = [f"{i:08d}" for i in range(-(-size // COPY_BLOCK))]

            async def put(i: int, bid: str) -> None:
                async with gate:
                    await blob.stage_block_from_url(
                        bid,
                        f"{source}/{name}?{sas}",
                        source_offset=i * COPY_BLOCK,
                        source_length=min(COPY_BLOCK, size - i * COPY_BLOCK),
                    )

            await asyncio.gather(*(put(i, bid) for i, bid in enumerate(ids)))
            await blob.commit_block_list(ids)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(f"f{i}.bin") for i in range(files)))
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--write", type=Path, help="replace the '## stage flags:' section")
    args = parser.parse_args()
    if not NEWER.exists():
        sys.exit(f"needs Azurite 3.37+ at {NEWER}; see this script's doc")
    size = args.size_mib * MiB
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        result = measure(args.files, size, args.reps)
    _results.save("stage-flags", result | {"reps": args.reps})
    publish(render.render("stage-flags"), args.write)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
