"""Many nodes: replicated state written once, node-local fast tiers, another world size.

Four ranks under torchrun as two emulated nodes of two ranks, each node's fast tier its own
folder, against two durable tiers in one run (Azurite, with a state that has private keys; a
folder, with a DDP state, all replicated); then three ranks load from the durable tiers alone.
The torchruns are module fixtures, shared by the tests that read what they left.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from ckpt_worker import digest, model_state
from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import CheckpointManifest, step_dir
from stoker.checkpoint._replicated import assign
from stoker.errors import CheckpointError, CorruptCheckpointError

WORKER = Path(__file__).with_name("ckpt_worker.py")


def _torchrun(n: int, mode: str, out: Path, *args: str) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={n}"]
    cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    out.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        [*cmd, str(WORKER), mode, str(out), *args], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(n)]


@pytest.fixture(scope="module")
def blob_url(azurite: Any) -> tuple[str, str]:
    """As ``blob_env`` gives it (that fixture is per test; this one serves the module)."""
    return azurite.connection_string, f"az://{azurite.container().container_name}"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, blob_url: Any) -> dict[str, Any]:
    conn, url = blob_url
    base = tmp_path_factory.mktemp("nodes")
    durables = [f"{url}/nodes", str(base / "durable")]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
        four = _torchrun(4, "nodes", base / "out4", str(base / "fast"), *durables)
        three = _torchrun(3, "reload", base / "out3", str(base / "fast"), *durables)
    return {"base": base, "durables": durables, "four": four, "three": three, "conn": conn}


def _shard_bytes(folder: Path, step: int) -> int:
    return sum(p.stat().st_size for p in (folder / step_dir(step)).glob("shard-*.bin"))


def _model_bytes(step: int) -> int:
    total = 0

    def walk(obj: Any) -> None:
        nonlocal total
        if isinstance(obj, torch.Tensor):
            total += obj.numel() * obj.element_size()
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)

    walk(model_state(step))
    return total


def test_replicated_state_is_written_once_and_balanced(saved: dict[str, Any]) -> None:
    model = _model_bytes(3)
    for d in ("d0", "d1"):
        fast = saved["base"] / "fast" / d
        on_fast = _shard_bytes(fast / "node0", 3) + _shard_bytes(fast / "node1", 3)
        # the model's bytes once, plus four small skeletons and indexes (not 4x the model)
        assert model <= on_fast <= model + 4 * 16_384, (d, on_fast, model)
        durable = Path(saved["durables"][1]) / step_dir(3)
        if d == "d1":
            assert sum(p.stat().st_size for p in durable.glob("shard-*")) == on_fast
        sizes = [r["runs"][int(d[1])]["bytes"] for r in saved["four"]]
        assert max(sizes) - min(sizes) <= 256 * 256 * 4  # within the largest tensor
    manifest = CheckpointManifest.from_json(
        (saved["base"] / "fast/d0/node1" / step_dir(3) / "manifest.json").read_bytes(), "t"
    )
    assert manifest.format == "stoker.checkpoint/2"
    assert manifest.replicated == ["model", "optim"] and manifest.private == ["rng", "rank"]
    assert manifest.nodes == [[0, 1], [2, 3]]
    held = [n for f in manifest.files for n in f.tensors]
    assert len(held) == len(set(held)) == 12  # every replicated tensor in exactly one file
    assert [f.rank for f in manifest.files] == [0, 1, 2, 3]


def test_every_rank_loads_identical_replicated_state_and_its_own(saved: dict[str, Any]) -> None:
    expected = digest(model_state(3))
    for i in (0, 1):
        for r in saved["four"]:
            run = r["runs"][i]
            assert run["nodes"] == [[0, 1], [2, 3]]
            for case in ("first", "wiped"):
                assert run[case]["step"] == 3
                assert run[case]["replicated_ok"] and run[case]["replicated_digest"] == expected
                if i == 0:
                    assert run[case]["private"] == {"rng": r["rank"] * 100 + 3, "rank": r["rank"]}
            # a node reads its own node's files from its fast tier, the other node's from durable
            node = r["rank"] // 2
            files = run["first"]["files"]
            assert run["first"]["tier"] == "fast"
            assert {n: t for n, t in files.items()} == {
                f"shard-{k:05d}-of-00004.bin": "fast" if k // 2 == node else "durable"
                for k in range(4)
            }
            # node 1's fast tier wiped: its ranks load from durable; node 0 is untouched
            assert run["wiped"]["tier"] == ("durable" if node == 1 else "fast")
            # each node's fast tier was pruned by its own lowest rank (keep_last=2)
            assert run["fast_steps"] == [2, 3]


def test_node_local_fast_tier_is_not_called_damaged(saved: dict[str, Any]) -> None:
    base, durable = saved["base"], saved["durables"][1]
    node1 = base / "fast/d1/node1"
    with Checkpointer(node1, durable, check_writable=False) as ckpt:
        infos = {i.step: i for i in ckpt.list(hashes=True)}
        assert infos[3].loads
        assert infos[3].tiers["fast"] == "ok: this node's files (ranks 2, 3)"
        assert infos[3].tiers["durable"] == "ok"
        report = ckpt.verify()  # node 0's files are not on node 1's disk, and not missing
        assert report.ok, report.problems
        assert report.files == sum(  # this node's files on fast, every file on durable
            len([n for n in (node1 / step_dir(s)).glob("shard-*")]) for s in (2, 3)
        ) + sum(len(list((Path(durable) / step_dir(s)).glob("shard-*"))) for s in (2, 3))
    with Checkpointer(base / "fast/d1/node0", check_writable=False, keep_last=1) as ckpt:
        infos = {i.step: i for i in ckpt.list(hashes=True)}
        assert infos[3].loads and infos[2].loads  # node 1's files are on node 1's disk
        report = ckpt.prune(dry_run=True)
        assert report["fast"] == [2] and not report.damaged


def test_another_nodes_file_damaged_on_durable_means_the_step_does_not_load(
    saved: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    node0, durable = tmp_path / "node0", tmp_path / "durable"
    shutil.copytree(saved["base"] / "fast/d1/node0", node0)
    shutil.copytree(saved["durables"][1], durable)
    shard = durable / step_dir(3) / "shard-00002-of-00004.bin"  # node 1's: not on node 0's disk
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))
    with Checkpointer(node0, durable, check_writable=False) as ckpt:
        infos = {i.step: i for i in ckpt.list(hashes=True)}
    assert not infos[3].loads and "shard-00002-of-00004.bin" in infos[3].why
    assert infos[3].tiers["fast"] == "ok: this node's files (ranks 0, 1)"
    assert infos[3].tiers["durable"].startswith("damaged: shard-00002-of-00004.bin")
    assert infos[2].loads


def test_three_ranks_load_from_the_durable_tier_alone(saved: dict[str, Any]) -> None:
    expected = digest(model_state(3))
    for r in saved["three"]:
        keyed, ddp = r["runs"]
        # private keys on another world size: refused, naming them; reshard=True: rank 0's
        assert "saved by 4 ranks, this job has 3" in keyed["plain"]["error"]
        assert "['rng', 'rank']" in keyed["plain"]["error"]
        assert keyed["reshard"]["private"] == {"rng": 3.0, "rank": 0}
        for run in (keyed["reshard"], ddp["plain"], ddp["reshard"]):
            assert run["replicated_digest"] == expected and run["tier"] == "durable"
            assert set(run["files"].values()) == {"durable"}


def test_one_rank_loads_a_four_rank_ddp_save_and_checks_each_range(
    saved: dict[str, Any], tmp_path: Path
) -> None:
    durable = Path(saved["durables"][1])
    with Checkpointer(tmp_path / "one", durable, check_writable=False) as ckpt:
        restored = ckpt.load()
        assert restored.step == 3 and digest(restored.state) == digest(model_state(3))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AZURE_STORAGE_CONNECTION_STRING", saved["conn"])
        with Checkpointer(tmp_path / "one", saved["durables"][0], check_writable=False) as ckpt:
            with pytest.raises(CheckpointError, match=r"\['rng', 'rank'\] are each rank's own"):
                ckpt.load()
    # one flipped byte in a replicated tensor of rank 1's durable file: that range fails
    # its own hash, so step 3 does not load from durable alone and step 2 is taken
    manifest = CheckpointManifest.from_json(
        (durable / step_dir(3) / "manifest.json").read_bytes(), "t"
    )
    record = manifest.file("shard-00001-of-00004.bin")
    name, (offset, *_rest) = next(iter(record.tensors.items()))
    shard = durable / step_dir(3) / record.name
    data = bytearray(shard.read_bytes())
    data[offset] ^= 0xFF
    shard.write_bytes(bytes(data))
    with Checkpointer(tmp_path / "two", durable, check_writable=False) as ckpt:
        with pytest.raises(CorruptCheckpointError, match=f"bytes of {re.escape(name)}"):
            ckpt.load(fallback=False)
        restored = ckpt.load()
        assert restored.step == 2 and 3 in restored.skipped
        assert digest(restored.state) == digest(model_state(2))


def test_dcp_on_node_local_fast_tiers_uploads_from_every_rank(
    saved: dict[str, Any], tmp_path: Path
) -> None:
    durable = Path(saved["durables"][1] + "-dcp")
    manifest = CheckpointManifest.from_json(
        (durable / step_dir(9) / "manifest.json").read_bytes(), "t"
    )
    assert manifest.kind == "dcp" and manifest.nodes == [[0, 1], [2, 3]]
    on_durable = {p.name for p in (durable / step_dir(9)).iterdir()}
    assert {f.name for f in manifest.files} | {"manifest.json"} == on_durable
    for r in saved["four"]:
        assert r["dcp"]["loaded_ok"]
        assert (
            "state['w']: a DTensor ((Shard(dim=0),)) cannot be saved by save()"
            in (r["dcp"]["dtensor_refused"])
        )
        # before the load each node held only its own ranks' files (and node 0 the .metadata)
        node = r["rank"] // 2
        written = {f.name for f in manifest.files if f.rank in (2 * node, 2 * node + 1)}
        others = {f.name for f in manifest.files} - written
        assert written | {"manifest.json"} <= set(r["dcp"]["fast_files"])
        assert not others & set(r["dcp"]["fast_files"])
    import torch.distributed.checkpoint as dcp

    state = {"w": torch.zeros(16, 4)}
    with Checkpointer(tmp_path / "fresh", durable, check_writable=False) as ckpt:
        dcp.load(state, storage_reader=ckpt.dcp_reader(), no_dist=True)
    assert torch.equal(state["w"], torch.arange(64, dtype=torch.float32).reshape(16, 4))


def test_ranks_that_hold_other_replicated_tensors_commit_nothing(saved: dict[str, Any]) -> None:
    for r in saved["four"]:
        assert r["mismatch"].startswith(
            "step 1: replicated= on node-local fast tiers (ranks [[0, 1], [2, 3]] each share one) "
            "needs a durable tier"
        )
        assert "rank(s) [3] hold other replicated tensors" in r["mismatch"]
        assert r["mismatch"].endswith("committed: []")


def test_assignment_is_deterministic_and_balanced() -> None:
    sizes = [(f"t{i}", (i * 7919) % 1000 + 1) for i in range(200)]
    owner = assign(sizes, 4)
    assert owner == assign(list(reversed(sizes)), 4)  # the order given does not matter
    loads = [sum(n for name, n in sizes if owner[name] == r) for r in range(4)]
    assert max(loads) - min(loads) <= max(n for _, n in sizes)
    assert assign([("a", 5), ("b", 5)], 2) == {"a": 0, "b": 1}


def test_replicated_keys_are_checked_and_a_single_rank_writes_all(tmp_path: Path) -> None:
    state = {"model": {"w": torch.arange(6.0)}, "step": 4}
    with Checkpointer(tmp_path / "f") as ckpt:
        with pytest.raises(CheckpointError, match=r"step 1: replicated= names \['optim'\]"):
            ckpt.save(1, state, replicated=("model", "optim"))
        ckpt.save(2, state, replicated=("model",))
        ckpt.wait()
        restored = ckpt.load()
    assert torch.equal(restored.state["model"]["w"], torch.arange(6.0))
    assert restored.state["step"] == 4


def test_a_format_1_manifest_is_still_read() -> None:
    raw = {
        "step": 5,
        "world_size": 1,
        "kind": "stoker",
        "created": "2026-11-30T08:13:41+00:00",
        "format": "stoker.checkpoint/1",
        "files": [{"name": "shard-00000-of-00001.bin", "size": 10, "xxh3": "ab"}],
    }
    manifest = CheckpointManifest.from_json(json.dumps(raw).encode(), "t")
    assert manifest.replicated is None and manifest.files[0].rank is None
    raw["format"] = "stoker.checkpoint/9"
    with pytest.raises(CheckpointError, match="stoker.checkpoint/9"):
        CheckpointManifest.from_json(json.dumps(raw).encode(), "t")


def test_a_step_written_in_format_1_still_loads(tmp_path: Path) -> None:
    """A shard and manifest as stoker.checkpoint/1 wrote them (no names, no layout)."""
    import io

    import xxhash

    from stoker.checkpoint._shardfile import MAGIC

    w = torch.arange(10, dtype=torch.float32)
    skeleton = io.BytesIO()
    torch.save({"w": {"__stoker_tensor__": 0}, "epoch": 3}, skeleton)
    skel = skeleton.getvalue()
    raw = w.numpy().tobytes()
    index = json.dumps(
        {
            "format": 1,
            "tensors": [[0, len(raw), "float32", [10], "cpu"]],
            "skeleton": [len(raw), len(skel)],
        }
    ).encode()
    data = raw + skel + index + len(index).to_bytes(8, "little") + MAGIC
    folder = tmp_path / "fast" / step_dir(5)
    folder.mkdir(parents=True)
    (folder / "shard-00000-of-00001.bin").write_bytes(data)
    manifest = {
        "step": 5,
        "world_size": 1,
        "kind": "stoker",
        "created": "2026-11-30T08:13:41+00:00",
        "format": "stoker.checkpoint/1",
        "files": [
            {
                "name": "shard-00000-of-00001.bin",
                "size": len(data),
                "xxh3": xxhash.xxh3_128(data).hexdigest(),
            }
        ],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with Checkpointer(tmp_path / "fast", check_writable=False) as ckpt:
        restored = ckpt.load()
    assert torch.equal(restored.state["w"], w) and restored.state["epoch"] == 3
