"""Which hashes each staging tool really checks: a probe, not a timing.

The stage benchmark compares stoker's MB/s and CPU seconds per GiB with rclone's and AzCopy's
"with MD5 checked on both sides"; that is only like for like if the peers do check. This asks
each tool, the way the benchmark runs it, on the same emulator:

* import: a blob whose Content-MD5 does not match its bytes (set through Set Blob Properties),
  once small (1 MiB: one GET) and once large (320 MiB: past rclone's 256 MiB multi-thread
  cutoff, so rclone's multi-thread download runs). A tool that checks fails (or deletes the
  copy); a tool that does not keeps the file and exits 0.
* export: a 1 MiB and a 64 MiB file uploaded by each tool (64 MiB: block uploads with the
  benchmark's 8 MiB chunks); does the blob then carry a Content-MD5, and is it right?

    .venv/bin/python bench/peer_hashes.py [--write BENCHMARKS.md]

Peers install into .bench/ as for bench/stage_bench.py. Measure, then render: the verdicts go
to bench/results/stage-hashes.json, formatted by bench/_render_stage_hashes.py.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _peers
import _results
import render
from _markdown import publish
from _peers import ACCOUNT, Azurite

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
SIZES = {"1 MiB": MiB, "320 MiB": 320 * MiB}
EXPORT_SIZES = {"1 MiB": MiB, "64 MiB": 64 * MiB}
STREAMS = "16"

STOKER = r"""
import sys
from stoker.errors import StokerError
from stoker.stage import stage
try:
    include = (sys.argv[4],) if len(sys.argv) > 4 else ()
    s = stage(sys.argv[1], sys.argv[2], allow_http=True, include=include)
    for line in s.failed:
        print(line, file=sys.stderr)
except StokerError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
sys.exit(0 if s.ok else 1)
"""


def blob_client(az: Azurite, container: str, name: str):  # type: ignore[no-untyped-def]
    from azure.storage.blob import BlobServiceClient

    svc = BlobServiceClient.from_connection_string(az.connection_string)
    return svc.get_blob_client(container, name)


def lying_blobs(az: Azurite, container: str) -> dict[str, str]:
    """One blob per size whose Content-MD5 is another content's; returns size label -> name."""
    from azure.storage.blob import ContentSettings

    az.create_container(container)
    names = {}
    for label, size in SIZES.items():
        name = f"s{size}/lie.bin"  # one folder each: tools that copy folders copy just it
        blob = blob_client(az, container, name)
        blob.upload_blob(os.urandom(size), max_concurrency=4)
        wrong = hashlib.md5(b"not these bytes").digest()
        blob.set_http_headers(ContentSettings(content_md5=bytearray(wrong)))
        names[label] = name
    return names


def run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    return done.returncode, (done.stderr + done.stdout).strip()


def import_verdict(code: int, out: str, dest: Path) -> str:
    kept = dest.exists() and dest.stat().st_size > 0
    said = next(
        (ln.strip() for ln in out.splitlines() if "md5" in ln.lower() or "hash" in ln.lower()), ""
    )
    if code == 0 and kept:
        return "**not checked**: exit 0, the file kept"
    verdict = f"checked: exit {code}, the file {'kept' if kept else 'not kept'}"
    said = said.split("ERROR : ")[-1].split(": ", 1)[-1]  # no timestamp, no temporary name
    return verdict + (f" (`{said[:60]}`)" if said else "")


def rclone_env(peers: _peers.Peers, az: Azurite) -> dict[str, str]:
    conf = Path(tempfile.gettempdir()) / "stoker-peer-hashes-rclone.conf"
    conf.touch()
    return dict(
        os.environ,
        RCLONE_CONFIG=str(conf),
        RCLONE_AZUREBLOB_ACCOUNT=ACCOUNT,
        RCLONE_AZUREBLOB_KEY=_peers.KEY,
        RCLONE_AZUREBLOB_ENDPOINT=az.endpoint,
    )


