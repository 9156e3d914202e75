"""A small model laid out as the Hugging Face hub's cache lays it out, for the model-cache demo.

    python examples/hf_snapshot.py .demo/hub

writes ``.demo/hub/models--demo--tiny/``: the bytes in ``blobs/<sha256>``, and under
``snapshots/<revision>/`` each file a relative symbolic link into ``blobs/``, as
``huggingface_hub`` writes it. It prints the snapshot's folder, for
``stoker cache pull SNAPSHOT ROOT --name tiny``, which follows the links (always) and publishes
plain files.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

REVISION = "3f1e6b0c9a52d4e8f7a6b5c4d3e2f1a0b9c8d7e6"


def write_snapshot(hub: Path) -> Path:
    model = hub / "models--demo--tiny"
    rng = random.Random(0)
    files = {
        "config.json": b'{"model_type": "tiny", "hidden_size": 64, "num_layers": 2}\n',
        "tokenizer.json": b'{"vocab": {"<s>": 0, "</s>": 1}}\n',
        "model.safetensors": rng.randbytes(3 << 20),
    }
    snapshot = model / "snapshots" / REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (model / "blobs").mkdir(exist_ok=True)
    (model / "refs").mkdir(exist_ok=True)
    (model / "refs" / "main").write_text(REVISION)
    for name, data in files.items():
        blob = model / "blobs" / hashlib.sha256(data).hexdigest()
        if not blob.exists():
            blob.write_bytes(data)
        link = snapshot / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


if __name__ == "__main__":
    print(write_snapshot(Path(sys.argv[1] if len(sys.argv) > 1 else ".demo/hub")))
