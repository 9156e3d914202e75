"""CPU seconds per GiB of an import (Blob -> local), stoker against rclone, A/B interleaved.

One Azurite holds 2 x 512 MiB blobs (each with a correct Content-MD5, set after the upload)
and 200 x 1 MiB blobs; each round runs every tool once, in a rotating order, into a fresh
folder, and takes the child's own CPU (user + sys, from wait4's rusage) and its wall time
(then a ``sync``, timed apart). The stoker variants are source trees put first on PYTHONPATH,
so two versions of stoker can be compared in one run on the same data:

    .venv/bin/python bench/stage_cpu.py [--variant NAME=SRC_DIR[,VAR=VALUE...] ...] [--reps 3]
        [--no-rclone] [--no-md5] [--rclone-defaults] [--floors] [--wrap "PROFILER ... {out} --"]
        [--write BENCHMARKS.md]

``--no-md5`` leaves the large blobs as the SDK's block upload does, with no Content-MD5 (as most
multi-GiB files in real accounts are: issue 55); ``--rclone-defaults`` adds rclone untuned;
``--floors`` adds the least CPU a Python program spends on the same blobs, with nothing stoker
adds (bench/_stage_floors.py: obstore alone, and the standard library's http.client alone).

Without ``--variant`` it measures this checkout's ``src`` as "stoker"; ``VAR=VALUE`` after a
variant's folder sets its environment (malloc settings, say). ``--wrap`` runs each stoker run
under a profiler (perf, py-spy), its output in .bench/stage-cpu-NAME-ROUND.prof. Every copy's MD5 is
checked against the source's (the first round). Other processes share the machine's cores:
the section says how much of the CPU they took while the tools ran. Measure, then render: the
runs go to bench/results/stage-cpu.json, which bench/_render_stage_cpu.py formats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import _peers
import _results
import render
from _machine import (
    PRIME_GIB,
    cpu_mark,
    kernel_thread_ticks,
    load_since,
    others_cpu_share,
    prime_memory,
)
from _markdown import publish
from _peers import ACCOUNT, Azurite

ROOT = Path(__file__).resolve().parents[1]
RUNS = _peers.BENCH / "stage-cpu-runs"  # (not under runs/: stage_bench.py clears that)
MiB = 1 << 20
CONTAINER = "cpu"
FLOORS = ("obstore", "httpclient")  # bench/_stage_floors.py
STREAMS = 16  # rclone's --transfers / --multi-thread-streams, as bench/stage_bench.py runs it

STOKER = r"""
import sys
from stoker.stage import stage
s = stage(sys.argv[1], sys.argv[2], allow_http=True)
sys.exit(0 if s.ok else 1)
"""


def seed(az: Azurite, large: int, large_mib: int, small: int, md5: bool = True) -> dict[str, str]:
    """Upload the blobs (``md5``: the large ones get their Content-MD5 set); returns each one's
    MD5 (hex)."""
    from azure.storage.blob import BlobServiceClient, ContentSettings

    az.create_container(CONTAINER)
    md5s: dict[str, str] = {}
    with BlobServiceClient.from_connection_string(az.connection_string) as svc:
        cc = svc.get_container_client(CONTAINER)
        for i in range(large):
            data = os.urandom(large_mib * MiB)
            name = f"large/{i}.bin"
            blob = cc.get_blob_client(name)
            blob.upload_blob(data, max_concurrency=4)
            digest = hashlib.md5(data).digest()
            # A block upload carries no Content-MD5: set it, as a service-side copy would have.
            if md5:
                blob.set_http_headers(ContentSettings(content_md5=bytearray(digest)))
            md5s[name] = digest.hex()
            del data
        for i in range(small):
            data = os.urandom(MiB)
            name = f"small/{i:03d}.bin"
            cc.get_blob_client(name).upload_blob(data)  # (one Put Blob: the service sets it)
            md5s[name] = hashlib.md5(data).hexdigest()
    return md5s


def check(dest: Path, md5s: dict[str, str]) -> None:
    for name, want in md5s.items():
        with open(dest / name, "rb") as f:
            got = hashlib.file_digest(f, "md5").hexdigest()
        if got != want:
            raise RuntimeError(f"{dest / name}: MD5 {got}, the source's {want}")


def run(argv: list[str], env: dict[str, str], log: Path) -> dict:
    """One tool's process: its wall time, its own CPU (user + sys), the others' CPU share, and
    what the kernel's threads used from its start to the end of the ``sync`` after it (the
    writeback of what it left unsynced)."""
    mark, kernel = cpu_mark(), kernel_thread_ticks()
    start = time.perf_counter()
    rss = log.with_suffix(".rss")
    # /usr/bin/time for the peak memory: a child's own ru_maxrss starts from this process's,
    # which a fork hands down (and this one held the seeded data). Its rusage includes the tool's.
    argv = ["/usr/bin/time", "-f", "%M", "-o", str(rss), *argv]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    others = others_cpu_share(mark)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code:
        raise RuntimeError(f"{argv[0]} exited {code}; see {log}")
    start = time.perf_counter()
    os.sync()
    sync_s = time.perf_counter() - start
    kernel_s = (kernel_thread_ticks() - kernel) / os.sysconf("SC_CLK_TCK")
    return {
        "wall": wall,
        "sync": sync_s,
        "kernel_threads": kernel_s,
        "user": usage.ru_utime,
        "sys": usage.ru_stime,
        "cpu": usage.ru_utime + usage.ru_stime,
        "others": others,
        "rss_mib": int(rss.read_text().split()[-1]) / 1024,
    }


def floor_job(az: Azurite, md5s: dict[str, str], large_mib: int) -> Path:
    """The floors' job (bench/_stage_floors.py): where the blobs are, a read SAS made here
    (outside the clock) and every blob's name and size (the listing, also made here)."""
    import datetime as dt

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(
        ACCOUNT,
        CONTAINER,
        account_key=_peers.KEY,
        permission=ContainerSasPermissions(read=True),
        expiry=dt.datetime.now(dt.UTC) + dt.timedelta(days=1),
    )
    sizes = {"large": large_mib * MiB, "small": MiB}
    job = {
        "endpoint": az.endpoint,
        "account": ACCOUNT,
        "container": CONTAINER,
        "key": _peers.KEY,
        "sas": sas,
        "blobs": [{"name": n, "size": sizes[n.split("/")[0]]} for n in md5s],
    }
    path = RUNS / "floor-job.json"
    path.write_text(json.dumps(job))
    return path


