"""``StreamingMixture``: shares within 1 % over an epoch (and over each data-parallel group's
part), deterministic from seed and epoch, resumable mid-epoch, ``repeat`` and ``stop``, inside
torch's DataLoader with workers, tensors, and bad input named."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from stoker.errors import StreamError
from stoker.stream import ShardWriter, StreamingDataset, StreamingLoader, StreamingMixture, _samples
from stoker.stream._format import CorruptSample
from stoker.stream._mixture_order import apportion, interleave

SIZES = (3000, 1000, 500)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("mix")
    for s, n in enumerate(SIZES):
        with ShardWriter(root / f"s{s}", shard_size="8KiB", codec="pickle") as w:
            for i in range(n):
                w.write({"s": s, "i": i, "pad": bytes([i % 251]) * 60})
    return [root / f"s{s}" for s in range(len(SIZES))]


def _mix(sources: list[Path], **options: object) -> StreamingMixture:
    options = {"weights": [0.5, 0.3, 0.2], "epoch_samples": 6000, "seed": 3} | options
    return StreamingMixture([StreamingDataset(p) for p in sources], **options)  # type: ignore[arg-type]


def _batches(loader: object) -> list[list[tuple[int, int]]]:
    return [[(x["s"], x["i"]) for x in batch] for batch in loader]  # type: ignore[attr-defined]


def _seen(loader: object) -> list[tuple[int, int]]:
    return [(x["s"], x["i"]) for batch in loader for x in batch]  # type: ignore[attr-defined]


def test_three_sources_at_half_three_tenths_a_fifth_each_within_1_percent(
    sources: list[Path],
) -> None:
    weights = [0.5, 0.3, 0.2]
    groups = []
    for dp_rank in (0, 1):  # two data-parallel groups, each its own share of the epoch
        mix = _mix(sources, dp_rank=dp_rank, dp_size=2)
        groups.append(_batches(StreamingLoader(mix, 50, collate_fn=list)))
    # Disjoint and complete: global batch k is group 0's batch k and group 1's (a batch's
    # samples come grouped by source).
    whole = [sorted(b) for b in _batches(StreamingLoader(_mix(sources), 100, collate_fn=list))]
    assert [sorted(a + b) for a, b in zip(*groups, strict=True)] == whole
    whole = [x for b in whole for x in b]
    everything, groups = whole, [[x for b in g for x in b] for g in groups]
    assert len(everything) == 6000
    for seen in (everything, *groups):
        count = Counter(s for s, _ in seen)
        for s, w in enumerate(weights):
            assert abs(count[s] / len(seen) - w) <= 0.01, (s, count)
    # and every stretch of 600 samples (a few batches) too: the sources are spread evenly
    order = [s for s, _ in everything]
    for start in range(0, 6000, 600):
        count = Counter(order[start : start + 600])
        assert all(abs(count[s] / 600 - w) <= 0.01 for s, w in enumerate(weights)), count


def test_the_order_is_the_seed_and_epochs_and_nothing_else(sources: list[Path]) -> None:
    a, b = _mix(sources), _mix(sources)
    assert np.array_equal(a.source.order(), b.source.order())
    b.set_epoch(1)
    assert not np.array_equal(a.source.order(), b.source.order())
    assert not np.array_equal(a.source.order(), _mix(sources, seed=4).source.order())
    counts = apportion([0.5, 0.3, 0.2], 7)
    assert counts == [4, 2, 1] and sum(apportion([1, 1, 1], 1000)) == 1000
    source, k = interleave([5, 3], [10, 10], seed=0, epoch=0, repeat=True)
    assert sorted(k[source == 0].tolist()) == list(range(5))  # each source in its own order


def test_a_source_that_runs_out_repeats_each_pass_whole_or_ends_the_epoch(
    sources: list[Path],
) -> None:
    # The 500-sample source at 0.2 of 6,000 is read 1,200 times: two passes and 200 more.
    repeated = Counter(_seen(StreamingLoader(_mix(sources), 40, collate_fn=list)))
    small = {i: n for (s, i), n in repeated.items() if s == 2}
    assert sum(small.values()) == 1200 and set(small.values()) <= {2, 3} and len(small) == 500
    stop = _mix(sources, on_exhausted="stop")
    seen = _seen(StreamingLoader(stop, 10, collate_fn=list))
    count = Counter(s for s, _ in seen)
    assert len(seen) == len(set(seen)) and count[2] <= 500  # no sample twice
    assert len(seen) < 6000 and abs(count[2] / len(seen) - 0.2) <= 0.01


def test_absolute_samples_per_source(sources: list[Path]) -> None:
    mix = _mix(sources, weights=None, epoch_samples=None, samples=[100, 0, 900])
    seen = _seen(StreamingLoader(mix, 20, collate_fn=list))
    assert Counter(s for s, _ in seen) == {0: 100, 2: 900}


def test_resume_mid_epoch_records_each_sources_position(sources: list[Path]) -> None:
    whole = _seen(StreamingLoader(_mix(sources), 25, collate_fn=list))
    loader = StreamingLoader(_mix(sources), 25, collate_fn=list)
    first = []
    for n, batch in enumerate(loader, 1):
        first += [(x["s"], x["i"]) for x in batch]
        if n == 97:
            break
    state = loader.state_dict()
    assert state["position"] == 97 * 25
    positions = state["mixture"]["positions"]
    assert positions == [Counter(s for s, _ in first)[s] for s in range(3)]
    again = StreamingLoader(_mix(sources), 25, collate_fn=list)
    again.load_state_dict(state)
    assert first + _seen(again) == whole
    with pytest.raises(StreamError, match="mixture with counts"):
        StreamingLoader(_mix(sources, epoch_samples=5000), 25).load_state_dict(state)
    with pytest.raises(StreamError, match="mixture source 1 .* is not the dataset"):
        _mix([sources[0], sources[2], sources[1]]).source.load_state_dict(state, "x")
    single = StreamingLoader(StreamingDataset(sources[0]), 25)
    with pytest.raises(StreamError, match="lacks mixture"):
        StreamingLoader(_mix(sources), 25).load_state_dict(single.state_dict())


def test_inside_torchs_dataloader_with_workers(sources: list[Path]) -> None:
    expected = Counter(_seen(StreamingLoader(_mix(sources), 50, collate_fn=list)))
    loader = torch.utils.data.DataLoader(
        _mix(sources), batch_size=64, num_workers=2, collate_fn=list
    )
    assert Counter(_seen(loader)) == expected
    workers = StreamingLoader(_mix(sources), 50, num_workers=2, collate_fn=list)
    assert Counter(_seen(workers)) == expected


def test_tensor_sources_give_one_tensor_a_batch(tmp_path: Path) -> None:
    roots = []
    for s in range(2):
        with ShardWriter(tmp_path / f"t{s}", shard_size="4KiB", codec="array") as w:
            for i in range(300):
                w.write(np.full(16, s * 1000 + i, dtype=np.int32))
        roots.append(tmp_path / f"t{s}")
    mix = StreamingMixture(
        [StreamingDataset(r, dtype=torch.int32) for r in roots], weights=[3, 1], epoch_samples=400
    )
    batches = list(StreamingLoader(mix, 40))
    assert all(isinstance(b, torch.Tensor) and b.shape == (40, 16) for b in batches)
    values = torch.cat(batches)[:, 0]
    assert (values >= 1000).sum().item() == 100  # a quarter from the second source


def test_a_batch_splits_into_each_sources_own_ids_in_their_order() -> None:
    from stoker.stream._mixture_reader import MixtureReader

    offsets = np.array([0, 3000, 4000, 4500])  # three sources of 3000, 1000 and 500
    reader = MixtureReader([], offsets)  # (split needs the offsets alone)
    ids = np.random.default_rng(5).permutation(4500)[:64]
    got = reader.split(ids)
    sources = np.searchsorted(offsets, ids, side="right") - 1
    want = [(s, ids[sources == s] - offsets[s]) for s in range(3) if (sources == s).any()]
    assert [s for s, _ in got] == [s for s, _ in want]
    for (_, mine), (_, theirs) in zip(got, want, strict=True):
        assert mine.tolist() == theirs.tolist()  # each source's ids, local, in batch order
    only_second = np.array([3999, 3000, 3500])
    assert [(s, ids.tolist()) for s, ids in reader.split(only_second)] == [(1, [999, 0, 500])]
    assert reader.split(np.array([], dtype=np.int64)) == []


def test_a_batch_is_located_in_every_source_at_once_as_each_source_locates_it(
    sources: list[Path],
) -> None:
    """One search of every source's shards (the tensor path) finds each sample where its own
    source's index does, grouped by source in the order of the batch."""
    mix = _mix(sources)
    reader, total = mix.reader, int(mix.source.offsets[-1])
    rng = np.random.default_rng(7)
    for ids in (rng.permutation(total)[:64], np.array([3999, 3000, 3500]), np.array([4499])):
        [got] = reader.locate_runs(ids, len(ids))  # (one batch: one run)
        want = []
        for s, local in reader.split(ids):
            shards, within = reader.readers[s].index.locate_all(local)
            want.append((s, list(zip(shards.tolist(), within.tolist(), strict=True))))
        assert got == want
    assert reader.locate_runs(np.array([], dtype=np.int64), 64) == []
    [every] = reader.locate_runs(np.arange(total), total)  # each source's, every shard of it
    assert [(s, len(places)) for s, places in every] == list(enumerate(SIZES))


