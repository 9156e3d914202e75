"""The shared model cache against Azurite: one puller, atomic publish, stale-lock takeover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stoker.errors import StageError
from stoker.stage import cache_pull, stage


@pytest.fixture
def model(blob_env: str, tmp_path: Path) -> str:
    src = tmp_path / "model"
    src.mkdir()
    for i in range(3):
        (src / f"shard-{i}.safetensors").write_bytes(os.urandom(3 << 20))
    (src / "config.json").write_text('{"layers": 2}')
    url = f"{blob_env}/llama-tiny"
    assert stage(str(src), url).ok
    return url


def _files(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()
    }


def test_many_pods_at_once_one_downloads(model: str, tmp_path: Path) -> None:
    cache = tmp_path / "rwx"
    code = (
        "import json, sys; from stoker.stage import cache_pull; "
        f"print(json.dumps(cache_pull({model!r}, {str(cache)!r}).to_dict()))"
    )
    pods = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        for _ in range(4)
    ]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in pods]
    assert [p.returncode for p in pods] == [0, 0, 0, 0]
    assert sum(r["pulled"] for r in results) == 1
    assert len({r["path"] for r in results}) == 1
    final = Path(results[0]["path"])
    assert _files(final) == {
        "config.json": 13,
        **{f"shard-{i}.safetensors": 3 << 20 for i in range(3)},
    }
    assert (cache / "llama-tiny" / "current").resolve() == final.resolve()
    assert not list((cache / "llama-tiny" / ".locks").iterdir())


def test_a_second_pull_reuses_the_cache(model: str, tmp_path: Path) -> None:
    first = cache_pull(model, tmp_path / "c")
    again = cache_pull(model, tmp_path / "c")
    assert first.pulled and not again.pulled and first.path == again.path


def test_a_changed_model_is_a_new_version(model: str, tmp_path: Path, azurite) -> None:
    first = cache_pull(model, tmp_path / "c")
    container, prefix = model.removeprefix("az://").split("/", 1)
    azurite.service().get_container_client(container).upload_blob(
        f"{prefix}/config.json", b'{"layers": 3}', overwrite=True
    )
    second = cache_pull(model, tmp_path / "c")
    assert second.pulled and second.version != first.version
    assert Path(first.path).is_dir()  # the old version stays for pods still reading it
    assert (Path(second.path) / "config.json").read_text() == '{"layers": 3}'


def test_a_crashed_pullers_lock_is_taken_over(model: str, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    probe = cache_pull(model, tmp_path / "probe")  # learn the version id
    lock = cache / "llama-tiny" / ".locks" / f"{probe.version}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text('{"host": "dead-pod", "pid": 1}')
    old = time.time() - 120
    os.utime(lock, (old, old))
    t0 = time.monotonic()
    result = cache_pull(model, cache, stale_after_s=30)
    assert result.pulled and time.monotonic() - t0 < 30
    assert not lock.exists()


def test_a_live_lock_makes_others_wait_then_time_out(model: str, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    probe = cache_pull(model, tmp_path / "probe")
    lock = cache / "llama-tiny" / ".locks" / f"{probe.version}.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("{}")  # fresh mtime: a puller that is still alive
    with pytest.raises(StageError, match="waited"):
        cache_pull(model, cache, stale_after_s=60, timeout_s=1.0, poll_s=0.1)
    assert not (cache / "llama-tiny" / "versions").exists()


def test_a_pull_points_current_at_a_version_published_without_it(
    model: str, tmp_path: Path
) -> None:
    """A puller killed between publishing the version and pointing ``current`` at it: the
    next pull finds the version and points ``current`` at it."""
    cache = tmp_path / "cache"
    first = cache_pull(model, cache)
    (cache / "llama-tiny" / "current").unlink()  # as if killed just before the link
    again = cache_pull(model, cache)
    assert not again.pulled
    assert (cache / "llama-tiny" / "current").resolve() == Path(first.path).resolve()


def test_a_slow_breaker_never_moves_the_lock_a_faster_one_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pod B finds the lock stale and is slow to move it (a busy NFS share); pod C, meanwhile,
    tries to take over too. Two pods must never hold the lock at once."""
    import os
    import threading
    import time

    from stoker.stage import _cache

    lock = tmp_path / "v1.lock"
    lock.write_text('{"token": "dead"}')
    old = time.time() - 600
    os.utime(lock, (old, old))
    real_rename = os.rename

    def slow_for_b(src: object, dst: object) -> None:
        if threading.current_thread().name == "B":
            time.sleep(0.5)
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(_cache.os, "rename", slow_for_b)
    b = threading.Thread(target=_cache._break_if_stale, args=(lock, 60.0), name="B")
    b.start()
    time.sleep(0.1)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # pod C: break if stale, then take the lock
        _cache._break_if_stale(lock, 60.0)
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            time.sleep(0.05)
            continue
        os.write(fd, b'{"token": "C"}')
        os.close(fd)
        break
    b.join()
    assert lock.read_text() == '{"token": "C"}'  # C holds it; B did not move it aside
