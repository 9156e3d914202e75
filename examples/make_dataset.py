"""Generate a small dataset (random bytes, log-normal sizes, fixed seed) to stage in the demo.

python examples/make_dataset.py DIR [--files 200] [--mean-kib 256]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--mean-kib", type=float, default=256.0)
    args = parser.parse_args()
    rng = random.Random(1234)
    total = 0
    for i in range(args.files):
        size = int(rng.lognormvariate(0, 0.8) * args.mean_kib * 1024)
        path = args.dir / f"shard-{i // 50:02d}" / f"sample-{i:05d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.stat().st_size != size:
            path.write_bytes(rng.randbytes(size))
        total += size
    print(f"{args.files} files, {total / 1e6:.1f} MB in {args.dir}")


if __name__ == "__main__":
    main()
