"""The public API from async code: stage, verify and cache_pull work inside a running event loop
(a notebook's), and their async twins let the caller's loop go on; cancelling one stops the
copy as Ctrl-C does, and the same call resumes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

import stoker


def _tree(root: Path, files: int = 3, size: int = 1 << 16) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"f{i}.bin").write_bytes(os.urandom(size))
    return root


def test_the_sync_forms_work_inside_a_running_event_loop(tmp_path: Path) -> None:
    """They called asyncio.run, which refuses inside a running loop (every notebook cell)."""
    src = _tree(tmp_path / "src")

    async def cell() -> tuple[stoker.StageSummary, stoker.VerifyReport]:
        return stoker.stage(str(src), str(tmp_path / "dst")), stoker.verify(
            str(src), str(tmp_path / "dst")
        )

    summary, report = asyncio.run(cell())
    assert summary.ok and summary.files_copied == 3
    assert report.ok and report.checked == 3


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not installed on Windows")
def test_the_public_api_runs_on_uvloop_from_plain_code_and_inside_a_loop() -> None:
    """The project installs uvloop (less CPU per request: store/_loop.new_loop); a missing
    install would fall back to asyncio's loop without a word."""
    from stoker.store._loop import run_sync

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    async def cell() -> str:  # the private loop in a thread of its own
        return run_sync(which())

    assert run_sync(which()).startswith("uvloop")
    assert asyncio.run(cell()).startswith("uvloop")


def test_the_async_twins_copy_while_the_callers_loop_goes_on(blob_env: str, tmp_path: Path) -> None:
    src = _tree(tmp_path / "model", files=4, size=1 << 20)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async def main() -> tuple:
        beat = asyncio.create_task(ticker())
        try:
            up = await stoker.stage_async(str(src), f"{blob_env}/m")
            check = await stoker.verify_async(str(src), f"{blob_env}/m")
            pulled = await stoker.cache_pull_async(f"{blob_env}/m", tmp_path / "cache")
        finally:
            beat.cancel()
        return up, check, pulled

    up, check, pulled = asyncio.run(main())
    assert up.ok and up.files_copied == 4
    assert check.ok and check.checked == 4
    assert pulled.pulled and sorted(p.name for p in Path(pulled.path).iterdir()) == [
        f"f{i}.bin" for i in range(4)
    ]
    assert ticks > 10  # the loop served its other tasks while the work ran


def test_the_twins_have_their_sync_forms_signature() -> None:
    import inspect

    from stoker.stage._cache import cache_pull
    from stoker.stage._stage import stage
    from stoker.stage._verify import verify

    for sync in (stage, verify, cache_pull):
        twin = getattr(stoker, f"{sync.__name__}_async")
        assert inspect.iscoroutinefunction(twin) and twin.__name__ == f"{sync.__name__}_async"
        assert inspect.signature(twin) == inspect.signature(sync)


def test_cancelling_a_twin_stops_the_copy_and_the_same_call_resumes(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src", files=400, size=1 << 14)
    dst = tmp_path / "dst"

    async def cancelled_early() -> None:
        task = asyncio.create_task(stoker.stage_async(str(src), str(dst), concurrency=1))
        while not dst.exists():  # the copy has begun
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_early())
    partial = [p for p in dst.rglob("*.stoker-partial")] if dst.exists() else []
    assert not partial  # a partial file is never left at its final path's name, nor behind
    again = stoker.stage(str(src), str(dst))
    assert again.ok and again.files_copied + again.files_skipped == 400
    assert again.files_copied > 0  # the cancelled run had not finished
    assert stoker.verify(str(src), str(dst)).ok


def test_an_error_in_a_twin_is_raised_to_the_awaiting_code(tmp_path: Path) -> None:
    with pytest.raises(stoker.StoreError, match="needs '://'"):
        asyncio.run(stoker.stage_async(str(tmp_path), "az:/acct/cont"))


def test_cancelling_cache_pull_async_ends_its_wait_for_another_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its wait is a sleep outside any coroutine: the cancel reached it only when another pod
    finished, or the timeout ran out."""
    import time

    from stoker.stage import _cache

    async def version(url: str, allow_http: bool = False) -> str:
        return "v1"

    monkeypatch.setattr(_cache, "_version", version)
    lock = tmp_path / "root" / "model" / ".locks" / "v1.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text('{"host": "another-pod", "pid": 1, "token": "theirs"}')  # fresh: held

    async def main() -> float:
        task = asyncio.create_task(
            stoker.cache_pull_async(str(tmp_path / "model"), tmp_path / "root", poll_s=30)
        )
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    assert asyncio.run(main()) < 5  # not the 30 s poll
    assert lock.exists()  # the other pod's lock is left alone
