"""The node's health marker (``stoker.node_markers``) as the node set-up writes it and as doctor
and guard read it: the real ``stoker-node health`` leaves the marker, doctor shows it without
failing on it (so the next health run can clear it), and guard never acts on an unhealthy node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from stoker import node_markers
from stoker.measure.doctor import doctor
from stoker.operate import Guard, GuardPolicy, NodeReading, decide, node_health
from stoker.operate.guard import GpuReading

REFUSED = "http://127.0.0.1:9/metadata/instance?api-version=2021-02-01"  # discard port: refused
SCRIPT = resources.files("stoker.provision").joinpath("node", "stoker-node.sh")
STOKER = Path(sys.executable).parent / "stoker"
POLICY = GuardPolicy(idle_for_s=600, util_below=5, interval_s=60)


def _mark(run: Path, line: str) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "unhealthy").write_text(line)
    return run


# ------------------------------------------------------------------------------- the marker


def test_the_marker_gives_its_time_and_reason_and_its_folder_can_be_moved(tmp_path, monkeypatch):
    assert node_markers.NODE_UNHEALTHY == "/run/stoker/unhealthy"  # what the script writes
    assert node_markers.unhealthy(tmp_path) is None
    _mark(tmp_path, "2026-01-02T03:04:05Z azurehpc-health-checks failed\n")
    found = node_markers.unhealthy(tmp_path)
    assert found is not None
    assert (found.at, found.reason) == ("2026-01-02T03:04:05Z", "azurehpc-health-checks failed")
    assert str(found) == "azurehpc-health-checks failed (since 2026-01-02T03:04:05Z)"
    monkeypatch.setenv("STOKER_RUN", str(tmp_path))  # as stoker-node.sh takes it
    assert node_markers.unhealthy() == found


def test_a_marker_that_cannot_be_read_still_marks_the_node_and_control_bytes_are_escaped(
    tmp_path,
):
    (tmp_path / "unhealthy").mkdir()  # there, but no file to read
    found = node_markers.unhealthy(tmp_path)
    assert found is not None and "unreadable" in found.reason
    _mark(tmp_path / "b", "2026-01-02T03:04:05Z bad\x1b[31m disk\n")
    assert "\x1b" not in str(node_markers.unhealthy(tmp_path / "b"))


# ------------------------------------------------------------------ the node script and doctor


def _health(run: Path, tmp: Path, *, nhc_exit: int, bin_: Path) -> subprocess.CompletedProcess:
    nhc = tmp / "nhc.sh"
    nhc.write_text(f"#!/bin/sh\nexit {nhc_exit}\n")
    nhc.chmod(0o755)
    env = {
        "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",  # no scontrol, no nvidia-smi
        "HOME": str(tmp),
        "STOKER_NODE_CONF": str(tmp / "none.conf"),
        "STOKER_MOUNTS": str(tmp / "none.mounts"),
        "STOKER_RUN": str(run),
        "STOKER_NHC": str(nhc),
        "STOKER_BIN": str(bin_),
        "STOKER_DOCTOR_JSON": str(tmp / "doctor.json"),
    }
    (tmp / "bin").mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPT), "health"], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_marker_the_script_leaves_is_shown_by_doctor_and_cleared_by_the_next_health_run(
    tmp_path,
):
    run = tmp_path / "run"
    ok_doctor = tmp_path / "doctor-ok"
    ok_doctor.write_text("#!/bin/sh\necho '{}'\n")
    ok_doctor.chmod(0o755)
    failed = _health(run, tmp_path, nhc_exit=1, bin_=ok_doctor)
    assert failed.returncode == 1
    found = node_markers.unhealthy(run)
    assert found is not None and found.reason == "azurehpc-health-checks failed"
    assert found.at.endswith("Z")

    # doctor shows it, as a warning: the node stays fit in its eyes.
    report = doctor(imds_url=REFUSED, env={}, run_dir=run)
    line = next(c for c in report.checks if c.check == "node health")
    assert line.status == "warn" and "azurehpc-health-checks failed" in line.found
    assert report.ok

    # The health timer's next run, with the real doctor: it passes, so the marker goes.
    healed = _health(run, tmp_path, nhc_exit=0, bin_=STOKER)
    assert healed.returncode == 0, healed.stderr
    assert node_markers.unhealthy(run) is None and (run / "ready").exists()
    shown = json.loads((tmp_path / "doctor.json").read_text())
    (seen,) = [c for c in shown["checks"] if c["check"] == "node health"]
    assert seen["status"] == "warn" and shown["ok"] is True  # it saw the marker, and passed

    after = doctor(imds_url=REFUSED, env={"STOKER_RUN": str(run)})  # the env, as on the node
    assert next(c for c in after.checks if c.check == "node health").status == "ok"


def test_a_node_stoker_did_not_set_up_is_a_skip(tmp_path):
    report = doctor(imds_url=REFUSED, env={}, root=tmp_path)
    assert next(c for c in report.checks if c.check == "node health").status == "skip"


# ------------------------------------------------------------------------------------ guard


def _idle(n: int = 11, start: float = 120) -> list[GpuReading]:
    return [GpuReading.of(start + 60 * i, {"0": 1.0, "1": 2.0}) for i in range(n)]


def _nodes(marked: set[float], n: int = 11, start: float = 120) -> list[NodeReading]:
    times = [start + 60 * i for i in range(n)]
    return [NodeReading(t, "nhc failed (since T)" if t in marked else "") for t in times]


def test_idle_gpus_on_an_unhealthy_node_are_unknown_and_say_why() -> None:
    assert decide(_idle(), [], POLICY, 720, _nodes(set())).idle  # the same GPUs, healthy
    verdict = decide(_idle(), [], POLICY, 720, _nodes({720}))
    assert verdict.state == "unknown" and verdict.node_unhealthy == "nhc failed (since T)"
    assert verdict.reason.startswith("node marked unhealthy: nhc failed")
    assert verdict.samples == []  # nothing for an action to rest on


def test_a_busy_node_marked_unhealthy_stays_busy_and_says_so() -> None:
    busy = [GpuReading.of(120 + 60 * i, {"0": 90.0}) for i in range(11)]
    verdict = decide(busy, [], POLICY, 720, _nodes({720}))
    assert verdict.state == "busy" and "node marked unhealthy: nhc failed" in verdict.reason


def test_the_idle_window_starts_again_once_the_marker_is_cleared() -> None:
    # Marked at 300 s, cleared at 360 s: idle GPUs since 120 s are not 10 idle minutes yet.
    verdict = decide(_idle(), [], POLICY, 720, _nodes({300}))
    assert verdict.state == "unknown" and "was marked unhealthy until 6 min ago" in verdict.reason
    assert verdict.node_unhealthy == ""
    # Once a whole window has passed since, the GPUs' idleness counts again.
    later = decide(_idle(16), [], POLICY, 1020, _nodes({300}, 16))
    assert later.idle


def test_guard_never_acts_while_its_node_is_marked_and_acts_once_it_is_cleared(tmp_path):
    run = _mark(tmp_path, "2026-01-02T03:04:05Z stoker doctor failed\n")
    clock = [0.0]
    acted: list = []
    seen: list = []
    guard = Guard(
        POLICY,
        gpus=lambda now: GpuReading.of(now, {"0": 0.0}),
        node=node_health(run),
        action=acted.append,
        on_verdict=seen.append,
        clock=lambda: clock[0],
        sleep=lambda s: clock.__setitem__(0, clock[0] + s),
    )
    assert guard.run(max_ticks=30) is None and not acted  # 30 min of idle GPUs
    assert "stoker doctor failed (since 2026-01-02T03:04:05Z)" in seen[-1].reason
    os.remove(run / "unhealthy")
    cleared_at = clock[0]  # the next look finds no marker
    verdict = guard.run(max_ticks=30)
    assert verdict is not None and acted == [verdict]
    # It waited a whole window after the marker went, though the GPUs idled all along.
    assert verdict.at - cleared_at == POLICY.idle_for_s


def test_guard_reads_this_nodes_marker_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_RUN", str(_mark(tmp_path, "2026-01-02T03:04:05Z gone\n")))
    guard = Guard(POLICY, gpus=lambda now: GpuReading.of(now, {"0": 0.0}), action=print)
    assert guard.tick().node_unhealthy == "gone (since 2026-01-02T03:04:05Z)"


@pytest.mark.parametrize("boom", [OSError, RuntimeError])
def test_a_marker_source_that_fails_is_no_all_clear(boom: type[Exception]) -> None:
    def broken(now: float) -> NodeReading:
        raise boom("no")

    guard = Guard(
        POLICY,
        gpus=lambda now: GpuReading.of(now, {"0": 0.0}),
        node=broken,
        action=print,
        clock=lambda: 0.0,
    )
    assert "could not be read" in guard.tick().node_unhealthy
