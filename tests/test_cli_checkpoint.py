"""``stoker checkpoint ls|verify|prune|pull`` on a fast folder and Azurite as the durable tier."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from stoker.checkpoint import Checkpointer, checkpoint_interval
from stoker.checkpoint._manifest import step_dir
from stoker.cli import app

runner = CliRunner()
BLOB_RUN1 = "https://acct.blob.core.windows.net/ckpts/run1"  # its account named: no env needed
CONN = "AZURE_STORAGE_CONNECTION_STRING"


def _saved(fast: Path, durable: str, steps: tuple[int, ...] = (10, 20, 30)) -> None:
    with Checkpointer(fast, durable, keep_last=5) as ckpt:
        for step in steps:
            ckpt.save(step, {"w": torch.full((1 << 18,), float(step))})


def test_ls_shows_tiers_and_prices_blob_from_the_catalog(blob_env: str, tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", f"{blob_env}/cli1"
    _saved(fast, durable)
    out = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", durable, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [c["step"] for c in data["checkpoints"]] == [30, 20, 10]
    assert all(c["tiers"] == {"fast": "ok", "durable": "ok"} for c in data["checkpoints"])
    fast_cost, blob_cost = data["costs"]
    assert fast_cost["usd_per_month"] is None and "billed with its VM" in fast_cost["basis"]
    assert (
        blob_cost["usd_per_gb_month"] == 0.0208
        and "catalog: Blob hot, eastus" in blob_cost["basis"]
    )
    assert abs(blob_cost["usd_per_month"] - blob_cost["bytes"] / 1e9 * 0.0208) < 1e-9
    table = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", durable])
    assert table.exit_code == 0 and " ok " in table.stdout and "USD/month" in table.stdout


def test_verify_names_the_corrupt_file_and_fails(blob_env: str, tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", f"{blob_env}/cli2"
    _saved(fast, durable)
    ok = runner.invoke(app, ["checkpoint", "verify", str(fast), "--durable", durable])
    assert ok.exit_code == 0 and "6 step copies, 6 files checked: ok" in ok.stdout
    shard = fast / step_dir(20) / "shard-00000-of-00001.bin"
    data = bytearray(shard.read_bytes())
    data[-40] ^= 1
    shard.write_bytes(bytes(data))
    bad = runner.invoke(app, ["checkpoint", "verify", str(fast), "--durable", durable, "--json"])
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert [(p["tier"], p["step"], p["file"]) for p in report["problems"]] == [
        ("fast", 20, "shard-00000-of-00001.bin")
    ]


def test_prune_dry_run_then_for_real_on_both_tiers(blob_env: str, tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", f"{blob_env}/cli3"
    _saved(fast, durable, (1, 2, 3, 4))
    args = ["checkpoint", "prune", str(fast), "--durable", durable, "--keep-last", "2"]
    dry = runner.invoke(app, [*args, "--dry-run", "--json"])
    assert json.loads(dry.stdout) == {
        "dry_run": True,
        "deleted": {"fast": [1, 2], "durable": [1, 2]},
        "damaged": {},
    }
    assert (fast / step_dir(1)).exists()
    real = runner.invoke(app, args)
    assert real.exit_code == 0 and "fast: deleted 2 step(s) [1, 2]" in real.stdout
    with Checkpointer(fast, durable) as ckpt:
        assert [i.step for i in ckpt.list()] == [4, 3]


def test_pull_brings_the_newest_step_to_an_empty_fast_tier(blob_env: str, tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", f"{blob_env}/cli4"
    _saved(fast, durable)
    shutil.rmtree(fast)
    out = runner.invoke(app, ["checkpoint", "pull", durable, str(fast), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["step"] == 30
    with Checkpointer(fast) as ckpt:  # no durable tier: it loads from the folder alone
        restored = ckpt.load()
    assert restored.step == 30 and restored.tier == "fast"
    missing = runner.invoke(app, ["checkpoint", "pull", durable, str(fast), "--step", "99"])
    assert missing.exit_code == 2 and "holds no committed step 99" in missing.stderr
    assert missing.stderr.startswith("error: ")  # no blank line left by the progress bar


def test_interval_follows_young_daly_and_schedules_saves(tmp_path: Path) -> None:
    # Young: sqrt(2 C M) = sqrt(2 * 10 * 10800) = 464.8 s; Daly's correction takes it to 458.1
    assert round(checkpoint_interval(10, 60, mtbf="3h"), 1) == 458.1
    assert checkpoint_interval(10, 900, mtbf="3h") == 900  # never more often than a save takes
    # 16,384 GPUs that each fail once in 50,000 h: the job fails every 3.05 h
    by_gpu = checkpoint_interval(10, gpus=16384, gpu_mtbf="50000h")
    assert by_gpu == checkpoint_interval(10, mtbf=50000 * 3600 / 16384)
    assert round(by_gpu, 1) == 462.1
    # gpus alone: the catalog's GPU MTBF, as the plan uses
    assert checkpoint_interval(10, gpus=512) == checkpoint_interval(10, gpus=512, gpu_mtbf="50677h")
    with Checkpointer(tmp_path / "f", mtbf="3h") as ckpt:
        assert ckpt.maybe_save(1, {"x": torch.zeros(4)}) is not None  # the first one measures
        ckpt.wait()
        assert ckpt.interval_s is not None and ckpt.interval_s > 1
        assert ckpt.maybe_save(2, {"x": torch.zeros(4)}) is None  # too soon


def test_maybe_save_never_starts_a_save_while_it_cannot_know_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps shorter than a save's write: while the first save was being written the interval
    was unknown, which counted as 'save now', so every step saved (and waited for the last)."""
    from stoker.checkpoint._pipeline import SavePipeline

    write = SavePipeline._write_fast
    monkeypatch.setattr(
        SavePipeline, "_write_fast", lambda self, *a: (time.sleep(0.5), write(self, *a))
    )
    with Checkpointer(tmp_path / "f", mtbf="3h", keep_last=100) as ckpt:
        saved = [
            s for s in range(20) if ckpt.maybe_save(s, {"x": torch.zeros(4)}) or time.sleep(0.01)
        ]
        assert saved == [0]
        ckpt.wait()
        assert ckpt.interval_s is not None and ckpt.interval_s > 1  # (not yet passed)
        assert ckpt.maybe_save(20, {"x": torch.zeros(4)}) is None


