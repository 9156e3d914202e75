"""Never lose the last good checkpoint: retention counts only steps that load, ``ls`` says what
is wrong on which tier, and a damaged manifest or shard on the fast tier is read again from the
durable tier. The faults are the ones a new user met: a torn manifest, one flipped byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from stoker.checkpoint import Checkpointer
from stoker.checkpoint._manifest import MANIFEST, step_dir
from stoker.cli import app

runner = CliRunner()
SHARD = "shard-00000-of-00001.bin"


def _state(step: int) -> dict:
    return {"w": torch.full((1 << 16,), float(step)), "step": step}


def _saved(fast: Path, durable: Path | str | None = None, steps=(1, 2, 3)) -> None:  # type: ignore[no-untyped-def]
    with Checkpointer(fast, durable, keep_last=10) as ckpt:
        for step in steps:
            ckpt.save(step, _state(step))


def _flip(path: Path, at: int = 100) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x01]))


def _tear(manifest: Path) -> None:
    data = manifest.read_bytes()
    manifest.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["torn manifest", "flipped byte"])
def test_prune_keep_last_1_keeps_the_newest_step_that_loads(tmp_path: Path, damage: str) -> None:
    fast = tmp_path / "fast"
    _saved(fast)
    if damage == "torn manifest":
        _tear(fast / step_dir(3) / MANIFEST)
    else:
        _flip(fast / step_dir(3) / SHARD)
    out = runner.invoke(app, ["checkpoint", "prune", str(fast), "--keep-last", "1", "--json"])
    assert out.exit_code == 1, out.output  # a step that does not load is worth a look
    report = json.loads(out.stdout)
    assert report["deleted"] == {"fast": [1]}  # 2 loads and stays; 3 is kept for inspection
    assert list(report["damaged"]["fast"]) == ["3"]
    assert "does not load (kept for inspection)" in out.stderr
    assert (fast / step_dir(2) / SHARD).exists() and (fast / step_dir(3)).exists()
    with Checkpointer(fast) as ckpt:
        restored = ckpt.load()
    assert restored.step == 2 and torch.equal(restored.state["w"], _state(2)["w"])
    assert list(restored.skipped) == [3]
    # asked to, prune deletes the damaged step, and still not the one that loads
    again = runner.invoke(
        app, ["checkpoint", "prune", str(fast), "--keep-last", "1", "--delete-damaged"]
    )
    assert again.exit_code == 1 and "(deleted)" in again.stderr
    assert sorted(p.name for p in fast.glob("step-*")) == [step_dir(2)]
    assert runner.invoke(app, ["checkpoint", "prune", str(fast), "--keep-last", "1"]).exit_code == 0


def test_the_automatic_retention_of_a_save_keeps_the_steps_that_load(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    _saved(fast, steps=(1, 2))
    _flip(fast / step_dir(2) / SHARD)
    with Checkpointer(fast, keep_last=2) as ckpt:  # a restarted job saves on
        ckpt.save(3, _state(3))
        ckpt.wait()
        # 3 and 1 load and are the two kept; 2 does not, and is kept for inspection
        assert sorted(p.name for p in fast.glob("step-*")) == [step_dir(s) for s in (1, 2, 3)]
        _flip(fast / step_dir(3) / SHARD)  # bit rot after the save: the file changed
        ckpt.save(4, _state(4))
        ckpt.wait()
    # 4 and 1 load; 3 and 2 are newer than 1 and do not: kept for inspection
    assert sorted(p.name for p in fast.glob("step-*")) == [step_dir(s) for s in (1, 2, 3, 4)]
    with Checkpointer(fast, keep_last=2) as ckpt:
        ckpt.save(5, _state(5))
        ckpt.wait()
    # 5 and 4 load: the damaged steps older than them go with 1, as any old step would
    assert sorted(p.name for p in fast.glob("step-*")) == [step_dir(s) for s in (4, 5)]


def test_ls_shows_each_tier_state_and_never_just_an_error(tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    _saved(fast, durable, steps=(1, 2, 3, 4))
    _tear(fast / step_dir(4) / MANIFEST)  # the durable copy is whole: 4 still loads
    _flip(fast / step_dir(3) / SHARD)
    _flip(durable / step_dir(3) / SHARD)  # 3 is damaged everywhere
    (durable / step_dir(2) / SHARD).unlink()  # 2 loads from the fast tier
    (fast / step_dir(1) / MANIFEST).unlink()  # 1 is incomplete on fast, ok on durable
    args = ["checkpoint", "ls", str(fast), "--durable", str(durable), "--json", "--hash"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    rows = {c["step"]: c for c in json.loads(out.stdout)["checkpoints"]}
    assert rows[4]["loads"] and rows[4]["tiers"]["durable"] == "ok"
    assert rows[4]["tiers"]["fast"].startswith("damaged: manifest unreadable")
    assert not rows[3]["loads"] and "no tier holds a good copy of " + SHARD in rows[3]["why"]
    assert rows[3]["tiers"]["fast"] == f"damaged: {SHARD}: hash differs from the manifest"
    assert rows[2]["loads"] and rows[2]["tiers"] == {
        "fast": "ok",
        "durable": f"damaged: {SHARD}: missing",
    }
    assert rows[1]["loads"] and rows[1]["tiers"]["fast"].startswith("incomplete")
    # without --hash the flipped byte is not read, and ls says so by its help; sizes still are
    plain = json.loads(runner.invoke(app, args[:-1]).stdout)["checkpoints"]
    assert {c["step"]: c["loads"] for c in plain} == {4: True, 3: True, 2: True, 1: True}
    table = runner.invoke(app, args[:-2])
    assert table.exit_code == 0 and "manifest unreadable" in table.stdout


@pytest.mark.parametrize("damage", ["torn manifest", "flipped byte", "manifest gone"])
def test_a_damaged_fast_copy_is_read_again_from_the_durable_tier(
    tmp_path: Path, damage: str
) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    _saved(fast, durable, steps=(1, 2))
    manifest = fast / step_dir(2) / MANIFEST
    good = manifest.read_bytes()
    if damage == "torn manifest":
        _tear(manifest)
    elif damage == "flipped byte":
        _flip(fast / step_dir(2) / SHARD)
    else:
        manifest.unlink()
    with Checkpointer(fast, durable) as ckpt:
        restored = ckpt.load()
        assert restored.step == 2 and restored.tier == "durable" and not restored.skipped
        assert torch.equal(restored.state["w"], _state(2)["w"])
        assert manifest.read_bytes() == good  # repaired on the fast tier
        again = ckpt.load()
    assert again.step == 2 and again.tier == "fast"  # the next load is local


def test_load_fallback_false_still_raises_on_damage(tmp_path: Path) -> None:
    from stoker.errors import CorruptCheckpointError

    fast = tmp_path / "fast"
    _saved(fast, steps=(1, 2))
    _tear(fast / step_dir(2) / MANIFEST)
    with Checkpointer(fast) as ckpt:
        with pytest.raises(Exception, match="unreadable checkpoint manifest"):
            ckpt.load(fallback=False)
        assert ckpt.load().step == 1
    _flip(fast / step_dir(1) / SHARD)
    with Checkpointer(fast) as ckpt, pytest.raises(CorruptCheckpointError, match="no checkpoint"):
        ckpt.load()  # nothing loads: said plainly, naming both steps' faults


@pytest.fixture
def read_only_folder(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A folder this process cannot write: a read-only tmpfs when root (root ignores chmod),
    else a folder without write permission."""
    import os
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", folder], check=True)
        yield folder
        subprocess.run(["umount", folder], check=True)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


