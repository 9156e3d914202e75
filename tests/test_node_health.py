"""The node's health checks and its stoker install (``stoker-node health``, ``install``): a
failing check drains the node in Slurm and keeps it not ready; a failed install fails the
set-up. azurehpc-health-checks and scontrol are stand-ins; ``stoker doctor`` and pip are real.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from loop_node import Node, loop_node, sh


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with loop_node(tmp_path) as n:
        yield n


def stand_in(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def slurm(node: Node) -> Path:
    """An scontrol that records what it is asked and shows the node with the reason in a file."""
    log = node.root / "scontrol.log"
    stand_in(
        node.root / "bin" / "scontrol",
        f'echo "$*" >> {log}\n'
        f'if [ "$1" = show ]; then echo "NodeName=$3 State=DRAIN Reason=$(cat {log}.reason)"; fi\n',
    )
    return log


def health(node: Node, nhc_exit: int | None) -> subprocess.CompletedProcess[str]:
    nhc = node.root / "run-health-checks.sh"
    if nhc_exit is not None:
        stand_in(nhc, f"echo ran >> {node.root / 'nhc.runs'}\nexit {nhc_exit}\n")
    # The real `stoker doctor` (off Azure it skips what it cannot see and passes).
    return node.run(
        "health",
        STOKER_NHC=str(nhc),
        STOKER_BIN=str(Path(sys.executable).parent / "stoker"),
        STOKER_DOCTOR_JSON=str(node.root / "log" / "stoker-doctor.json"),
        STOKER_NODENAME="gpu-7",
    )


def test_a_failing_health_check_drains_the_node_and_a_passing_one_lifts_only_its_own_drain(
    node: Node, slurm: Path
):
    assert node.run("scratch").returncode == 0
    (node.run_dir).mkdir(parents=True)
    (node.run_dir / "ready").write_text("earlier\n")
    result = health(node, nhc_exit=1)
    assert result.returncode == 1
    assert "azurehpc-health-checks failed" in (node.run_dir / "unhealthy").read_text()
    assert not (node.run_dir / "ready").exists()
    assert slurm.read_text() == (
        "update nodename=gpu-7 state=drain reason=stoker-health: azurehpc-health-checks failed\n"
    )
    assert '"ok": true' in (node.root / "log" / "stoker-doctor.json").read_text()
    ready = node.run("ready")
    assert ready.returncode == 1 and "marked unhealthy" in ready.stderr

    slurm.with_name("scontrol.log.reason").write_text(
        "stoker-health: azurehpc-health-checks failed"
    )
    assert health(node, nhc_exit=0).returncode == 0
    assert not (node.run_dir / "unhealthy").exists()
    assert (node.run_dir / "ready").exists()
    assert slurm.read_text().splitlines()[-2:] == [
        "show node gpu-7",
        "update nodename=gpu-7 state=resume",
    ]

    # Healthy, but scratch is gone: not ready, and the drain is not lifted.
    calls = len(slurm.read_text().splitlines())
    sh("umount", str(node.scratch))
    result = health(node, nhc_exit=0)
    assert result.returncode == 0 and "healthy, but not ready: a drain stays" in result.stderr
    assert not (node.run_dir / "ready").exists()
    assert len(slurm.read_text().splitlines()) == calls
    assert node.run("scratch").returncode == 0

    # An operator's drain is theirs: a passing check does not resume the node.
    slurm.with_name("scontrol.log.reason").write_text("maintenance by ops")
    assert health(node, nhc_exit=0).returncode == 0
    assert slurm.read_text().splitlines()[-1] == "show node gpu-7"


def test_missing_health_checks_count_as_unhealthy(node: Node, slurm: Path):
    result = health(node, nhc_exit=None)
    assert result.returncode == 1
    assert "azurehpc-health-checks is missing" in (node.run_dir / "unhealthy").read_text()
    assert "state=drain" in slurm.read_text()


def wheel(folder: Path) -> Path:
    """A small real wheel whose console script `stoker` prints a version, as stoker's does."""
    path = folder / "stoker-9.9.9-py3-none-any.whl"
    files = {
        "stoker/__init__.py": "",
        "stoker/cli.py": "def main():\n    print('stoker 9.9.9')\n",
        "stoker-9.9.9.dist-info/METADATA": "Metadata-Version: 2.1\nName: stoker\nVersion: 9.9.9\n",
        "stoker-9.9.9.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        "stoker-9.9.9.dist-info/entry_points.txt": "[console_scripts]\nstoker = stoker.cli:main\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "stoker-9.9.9.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, "stoker-9.9.9.dist-info/RECORD": record}.items():
            z.writestr(name, text)
    return path


def install(node: Node, requirement: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return node.run(
        "install",
        STOKER_INSTALL=requirement,
        STOKER_PREFIX=str(node.root / "opt" / "stoker"),
        STOKER_BIN=str(node.root / "bin" / "stoker"),
        STOKER_PYTHON=sys.executable,
        PIP_NO_INDEX="1",  # offline: only what the requirement names
        **extra,
    )


def test_install_uses_pip_target_and_a_failure_fails_the_set_up(node: Node):
    old = install(node, str(wheel(node.root)), STOKER_PYTHON_MIN="99.0")
    assert old.returncode == 1
    assert f"stoker needs Python 99.0 or later; this image's {sys.executable} is 3." in old.stderr
    bad = install(node, "stoker-no-such-package==0.0.1")
    assert bad.returncode != 0
    assert not (node.root / "bin" / "stoker").exists()
    assert not (node.root / "opt" / "stoker" / "installed").exists()

    whl = wheel(node.root)
    good = install(node, str(whl))
    assert good.returncode == 0, good.stderr
    assert sh(str(node.root / "bin" / "stoker"), "--version") == "stoker 9.9.9"
    assert (node.root / "opt" / "stoker" / "installed").read_text().strip() == str(whl)
    whl.unlink()  # installed: the next boot does not fetch it again
    assert install(node, str(whl)).returncode == 0


def test_a_busy_node_runs_doctor_but_leaves_the_gpu_checks_for_an_idle_run(node: Node, slurm: Path):
    # nvidia-smi as it answers when a training process holds the GPUs.
    stand_in(node.root / "bin" / "nvidia-smi", "echo 4242\n")
    result = health(node, nhc_exit=1)
    assert result.returncode == 0, result.stderr
    assert "azurehpc-health-checks waits for the next idle run" in result.stderr
    assert not (node.root / "nhc.runs").exists()
    assert (node.root / "log" / "stoker-doctor.json").exists()
    assert not (node.run_dir / "unhealthy").exists()
    stand_in(node.root / "bin" / "nvidia-smi", "true\n")  # idle: no process listed
    assert health(node, nhc_exit=1).returncode == 1
    assert (node.root / "nhc.runs").read_text() == "ran\n"
