"""Data-parallel groups: ranks of one model replica read identical batches, replicas disjoint
shares that together make the epoch; under torchrun (gloo, CPU), and for a 64-VM tp=8 job
(world 512) through a device mesh on torch's fake process group, without 512 processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import StreamError
from stoker.stream import ShardWriter, StreamingDataset

WORKER = Path(__file__).with_name("stream_worker.py")
N = 500
BATCH = 6  # stream_worker.py's


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("groups") / "ds"
    with ShardWriter(root, shard_size="8KiB", codec="pickle") as w:
        for i in range(N):
            w.write({"id": i, "data": bytes([i % 251]) * (100 + i % 200)})
    return root


def _run(nproc: int, out: Path, root: Path, groups: str, *, stop: str = "-", state: str = "-"):
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
    cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    cmd += [str(WORKER), str(root), str(out), stop, state, groups]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads((out / f"rank-{r}.json").read_text()) for r in range(nproc)]


@pytest.fixture(scope="module")
def two_replicas(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """4 ranks, tp = 2: ranks 0 and 1 are replica 0, ranks 2 and 3 replica 1."""
    return _run(4, tmp_path_factory.mktemp("dp") / "out", dataset, "dp:2")


def _ids(rank: dict) -> list[int]:
    return [i for batch in rank["batches"] for i in batch]


def _check_replicas(ranks: list[dict], tp: int, samples: int) -> None:
    """Ranks of a replica: byte-identical batches in identical order; replicas: disjoint and,
    together, every sample that fills a global batch."""
    dp = len(ranks) // tp
    assert [r["group"] for r in ranks] == [[k // tp, dp] for k in range(len(ranks))]
    for replica in range(dp):
        members = ranks[replica * tp : (replica + 1) * tp]
        assert all(m["batches"] == members[0]["batches"] for m in members)
        assert all(m["hashes"] == members[0]["hashes"] for m in members)
    shares = [set(_ids(ranks[replica * tp])) for replica in range(dp)]
    assert sum(map(len, shares)) == len(set().union(*shares))  # disjoint
    assert len(set().union(*shares)) == samples // (dp * BATCH) * dp * BATCH  # complete


def test_ranks_of_a_replica_read_identical_batches(two_replicas: list[dict]) -> None:
    _check_replicas(two_replicas, tp=2, samples=N)
    assert len(two_replicas[0]["batches"]) == N // (2 * BATCH)
    assert len({json.dumps(r["state"]) for r in two_replicas}) == 1  # one global position


def test_a_device_mesh_reads_as_the_same_groups_given_by_number(
    dataset: Path, tmp_path: Path, two_replicas: list[dict]
) -> None:
    """The worker also checks that the mesh's groups match the same groups made as torch
    process groups (process_group=)."""
    mesh = _run(4, tmp_path / "mesh", dataset, "mesh:2")
    _check_replicas(mesh, tp=2, samples=N)
    assert [r["batches"] for r in mesh] == [r["batches"] for r in two_replicas]


def test_resume_from_two_data_parallel_groups_onto_one(dataset: Path, tmp_path: Path) -> None:
    half = _run(4, tmp_path / "a", dataset, "dp:2", stop="7")
    assert len({json.dumps(r["state"]) for r in half}) == 1
    assert half[0]["state"]["position"] == 7 * 2 * BATCH
    state = tmp_path / "state.json"
    state.write_text(json.dumps(half[0]["state"]))
    rest = _run(2, tmp_path / "b", dataset, "dp:2", state=str(state))  # one replica of 2 ranks
    assert rest[0]["batches"] == rest[1]["batches"] and rest[0]["hashes"] == rest[1]["hashes"]
    seen = _ids(half[0]) + _ids(half[2]) + _ids(rest[0])
    assert len(seen) == len(set(seen))  # no sample twice
    assert len(seen) == 7 * 2 * BATCH + (N - 7 * 2 * BATCH) // BATCH * BATCH  # none skipped


def test_a_data_parallel_size_without_a_mapping_is_an_error(
    dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(
        StreamError,
        match=r"dp_size=2 in a job of 4 ranks: .* pass dp_rank= .*process_group= .*device_mesh=",
    ):
        StreamingDataset(dataset, dp_size=2)
    # A plain job, every rank its own replica, works as before, with dp_size or without.
    assert StreamingDataset(dataset, dp_size=4).group == StreamingDataset(dataset).group
    assert (StreamingDataset(dataset).group.rank, StreamingDataset(dataset).group.size) == (1, 4)
    assert StreamingDataset(dataset, dp_rank=0, dp_size=2).group.size == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dp_rank": 1}, r"dp_rank=1: pass dp_size="),
        ({"dp_rank": 2, "dp_size": 2}, r"dp_rank=2: use a whole number from 0 to dp_size - 1"),
        ({"dp_rank": -1, "dp_size": 2}, r"dp_rank=-1: use a whole number"),
        ({"dp_rank": "0", "dp_size": 2}, r"dp_rank='0': use a whole number"),
        ({"dp_rank": 0, "dp_size": 0}, r"dp_size=0: use a whole number >= 1"),
        ({"dp_rank": 0, "dp_size": 2, "process_group": object()}, r"dp_rank and process_group"),
        ({"mesh_dim": "dp"}, r"mesh_dim=: pass device_mesh="),
        ({"process_group": object()}, r"process_group=: torch.distributed is not started"),
    ],
)
def test_bad_group_values_are_named(dataset: Path, options: dict, message: str) -> None:
    with pytest.raises(StreamError, match=message):
        StreamingDataset(dataset, **options)


MESH_512 = """
import json, sys
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore
from stoker.errors import StreamError
from stoker.stream import StreamingDataset

