"""The checkpointer on a POSIX fast tier: round trip, snapshot semantics, commit protocol,
corruption, retention, background failures, and kill -9 at random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import MANIFEST, step_dir
from stoker.checkpoint._retention import plan_prune
from stoker.errors import CheckpointError, CorruptCheckpointError, UntrustedStateError


def _state(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "model": OrderedDict(w=torch.randn(256, 64, generator=g), b=torch.zeros(64)),
        "optim": {"step": torch.tensor(seed), "lr": 1e-3, "betas": (0.9, 0.95)},
        "half": torch.randn(7, generator=g).to(torch.bfloat16),
        "flags": torch.tensor([True, False]),
        "empty": torch.empty(0, 3),
        "view": torch.arange(20.0).view(4, 5).t(),  # not contiguous
        "meta": ["epoch", 3, None, {"name": "run-1"}],
    }


def _assert_same(a: object, b: object) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b)  # type: ignore[arg-type]
        for k in a:
            _assert_same(a[k], b[k])  # type: ignore[index]
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b)  # type: ignore[arg-type]
        for x, y in zip(a, b, strict=True):  # type: ignore[call-overload]
            _assert_same(x, y)
    else:
        assert a == b


def test_round_trip_keeps_every_type_and_structure(tmp_path: Path) -> None:
    state = _state(1)
    with Checkpointer(tmp_path / "fast") as ckpt:
        stats = ckpt.save(10, state)
        ckpt.wait()
        restored = ckpt.load()
    assert restored.step == 10 and restored.tier == "fast"
    _assert_same(state, restored.state)
    assert stats.fast_s is not None and stats.fast_s >= stats.blocking_s > 0
    assert (
        stats.bytes
        == (tmp_path / "fast" / step_dir(10)).joinpath("shard-00000-of-00001.bin").stat().st_size
    )


def test_mutating_right_after_save_does_not_change_what_is_saved(tmp_path: Path) -> None:
    big = torch.randn(16 << 20)  # 64 MiB: the write is still going when we mutate
    expected = big.clone()
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.save(1, {"big": big})
        big.fill_(7.0)
        assert ckpt.busy  # 64 MiB are still on their way to disk
        ckpt.wait()
        assert not ckpt.busy
        loaded = ckpt.load().state["big"]
    assert torch.equal(loaded, expected)


def test_snapshot_buffer_is_reused_across_saves(tmp_path: Path) -> None:
    state = {"t": torch.randn(1 << 20)}
    with Checkpointer(tmp_path / "fast") as ckpt:
        ckpt.save(1, state)
        first = ckpt._snapshot.buffer  # type: ignore[union-attr]
        for step in range(2, 6):
            ckpt.save(step, state)
        assert ckpt._snapshot.buffer is first  # type: ignore[union-attr]


def test_flipped_byte_is_named_and_load_skips_to_the_previous_step(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    with Checkpointer(fast) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.save(2, _state(2))
    shard = fast / step_dir(2) / "shard-00000-of-00001.bin"
    with open(shard, "r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0x01]))
    with Checkpointer(fast) as ckpt:
        with pytest.raises(CorruptCheckpointError, match=r"step-000000000002/shard-00000"):
            ckpt.load(fallback=False)
        restored = ckpt.load()
    assert restored.step == 1 and list(restored.skipped) == [2]
    assert "does not match the manifest" in restored.skipped[2]
    _assert_same(_state(1), restored.state)


def test_truncated_shard_is_refused(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    with Checkpointer(fast) as ckpt:
        ckpt.save(3, _state())
    shard = fast / step_dir(3) / "shard-00000-of-00001.bin"
    os.truncate(shard, shard.stat().st_size - 1)
    with Checkpointer(fast) as ckpt, pytest.raises(CorruptCheckpointError, match="bytes"):
        ckpt.load()


def test_step_without_manifest_is_never_loaded_and_later_cleaned(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    with Checkpointer(fast, keep_last=5) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.wait()
        # a writer that died after its shard but before the commit
        junk = fast / step_dir(2)
        junk.mkdir()
        (junk / "shard-00000-of-00001.bin").write_bytes(b"half a shard")
        (junk / "shard-00000-of-00001.bin.stoker-partial").write_bytes(b"x")
        assert ckpt.load().step == 1
        ckpt.save(3, _state(3))
        ckpt.wait()
        assert not junk.exists()
        assert [i.step for i in ckpt.list()] == [3, 1]


def test_retention_keeps_last_and_every_and_never_the_newest(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    with Checkpointer(fast, keep_last=2, keep_every=10) as ckpt:
        for step in range(0, 30, 5):
            ckpt.save(step, {"s": torch.tensor(step)})
        ckpt.wait()
        steps = [i.step for i in ckpt.list()]
    assert steps == [25, 20, 10, 0]
    assert (fast / "latest.json").read_text().strip() == '{"step": 25}'


def _plan(committed, incomplete=(), damaged=(), **kw):  # type: ignore[no-untyped-def]
    asked: list[int] = []

    def loads(step: int) -> str:
        asked.append(step)
        return "hash differs" if step in damaged else ""

    kw.setdefault("keep_every", None)
    pruned = plan_prune(list(committed), list(incomplete), loads, **kw)
    return pruned.deleted, sorted(pruned.damaged), asked


def test_retention_rules() -> None:
    assert _plan([1, 2, 3, 4], keep_last=2)[0] == [1, 2]
    assert _plan([10, 15, 20, 25], keep_last=1, keep_every=10)[0] == [15]
    assert _plan([1, 2, 3], keep_last=1, protect={1})[0] == [2]
    assert _plan([], keep_last=1)[0] == []
    assert _plan([10], incomplete=[5, 9, 12], keep_last=1, protect={5})[0] == [9]
    assert _plan([], incomplete=[5], keep_last=1)[0] == []


def test_retention_counts_only_steps_that_load() -> None:
    # the newest two do not load: keep-last 1 keeps the newest that does, and the damaged ones
    deleted, damaged, asked = _plan([1, 2, 3, 4], damaged={3, 4}, keep_last=1)
    assert (deleted, damaged, asked) == ([1], [3, 4], [4, 3, 2])  # 1 is never read
    assert _plan([1, 2, 3, 4], damaged={3, 4}, keep_last=1, delete_damaged=True)[0] == [1, 3, 4]
    # nothing loads: nothing committed goes, and an incomplete step is not "abandoned"
    assert _plan([1, 2], incomplete=[0], damaged={1, 2}, keep_last=1)[0] == []
    # incomplete steps are judged against the newest step that loads, not the newest committed
    assert _plan([5, 9], incomplete=[7], damaged={9}, keep_last=1)[0] == []
    assert _plan([5, 9], incomplete=[3, 7], damaged={9}, keep_last=2)[0] == [3]
    assert _plan([5, 9], incomplete=[3, 7], keep_last=1)[0] == [3, 5, 7]


def test_background_failure_is_raised_at_the_next_wait_and_earlier_ones_survive(
    tmp_path: Path,
) -> None:
    fast = tmp_path / "fast"
    with Checkpointer(fast) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.wait()
        (fast / step_dir(2)).write_text("a file where the step folder should go")
        ckpt.save(2, _state(2))
        with pytest.raises(CheckpointError, match="background checkpoint save failed"):
            ckpt.wait()
        ckpt.wait()  # reported once, not again
        assert ckpt.load().step == 1


def test_arbitrary_objects_need_trust(tmp_path: Path) -> None:
    """stoker's own error names trusted=True (torch's named its own knobs), and a fallback load
    does not take the older plain step as if the newer one were damaged."""
    fast = tmp_path / "fast"
    with Checkpointer(fast) as ckpt:
        ckpt.save(1, {"plain": torch.ones(2)})
        ckpt.save(2, {"when": time.struct_time((2026, 1, 1, 0, 0, 0, 0, 1, 0))})
        ckpt.wait()
        for fallback in (False, True):
            with pytest.raises(UntrustedStateError, match=r"holds time.struct_time.*trusted=True"):
                ckpt.load(fallback=fallback)
        assert ckpt.load(trusted=True).state["when"].tm_year == 2026


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="keep_last=0"):
        Checkpointer(tmp_path, keep_last=0)
    with pytest.raises(CheckpointError, match="fast tier must be a local"):
        Checkpointer("https://acct.blob.core.windows.net/container/x")
    with Checkpointer(tmp_path / "f") as ckpt:
        with pytest.raises(CheckpointError, match="no complete checkpoint is on fast tier"):
            ckpt.load()
        with pytest.raises(CheckpointError, match="sparse"):
            ckpt.save(1, {"s": torch.eye(3).to_sparse()})
        with pytest.raises(CheckpointError, match="negative"):
            ckpt.save(-1, {})

    with pytest.raises(CheckpointError, match="keep_every=0: give a step interval of 1 or more"):
        Checkpointer(tmp_path, keep_every=0)
    with pytest.raises(CheckpointError, match="durable_keep_last=0"):
        Checkpointer(tmp_path, durable_keep_last=0)
    with Checkpointer(tmp_path) as ckpt:
        with pytest.raises(CheckpointError, match="blob_tier=banana: .* hot, cool, cold, archive"):
            ckpt.costs(blob_tier="banana")
        with pytest.raises(CheckpointError, match="fast_usd_per_gb_month=-1"):
            ckpt.costs(fast_usd_per_gb_month=-1)
        with pytest.raises(CheckpointError, match="durable_usd_per_gb_month=nan"):
            ckpt.costs(durable_usd_per_gb_month=float("nan"))


def test_a_rank_of_torchrun_without_a_process_group_is_refused_before_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under torchrun, a Checkpointer made before (or without) init_process_group saved as if
    alone: every rank wrote the same step's files in the same folders, and the second rank
    failed with 'step 3 is before step 21', or replaced the first one's shard."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with Checkpointer(tmp_path / "f") as ckpt:
        for save in (lambda: ckpt.save(1, _state(1)), lambda: ckpt.dcp_writer(1)):
            with pytest.raises(CheckpointError, match=r"WORLD_SIZE=2 .*init_process_group\(\)"):
                save()
    assert not (tmp_path / "f").exists()


def test_a_mistyped_path_is_never_verified_listed_or_pruned(tmp_path: Path) -> None:
    """verify() of nothing used to return ok with zero steps, so a typo passed as verified."""
    with Checkpointer(tmp_path / "typo") as ckpt:
        for call in (ckpt.verify, ckpt.list, ckpt.prune):
            with pytest.raises(CheckpointError, match="no such folder, so no checkpoint here"):
                call()
    assert not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    with Checkpointer(tmp_path / "empty") as ckpt:
        assert ckpt.list() == [] and ckpt.prune() == {"fast": []}  # empty, but there
        with pytest.raises(CheckpointError, match="no committed checkpoint to verify on fast"):
            ckpt.verify()
        with pytest.raises(CheckpointError, match="step 7 is not committed on fast"):
            ckpt.verify(7)


def test_a_checkpointer_saving_into_a_new_folder_is_not_refused(tmp_path: Path) -> None:
    with Checkpointer(tmp_path / "new" / "run") as ckpt:
        ckpt.save(1, _state(1))
        assert isinstance(ckpt.list(), list)  # not refused while the write is in flight
        ckpt.wait()
        assert [i.step for i in ckpt.list()] == [1]
        assert ckpt.verify().ok and ckpt.prune() == {"fast": []}


def test_pull_leaves_nothing_behind_when_the_durable_copy_is_damaged(tmp_path: Path) -> None:
    durable = tmp_path / "durable"
    # (a job resumed from another fast folder says it is the same job: see _claim.py)
    with Checkpointer(tmp_path / "fast", durable, job_id="run-1") as ckpt:
        ckpt.save(1, _state(1))
        ckpt.save(2, _state(2))
    shard = durable / step_dir(2) / "shard-00000-of-00001.bin"
    data = bytearray(shard.read_bytes())
    data[-40] ^= 1
    shard.write_bytes(bytes(data))
    with Checkpointer(tmp_path / "new", durable, job_id="run-1") as ckpt:
        with pytest.raises(CorruptCheckpointError, match=r"step 2 .* committed there: 1 \(pull"):
            ckpt.pull()
        assert not (tmp_path / "new").exists()
        assert ckpt.pull(1)[0] == 1


SAVER = textwrap.dedent(
    """
    import sys, torch
    from stoker.checkpoint import Checkpointer
    ckpt = Checkpointer(sys.argv[1], keep_last=2)
    step = int(sys.argv[2])
    state = {"x": torch.empty(2 << 20)}
    print("ready", flush=True)
    while True:
        state["x"].fill_(step)
        ckpt.save(step, {"x": state["x"], "step": step})
        ckpt.wait()
        print("committed", step, flush=True)
        step += 1
    """
)


def test_kill_9_at_random_moments_never_loads_a_partial_checkpoint(tmp_path: Path) -> None:
    fast, rng, last = tmp_path / "fast", random.Random(7), -1
    for _ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(fast), str(last + 1)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.05, 1.0))  # somewhere in a save: snapshot, write or commit
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        committed = [int(line.split()[1]) for line in out.splitlines() if line]
        last = max(committed, default=last)
        if last < 0:
            continue
        with Checkpointer(fast) as ckpt:
            restored = ckpt.load()
        # never older than the last one reported committed; always whole and consistent
        assert restored.step >= last
        assert torch.all(restored.state["x"] == restored.state["step"])
        last = restored.step
    assert last > 0
    leftovers = [p for p in fast.iterdir() if p.is_dir() and not (p / MANIFEST).exists()]
    assert len(leftovers) <= 1  # at most the step the last kill interrupted


def test_disk_full_is_reported_and_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from stoker.checkpoint import _shardfile

    fast, real_write = tmp_path / "fast", os.write
    with Checkpointer(fast) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.wait()

        def full(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(_shardfile.os, "write", full)
        ckpt.save(2, _state(2))
        with pytest.raises(CheckpointError, match="step 2 was not saved: no space left"):
            ckpt.wait()
        assert not list((fast / step_dir(2)).glob("*"))  # the partial file is gone
        assert ckpt.load().step == 1
        monkeypatch.setattr(_shardfile.os, "write", real_write)  # space was freed
        ckpt.save(3, _state(3))
        ckpt.wait()
        assert ckpt.load().step == 3


def test_dict_subclasses_and_state_dict_metadata_come_back_as_they_were(tmp_path: Path) -> None:
    from collections import Counter, defaultdict

    model = torch.nn.Linear(3, 2)
    state = {
        "seen": Counter({"cat": 3, "dog": 5}),
        "by_key": defaultdict(list, {"a": [1, 2]}),
        "model": model.state_dict(),
    }
    with Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, state)
        got = ckpt.load(trusted=True).state  # (a Counter is pickled: it needs trust)
    assert got["seen"] == Counter({"cat": 3, "dog": 5}) and type(got["seen"]) is Counter
    assert got["by_key"]["b"] == [] and got["by_key"]["a"] == [1, 2]
    assert got["model"]._metadata == state["model"]._metadata  # module versions, for loading
    assert torch.equal(got["model"]["weight"], model.weight.detach())


SAVE_THEN_EXIT = """
import sys, torch
from stoker import Checkpointer
ckpt = Checkpointer(sys.argv[1])
ckpt.save(7, {"w": torch.arange(1_000_000)})
if sys.argv[2] == "raise":
    raise RuntimeError("loss is NaN")  # the loop dies right after its save