def test_verify_of_a_folder_with_no_checkpoint_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()  # (a folder that does not exist: see the test below)
    out = runner.invoke(app, ["checkpoint", "verify", str(tmp_path / "empty")])
    assert out.exit_code == 2 and "no committed checkpoint to verify" in out.stderr, out.output


# ---------------------------------------------------------------- errors a shell user can act on


def _local(tmp_path: Path, steps: tuple[int, ...] = (10, 20, 30)) -> tuple[Path, Path]:
    """A fast folder and a durable folder (no Azurite needed) holding ``steps``."""
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    with Checkpointer(fast, durable, keep_last=5) as ckpt:
        for step in steps:
            ckpt.save(step, {"w": torch.full((1 << 12,), float(step))})
    return fast, durable


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-40] ^= 1
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("verb", ["ls", "prune", "verify"])
def test_a_missing_fast_folder_is_an_error_not_an_empty_listing(verb: str, tmp_path: Path) -> None:
    out = runner.invoke(app, ["checkpoint", verb, str(tmp_path / "typo")])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith("error: fast tier ") and "check the path" in out.stderr
    assert "Traceback" not in out.output and not (tmp_path / "typo").exists()


def test_an_empty_folder_lists_nothing_and_a_new_vm_lists_the_durable_tier(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    empty = runner.invoke(app, ["checkpoint", "ls", str(tmp_path / "empty"), "--json"])
    assert empty.exit_code == 0 and json.loads(empty.stdout)["checkpoints"] == []
    _, durable = _local(tmp_path)
    new_vm = str(tmp_path / "new-vm")  # no fast folder yet: what is on the durable tier?
    out = runner.invoke(app, ["checkpoint", "ls", new_vm, "--durable", str(durable), "--json"])
    assert out.exit_code == 0, out.output
    assert [c["step"] for c in json.loads(out.stdout)["checkpoints"]] == [30, 20, 10]


def test_pull_of_a_damaged_step_exits_1_names_the_step_option_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    _, durable = _local(tmp_path)
    _flip(durable / step_dir(30) / "shard-00000-of-00001.bin")
    fast = tmp_path / "new-vm"
    out = runner.invoke(app, ["checkpoint", "pull", str(durable), str(fast)])
    assert out.exit_code == 1, out.output
    assert out.stderr.startswith("error: step 30 on the durable tier")  # no blank line first
    assert "committed there: 20, 10 (pull one with --step N)" in out.stderr
    assert "fallback" not in out.stderr and "Traceback" not in out.output
    assert not fast.exists()  # nothing half-written
    older = runner.invoke(app, ["checkpoint", "pull", str(durable), str(fast), "--step", "20"])
    assert older.exit_code == 0, older.output


def test_pull_over_an_existing_fast_folder_removes_only_its_own_step(tmp_path: Path) -> None:
    fast, durable = _local(tmp_path, (10,))
    job = json.loads((durable / "stoker-claim.json").read_bytes())["job_id"]  # the same job
    with Checkpointer(tmp_path / "other", durable, keep_last=5, job_id=job) as ckpt:
        ckpt.save(20, {"w": torch.zeros(8)})
    _flip(durable / step_dir(20) / "shard-00000-of-00001.bin")
    out = runner.invoke(app, ["checkpoint", "pull", str(durable), str(fast)])
    assert out.exit_code == 1, out.output
    kept = sorted(p.name for p in fast.iterdir() if not p.name.startswith(".stoker-writer"))
    assert kept == ["latest.json", step_dir(10)]


def test_pull_from_an_unreachable_durable_tier_says_so_with_the_stores_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.checkpoint._tier import Tier
    from stoker.errors import StoreError

    def unreachable(self: Tier) -> dict:
        raise StoreError(f"listing {self.store}: Cannot connect to host 127.0.0.1:1")

    monkeypatch.setattr(Tier, "steps", unreachable)
    out = runner.invoke(app, ["checkpoint", "pull", BLOB_RUN1, str(tmp_path / "f")])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith(f"error: could not reach the durable tier {BLOB_RUN1}")
    assert "Cannot connect to host 127.0.0.1:1" in out.stderr and "holds no" not in out.stderr
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["ls", "--blob-tier", "banana"], "--blob-tier banana: not a Blob access tier; choose one"),
        (["ls", "--fast-price", "-1"], "--fast-price -1.0: give the tier's price"),
        (["prune", "--keep-every", "0"], "--keep-every 0: give a step interval of 1 or more"),
        (["prune", "--keep-last", "0"], "--keep-last 0: keep at least the newest checkpoint"),
    ],
)
def test_bad_options_exit_2_naming_the_option(args: list[str], says: str, tmp_path: Path) -> None:
    fast, _ = _local(tmp_path, (1, 2))
    out = runner.invoke(app, ["checkpoint", args[0], str(fast), *args[1:]])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith(f"error: {says}"), out.stderr
    assert "_" not in out.stderr.split(":")[1]  # an option, not a parameter name
    if "--blob-tier" in args:
        assert "hot, cool, cold, archive" in out.stderr
    assert [i.step for i in Checkpointer(fast).list()] == [2, 1]  # nothing pruned