out = {"groups": [], "errors": []}
for rank in range(512):
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=512)
    mesh = init_device_mesh("cpu", (64, 8), mesh_dim_names=("dp", "tp"))
    group = StreamingDataset(sys.argv[1], device_mesh=mesh, mesh_dim="dp").group
    out["groups"].append([group.rank, group.size])
    if rank == 9:  # HSDP: replicate x shard flattened; a mesh without mesh_dim; a wrong name
        hsdp = init_device_mesh("cpu", (4, 16, 8), mesh_dim_names=("rep", "shard", "tp"))
        g = StreamingDataset(sys.argv[1], device_mesh=hsdp, mesh_dim=("rep", "shard")).group
        out["hsdp"] = [g.rank, g.size]
        for dim in (None, "data"):
            try:
                StreamingDataset(sys.argv[1], device_mesh=mesh, mesh_dim=dim)
            except StreamError as exc:
                out["errors"].append(str(exc))
    dist.destroy_process_group()
print(json.dumps(out))
"""


def test_a_64_vm_tp8_job_maps_ranks_to_disjoint_complete_shares(tmp_path: Path) -> None:
    """World 512 (64 VMs of 8 GPUs), tp = 8 within a VM: 64 data-parallel groups. Each rank's
    group comes from a real DeviceMesh ("dp", "tp") on torch's fake process group; the shares
    are then worked out for all 512 ranks."""
    root = tmp_path / "ds"
    with ShardWriter(root, shard_size="4KiB") as w:
        for i in range(3000):
            w.write(i.to_bytes(4, "little"))
    run = subprocess.run(
        [sys.executable, "-c", MESH_512, str(root)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert found["groups"] == [[rank // 8, 64] for rank in range(512)]
    assert found["hsdp"] == [1, 64]  # rank 9: rep 0, shard 1 of 16
    assert "has 2 dimensions (dp, tp): pass mesh_dim=" in found["errors"][0]
    assert "mesh_dim='data': the mesh's dimensions are 'dp', 'tp'" in found["errors"][1]

    ds = StreamingDataset(root, batch_size=4, seed=3)
    shares: dict[int, np.ndarray] = {}
    for dp_rank, dp_size in found["groups"]:  # rank by rank, all 512
        mine = StreamingDataset(root, batch_size=4, seed=3, dp_rank=dp_rank, dp_size=dp_size)
        got = mine.my_batches()
        if dp_rank in shares:
            assert np.array_equal(got, shares[dp_rank])  # the replica's ranks alike
        shares[dp_rank] = got
    every = np.concatenate([s.ravel() for s in shares.values()])
    assert len(shares) == 64 and len(set(every.tolist())) == len(every)  # disjoint
    assert len(every) == 3000 // (64 * 4) * 64 * 4  # complete, but the short tail
    merged = np.stack([shares[d] for d in range(64)], axis=1).ravel()  # the global order
    assert np.array_equal(merged, ds.source.order()[: len(merged)])


STARTED_BY_HAND = """
import json, os, sys
import torch.distributed as dist
import torch.utils.data
from torch.testing._internal.distributed.fake_pg import FakeStore
from stoker.stream import StreamingDataset

if __name__ == "__main__":
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        os.environ.pop(name, None)
    dist.init_process_group("fake", store=FakeStore(), rank=3, world_size=4)
    ds = StreamingDataset(sys.argv[1], seed=4, batch_size=5)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=1, multiprocessing_context=ds.mp_context
    )
    got = [int.from_bytes(s, "little") for s in loader]  # a forked worker: it has the group
    sent = ds.__getstate__()["data_group"]  # what a worker started afresh gets (fork server)
    mine = ds.my_batches().ravel().tolist()
    print(json.dumps({"got": got, "mine": mine, "sent": [sent.rank, sent.size]}))
"""


def test_workers_read_the_share_of_a_group_started_by_hand(
    tmp_path: Path,
) -> None:
    """A process group started without torchrun's variables (rank 3 of 4 here): a worker
    started afresh (the fork server of a remote dataset) has no group and no RANK, and would
    read the whole epoch as rank 0 of 1; it is sent the group as numbers."""
    root = tmp_path / "ds"
    with ShardWriter(root, shard_size="1KiB") as w:
        for i in range(200):
            w.write(i.to_bytes(4, "little"))
    script = tmp_path / "by_hand.py"
    script.write_text(STARTED_BY_HAND)
    run = subprocess.run(
        [sys.executable, str(script), str(root)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout)
    assert found["got"] == found["mine"] and len(found["got"]) == 200 // 20 * 5
    assert found["sent"] == [3, 4]
