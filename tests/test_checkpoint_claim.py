"""One owner per durable prefix (_claim.py): a second job is refused, load, ls and retention see
only their job's steps, and a durable tier that is the fast folder, sits on a missing volume or
does not answer is refused when the Checkpointer is made."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from azurite import ACCOUNT, ACCOUNT_KEY, free_port
from stoker.checkpoint import Checkpointer
from stoker.checkpoint._claim import CLAIM
from stoker.checkpoint._manifest import MANIFEST, step_dir
from stoker.cli import app
from stoker.errors import CheckpointError
from stoker.store import _reach, open_store

WORKER = Path(__file__).with_name("ckpt_claim_worker.py")
runner = CliRunner()


def _state(step: int) -> dict:
    return {"w": torch.full((1 << 10,), float(step)), "step": step}


def _saved(fast: Path, durable: Path | str, job: str, steps: tuple[int, ...]) -> None:
    with Checkpointer(fast, durable, keep_last=10, job_id=job) as ckpt:
        for step in steps:
            ckpt.save(step, _state(step))


def _owners(root: Path) -> dict[int, str | None]:
    """Step -> the job its manifest names, for every committed step under ``root``."""
    out = {}
    for manifest in root.glob(f"step-*/{MANIFEST}"):
        out[int(manifest.parent.name[5:])] = json.loads(manifest.read_bytes()).get("job_id")
    return out


# ------------------------------------------------------------------ one prefix, one job
def test_a_second_job_on_a_claimed_prefix_is_refused_and_the_same_job_goes_on(
    tmp_path: Path,
) -> None:
    durable = tmp_path / "durable"
    _saved(tmp_path / "a", durable, "job-a", (1, 2))
    with pytest.raises(CheckpointError) as refused:
        Checkpointer(tmp_path / "b", durable, job_id="job-b")
    said = str(refused.value)
    assert "\n" not in said and "'job-a'" in said and str(durable) in said and "'job-b'" in said
    assert "job_id='job-a'" in said  # how the same job resumed gets in
    assert not (tmp_path / "b").exists() and sorted(_owners(durable)) == [1, 2]
    # the same job from another fast folder (a new VM) goes on, and loads its newest step
    with Checkpointer(tmp_path / "a2", durable, job_id="job-a") as ckpt:
        assert ckpt.load().step == 2
        ckpt.save(3, _state(3))
    assert _owners(durable) == {1: "job-a", 2: "job-a", 3: "job-a"}
    claim = json.loads((durable / CLAIM).read_bytes())
    assert claim["job_id"] == "job-a" and claim["format"] == "stoker.claim/1"


def test_the_job_id_comes_from_torchrun_else_from_the_fast_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    with Checkpointer(tmp_path / "f") as one:
        assert one.job_id.startswith("fast-")
    with Checkpointer(tmp_path / "f" / ".." / "f") as two:
        assert two.job_id == one.job_id  # the same folder, however it is written
    with Checkpointer(tmp_path / "g") as other:
        assert other.job_id != one.job_id
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's value without --rdzv-id
    with Checkpointer(tmp_path / "f") as ckpt:
        assert ckpt.job_id == one.job_id
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "rdzv-42")
    with Checkpointer(tmp_path / "h", tmp_path / "d") as ckpt:
        assert ckpt.job_id == "rdzv-42"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "rdzv-43")  # a new launch of torchrun --standalone
    with pytest.raises(CheckpointError, match=r"'rdzv-42'.*'rdzv-43' \(from TORCHELASTIC_RUN_ID\)"):
        Checkpointer(tmp_path / "h", tmp_path / "d")
    with pytest.raises(CheckpointError, match=r"^job_id='a b':"):
        Checkpointer(tmp_path / "h", job_id="a b")


def test_load_ls_and_prune_never_touch_another_jobs_step(tmp_path: Path) -> None:
    """A step another job's manifest names (copied in by hand, or left by a job before its
    prefix was claimed) is neither loaded, listed nor deleted, even when it is the newest."""
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    _saved(fast, durable, "job-a", (1, 2, 3))
    for tier in (fast, durable):  # step 9: job-z's, on both tiers
        (tier / step_dir(9)).mkdir()
        for f in (tier / step_dir(3)).iterdir():
            data = f.read_bytes()
            if f.name == MANIFEST:
                raw = json.loads(data)
                raw.update(step=9, job_id="job-z")
                data = json.dumps(raw).encode()
            (tier / step_dir(9) / f.name).write_bytes(data)
    with Checkpointer(fast, durable, keep_last=1, job_id="job-a") as ckpt:
        assert ckpt.load().step == 3
        assert [i.step for i in ckpt.list()] == [3, 2, 1]
        assert ckpt.prune() == {"fast": [1, 2], "durable": [1, 2]}
        ckpt.save(10, _state(10))  # a save's own retention, too
        ckpt.wait()
    assert _owners(durable) == {9: "job-z", 10: "job-a"}
    assert _owners(fast) == {9: "job-z", 10: "job-a"}
    out = runner.invoke(app, ["checkpoint", "ls", str(fast), "--durable", str(durable), "--json"])
    assert out.exit_code == 0, out.output
    assert [c["step"] for c in json.loads(out.stdout)["checkpoints"]] == [10]


def test_steps_from_before_job_ids_are_adopted_by_the_first_claim(tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    _saved(fast, durable, "old", (1, 2, 3))
    (durable / CLAIM).unlink()  # as an older stoker left it: no claim, no job ids
    for tier in (fast, durable):
        for manifest in tier.glob(f"step-*/{MANIFEST}"):
            raw = json.loads(manifest.read_bytes())
            del raw["job_id"]
            manifest.write_text(json.dumps(raw))
    # a look (no claim yet) loads them; the first job to claim the prefix owns them
    with Checkpointer(tmp_path / "look", durable, check_writable=False) as ckpt:
        assert ckpt.load().step == 3
    assert not (durable / CLAIM).exists()  # looking claims nothing
    with Checkpointer(fast, durable, keep_last=1, job_id="new") as ckpt:
        assert ckpt.load().step == 3
        ckpt.save(4, _state(4))
        ckpt.wait()
    assert _owners(durable) == {4: "new"}  # its retention took the adopted steps
    with pytest.raises(CheckpointError, match="'new'"):
        Checkpointer(tmp_path / "late", durable, job_id="another")


def test_a_step_whose_job_cannot_be_read_is_never_pruned(tmp_path: Path) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    _saved(fast, durable, "job-a", (1, 2, 3))
    torn = durable / step_dir(1) / MANIFEST  # an old step: retention would delete it by number
    torn.write_bytes(torn.read_bytes()[:40])
    with Checkpointer(fast, durable, keep_last=1, job_id="job-a") as ckpt:
        report = ckpt.prune(delete_damaged=True)
    assert report == {"fast": [1, 2], "durable": [2]}
    assert torn.exists()  # kept: whose step it is cannot be read


def test_a_read_only_look_takes_the_holders_id(tmp_path: Path) -> None:
    durable = tmp_path / "durable"
    _saved(tmp_path / "a", durable, "job-a", (5,))
    with Checkpointer(tmp_path / "elsewhere", durable, check_writable=False) as ckpt:
        assert ckpt.job_id == "job-a" and [i.step for i in ckpt.list()] == [5]
    out = runner.invoke(
        app, ["checkpoint", "ls", str(tmp_path / "x"), "--durable", str(durable), "--job-id", "b"]
    )
    assert out.exit_code == 2 and "'job-a'" in out.stderr and "--job-id 'job-a' if" in out.stderr


# ------------------------------------------------------------------ where the durable tier is
@pytest.mark.parametrize("spelling", ["same", "dot", "link"])
def test_a_durable_folder_that_is_the_fast_folder_is_refused(tmp_path: Path, spelling: str) -> None:
    fast = tmp_path / "fast"
    fast.mkdir()
    durable: Path | str = {"same": fast, "dot": f"{fast}/./", "link": tmp_path / "link"}[spelling]
    if spelling == "link":
        (tmp_path / "link").symlink_to(fast)
    with pytest.raises(CheckpointError, match=r"is the fast folder .*one copy is not two"):
        Checkpointer(fast, durable)
    assert list(fast.iterdir()) == []


def test_a_durable_folder_on_a_missing_volume_is_refused_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    unmounted = tmp_path / "mnt" / "blobfuse"  # the mount point itself is missing
    with pytest.raises(CheckpointError, match=r"its folder .*blobfuse does not exist.*mounted"):
        Checkpointer(tmp_path / "fast", unmounted / "ckpt")
    assert not (tmp_path / "mnt").exists() and not (tmp_path / "fast").exists()
    (tmp_path / "mnt" / "blobfuse").mkdir(parents=True)  # mounted: its new folder is made
    with Checkpointer(tmp_path / "fast", unmounted / "ckpt") as ckpt:
        ckpt.save(1, _state(1))
    assert (unmounted / "ckpt" / step_dir(1) / MANIFEST).is_file()


@pytest.mark.parametrize("endpoint", ["closed", "silent"])
def test_a_durable_endpoint_that_does_not_answer_fails_within_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    monkeypatch.setattr(_reach, "_answered", set())
    silent = socket.socket()  # listens, so connections are accepted, and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1] if endpoint == "silent" else free_port()
    url = f"http://127.0.0.1:{port}/{ACCOUNT}"
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={url}",
    )
    started = time.monotonic()
    try:
        with pytest.raises(CheckpointError) as failed:
            Checkpointer(tmp_path / "fast", "az://ckpts/run1")
    finally:
        silent.close()
    took = time.monotonic() - started
    assert took < 10, took
    said = str(failed.value)
    assert "durable tier" in said and ACCOUNT_KEY not in said
    if endpoint == "closed":
        assert f"nothing answers at 127.0.0.1:{port} (connection refused)" in said
    else:
        assert "did not answer within 8 s" in said and took >= 7


# ------------------------------------------------------------------ Blob (Azurite)
def test_a_blob_claim_is_create_only(blob_env: str, tmp_path: Path) -> None:
    url = f"{blob_env}/run1"

    async def race() -> list[bool]:
        stores = [open_store(f"{blob_env}/race") for _ in range(8)]
        try:
            return await asyncio.gather(
                *(s.create_bytes("claim", str(i).encode()) for i, s in enumerate(stores))
            )
        finally:
            for s in stores:
                await s.close()

    won = asyncio.run(race())
    assert sorted(won) == [False] * 7 + [True]  # If-None-Match: *, one winner

    _saved(tmp_path / "a", url, "job-a", (1, 2))
    with pytest.raises(CheckpointError, match=r"run1 holds job 'job-a'.*'job-b'"):
        Checkpointer(tmp_path / "b", url, job_id="job-b")
    with Checkpointer(tmp_path / "a2", url, job_id="job-a") as ckpt:  # the job resumed
        restored = ckpt.load()
        assert restored.step == 2 and restored.tier == "durable"


def test_jobs_racing_for_one_blob_prefix_get_one_owner(blob_env: str, tmp_path: Path) -> None:
    url, results = f"{blob_env}/contested", {}

    def start(job: str) -> None:
        try:
            Checkpointer(tmp_path / job, url, job_id=job).close()
            results[job] = "ok"
        except CheckpointError as exc:
            results[job] = str(exc)

    threads = [threading.Thread(target=start, args=(f"job-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [job for job, said in results.items() if said == "ok"]
    assert len(winners) == 1, results
    for job, said in results.items():
        if job != winners[0]:
            assert f"holds job {winners[0]!r}" in said


# ------------------------------------------------------------------ kill -9, 50 rounds
def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _wait_for(log: Path, start: int, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = _lines(log)[start:]
        for line in lines:
            if line == "ready" or line.startswith("refused"):
                return line
        time.sleep(0.01)
    raise AssertionError(f"{log}: no word in {timeout_s} s: {_lines(log)[start:]}")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_50_rounds_of_kill_9_never_cross_jobs(tmp_path: Path) -> None:
    """Job A saves to prefix P, job C to its sibling Q, and job B tries P every round; A and C
    are killed at random moments of their saves. B is refused every time; no step of A is
    deleted by another job, every manifest names its prefix's job, every load is its own job's
    state and never older than the newest step its log called durable."""
    root = tmp_path / "durable"
    root.mkdir()
    prefix, sibling = root / "P", root / "Q"
    zygote = subprocess.Popen(
        [sys.executable, str(WORKER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent,
    )
    assert zygote.stdin is not None and zygote.stdout is not None
    rng = random.Random(50)
    logs = {j: tmp_path / f"{j}.log" for j in "ABC"}
    durable = {"A": prefix, "B": prefix, "C": sibling}
    newest = {"A": 0, "C": 0}  # the newest step each job's log called durable
    foreign_loads = refusals = 0

    def fork(job: str) -> tuple[int, int]:
        order = {"job": job, "fast": str(tmp_path / f"fast-{job}"), "durable": str(durable[job])}
        assert zygote.stdin is not None and zygote.stdout is not None
        seen = len(_lines(logs[job]))  # (before the fork: it may write at once)
        zygote.stdin.write(json.dumps(order | {"log": str(logs[job])}) + "\n")
        zygote.stdin.flush()
        return int(zygote.stdout.readline()), seen

    started = time.monotonic()
    try:
        for _ in range(50):
            running = {}
            for job in "AC":
                pid, seen = fork(job)
                assert _wait_for(logs[job], seen) == "ready"
                running[job] = (pid, seen)
            pid_b, seen_b = fork("B")  # A holds P: B is refused, every round
            said = _wait_for(logs["B"], seen_b)
            assert said.startswith("refused ") and "holds job 'A'" in said and str(prefix) in said
            refusals += 1
            for job in rng.sample("AC", 2):  # each killed somewhere in a save
                time.sleep(rng.uniform(0.0, 0.25))
                os.kill(running[job][0], signal.SIGKILL)
            for pid in (*(p for p, _ in running.values()), pid_b):
                while not _gone(pid):
                    time.sleep(0.005)
            for job in "AC":
                lines = _lines(logs[job])[running[job][1] :]
                for line in lines:
                    word, *rest = line.split()
                    if word == "loaded":
                        step, whose = int(rest[0]), rest[1]
                        foreign_loads += whose != job
                        assert step >= newest[job], (job, line, newest[job])
                    elif word == "durable":
                        newest[job] = max(newest[job], int(rest[0]))
                owners = _owners(durable[job])
                assert set(owners.values()) <= {job}, owners
                if newest[job]:  # its newest durable step was deleted by no one
                    assert max(owners) >= newest[job], (job, owners, newest[job])
    finally:
        zygote.kill()
        zygote.wait()
    assert foreign_loads == 0 and refusals == 50
    assert newest["A"] > 10 and newest["C"] > 10  # the rounds saved, not just started
    assert not (tmp_path / "fast-B").exists() or not list((tmp_path / "fast-B").glob("step-*"))
    assert time.monotonic() - started < 90
