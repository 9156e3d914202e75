"""The node set-up (``stoker-node``, run by systemd at every boot) on real block devices:
the NVMe array and its file system through reboots, new disks, disks that are not ours, and
shared file systems through fstab (tests/loop_node.py has the node and its reboot).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loop_node import DISK_BYTES, TESTS, Node, loop_node, sh


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with loop_node(tmp_path) as n:
        yield n


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


def test_the_demo_runs_the_shipped_script_through_three_reboots(tmp_path: Path):
    demo = TESTS.parent / "examples" / "node_reboots.py"
    out = sh(sys.executable, str(demo), str(tmp_path / "node"))
    assert out.count("; shard-0 intact") == 3 and "CHANGED" not in out
    assert "mounted from" in out and "udev names it md127" in out
    assert "stoker-node ready: FAILED" in out and "run/ready exists: False" in out
    subprocess.run(["chattr", "-R", "-i", str(tmp_path / "node")], check=False)