@pytest.mark.parametrize("where", ["the folder", "a folder below it"])
def test_a_read_only_fast_tier_is_refused_when_the_checkpointer_is_made(
    read_only_folder: Path, where: str
) -> None:
    from stoker.errors import CheckpointError

    fast = read_only_folder if where == "the folder" else read_only_folder / "run" / "fast"
    with pytest.raises(CheckpointError, match="cannot be written.*(read-only|ermission)"):
        Checkpointer(fast)
    with Checkpointer(fast, check_writable=False) as ckpt:  # inspecting needs no write
        if where == "the folder":
            assert ckpt.list() == []


def test_a_durable_container_that_does_not_exist_is_refused_before_any_save(
    blob_env: str, tmp_path: Path
) -> None:
    from stoker.errors import CheckpointError

    missing = "az://no-such-container-" + blob_env.rsplit("-", 1)[-1] + "/run"
    with pytest.raises(CheckpointError, match="durable tier.*cannot be written.*no-such-container"):
        Checkpointer(tmp_path / "fast", missing)
    assert not (tmp_path / "fast").exists()  # nothing was written anywhere
    with Checkpointer(tmp_path / "fast", f"{blob_env}/run") as ckpt:  # the real one is fine
        ckpt.save(1, _state(1))
        ckpt.wait()
        assert ckpt.list()[0].tiers == {"fast": "ok", "durable": "ok"}


def test_a_rank_that_cannot_write_stops_every_rank_when_the_checkpointer_is_made(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
    cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
    worker = Path(__file__).with_name("ckpt_probe_worker.py")
    run = subprocess.run(
        [*cmd, str(worker), str(out), str(tmp_path / "base")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert "is a file, not a folder" in ranks[1]["raised"]
    assert ranks[0]["raised"].startswith("rank 1 cannot save:")  # rank 0 could write, yet stops


def test_a_second_writer_or_a_prune_during_a_run_is_refused_naming_the_holder(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    fast = tmp_path / "fast"
    holder = subprocess.Popen(  # a job that is still running (a restart raced it)
        [
            sys.executable,
            "-c",
            "import sys, torch; from stoker.checkpoint import Checkpointer\n"
            "c = Checkpointer(sys.argv[1]); c.save(1, {'w': torch.ones(4)}); c.wait()\n"
            "print('saved', flush=True); sys.stdin.read()",
            str(fast),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "saved"
        from stoker.errors import CheckpointError

        with pytest.raises(CheckpointError, match=rf"PID {holder.pid} on .* as rank 0: stop it"):
            Checkpointer(fast)
        out = runner.invoke(app, ["checkpoint", "prune", str(fast), "--keep-last", "1"])
        assert out.exit_code == 2 and f"PID {holder.pid}" in out.stderr
        listed = runner.invoke(app, ["checkpoint", "ls", str(fast), "--json"])  # reading is fine
        assert listed.exit_code == 0 and json.loads(listed.stdout)["checkpoints"][0]["loads"]
    finally:
        holder.communicate("", timeout=60)
    with Checkpointer(fast) as ckpt:  # the holder ended: the lock went with it
        ckpt.save(2, _state(2))
