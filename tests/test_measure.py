"""bench storage and bench loader at small sizes: what they measure, how they fail."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from stoker.cli import app
from stoker.errors import StokerError
from stoker.measure.loader import generate, most_accelerators, run_loader
from stoker.measure.storage import bench_storage

runner = CliRunner()
MiB = 1 << 20


def test_storage_runs_every_case_and_cleans_up(tmp_path: Path) -> None:
    heard: list[tuple[str, int, int]] = []
    results = bench_storage(
        tmp_path, size=8 * MiB, blocks=(MiB, 4096), jobs=(1, 2), progress=lambda *a: heard.append(a)
    )
    # the fill, then each test as it starts: what runs, steps done, steps in all
    assert [(done, total) for _, done, total in heard] == [
        (i, len(results) + 1) for i in range(len(results) + 1)
    ]
    assert heard[0][0].startswith("writing the") and "seq-read 1,048,576 B x 2 job(s), cold" in [
        what for what, _, _ in heard
    ]
    cases = {(r.test, r.block, r.jobs, r.cache) for r in results}
    assert ("seq-read", MiB, 2, "cold") in cases and ("seq-read", MiB, 2, "warm") in cases
    assert ("rand-read", 4096, 1, "cold") in cases and ("rand-write", 4096, 2, "-") in cases
    assert not any(r.test.startswith("seq") and r.block == 4096 for r in results)
    for r in results:
        assert r.bytes == 8 * MiB // r.jobs // r.block * r.block * r.jobs and r.seconds > 0
        assert r.iops == pytest.approx(r.bytes / r.block / r.seconds)
        assert r.direct == (r.cache != "warm")  # warm reads go through the page cache
    assert list(tmp_path.iterdir()) == []


def test_storage_refuses_bad_input(tmp_path: Path) -> None:
    with pytest.raises(StokerError, match="is not a folder"):
        bench_storage(tmp_path / "missing")
    with pytest.raises(StokerError, match="multiple of 4096"):
        bench_storage(tmp_path, blocks=(1000,))


def test_storage_cli_json(tmp_path: Path) -> None:
    out = runner.invoke(
        app, ["bench", "storage", str(tmp_path), "--size", "4MiB", "--jobs", "1", "--json"]
    )
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert {r["test"] for r in rows} == {"seq-read", "seq-write", "rand-read", "rand-write"}
    assert all(r["mb_per_s"] > 0 for r in rows)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = str(tmp_path_factory.mktemp("rn50") / "data")
    generate("resnet50", out, 900)
    return out


def test_loader_au_is_compute_over_total(resnet: str) -> None:
    slow = run_loader(resnet, "resnet50", steps=2, workers=1, compute_s=1.0)
    assert slow.batch == 400 and slow.steps == 2 and slow.passed
    # the emulated compute over the wall time after step 1: never above what the waits allow
    assert slow.utilization is not None
    assert 0.9 <= slow.utilization <= 1.0 / (1.0 + slow.wait_s) + 1e-3
    assert slow.first_batch_s is not None and slow.mb_per_s > 0
    heard: list[tuple[str, int, int]] = []
    busy = run_loader(
        resnet, "resnet50", steps=2, workers=1, compute_s=0.0, progress=lambda *a: heard.append(a)
    )
    assert busy.utilization == 0.0 and not busy.passed
    assert heard == [("x1, step", 1, 2), ("x1, step", 2, 2)]  # what the CLI's bar shows


def test_loader_search_and_limits(resnet: str) -> None:
    best, runs, capped = most_accelerators(resnet, "resnet50", steps=2, workers=1, compute_s=1.0)
    assert best == 1 and [r.accelerators for r in runs] == [1]  # 2 x 400 x 2 steps > 900 samples
    assert capped is not None and "capped by the dataset: 900 samples" in capped
    with pytest.raises(StokerError, match="workload 'bert'"):
        run_loader(resnet, "bert")
    with pytest.raises(StokerError, match="needs at least 1600"):
        run_loader(resnet, "resnet50", accelerators=2)


def test_loader_cli_exit_status_follows_the_threshold(resnet: str) -> None:
    # a tight compute time on a shared machine may pass or fail: the exit status must agree
    out = runner.invoke(
        app, ["bench", "loader", resnet, "--steps", "2", "--workers", "1", "--json"]
    )
    assert out.exit_code in (0, 1), out.output
    assert (out.exit_code == 0) == json.loads(out.stdout)["runs"][0]["passed"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"jobs": (-2,)}, r"--jobs -2: each must be 1 or more"),
        ({"jobs": (0,)}, r"--jobs 0: each must be 1 or more"),
        ({"blocks": (0,)}, r"--block 0: each must be a positive multiple of 4096"),
        ({"blocks": (-4096,)}, r"--block -4096: each must be a positive multiple"),
        ({"size": 0}, r"--size 0: the test file must hold at least one block per job"),
        ({"size": -1}, r"--size -1: the test file must hold"),
        ({"size": 1536}, r"--size 1.5 KiB: the test file must hold"),
        ({"size": MiB, "jobs": (4,)}, r"4 MiB for --block 1 MiB x --jobs 4"),
    ],
    ids=["jobs-2", "jobs0", "block0", "block-4096", "size0", "size-1", "size1.5KiB", "size<need"],
)
def test_storage_refuses_what_would_hang_or_measure_nothing(
    tmp_path: Path, options: dict, message: str
) -> None:
    with pytest.raises(StokerError, match=message):
        bench_storage(tmp_path, **({"size": 8 * MiB} | options))
    assert list(tmp_path.iterdir()) == []


def test_storage_cli_refuses_bad_jobs_and_sizes(tmp_path: Path) -> None:
    for args in (["--jobs", "-2"], ["--jobs", "0"], ["--size", "0"], ["--block", "0"]):
        out = runner.invoke(app, ["bench", "storage", str(tmp_path), *args])
        assert out.exit_code == 2 and out.exception is None or isinstance(out.exception, SystemExit)
        assert "Traceback" not in out.output
    assert list(tmp_path.iterdir()) == []


def test_a_failing_storage_job_never_leaves_the_others_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mmap
    import threading
    import types

    from stoker.measure import storage

    calls: list[int] = []

    def second_job_fails(*args: object) -> object:  # the buffer comes before the start gate
        calls.append(1)
        if len(calls) == 2:
            raise OSError(12, "Cannot allocate memory")
        return mmap.mmap(*args)  # type: ignore[call-overload]

    monkeypatch.setattr(storage, "mmap", types.SimpleNamespace(mmap=second_job_fails))
    path = tmp_path / "f"
    path.write_bytes(b"\0" * MiB)
    got: list[BaseException] = []

    def run() -> None:
        try:
            storage._run(
                path, write=False, sequential=True, block=4096, jobs=4, size=MiB, direct=False
            )
        except BaseException as exc:  # noqa: BLE001 - checked below
            got.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "a failed job left the others at the start gate"
    assert got and isinstance(got[0], OSError) and got[0].errno == 12


@pytest.mark.parametrize(
    ("code", "message"),
    [(28, "no space left in .* use a smaller --size"), (30, "read-only file system")],
    ids=["ENOSPC", "EROFS"],
)
def test_storage_disk_errors_are_one_line_and_leave_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, message: str
) -> None:
    from stoker.measure import storage

    def fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    def unlink(self: Path, missing_ok: bool = False) -> None:  # as a read-only FS answers
        if code == 30:
            raise OSError(30, os.strerror(30))
        real_unlink(self, missing_ok=missing_ok)

    real_unlink = Path.unlink
    monkeypatch.setattr(storage.os, "fsync", fsync)
    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(StokerError, match=message):
        bench_storage(tmp_path, size=MiB, blocks=(MiB,), jobs=(1,))
    monkeypatch.undo()
    if code == 28:
        assert list(tmp_path.iterdir()) == []


def test_storage_refuses_a_size_above_the_free_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.measure import storage

    usage = storage.shutil.disk_usage(tmp_path)._replace(free=10 * MiB)
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda p: usage)
    with pytest.raises(StokerError, match=r"--size 16 MiB does not fit in .*: 10 MiB free"):
        bench_storage(tmp_path, size=16 * MiB)
    assert list(tmp_path.iterdir()) == []


def test_storage_sigterm_removes_the_test_file(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import sys, time\n"
        "from stoker.measure import storage\n"
        "storage.measure = lambda *a, **k: time.sleep(60)\n"
        "storage.bench_storage(sys.argv[1], size=1 << 20, blocks=(1 << 20,), jobs=(1,))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)])
    deadline = time.monotonic() + 60
    while not list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the file is there: fill() has returned, the "test" is running
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_storage_says_which_tests_a_block_size_leaves_out(tmp_path: Path) -> None:
    args = ["bench", "storage", str(tmp_path), "--size", "1MiB", "--jobs", "1", "--json"]
    out = runner.invoke(app, [*args, "--block", "16KiB"])
    assert out.exit_code == 0, out.output
    assert {r["test"] for r in json.loads(out.stdout)} == {"rand-read", "rand-write"}
    assert "seq-write not run: no --block of 64 KiB or more" in out.stderr
    assert "seq-read not run" in out.stderr
    out = runner.invoke(app, ["bench", "storage", "--help"])
    assert "64 KiB" in out.output


def test_loader_drops_the_dataset_from_the_page_cache_and_says_it_fits_in_ram(
    resnet: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.measure import storage

    evicted: list[str] = []
    monkeypatch.setattr(storage, "evict", lambda path: evicted.append(Path(path).name))
    r = run_loader(resnet, "resnet50", steps=2, workers=0, compute_s=0.0)
    shards = sorted(p.name for p in Path(resnet).glob("*.stk"))
    assert shards and set(shards) <= set(evicted)
    assert r.dataset_bytes > 0
    assert any("smaller than RAM" in n and "5x RAM" in n for n in r.notes)


def test_loader_au_leaves_out_the_end_of_epoch_teardown(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import stoker.stream
    from stoker.measure import loader

    # A clock moved only by sleeps: the loop's own bookkeeping takes no time on it, so the AU
    # is exact (on the real clock a loaded machine's sleeps overshoot by tens of ms).
    now = [0.0]
    clock = types.SimpleNamespace(
        perf_counter=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )

    class SlowEnd:  # three batches, then a 0.6 s teardown before StopIteration
        metrics = types.SimpleNamespace(first_batch_s=0.0, wait_s=0.0)

        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def __iter__(self):  # type: ignore[no-untyped-def]
            yield from ([1] * 400 for _ in range(3))
            clock.sleep(0.6)

    index = types.SimpleNamespace(samples=1200, bytes=1200)
    fake_ds = types.SimpleNamespace(index=index, in_place=False, local=None, remote="x")
    monkeypatch.setattr(loader, "time", clock)
    monkeypatch.setattr(stoker.stream, "StreamingLoader", SlowEnd)
    monkeypatch.setattr(stoker.stream, "StreamingDataset", lambda *a, **k: fake_ds)
    r = loader.run_loader("az://x/y", "resnet50", compute_s=0.1)
    # 2 measured steps of 0.1 s compute in 0.2 s; counting the teardown would give 0.2 / 0.8
    assert r.steps == 3 and r.utilization == pytest.approx(1.0)


def test_loader_says_how_many_steps_were_measured(resnet: str) -> None:
    r = run_loader(resnet, "resnet50", steps=4, workers=1, compute_s=0.0)
    assert r.steps == 2 and r.steps_asked == 4 and r.measured_steps == 1
    assert "4 steps asked, the dataset held 2 (1 measured)" in " ".join(r.notes)
    out = runner.invoke(app, ["bench", "loader", resnet, "--steps", "2", "--workers", "1"])
    assert "2 steps (1 measured)" in out.stdout


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"steps": 0}, "--steps 0: run at least 2"),
        ({"steps": 1}, "--steps 1: run at least 2"),
        ({"accelerators": 0}, "--accelerators 0: emulate at least 1"),
        ({"workers": -1}, "--workers -1: use 0"),
    ],
    ids=["steps0", "steps1", "accelerators0", "workers-1"],
)
def test_loader_refuses_bad_options(resnet: str, options: dict, message: str) -> None:
    with pytest.raises(StokerError, match=message):
        run_loader(resnet, "resnet50", **options)


def test_loader_cli_errors_are_one_line(resnet: str, tmp_path: Path) -> None:
    bad = [
        ["/etc/passwd"],
        [resnet, "--steps", "0"],
        [resnet, "--steps", "-1"],
        [resnet, "--accelerators", "0"],
        [resnet, "--workers", "-1"],
        [str(tmp_path / "new"), "--generate", "-5"],
        [resnet, "--generate", "10"],
    ]
    for args in bad:
        out = runner.invoke(app, ["bench", "loader", *args])
        assert out.exit_code == 2, (args, out.output)
        assert out.exception is None or isinstance(out.exception, SystemExit), args
    assert not (tmp_path / "new").exists()
    out = runner.invoke(app, ["bench", "loader", resnet, "--generate", "10"])
    assert "already holds a dataset: drop --generate to measure it" in out.stderr
    assert "--resume" not in out.output
    with pytest.raises(StokerError, match="is not a folder"):
        run_loader("/etc/passwd", "resnet50")
    with pytest.raises(StokerError, match="--generate -5: write at least 1 sample"):
        generate("resnet50", str(tmp_path / "new"), -5)
    assert not (tmp_path / "new").exists()