def commands(
    az: Azurite,
    variants: dict[str, str],
    rclone_defaults: bool = False,
    floor_job: Path | None = None,
) -> dict:
    conf = RUNS / "rclone.conf"
    conf.touch()
    rclone_env = dict(
        os.environ,
        RCLONE_CONFIG=str(conf),
        RCLONE_AZUREBLOB_ACCOUNT=ACCOUNT,
        RCLONE_AZUREBLOB_KEY=_peers.KEY,
        RCLONE_AZUREBLOB_ENDPOINT=az.endpoint,
    )
    rclone = str(_peers.VENV / "bin" / "rclone")
    tune = ["--transfers", str(STREAMS), "--checkers", str(STREAMS)]
    tune += ["--multi-thread-streams", str(STREAMS)]
    out: dict = {
        "rclone": lambda d: (
            [rclone, "copy", f":azureblob:{CONTAINER}", str(d), "-q", *tune],
            rclone_env,
        )
    }
    if rclone_defaults:
        out["rclone-defaults"] = lambda d: (
            [rclone, "copy", f":azureblob:{CONTAINER}", str(d), "-q"],
            rclone_env,
        )
    if floor_job:
        floors = str(Path(__file__).with_name("_stage_floors.py"))
        for how in FLOORS:
            out[f"floor-{how}"] = lambda d, how=how: (
                [sys.executable, floors, how, str(floor_job), str(d)],
                dict(os.environ),
            )
    for name, spec in variants.items():
        # NAME=SRC_DIR[,VAR=VALUE...]: extra environment for that variant (malloc tuning...)
        src, *extra = str(spec).split(",")
        env = dict(
            os.environ,
            **dict(e.split("=", 1) for e in extra),
            PYTHONPATH=str(src),
            AZURE_STORAGE_CONNECTION_STRING=az.connection_string,
            XDG_CACHE_HOME=str(RUNS / "state"),
        )
        out[name] = lambda d, env=env: (
            [sys.executable, "-c", STOKER, f"az://{CONTAINER}", str(d)],
            env,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=SRC_DIR[,VAR=VALUE...]: a stoker source tree (and environment) to measure",
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--large", type=int, default=2)
    ap.add_argument("--large-mib", type=int, default=512)
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--no-rclone", action="store_true")
    ap.add_argument("--no-md5", action="store_true", help="large blobs without Content-MD5")
    ap.add_argument("--rclone-defaults", action="store_true", help="rclone untuned too")
    ap.add_argument(
        "--floors",
        action="store_true",
        help="the least CPU a Python program spends on the same blobs (bench/_stage_floors.py)",
    )
    ap.add_argument(
        "--prime-gib",
        type=float,
        default=PRIME_GIB,
        help="memory to touch and free just before each run (_machine.prime_memory; 0: none)",
    )
    ap.add_argument(
        "--wrap",
        help="a profiler's command before each stoker run, {out} its output "
        '(e.g. "perf record -e cpu-clock -F 499 -g -o {out} --")',
    )
    ap.add_argument("--write", type=Path, help="BENCHMARKS.md to update (else printed)")
    args = ap.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) or {"stoker": str(ROOT / "src")}
    variants = {k: v if "," in v else str(Path(v).resolve()) for k, v in variants.items()}
    _peers.ensure_venv()
    _peers.ensure_azurite()
    shutil.rmtree(RUNS, ignore_errors=True)
    RUNS.mkdir(parents=True)
    gib = (args.large * args.large_mib + args.small) / 1024
    results: dict[str, list[dict]] = {}
    mark = cpu_mark()
    with Azurite() as az:
        md5s = seed(az, args.large, args.large_mib, args.small, not args.no_md5)
        job = floor_job(az, md5s, args.large_mib) if args.floors else None
        cmds = commands(az, variants, args.rclone_defaults, job)
        if args.no_rclone:
            del cmds["rclone"]
        tools = list(cmds)
        for rep in range(args.reps):
            order = tools[rep % len(tools) :] + tools[: rep % len(tools)]
            for tool in order:
                dest = RUNS / f"{tool}-{rep}"
                shutil.rmtree(RUNS / "state", ignore_errors=True)
                argv, env = cmds[tool](dest)
                if args.wrap and not tool.startswith(("rclone", "floor-")):
                    out = RUNS.parent / f"stage-cpu-{tool}-{rep}.prof"
                    argv = [*args.wrap.format(out=out).split(), *argv]
                prime_memory(args.prime_gib)
                r = run(argv, env, RUNS / f"{tool}-{rep}.log")
                if rep == 0:
                    check(dest, md5s)
                shutil.rmtree(dest)
                results.setdefault(tool, []).append(r)
                print(
                    f"round {rep} {tool:>12}: {r['cpu'] / gib:.2f} CPU s/GiB "
                    f"(user {r['user']:.2f} sys {r['sys']:.2f}; kernel threads "
                    f"{r['kernel_threads'] / gib:.2f}), "
                    f"{gib * 1024 * MiB / 1e6 / r['wall']:.0f} MB/s, {r['rss_mib']:.0f} MiB, "
                    f"others {100 * r['others']:.0f} %",
                    flush=True,
                )
    version = subprocess.run(
        [str(_peers.VENV / "bin" / "rclone"), "version"], capture_output=True, text=True
    ).stdout.split("\n")[0]
    _results.save(
        "stage-cpu",
        {
            "gib": gib,
            "data": f"{args.large} x {args.large_mib} MiB + {args.small} x 1 MiB",
            "rclone": version,
            "streams": STREAMS,
            "md5": not args.no_md5,
            "prime_gib": args.prime_gib,
            "variants": variants,
            "runs": results,
            "load": load_since(mark),
        },
    )
    publish(render.render("stage-cpu"), args.write)


if __name__ == "__main__":
    main()
