"""A node for the set-up tests (``stoker-node``): its disks, its /etc and /run, under tmp.

Loop devices on sparse files stand in for the NVMe disks; ``tests/fake_mdadm`` stands in for
mdadm (this kernel has no md driver) and keeps its superblocks on those devices. Formatting,
fstab, mounting and the reboot cycle are real: a reboot unmounts, forgets the array, detaches
the disks and attaches them again in another order. Needs root (this machine and CI are root).
The script reads every path it writes from the environment, so the host's /etc is untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import stoker

TESTS = Path(__file__).parent
SCRIPT = Path(stoker.__file__).parent / "provision" / "node" / "stoker-node.sh"
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


@contextmanager
def loop_node(tmp_path: Path) -> Iterator[Node]:
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
