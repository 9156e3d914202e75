"""Save on preemption, against a real loopback server that answers as IMDS Scheduled Events do
(stoker.checkpoint._events_server): no events, other VMs' events (ignored), a Preempt for this
VM with 30 s of notice, a notice shorter than a save, the same event polled again and again; the
acknowledgement must arrive only once the step's manifest is committed. Two ranks as two emulated
nodes, each with its own IMDS, under torchrun; and a child killed when its short notice runs out
leaves only whole steps."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from stoker.checkpoint import Checkpointer, Preemption
from stoker.checkpoint._events_server import EventsServer
from stoker.checkpoint._manifest import MANIFEST, step_dir
from stoker.checkpoint._scheduled_events import parse_events, parse_not_before
from stoker.errors import CheckpointError

VM = "vmss-train_3"


def _until(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def _committed(root: Path) -> set[int]:
    if not root.is_dir():
        return set()
    return {int(d.name.split("-")[1]) for d in root.glob("step-*") if (d / MANIFEST).exists()}


def _record_commits_at_ack(server: EventsServer, *roots: Path) -> list[list[set[int]]]:
    """What each tier held, committed, at the moment each acknowledgement arrived."""
    seen: list[list[set[int]]] = []
    server.on_ack = lambda ids: seen.append([_committed(r) for r in roots])
    return seen


def _train(
    ckpt: Checkpointer,
    watcher,
    state: dict,
    *,
    steps: int = 2000,
    step_s: float = 0.01,
    before: Callable[[int], None] | None = None,
) -> int | None:
    """A training loop: the step it stopped at, or None if it ran out."""
    for step in range(1, steps + 1):
        state["w"].fill_(float(step))
        state["step"] = step
        if before is not None:
            before(step)
        if watcher.should_stop(step):
            return step
        time.sleep(step_s)
    return None


@pytest.fixture()
def server():
    with EventsServer(VM) as srv:
        yield srv


def test_documents_parse_as_azure_writes_them() -> None:
    doc = {
        "DocumentIncarnation": 7,
        "Events": [
            {
                "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
                "EventType": "Preempt",
                "ResourceType": "VirtualMachine",
                "Resources": ["FrontEnd_IN_0", "BackEnd_IN_0"],
                "EventStatus": "Scheduled",
                "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
                "Description": "",
                "EventSource": "Platform",
                "DurationInSeconds": 5,
            },
            {
                "EventId": "x",
                "EventType": "Reboot",
                "Resources": ["a"],
                "EventStatus": "Started",
                "NotBefore": "",
            },
        ],
    }
    incarnation, (preempt, reboot) = parse_events(doc)
    assert incarnation == 7
    assert preempt.not_before == 1474309787.0  # 2016-09-19T18:29:47Z
    assert preempt.aims_at("BackEnd_IN_0") and not preempt.aims_at("BackEnd_IN_1")
    assert reboot.not_before is None and reboot.status == "Started"
    assert parse_not_before("soon") is None
    freeze = parse_events({"Events": [{"EventId": "f", "EventType": "Freeze", "Resources": ["a"]}]})
    assert not freeze[1][0].aims_at("a")  # memory kept: no reason to stop


def test_no_events_and_other_vms_events_are_ignored(server: EventsServer, tmp_path: Path) -> None:
    server.schedule("Preempt", resources=["vmss-train_4"])  # a neighbour's eviction
    server.schedule("Reboot", resources=["vmss-train_4", "vmss-train_5"])
    server.schedule("Freeze", resources=[VM])  # a pause of seconds: nothing to save
    state = {"w": torch.zeros(1000), "step": 0}
    with Checkpointer(tmp_path / "fast") as ckpt:
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        assert watcher.vm_name == VM  # learned from the instance document
        stops = []
        for step in range(1, 11):
            _until(lambda n=3 * step: watcher.polls >= n)
            stops.append(watcher.should_stop(step))
        assert stops == [False] * 10
        assert not watcher.stop_requested and watcher.last is None
        watcher.close()
    assert server.acks == [] and server.refused == 0
    assert not (tmp_path / "fast").exists()  # nothing saved


def test_preempt_saves_commits_on_both_tiers_then_acknowledges_once(
    server: EventsServer, tmp_path: Path
) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    at_ack = _record_commits_at_ack(server, fast, durable)
    state = {"w": torch.zeros(4 << 20), "step": 0}  # 16 MiB
    called: list[Preemption] = []
    with Checkpointer(fast, durable, keep_last=5) as ckpt:
        watcher = ckpt.watch_preemption(
            lambda: state, endpoint=server.url, poll_s=0.01, on_preempt=called.append
        )

        def before(step: int) -> None:
            if step == 5:
                ckpt.save(step, state)  # a periodic save, done before the event
            if step == 30:
                server.schedule("Preempt", notice_s=30)

        stopped = _train(ckpt, watcher, state, before=before)
        assert stopped is not None and stopped >= 30
        report = watcher.last
        assert called == [report] and watcher.stop_requested
        assert report.step == stopped and report.fast and report.durable and report.acknowledged
        assert 25 < report.notice_s <= 31
        assert [e.event_type for e in report.events] == ["Preempt"]
        # the acknowledgement came after the step was committed on both tiers
        assert at_ack == [[{5, stopped}, {5, stopped}]]
        # the same event, polled again and again, is handled once
        polls = watcher.polls
        _until(lambda: watcher.polls >= polls + 5)
        assert watcher.should_stop(stopped + 1) and watcher.should_stop(stopped + 2)
        assert len(server.acks) == 1 and len(called) == 1
        assert ckpt.last_save.step == stopped
        watcher.close()
        restored = ckpt.load()
    assert restored.step == stopped and restored.state["step"] == stopped
    assert torch.all(restored.state["w"] == stopped)


def test_a_step_just_saved_is_finished_not_saved_again(
    server: EventsServer, tmp_path: Path
) -> None:
    state = {"w": torch.zeros(1 << 20), "step": 0}
    at_ack = _record_commits_at_ack(server, tmp_path / "fast")
    with Checkpointer(tmp_path / "fast") as ckpt:
        watcher = ckpt.watch_preemption(endpoint=server.url, poll_s=0.01)  # no state_fn
        server.schedule("Terminate", notice_s=300)
        _until(lambda: watcher.stop_requested)
        ckpt.save(8, state)  # in flight when should_stop is called
        assert watcher.should_stop(8)
        assert watcher.last.step == 8 and "saved already" in watcher.last.note
        assert at_ack == [[{8}]]


def test_no_state_and_nothing_saved_is_not_acknowledged(
    server: EventsServer, tmp_path: Path
) -> None:
    with Checkpointer(tmp_path / "fast") as ckpt:
        watcher = ckpt.watch_preemption(endpoint=server.url, poll_s=0.01)
        server.schedule("Preempt", notice_s=30)
        _until(lambda: watcher.stop_requested)
        assert watcher.should_stop(3)
        assert watcher.last.step is None and not watcher.last.acknowledged
        assert "nothing to save" in watcher.last.note
    assert server.acks == []


def test_short_notice_saves_to_the_fast_tier_and_says_so(
    server: EventsServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    at_ack = _record_commits_at_ack(server, fast)
    state = {"w": torch.zeros(4 << 20), "step": 0}
    with Checkpointer(fast, durable) as ckpt:
        ckpt.save(1, state)
        ckpt.wait()  # measured: a save takes some time, and no notice is shorter than none
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        server.schedule("Reboot", notice_s=None)  # a host failure: already Started
        caplog.set_level("WARNING", logger="stoker.checkpoint")
        stopped = _train(ckpt, watcher, state)
        report = watcher.last
        assert stopped is not None and report.step == stopped
        assert report.notice_s <= 0 and report.fast and report.acknowledged
        assert not report.durable  # no time left: not waited for
        assert "no notice left" in report.note
        assert "shorter than a save" in report.note and "step 1 (committed)" in report.note
        assert "not waiting for the durable tier" in report.note
        assert "shorter than a save" in caplog.text
        assert at_ack == [[{1, stopped}]]  # committed on the fast tier before the ack
        ckpt.wait()  # the upload went on in the background
    assert _committed(durable) == {1, stopped}


def test_unreachable_imds_and_bad_poll_are_refused(tmp_path: Path) -> None:
    with Checkpointer(tmp_path / "fast") as ckpt:
        with pytest.raises(CheckpointError, match="give vm_name= and endpoint="):
            ckpt.watch_preemption(endpoint="http://127.0.0.1:9")  # nothing listens on 9
        with pytest.raises(CheckpointError, match="poll_s=0"):
            ckpt.watch_preemption(poll_s=0)


def test_polling_survives_a_bad_answer(server: EventsServer, tmp_path: Path) -> None:
    state = {"w": torch.zeros(10), "step": 0}
    with Checkpointer(tmp_path / "fast") as ckpt:
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        real = server.document
        server.document = lambda: {"no": "events"}  # type: ignore[method-assign]
        time.sleep(0.1)
        assert watcher.polls == 0 or not watcher.stop_requested
        server.document = real  # type: ignore[method-assign]
        server.schedule("Preempt", notice_s=30)
        assert _train(ckpt, watcher, state) is not None
        assert len(server.acks) == 1


# ------------------------------------------------------------------ killed at NotBefore
CHILD = textwrap.dedent(
    """
    import logging, sys, time, torch
    logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
    from stoker.checkpoint import Checkpointer
    fast, url, numel, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ckpt = Checkpointer(fast, keep_last=3)
    state = {"w": torch.zeros(numel), "step": 0}
    watcher = ckpt.watch_preemption(lambda: state, endpoint=url, vm_name="vm-a", poll_s=0.01)
    step = first - 1  # resumed after the newest committed step
    while True:
        step += 1
        state["w"].fill_(float(step))
        state["step"] = step
        if (step - first) % 20 == 0:
            ckpt.save(step, state)
        if step == first:
            ckpt.wait()
            print("ready", ckpt.last_save.fast_s, flush=True)
        if watcher.should_stop(step):
            print("stopped", step, flush=True)
            break
        time.sleep(0.005)
    time.sleep(60)  # Azure takes the VM away
    """
)


def test_killed_when_a_short_notice_runs_out_leaves_only_whole_steps(tmp_path: Path) -> None:
    fast = tmp_path / "fast"
    rounds = []
    # Of a save's write time, after the event is served. 0.0 kills before any save can finish,
    # however long the write time measured at the start came out on a busy machine.
    for fraction in (0.0, 0.2, 0.6, 1.0, 1.6):
        with EventsServer("vm-a") as server:
            at_ack = _record_commits_at_ack(server, fast)
            first = max(_committed(fast), default=0) + 1  # 128 MiB a step, from there
            proc = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(fast), server.url, str(32 << 20), str(first)],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            first = proc.stdout.readline().split()
            assert first and first[0] == "ready", first
            write_s = float(first[1])
            event = server.schedule("Preempt", notice_s=0.0)  # NotBefore now: shorter than a save
            _until(lambda e=event: e in server.first_served)
            time.sleep(fraction * write_s)  # the notice ran out: the VM goes
            proc.send_signal(signal.SIGKILL)
            out = proc.communicate()[0]
            rounds.append((at_ack, out))
        with Checkpointer(fast, keep_last=3) as ckpt:
            report = ckpt.verify()  # every committed step is whole
            assert not report.problems, report.problems
            newest = max(_committed(fast))
            restored = ckpt.load()
            assert restored.step == newest and torch.all(restored.state["w"] == newest)
        if at_ack:  # acknowledged: the step saved for the event was committed by then
            assert len(at_ack) == 1 and max(at_ack[0][0]) == newest
        if "stopped" in out:  # handled before the kill: its step is the newest, acknowledged
            assert newest == int(out.split("stopped")[1].split()[0])
            assert at_ack
    # at least one kill came before the commit (else this test would not test that case)
    assert any(not at_ack for at_ack, _ in rounds), rounds
    # at least one round was told its notice was too short before it was killed
    assert any("notice is shorter than a save" in out for _, out in rounds), rounds


# ------------------------------------------------------------------ two ranks, two nodes
WORKER = Path(__file__).with_name("preempt_worker.py")


def test_two_nodes_stop_together_and_only_the_evicted_node_acknowledges(tmp_path: Path) -> None:
    """Rank 0 and rank 1 play two nodes, each with its own IMDS and node-local fast tier; the
    eviction is announced on node 1 only: both ranks save the same step and stop, and node 1
    acknowledges once its manifest copy and the durable commit are there."""
    durable = tmp_path / "durable"
    fasts = [tmp_path / "fast-node0", tmp_path / "fast-node1"]
    with EventsServer("node-0") as imds0, EventsServer("node-1") as imds1:
        at_ack = _record_commits_at_ack(imds1, fasts[1], durable)
        imds0.on_ack = lambda ids: pytest.fail("node 0 was not evicted")  # noqa: ARG005
        out = tmp_path / "out"
        out.mkdir()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
        cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
        cmd += [
            str(WORKER),
            str(out),
            str(durable),
            str(fasts[0]),
            imds0.url,
            str(fasts[1]),
            imds1.url,
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        _until(lambda: imds1.gets >= 3 and imds0.gets >= 3, timeout=120)
        imds1.schedule("Preempt", notice_s=30)
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-3000:]
        results = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    stopped = results[0]["stopped"]
    assert stopped is not None and results[1]["stopped"] == stopped
    assert [r["acknowledged"] for r in results] == [False, True]
    assert [r["events"] for r in results] == [0, 1]
    assert all(r["fast"] and r["durable"] and r["step"] == stopped for r in results)
    assert imds0.acks == [] and len(imds1.acks) == 1
    assert at_ack == [[{stopped}, {stopped}]]  # node 1's own manifest copy, and durable
    assert _committed(fasts[0]) == {stopped}
    manifest = json.loads((durable / step_dir(stopped) / MANIFEST).read_text())
    assert manifest["world_size"] == 2


def _slow_uploads(monkeypatch: pytest.MonkeyPatch, ckpt: Checkpointer, seconds: float) -> None:
    """A durable tier that takes ``seconds`` for each upload (a slow link to Blob)."""
    assert ckpt.durable is not None
    real = ckpt.durable.upload

    def slow(*args: object, **kwargs: object) -> None:
        time.sleep(seconds)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ckpt.durable, "upload", slow)


def test_an_upload_measured_longer_than_the_notice_is_not_waited_for(
    server: EventsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    at_ack = _record_commits_at_ack(server, fast, durable)
    state = {"w": torch.zeros(1000), "step": 0}
    with Checkpointer(fast, durable) as ckpt:
        _slow_uploads(monkeypatch, ckpt, 2.5)
        ckpt.save(1, state)
        ckpt.wait()  # measured: an upload takes 2.5 s
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        server.schedule("Preempt", notice_s=3.5)  # 2.5-3.5 s (NotBefore is whole seconds)
        stopped = _train(ckpt, watcher, state)
        report = watcher.last
        assert report.fast and not report.durable and report.acknowledged
        assert re.search(r"an upload took [23]\.\d s the last time", report.note), report.note
        assert at_ack == [[{1, stopped}, {1}]]  # acknowledged without waiting for durable
        ckpt.wait()
    assert _committed(durable) == {1, stopped}  # the upload went on


def test_an_upload_that_runs_past_the_notice_is_given_up_before_notbefore(
    server: EventsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, durable = tmp_path / "fast", tmp_path / "durable"
    at_ack = _record_commits_at_ack(server, fast, durable)
    state = {"w": torch.zeros(1000), "step": 0}
    with Checkpointer(fast, durable) as ckpt:
        _slow_uploads(monkeypatch, ckpt, 6.0)  # no upload measured yet: the watcher tries
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        event = server.schedule("Preempt", notice_s=5.0)
        stopped = _train(ckpt, watcher, state)
        acked_at = server.acks[0][0]
        report = watcher.last
        assert report.fast and not report.durable and report.acknowledged
        assert "did not finish in time" in report.note
        not_before = parse_not_before(server.events[0]["NotBefore"])
        assert server.events[0]["EventId"] == event and not_before is not None
        # it waited, but acknowledged about ACK_MARGIN_S (2 s) before NotBefore
        waited = acked_at - server.first_served[event]
        assert 1.0 < waited < 4.5, waited
        assert at_ack == [[{stopped}, set()]]


def test_on_one_node_only_local_rank_0_polls_and_both_ranks_stop(tmp_path: Path) -> None:
    durable, fast = tmp_path / "durable", tmp_path / "fast"
    with EventsServer("node-0") as imds:
        at_ack = _record_commits_at_ack(imds, fast, durable)
        out = tmp_path / "out"
        out.mkdir()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2"]
        cmd += ["--master-port=0", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
        cmd += [str(WORKER), str(out), str(durable), str(fast), imds.url, "-", "-", "one-node"]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        _until(lambda: imds.gets >= 3, timeout=120)
        imds.schedule("Terminate", notice_s=600)
        stdout, stderr = proc.communicate(timeout=180)
        assert proc.returncode == 0, stderr[-3000:]
        results = [json.loads((out / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["poller"] for r in results] == [True, False]
    stopped = results[0]["stopped"]
    assert stopped is not None and results[1]["stopped"] == stopped
    assert [r["acknowledged"] for r in results] == [True, False]
    assert len(imds.acks) == 1 and at_ack == [[{stopped}, {stopped}]]


def test_preempt_with_blob_as_the_durable_tier(
    server: EventsServer, blob_env: str, tmp_path: Path
) -> None:
    """Azurite as the durable tier: the acknowledgement comes after the manifest is on Blob."""
    fast = tmp_path / "fast"
    state = {"w": torch.zeros(1 << 20), "step": 0}
    with Checkpointer(fast, f"{blob_env}/run-1") as ckpt:
        durable = ckpt.durable
        assert durable is not None
        on_blob: list[set[int]] = []
        server.on_ack = lambda ids: on_blob.append(
            {s for s, listing in durable.steps().items() if listing.committed}
        )
        watcher = ckpt.watch_preemption(lambda: state, endpoint=server.url, poll_s=0.01)
        server.schedule("Preempt", notice_s=30)
        stopped = _train(ckpt, watcher, state)
        assert watcher.last.durable and watcher.last.acknowledged
        assert on_blob == [{stopped}]