"""


@pytest.mark.parametrize("how", ["exit", "raise"])
def test_a_script_that_ends_without_wait_keeps_its_last_save(tmp_path: Path, how: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SAVE_THEN_EXIT, str(tmp_path), how], capture_output=True, text=True
    )
    assert done.returncode == (0 if how == "exit" else 1), done.stderr[-2000:]
    with Checkpointer(tmp_path) as ckpt:
        restored = ckpt.load()
    assert restored.step == 7 and restored.state["w"][-1].item() == 999_999


def test_a_closed_checkpointer_says_so_instead_of_hanging(tmp_path: Path) -> None:
    with Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, {"x": torch.zeros(3)})
    ckpt.close()  # a second close: nothing to do
    for call in (ckpt.load, ckpt.list, lambda: ckpt.save(2, {})):
        with pytest.raises(CheckpointError, match="this Checkpointer is closed"):
            call()


def test_steps_past_twelve_digits_are_found_and_odd_steps_refused(tmp_path: Path) -> None:
    tokens = 10**12 + 5  # a step that counts tokens
    with Checkpointer(tmp_path) as ckpt:
        ckpt.save(999, {"x": torch.zeros(1)})
        ckpt.save(tokens, {"x": torch.ones(1)})
        ckpt.wait()
        assert ckpt.load().step == tokens and ckpt.load(step=tokens).step == tokens
        for bad in (1.5, "3", True):
            with pytest.raises(CheckpointError, match="a checkpoint step is a whole number"):
                ckpt.save(bad, {})  # type: ignore[arg-type]


def test_a_rollback_must_discard_the_abandoned_steps_before_saving_again(tmp_path: Path) -> None:
    """After going back to step 200, saving 210 while 300 is on disk would let a restart resume
    at 300 and let pruning drop the new steps: save refuses until the later steps go."""
    with Checkpointer(tmp_path, keep_last=3) as ckpt:
        for step in (100, 200, 300):
            ckpt.save(step, {"at": torch.tensor(step)})
        ckpt.wait()
        restored = ckpt.load(step=200)  # a loss spike after 200: roll back
        with pytest.raises(CheckpointError, match="step 210 is before step 300, already saved"):
            ckpt.save(210, restored.state)
        assert ckpt.discard_after(restored.step) == [300]
        for step in (210, 220, 230):
            ckpt.save(step, {"at": torch.tensor(step)})
    with Checkpointer(tmp_path, keep_last=3) as again:  # a restart
        assert again.load().step == 230
        assert [i.step for i in again.list()] == [230, 220, 210]  # 200 pruned, nothing of 300


def test_the_same_step_twice_is_refused(tmp_path: Path) -> None:
    """Its files would be rewritten under a committed manifest: a crash half way would leave
    the step unloadable."""
    with Checkpointer(tmp_path, keep_last=1) as ckpt:
        ckpt.save(5, {"x": torch.zeros(2)})
        with pytest.raises(CheckpointError, match="step 5 is already saved"):
            ckpt.save(5, {"x": torch.ones(2)})
        assert torch.equal(ckpt.load().state["x"], torch.zeros(2))


def test_every_failed_save_is_a_checkpoint_error_and_the_next_save_says_it_did_not_happen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.checkpoint._tier import Tier
    from stoker.errors import StageError

    real_commit = Tier.commit

    def full_disk(self: Tier, manifest: object, **options: object) -> None:
        if getattr(manifest, "step", None) == 2:
            raise StageError("no space left writing manifest.json")  # as the store says it
        real_commit(self, manifest, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Tier, "commit", full_disk)
    with Checkpointer(tmp_path) as ckpt:
        ckpt.save(1, _state(1))
        ckpt.wait()
        ckpt.save(2, _state(2))  # its write fails in the background
        with pytest.raises(CheckpointError, match="step 3 was not saved either") as err:
            ckpt.save(3, _state(3))
        assert "no space left" in str(err.value)
        ckpt.save(3, _state(3))  # saved again, as the message says
        ckpt.wait()
        assert ckpt.load().step == 3


def test_a_slow_durable_tier_holds_the_saves_back_instead_of_filling_the_fast_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.checkpoint._tier import Tier

    real_upload = Tier.upload

    def slow_upload(self: Tier, *args: object, **options: object) -> None:
        time.sleep(0.3)  # the durable tier is slower than the saves come
        real_upload(self, *args, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(Tier, "upload", slow_upload)
    fast = tmp_path / "fast"
    most = 0
    with Checkpointer(fast, tmp_path / "durable", keep_last=2) as ckpt:
        for step in range(1, 9):
            ckpt.save(step, _state(step))
            names = os.listdir(fast) if fast.exists() else []
            most = max(most, len([n for n in names if n.startswith("step-")]))
        ckpt.wait()
        assert {i.step for i in ckpt.list() if i.tiers.get("durable") == "ok"} >= {7, 8}
    assert most <= 2 + 2  # keep_last, plus the step being uploaded and the one behind it