def test_a_group_is_located_in_the_mixtures_order_by_rows_of_every_sources_shards(
    sources: list[Path],
) -> None:
    """Sample by sample, a group is located in the order of its ids, each sample by a row of
    the table of every source's shards, which names the source and its shard there."""
    mix = _mix(sources)
    reader, total = mix.reader, int(mix.source.offsets[-1])
    ids = np.random.default_rng(8).permutation(total)[:150]
    runs = reader.locate_in_order(ids, 64)
    assert [len(r) for r in runs] == [64, 64, 22]
    source, number = reader.rows()
    offsets = mix.source.offsets
    for sample, (row, i) in zip(ids.tolist(), [p for r in runs for p in r], strict=True):
        s = int(np.searchsorted(offsets, sample, side="right") - 1)
        assert source[row] == s
        assert (number[row], i) == reader.readers[s].index.locate(sample - int(offsets[s]))


def test_many_batches_located_at_once_as_each_alone(sources: list[Path]) -> None:
    """The batcher locates a window of batches in one search (``locate_runs``); each run must
    come out as it is found alone, a short last run too, for a mixture and a dataset."""
    mix = _mix(sources)
    reader, total = mix.reader, int(mix.source.offsets[-1])
    ids = np.random.default_rng(11).permutation(total)[: 64 * 5 + 17]
    runs = [ids[a : a + 64] for a in range(0, len(ids), 64)]
    assert reader.locate_runs(ids, 64) == [reader.locate_runs(run, len(run))[0] for run in runs]
    one = reader.readers[0]
    local = np.random.default_rng(12).permutation(SIZES[0])[:150]
    shards, within = one.index.locate_all(local)
    places = list(zip(shards.tolist(), within.tolist(), strict=True))
    assert one.locate_runs(local, 64) == [places[:64], places[64:128], places[128:]]


