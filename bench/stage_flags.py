"""stage flags: --bwlimit against its cap, and a server-side copy between accounts (Put Block
From URL) against the relay through a local spool file.

Reproduce: `.venv/bin/python bench/stage_flags.py --write BENCHMARKS.md` (needs Azurite 3.37+,
the first with Put Block From URL: `npm install --prefix .bench/azurite-next --no-audit
--no-fund azurite@3.37.0`). One emulator on loopback holds two accounts; its data lives on disk
under .bench/. Both copies run side by side in one run, alternating, so that the machine's load
weighs on each alike; the figures are medians.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from _machine import cpu_mark, others_cpu_share  # noqa: E402
from _markdown import publish  # noqa: E402

import azurite as azurite_module  # noqa: E402
from azurite import ACCOUNT, ACCOUNT_KEY, Azurite  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
NEWER = ROOT / ".bench" / "azurite-next" / "node_modules" / ".bin" / "azurite-blob"
OTHER = "otheracct"
CAPS = {"capped": ("100M", 100e6), "capped20": ("20M", 20e6)}  # --bwlimit, and in bytes/s


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
    work = ROOT / ".bench" / "stage-flags"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    server = Azurite(location=work / "azurite").start()
    os.environ["AZURE_STORAGE_CONNECTION_STRING"] = server.connection_string
    read = _count_reads()
    out: dict[str, Any] = {"bytes": files * size, "copy": [], "spool": [], "free": []}
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
        assert stage(str(local), f"az://{src}").ok
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
        out["others_cpu"] = others_cpu_share(marks)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)
    return out


def capped_row(how: str, measured: float, size: int) -> str:
    text, cap = CAPS[how]
    met = "yes" if 0.9 <= measured / cap <= 1.1 else "**no**"
    return (
        f"| Blob -> local, `--bwlimit {text}` ({cap / 1e6:.0f} MB/s) | 1 x {size // MiB:,} MiB | "
        f"{measured / 1e6:,.1f} | | {measured / cap:.3f}x the cap | 0.9-1.1x | {met} |\n"
    )


def section(r: dict[str, Any], files: int, size: int, reps: int) -> str:
    total = r["bytes"]

    def rate(rows: list[dict], nbytes: int | None = None) -> float:
        return statistics.median((nbytes or row.get("bytes") or total) / row["s"] for row in rows)

    copy, spool = rate(r["copy"]), rate(r["spool"])
    free = rate(r["free"])
    local, local_free = rate(r["local"]), rate(r["local_free"])
    through = max(row["read"] for row in r["copy"])
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M+00:00")
    shape = f"{files} x {size // MiB:,} MiB"
    return f"""## stage flags: server-side copy between accounts, and --bwlimit (targets: copy >= 1.5x the spool, 0 bytes through the client; rate within 10 % of the cap)

Reproduce: `.venv/bin/python bench/stage_flags.py --write BENCHMARKS.md` (Azurite 3.37+, the
first with Put Block From URL: `npm install --prefix .bench/azurite-next --no-audit --no-fund
azurite@3.37.0`). One Azurite on loopback, data on disk, holding two accounts; measured
{when}, {reps} runs of each, alternating, medians; other processes used
{r["others_cpu"]:.0%} of the machine's CPU meanwhile (the figures are ratios of one run).

| copy | shape | MB/s | bytes through stoker | ratio | target | met |
|---|---|---:|---:|---:|---:|---|
| Blob -> Blob, another account: Put Block From URL, 32 blocks in flight | {shape} | {copy / 1e6:,.0f} | {through:,} | {copy / spool:.2f}x the spool | 1.5x | {"yes" if copy >= 1.5 * spool and through == 0 else "**no**"} |
| Blob -> Blob, another account: through a local spool file (the ceiling of a relay) | {shape} | {spool / 1e6:,.0f} | {total:,} (read) + {total:,} (sent) | 1.00x | | |
{"".join(capped_row(how, rate(r[how]), size) for how in CAPS)}| Blob -> local, no cap (the ceiling here) | 1 x {size // MiB:,} MiB | {free / 1e6:,.0f} | | | | |
| local -> local, `--bwlimit 100M` (100 MB/s) | 1 x {size // MiB:,} MiB | {local / 1e6:,.1f} | | {local / 100e6:.3f}x the cap | 0.9-1.1x | {"yes" if 0.9 <= local / 100e6 <= 1.1 else "**no**"} |
| local -> local, no cap (the ceiling here) | 1 x {size // MiB:,} MiB | {local_free / 1e6:,.0f} | | | | |

The emulator is both services, on one machine: a service-side copy here moves each block over
loopback inside Azurite (its Put Block From URL fetches the source range over HTTP from itself),
which is the ceiling; between two Azure accounts the bytes move inside the storage service, and
the relay's through this machine's NIC. The cap is measured over the whole command (listing and
commit included), so a cap far under the ceiling is what it can show.
"""


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
    publish(section(result, args.files, size, args.reps), args.write)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