def test_verify_prints_each_problem_on_one_line_when_piped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # what a pipe gets
    fast, durable = _local(tmp_path)
    _flip(fast / step_dir(20) / "shard-00000-of-00001.bin")
    out = runner.invoke(app, ["checkpoint", "verify", str(fast), "--durable", str(durable)])
    assert out.exit_code == 1, out.output
    line = (
        "fast step 20 shard-00000-of-00001.bin: hash differs from the manifest: the file is corrupt"
    )
    assert line in out.stdout.splitlines()
    assert out.stderr == ""  # the progress bar left a blank line here


def test_ls_help_lists_the_blob_tiers_and_the_price_unit() -> None:
    from stoker.catalog import BlobTier

    out = runner.invoke(app, ["checkpoint", "ls", "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0
    text = " ".join(out.stdout.split())  # help wraps at spaces: compare the words
    assert ", ".join(BlobTier.access_tiers()[:-1]) + " or archive" in text
    assert "USD per GB-month" in text and "0 or more" in text


def test_verify_counts_a_durable_tier_it_could_not_list_as_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It logged a warning, checked the fast tier alone and said ok."""
    from stoker.checkpoint._tier import Tier
    from stoker.errors import StoreError

    with Checkpointer(tmp_path / "f") as ckpt:
        ckpt.save(1, {"x": torch.ones(3)})
    steps = Tier.steps

    def durable_unreachable(self: Tier) -> dict:
        if self.name == "durable":
            raise StoreError(f"listing {self.store}: Cannot connect to host 127.0.0.1:1")
        return steps(self)

    monkeypatch.setattr(Tier, "steps", durable_unreachable)
    args = ["checkpoint", "verify", str(tmp_path / "f"), "--durable", str(tmp_path / "d")]
    out = runner.invoke(app, args)
    assert out.exit_code == 1, out.output
    assert "durable: not checked: listing" in out.stdout and "1 problem(s)" in out.stdout
    report = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert report["ok"] is False and report["problems"][0]["step"] is None


def test_ls_with_the_durable_tier_out_of_reach_lists_the_fast_tier_and_exits_1(
    blob_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was one error naming the durable tier: the steps on the local disk were not shown.
    (Refused credentials stand for any listing that fails; a dead endpoint is retried first.)"""
    import base64
    import os
    import re

    fast, durable = tmp_path / "fast", f"{blob_env}/run1"
    _saved(fast, durable, steps=(10, 20))
    wrong = base64.b64encode(b"not the key").decode()
    refused = re.sub("AccountKey=[^;]+", f"AccountKey={wrong}", os.environ[CONN])
    monkeypatch.setenv(CONN, refused)
    out = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", durable, "--json"])
    assert out.exit_code == 1, out.output
    data = json.loads(out.stdout)
    assert [c["step"] for c in data["checkpoints"]] == [20, 10]
    assert all(c["tiers"] == {"fast": "ok"} for c in data["checkpoints"])
    assert list(data["unreachable"]) == ["durable"] and "403" in data["unreachable"]["durable"]
    fast_cost, blob_cost = data["costs"]
    assert fast_cost["bytes"] > 2 * (1 << 20) and blob_cost["bytes"] is None
    assert blob_cost["usd_per_month"] is None and blob_cost["usd_per_gb_month"] == 0.0208
    assert out.stderr.startswith("error: the durable tier could not be listed")
    table = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", durable])
    assert table.exit_code == 1, table.output
    assert " ok " in table.stdout and "?" in table.stdout and "USD/month" in table.stdout