def test_a_mixed_batch_is_counted_with_one_add_for_every_source(
    sources: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sources share one set of counters, told once a batch (or a group, sample by
    sample): each add takes a lock every worker process shares."""
    from stoker.stream._counters import Counters

    adds = []
    real_add = Counters.add
    monkeypatch.setattr(Counters, "add", lambda self, **n: adds.append(n) or real_add(self, **n))
    roots = []
    for s in range(3):
        roots.append(_records(sources[0].parent / f"counted{s}", s, 200))
    mix = StreamingMixture(
        [StreamingDataset(r, dtype=torch.int32) for r in roots], weights=[0.5, 0.3, 0.2]
    )
    batches = list(StreamingLoader(mix, 40))
    assert len(adds) == len(batches) == 15
    assert sum(a["samples"] for a in adds) == mix.stats()["samples"] == 600
    adds.clear()
    assert len(list(iter(mix))) == 600  # sample by sample: a group of 64 at a time
    assert len(adds) == -(-600 // 64)
    assert mix.stats()["samples"] == 1200


def test_sources_read_in_place_plan_no_prefetch(
    sources: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a source that downloads shards plans its prefetch: for sources read in place the
    plan was a sort of the worker's whole epoch before its first batch, for nothing."""
    from stoker.stream._mixture_reader import MixtureReader

    mix = _mix(sources)
    split = MixtureReader.split
    calls = []
    monkeypatch.setattr(
        MixtureReader, "split", lambda self, ids: calls.append(len(ids)) or split(self, ids)
    )
    mix.reader.access().plan_prefetch(mix.source.order())
    assert calls == []
    assert len(list(StreamingLoader(mix, 64))) == 6000 // 64  # (and it still reads)


def test_bad_shares_are_named(sources: list[Path]) -> None:
    ds = [StreamingDataset(p) for p in sources]
    for options, message in [
        ({}, "give weights= .* or samples="),
        ({"weights": [1, 1]}, r"weights=\[1, 1\]: give one per source \(3\)"),
        ({"weights": [1, -1, 1]}, "use numbers >= 0"),
        ({"weights": [0, 0, 0]}, "at least one must be above 0"),
        ({"samples": [1, 2, 3], "epoch_samples": 9}, "leave epoch_samples out"),
        ({"samples": [1, 2.5, 3]}, "use whole numbers >= 0"),
        ({"weights": [1, 1, 1], "on_exhausted": "wrap"}, "use 'repeat' or 'stop'"),
        ({"weights": [1, 1, 1], "epoch_samples": -1}, "epoch_samples=-1"),
    ]:
        with pytest.raises(StreamError, match=message):
            StreamingMixture(ds, **options)  # type: ignore[arg-type]
    with pytest.raises(StreamError, match="at least one source"):
        StreamingMixture([], weights=[])


def _local_and_remote(local: Path, url: str, cache: Path) -> StreamingMixture:
    """A local source and one of 400 samples written to ``url``, at 0.7 / 0.3 of 1,000."""
    with ShardWriter(url, shard_size="8KiB", codec="pickle") as w:
        for i in range(400):
            w.write({"s": 1, "i": i, "pad": b"r" * 60})
    return StreamingMixture(
        [StreamingDataset(local), StreamingDataset(url, cache)],
        weights=[0.7, 0.3],
        epoch_samples=1000,
    )


def test_sources_on_different_tiers_mix(blob_env: str, sources: list[Path], tmp_path: Path) -> None:
    mix = _local_and_remote(sources[0], f"{blob_env}/remote", tmp_path / "cache")
    assert mix.tier == "posix+az"
    seen = _seen(StreamingLoader(mix, 20, num_workers=2, collate_fn=list))
    assert Counter(s for s, _ in seen) == {0: 700, 1: 300}
    assert len({i for s, i in seen if s == 1}) == 300  # 300 distinct of its 400


def test_a_mixture_under_torchrun_in_two_data_parallel_groups_of_two_ranks(tmp_path: Path) -> None:
    """make demo's stream step, small: 4 ranks, 2 groups, a two-source mixture; it dies half way
    and resumes from its checkpoint; the ranks of a group get identical batches."""
    import subprocess
    import sys

    for name, n in (("a", 90), ("b", 60)):
        for i in range(n):
            (tmp_path / name).mkdir(exist_ok=True)
            (tmp_path / name / f"{i:03d}.bin").write_bytes(bytes([i % 251, ord(name)]) * 200)
    example = Path(__file__).resolve().parents[1] / "examples" / "train_stream.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=4"]
    cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", str(example)]
    cmd += ["--source", str(tmp_path / "a"), "--mix", str(tmp_path / "b"), "--dp-size", "2"]
    cmd += ["--batch", "4", "--every", "2", "--workers", "0"]
    cmd += ["--data", str(tmp_path / "shards"), "--ckpt", str(tmp_path / "ckpt")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    # What the failing rank wrote comes before torchrun stops the others; its own summary that
    # follows names the rank but not the error (a failure in a fresh-clone run left only that).
    assert out.returncode == 0, out.stderr.split("Sending process")[0][-3000:]
    # source a runs out at 0.7 of the epoch: 90 / 0.7 = 128 samples, 16 global batches of 8
    assert "128 samples consumed, 128 distinct, 128 expected -> ok" in out.stdout, out.stdout
    assert "source 0 " in out.stdout and "(weight 0.7)" in out.stdout
    assert "a group's ranks got identical batches: yes" in out.stdout
    assert "group 1 (ranks 2-3): accelerator utilization" in out.stdout


def _records(root: Path, tag: int, n: int) -> Path:
    with ShardWriter(root, shard_size="1KiB", codec="array") as w:
        for i in range(n):
            w.write(np.array([tag, i, i * 7, -i], dtype=np.int32))
    return root


@pytest.mark.parametrize("drop_in", [False, True])
def test_a_corrupt_sample_in_a_mixed_batch_is_raised_or_skipped_by_its_source(
    tmp_path: Path, drop_in: bool
) -> None:
    """Tensors of several sources read into one batch (or sample by sample): a damaged
    sample is raised, or skipped, as its own source says; the rest arrive whole."""
    a, b = _records(tmp_path / "a", 1, 200), _records(tmp_path / "b", 2, 200)
    ds_b = StreamingDataset(b, dtype=torch.int32, shuffle=False)
    shard = b / ds_b.index.shards[1].name
    data = bytearray(shard.read_bytes())
    data[-2] ^= 0xFF  # the shard's last sample
    shard.write_bytes(bytes(data))
    bad = ds_b.index.first(2) - 1

    def read(on_corrupt: str) -> list[tuple[int, int]]:
        parts = [
            StreamingDataset(a, dtype=torch.int32),
            StreamingDataset(b, dtype=torch.int32, on_corrupt=on_corrupt),
        ]
        mix = StreamingMixture(parts, weights=[0.5, 0.5], seed=1)
        loader = (
            torch.utils.data.DataLoader(mix, batch_size=16) if drop_in else StreamingLoader(mix, 16)
        )
        rows = [row for batch in loader for row in batch]
        assert all(r[2] == 7 * r[1] and r[3] == -r[1] for r in rows)  # whole, unchanged
        return [(int(r[0]), int(r[1])) for r in rows]

    with pytest.raises(CorruptSample, match=r"shard shard-000001.stk: sample \d+"):
        read("raise")
    got = read("skip")
    assert (2, bad) not in got and len(got) == len(set(got)) == 399


def _in_order(mix: StreamingMixture) -> list[object]:
    """The mixture's samples in its order, each read alone by its source."""
    ids = mix.source.batches(mix.group, mix.batch_size, worker=0, workers=1).reshape(-1)
    return [mix[int(i)] for i in ids]


def test_sources_that_decode_differently_mix_sample_by_sample(
    sources: list[Path], tmp_path: Path
) -> None:
    """Sample by sample, a group across the sources is read in the mixture's order and each
    sample decoded by its own source, though their codecs differ."""
    with ShardWriter(tmp_path / "json", shard_size="4KiB", codec="json") as w:
        for i in range(500):
            w.write({"s": 9, "i": i})
    mix = StreamingMixture(
        [StreamingDataset(sources[0]), StreamingDataset(tmp_path / "json")],
        weights=[0.6, 0.4],
        epoch_samples=1000,
        seed=5,
    )
    got = list(mix)
    assert got == _in_order(mix)
    assert Counter(x["s"] for x in got) == {0: 600, 9: 400}  # type: ignore[index]


def test_a_sample_its_dtype_cannot_hold_is_named_by_its_own_source(tmp_path: Path) -> None:
    """Sources that decode alike share one decoder; a sample that fails is still named by the
    source it came from, not by the one whose decoder it was."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    for root, odd in ((good, None), (bad, 37)):
        with ShardWriter(root, shard_size="1KiB") as w:
            for i in range(100):
                w.write(b"\0" * (6 if i == odd else 8))
    mix = StreamingMixture(
        [StreamingDataset(p, dtype=torch.int32) for p in (good, bad)], weights=[0.5, 0.5]
    )
    with pytest.raises(StreamError, match=rf"^{bad}: 6 bytes is not a whole number"):
        list(mix)


def test_a_remote_source_mixes_sample_by_sample_from_its_first_group(
    blob_env: str, sources: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drop-in path's first group reads a remote source's samples by range, beside a
    local source's read in place; every later group from the shards it downloaded."""
    mix = _local_and_remote(sources[0], f"{blob_env}/remote-obo", tmp_path / "cache")
    ranged: list[int] = []
    fetch = _samples.fetch_samples
    monkeypatch.setattr(_samples, "fetch_samples", lambda w: (ranged.append(len(w)), fetch(w)))
    got = list(torch.utils.data.DataLoader(mix, batch_size=None))
    assert len(ranged) == 1 and 0 < ranged[0] < 64  # the remote part of the first group
    assert got == _in_order(mix)
    assert Counter(x["s"] for x in got) == {0: 700, 1: 300}
