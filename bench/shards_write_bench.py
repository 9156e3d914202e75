"""Parallel conversion: ``write_shards`` of 20,000 files with 1 process and with 2 (``workers=2``),
and the machine's ceiling for 2: two independent 1-process conversions of half the files each,
at the same time (what 2 processes can do here with nothing shared between them).

    python bench/shards_write_bench.py [--files 20000] [--size 16384] [--rounds 3]

Rounds alternate the three runs (the machine is shared and noisy); medians are reported with
the CPU that other processes took while each round ran. Results: bench/results/shards_write.json
(rendered by bench/_render_shards_write.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_mark, others_cpu_share  # noqa: E402
from _results import save  # noqa: E402

CONVERT = """
import sys, time
from stoker.stream import write_shards
if __name__ == "__main__":
    start = time.perf_counter()
    index = write_shards(sys.argv[1], sys.argv[2], shard_size=sys.argv[3], workers=int(sys.argv[4]))
    print(time.perf_counter() - start, index.samples)
"""


def make_files(root: Path, files: int, size: int) -> None:
    """``files`` files of about ``size`` bytes in folders of 1,000 (incompressible)."""
    block = os.urandom(size + 1024)
    for i in range(files):
        folder = root / f"{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:06d}.bin").write_bytes(block[i % 1024 : i % 1024 + size])


def convert(script: Path, src: Path, out: Path, shard: str, workers: int) -> subprocess.Popen:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, str(script), str(src), str(out), shard, str(workers)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def timed(*starts: tuple) -> float:
    """Seconds until every conversion of ``starts`` (started together) is done."""
    begin = time.perf_counter()
    runs = [convert(*s) for s in starts]
    for run in runs:
        if run.wait() != 0:
            raise SystemExit(f"conversion failed: {run.args}")
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=16_384)
    parser.add_argument("--shard", default="8MiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: /tmp)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="stoker-shards-bench-", dir=args.dir))
    try:
        src, halves = scratch / "src", [scratch / "half0", scratch / "half1"]
        make_files(src, args.files, args.size)
        for h, half in enumerate(halves):  # the same files, split in two trees for the ceiling
            half.mkdir()
            for folder in sorted(src.iterdir())[h::2]:
                shutil.copytree(folder, half / folder.name)
        script = scratch / "convert.py"
        script.write_text(CONVERT)
        timed((script, src, scratch / "warm", args.shard, 1))  # the inputs into the page cache
        rounds = []
        for r in range(args.rounds):
            mark = cpu_mark()
            one = timed((script, src, scratch / "o1", args.shard, 1))
            two = timed((script, src, scratch / "o2", args.shard, 2))
            pair = timed(
                *((script, h, scratch / f"p{i}", args.shard, 1) for i, h in enumerate(halves))
            )
            same = (scratch / "o1" / "index.json").read_bytes() == (
                scratch / "o2" / "index.json"
            ).read_bytes()
            rounds.append({
                "one_s": one, "two_s": two, "pair_s": pair, "identical": same,
                "others_cpu": others_cpu_share(mark), "loadavg_1m": os.getloadavg()[0],
            })  # fmt: skip
            print(f"round {r + 1}: 1 process {one:.2f} s, 2 processes {two:.2f} s, "
                  f"2 independent halves {pair:.2f} s, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        med = {k: statistics.median(x[k] for x in rounds) for k in ("one_s", "two_s", "pair_s")}
        results = {
            "files": args.files,
            "file_bytes": args.size,
            "shard_size": args.shard,
            "cores": os.cpu_count(),
            "rounds": rounds,
            "median": med,
            "speedup": med["one_s"] / med["two_s"],
            "ceiling": med["one_s"] / med["pair_s"],
            "target": 1.7,
        }
        path = save("shards_write", results)
        print(
            f"2 processes {results['speedup']:.2f}x one; ceiling {results['ceiling']:.2f}x -> {path}"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
