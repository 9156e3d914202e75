"""The node set-up (``stoker-node``, run by systemd at every boot) on real block devices.

Loop devices on sparse files stand in for the NVMe disks; ``tests/fake_mdadm`` stands in for
mdadm (this kernel has no md driver) and keeps its superblocks on those devices. Formatting,
fstab, mounting and the reboot cycle are real: a reboot unmounts, forgets the array, detaches
the disks and attaches them again in another order, then runs the script again. Needs root
(this machine and CI are root). The script reads every path it writes from the environment,
so the host's /etc is never touched.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import stoker

TESTS = Path(__file__).parent
NODE = Path(stoker.__file__).parent / "provision" / "node"
SCRIPT = NODE / "stoker-node.sh"
DISK_BYTES = 64 << 20


def sh(*args: str, **kw) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout.strip()


@dataclass
class Node:
    """A node's disks, its /etc (fstab, mdadm.conf, stoker's files) and /run, under tmp."""

    root: Path
    disk_files: list[Path]
    disks: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)  # every loop device the test attached

    @property
    def scratch(self) -> Path:
        return self.root / "mnt" / "nvme"

    @property
    def fstab(self) -> Path:
        return self.root / "etc" / "fstab"

    @property
    def mdconf(self) -> Path:
        return self.root / "etc" / "mdadm" / "mdadm.conf"

    @property
    def run_dir(self) -> Path:
        return self.root / "run" / "stoker"

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}",
            "FAKE_MDADM_STATE": str(self.root / "md-state"),
            "FAKE_MDADM_DEV": str(self.root / "dev"),
            "STOKER_NODE_CONF": str(self.root / "etc" / "stoker" / "node.conf"),
            "STOKER_FSTAB": str(self.fstab),
            "STOKER_MDADM_CONF": str(self.mdconf),
            "STOKER_MOUNTS": str(self.root / "etc" / "stoker" / "mounts"),
            "STOKER_RUN": str(self.run_dir),
            "STOKER_DISKS": " ".join(self.disks),
            "STOKER_MOUNT_TRIES": "2",
            "STOKER_MOUNT_WAIT_S": "0",
            # libblkid's cache of which device holds which UUID lives on /run: a reboot loses it.
            "BLKID_FILE": str(self.root / "blkid.tab"),
            **extra,
        }

    def run(self, verb: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), verb], env=self.env(**extra), capture_output=True, text=True
        )

    def mdadm(self, *args: str) -> str:
        return sh(str(TESTS / "fake_mdadm"), *args, env=self.env())

    def attach(self, order: list[int]) -> None:
        self.disks = [sh("losetup", "-f", "--show", str(self.disk_files[i])) for i in order]
        self.loops += self.disks

    def mount_source(self, path: Path) -> str:
        return sh("findmnt", "-n", "-o", "SOURCE", "-M", str(path))

    def reboot(self, order: list[int]) -> None:
        """What the node's disks and kernel go through: everything unmounted, the array
        forgotten (its loop device gone), the disks back, perhaps under other names."""
        for target in mounted_under(self.root):
            sh("umount", target)
        self.mdadm("--stop", "--scan")
        shutil.rmtree(self.root / "md-state", ignore_errors=True)
        shutil.rmtree(self.root / "dev", ignore_errors=True)
        (self.root / "blkid.tab").unlink(missing_ok=True)
        for dev in self.disks:
            sh("losetup", "-d", dev)
        self.attach(order)


def mounted_under(root: Path) -> list[str]:
    targets = sh("findmnt", "-rn", "-o", "TARGET").splitlines()
    return sorted((t for t in targets if t.startswith(f"{root}/")), reverse=True)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    assert os.geteuid() == 0, "the node set-up tests run as root (loop devices, mount)"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mdadm").symlink_to(TESTS / "fake_mdadm")
    (tmp_path / "etc" / "stoker").mkdir(parents=True)
    files = []
    for i in range(2):
        f = tmp_path / f"nvme{i}.img"
        with f.open("wb") as out:
            out.truncate(DISK_BYTES)
        files.append(f)
    n = Node(tmp_path, files)
    n.fstab.write_text(
        "# the image's own line, never touched\nLABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
    )
    (tmp_path / "etc" / "stoker" / "node.conf").write_text(
        f"STOKER_SCRATCH={n.scratch}\nSTOKER_FSTYPE=ext4\n"
    )
    n.attach([0, 1])
    try:
        yield n
    finally:
        for target in mounted_under(tmp_path):
            subprocess.run(["umount", "-l", target], check=False)
        # The script makes mount points immutable; pytest must be able to delete them.
        for folder in (tmp_path / "mnt", tmp_path / "lustre"):
            if folder.exists():
                subprocess.run(["chattr", "-R", "-i", str(folder)], check=False)
        subprocess.run([str(TESTS / "fake_mdadm"), "--stop", "--scan"], env=n.env(), check=False)
        for dev in n.loops:
            subprocess.run(["losetup", "-d", dev], check=False, capture_output=True)


def put_data(root: Path) -> dict[str, str]:
    (root / "run-1").mkdir()
    sums = {}
    for i in range(4):
        blob = os.urandom(256 << 10)
        (root / "run-1" / f"shard-{i}").write_bytes(blob)
        sums[f"run-1/shard-{i}"] = hashlib.sha256(blob).hexdigest()
    return sums


def read_data(root: Path, sums: dict[str, str]) -> dict[str, str]:
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in sums}


def scratch_lines(n: Node) -> list[str]:
    return [ln for ln in n.fstab.read_text().splitlines() if f" {n.scratch} " in ln]


def test_scratch_comes_back_after_three_reboots_with_its_data(node: Node):
    first = node.run("scratch")
    assert first.returncode == 0, first.stderr
    assert "creating RAID0" in first.stderr and "mkfs.ext4" in first.stderr
    (line,) = scratch_lines(node)
    uuid = re.fullmatch(rf"UUID=(\S+) {node.scratch} ext4 defaults,noatime,nofail 0 2", line)[1]
    sums = put_data(node.scratch)
    image_lines = node.fstab.read_text().splitlines()[:2]

    # 1: the array assembled from mdadm.conf; 2: udev got there first and named it md127;
    # 3: mdadm.conf lost, the array found by its superblock. Disks come back in another order.
    for boot, order in enumerate(([1, 0], [0, 1], [1, 0]), start=1):
        node.reboot(order)
        assert not os.path.ismount(node.scratch)
        with pytest.raises(PermissionError):  # unmounted, the OS disk's folder takes nothing
            (node.scratch / "spill").write_bytes(b"x")
        if boot == 2:
            array_uuid = re.search(r"UUID=(\S+)", node.mdconf.read_text())[1]
            node.mdadm("--assemble", "/dev/md127", f"--uuid={array_uuid}", *node.disks)
        if boot == 3:
            node.mdconf.write_text("# mdadm.conf as a fresh image has it\n")
        result = node.run("scratch")
        assert result.returncode == 0, (boot, result.stderr)
        assert "mkfs" not in result.stderr and "creating" not in result.stderr
        assert os.path.ismount(node.scratch)
        source = os.path.realpath(node.mount_source(node.scratch))
        array_dev = node.mdadm("--detail", "--scan").split()[1]
        assert source == os.path.realpath(array_dev)
        if boot == 2:
            assert array_dev.endswith("/md127")
        assert read_data(node.scratch, sums) == sums
        assert scratch_lines(node) == [line]  # same file system, one line, not a new one
        assert node.fstab.read_text().splitlines()[:2] == image_lines
        assert node.mdconf.read_text().count("ARRAY") == 1
        assert node.run("ready").returncode == 0
    assert uuid in line


def test_new_disks_after_deallocate_get_a_new_array_and_their_own_fstab_line(node: Node):
    assert node.run("scratch").returncode == 0
    (old,) = scratch_lines(node)
    node.reboot([0, 1])
    # Deallocate-and-start: the VM comes back on other hosts' NVMe, blank.
    for dev, f in zip(node.disks, node.disk_files, strict=True):
        sh("losetup", "-d", dev)
        f.unlink()
        with f.open("wb") as out:
            out.truncate(DISK_BYTES)
    node.attach([0, 1])
    result = node.run("scratch")
    assert result.returncode == 0, result.stderr
    assert "creating RAID0" in result.stderr
    (new,) = scratch_lines(node)
    assert new != old and os.path.ismount(node.scratch)
    assert node.mdconf.read_text().count("ARRAY") == 1


def test_disks_of_another_array_and_an_fstab_line_not_ours_are_left_alone(node: Node):
    node.mdadm("--create", "/dev/md/theirs", "--name=theirs", "--level=0", "--raid-devices=1",
               "--run", node.disks[1])  # fmt: skip
    node.mdadm("--stop", "--scan")
    result = node.run("scratch")
    assert result.returncode == 1
    assert f"disks {node.disks[1]} carry another md array's superblock" in result.stderr
    assert not os.path.ismount(node.scratch) and not scratch_lines(node)
    assert not node.mdconf.exists()

    theirs = f"/dev/sdz1 {node.scratch} ext4 defaults 0 2"
    node.fstab.write_text(node.fstab.read_text() + theirs + "\n")
    result = node.run("scratch")
    assert result.returncode == 1
    assert f"{node.fstab} already mounts {node.scratch} in a line stoker did not write" in (
        result.stderr
    )
    assert scratch_lines(node) == [theirs]


def write_mounts(node: Node, *lines: str) -> None:
    (node.root / "etc" / "stoker" / "mounts").write_text(
        "# shared\n" + "".join(f"{ln}\n" for ln in lines)
    )


def test_a_missing_lustre_server_leaves_the_node_not_ready_and_its_path_empty(node: Node):
    lustre = node.root / "lustre" / "checkpoints"
    write_mounts(node, f"10.255.255.1@tcp:/lustrefs {lustre} lustre noatime,flock,_netdev")
    assert node.run("scratch").returncode == 0
    result = node.run("mounts")
    assert result.returncode == 1
    assert f"not mounted: {lustre}" in result.stderr
    assert f"10.255.255.1@tcp:/lustrefs {lustre} lustre noatime,flock,_netdev 0 0" in (
        node.fstab.read_text()
    )
    ready = node.run("ready")
    assert ready.returncode == 1
    assert f"writes would land on the OS disk): {lustre}" in ready.stderr
    assert not (node.run_dir / "ready").exists()
    assert list(lustre.iterdir()) == []  # nothing written to the OS disk's directory
    with pytest.raises(PermissionError):  # nor can a job write there while it is unmounted
        (lustre / "step-100.pt").write_bytes(b"weights")


def test_shared_file_systems_mount_through_fstab_and_then_the_node_is_ready(node: Node):
    # A second file system on a loop device stands in for Lustre: mounted by fstab, _netdev.
    image = node.root / "shared.img"
    with image.open("wb") as out:
        out.truncate(DISK_BYTES)
    shared_dev = sh("losetup", "-f", "--show", str(image))
    node.loops.append(shared_dev)
    sh("mkfs.ext4", "-q", shared_dev)
    shared = node.root / "lustre" / "data"
    write_mounts(node, f"{shared_dev} {shared} ext4 noatime,_netdev")
    assert node.run("ready").returncode == 1  # nothing mounted yet
    assert node.run("scratch").returncode == 0
    result = node.run("mounts")
    assert result.returncode == 0, result.stderr
    assert node.mount_source(shared) == shared_dev
    assert node.run("mounts").returncode == 0  # again at the next boot: same fstab
    assert node.fstab.read_text().count(f" {shared} ") == 1
    ready = node.run("ready")
    assert ready.returncode == 0, ready.stderr
    assert (node.run_dir / "ready").read_text().strip()


# ------------------------------------------------------------------------------ health, install


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
        stand_in(nhc, f"echo 'NHC: checks ran'\nexit {nhc_exit}\n")
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


def test_the_demo_runs_the_shipped_script_through_three_reboots(tmp_path: Path):
    demo = TESTS.parent / "examples" / "node_reboots.py"
    out = sh(sys.executable, str(demo), str(tmp_path / "node"))
    assert out.count("; shard-0 intact") == 3 and "CHANGED" not in out
    assert "mounted from" in out and "udev names it md127" in out
    assert "stoker-node ready: FAILED" in out and "run/ready exists: False" in out
    subprocess.run(["chattr", "-R", "-i", str(tmp_path / "node")], check=False)