def imports(peers: _peers.Peers, az: Azurite, work: Path) -> list[tuple[str, str, str]]:
    container = "lies"
    names = lying_blobs(az, container)
    sas = az.container_sas(container)
    stoker_env = dict(os.environ, AZURE_STORAGE_CONNECTION_STRING=az.connection_string)
    tools = {
        f"rclone copy --multi-thread-streams {STREAMS} (the benchmark's)": lambda n, d: (
            [
                str(peers.rclone),
                "copy",
                f":azureblob:{container}/{Path(n).parent}",
                str(d),
                "-v",
                "--multi-thread-streams",
                STREAMS,
            ],
            rclone_env(peers, az),
        ),
        "rclone copy (its defaults)": lambda n, d: (
            [str(peers.rclone), "copy", f":azureblob:{container}/{Path(n).parent}", str(d), "-v"],
            rclone_env(peers, az),
        ),
        "AzCopy copy (its defaults, the benchmark's)": lambda n, d: (
            [
                str(peers.azcopy),
                "copy",
                f"{az.endpoint}/{container}/{n}?{sas}",
                str(d / "lie.bin"),
                "--from-to",
                "BlobLocal",
                "--output-level",
                "essential",
            ],
            _peers.azcopy_env(),
        ),
        "AzCopy copy --check-md5 FailIfDifferentOrMissing": lambda n, d: (
            [
                str(peers.azcopy),
                "copy",
                f"{az.endpoint}/{container}/{n}?{sas}",
                str(d / "lie.bin"),
                "--from-to",
                "BlobLocal",
                "--check-md5",
                "FailIfDifferentOrMissing",
                "--output-level",
                "essential",
            ],
            _peers.azcopy_env(),
        ),
        "stoker stage (its defaults)": lambda n, d: (
            [sys.executable, "-c", STOKER, f"az://{container}/{Path(n).parent}", str(d)],
            stoker_env,
        ),
    }
    rows = []
    for tool, command in tools.items():
        for label, name in names.items():
            dest_dir = work / "import" / f"{len(rows)}"
            dest_dir.mkdir(parents=True)
            code, out = run(*command(name, dest_dir))
            rows.append((tool, label, import_verdict(code, out, dest_dir / "lie.bin")))
            print(f"import {tool} {label}: {rows[-1][2]}", flush=True)
            shutil.rmtree(dest_dir, ignore_errors=True)
    return rows


def exports(peers: _peers.Peers, az: Azurite, work: Path) -> list[tuple[str, str, str]]:
    src = work / "export"
    src.mkdir(parents=True)
    digests = {}
    for label, size in EXPORT_SIZES.items():
        data = os.urandom(size)
        (src / f"{size}.bin").write_bytes(data)
        digests[label] = hashlib.md5(data).digest()
    stoker_env = dict(os.environ, AZURE_STORAGE_CONNECTION_STRING=az.connection_string)
    tools = {
        "rclone copy (the benchmark's: 8M chunks, 16 at once)": lambda c, f: (
            [
                str(peers.rclone),
                "copy",
                str(f),
                f":azureblob:{c}",
                "--azureblob-chunk-size",
                "8M",
                "--azureblob-upload-concurrency",
                STREAMS,
            ],
            rclone_env(peers, az),
        ),
        "AzCopy copy --put-md5 (the benchmark's)": lambda c, f: (
            [
                str(peers.azcopy),
                "copy",
                str(f),
                f"{az.endpoint}/{c}/{f.name}?{az.container_sas(c)}",
                "--from-to",
                "LocalBlob",
                "--put-md5",
                "--output-level",
                "essential",
            ],
            _peers.azcopy_env(),
        ),
        "AzCopy copy (its defaults)": lambda c, f: (
            [
                str(peers.azcopy),
                "copy",
                str(f),
                f"{az.endpoint}/{c}/{f.name}?{az.container_sas(c)}",
                "--from-to",
                "LocalBlob",
                "--output-level",
                "essential",
            ],
            _peers.azcopy_env(),
        ),
        "stoker stage (its defaults)": lambda c, f: (
            [sys.executable, "-c", STOKER, str(f.parent), f"az://{c}", "--include", f.name],
            stoker_env,
        ),
    }
    rows = []
    for i, (tool, command) in enumerate(tools.items()):
        container = f"upload{i}"
        az.create_container(container)
        for label, size in EXPORT_SIZES.items():
            path = src / f"{size}.bin"
            code, out = run(*command(container, path))
            props = blob_client(az, container, path.name).get_blob_properties()
            md5 = props.content_settings.content_md5
            if code:
                verdict = f"failed: exit {code} ({out[-120:]})"
            elif not md5:
                verdict = "**no Content-MD5**"
            elif bytes(md5) == digests[label]:
                verdict = "Content-MD5 set, right"
            else:
                verdict = f"Content-MD5 set, **wrong** ({base64.b64encode(bytes(md5)).decode()})"
            rows.append((tool, label, verdict))
            print(f"export {tool} {label}: {verdict}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the section into this Markdown file")
    args = parser.parse_args()
    peers = _peers.install()
    with tempfile.TemporaryDirectory(dir=_peers.BENCH) as tmp, Azurite() as az:
        work = Path(tmp)
        imported = imports(peers, az, work)
        exported = exports(peers, az, work)
    _results.save(
        "stage-hashes",
        {
            "versions": peers.versions,
            "sizes": list(SIZES),
            "export_sizes": list(EXPORT_SIZES),
            "imports": imported,
            "exports": exported,
        },
    )
    publish(render.render("stage-hashes"), args.write)


if __name__ == "__main__":
    main()
