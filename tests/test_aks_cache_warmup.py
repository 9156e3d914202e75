"""The AKS model cache warm-up, for real: 16 processes standing in for pods start
``cache_pull`` at once against one shared folder (the ReadWriteMany volume) and one Blob source
(Azurite, behind a proxy that logs every request). The source is read once, and every process
reads back a complete copy whose bytes match the source's."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from azurite import ACCOUNT, ACCOUNT_KEY
from faulty_proxy import FaultyProxy

PODS = 16
# Each file is below one ranged GET (16 MiB), so one download of a file is one GET.
FILES = {
    "config.json": b'{"layers": 2}',
    **{f"model-{i:05d}-of-00004.safetensors": os.urandom((3 << 20) + i) for i in range(4)},
    "tokenizer.json": os.urandom(50_000),
}

# A pod: wait for the start signal (so all 16 pull at once), pull, then read back every file
# of the version it was given and hash it, as a serving process loading the model would.
POD = """
import hashlib, json, os, sys, time
from pathlib import Path
from stoker.stage import cache_pull
src, root, go = sys.argv[1:4]
while not os.path.exists(go):
    time.sleep(0.01)
r = cache_pull(src, root, poll_s=0.05)
seen = {p.relative_to(r.path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in Path(r.path).rglob("*") if p.is_file()}
print(json.dumps({"pulled": r.pulled, "path": r.path, "seen": seen}))
"""


def _blob_gets(proxy: FaultyProxy, prefix: str) -> dict[str, int]:
    """GETs of each blob under ``prefix`` (listings are GETs of the container: not counted)."""
    counts: dict[str, int] = {}
    for r in proxy.log:
        path, _, query = r.path.partition("?")
        if r.method == "GET" and f"/{prefix}/" in path and "comp=list" not in query:
            name = path.rsplit(f"/{prefix}/", 1)[1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_sixteen_pods_one_download_every_reader_complete(azurite, tmp_path: Path) -> None:
    container = azurite.container()
    for name, data in FILES.items():
        container.upload_blob(f"llama-tiny/{name}", data)
    want = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}
    shared = tmp_path / "rwx"  # the ReadWriteMany volume every pod mounts
    go = tmp_path / "go"
    with FaultyProxy(azurite.port, lambda method, path: None) as proxy:
        env = os.environ | {
            "AZURE_STORAGE_CONNECTION_STRING": f"AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={proxy.endpoint(ACCOUNT)}",
            "PYTHONPATH": str(Path(__file__).parent),
        }
        src = f"az://{container.container_name}/llama-tiny"
        pods = [
            subprocess.Popen(
                [sys.executable, "-c", POD, src, str(shared), str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(PODS)
        ]
        time.sleep(1.0)  # let them all import and wait at the start line
        go.touch()
        outs = [p.communicate(timeout=300) for p in pods]
        gets = _blob_gets(proxy, "llama-tiny")
    assert [p.returncode for p in pods] == [0] * PODS, [err[-2000:] for _, err in outs]
    results = [json.loads(out) for out, _ in outs]
    assert sum(r["pulled"] for r in results) == 1  # one pod downloaded; 15 waited for it
    assert gets == {name: 1 for name in FILES}  # the source saw each file read exactly once
    assert len({r["path"] for r in results}) == 1
    for r in results:
        assert r["seen"] == want  # complete, and every byte as the source has it
    base = shared / "llama-tiny"
    assert (base / "current").resolve() == Path(results[0]["path"]).resolve()
    assert not list((base / ".locks").iterdir())  # the lock is gone with its holder
    assert not list((base / ".incoming").iterdir())  # nothing half-written left behind
