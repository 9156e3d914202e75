"""A GPU node's set-up as stoker provision ships it, run on this machine: the cloud-init file's
``stoker-node`` script against two loop devices standing in for the NVMe disks, then three
reboots (the array back under its name, as /dev/md127, and with mdadm.conf lost) and a Lustre
server that does not answer.

Needs root (loop devices, mount). mdadm is tests/fake_mdadm, a stand-in that keeps real
superblocks on the disks, because this kernel has no md driver; formatting, fstab and mounting
are real. Every path the script writes (fstab, mdadm.conf, /run/stoker) is under WORKDIR.

    python examples/node_reboots.py WORKDIR
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import tomli_w
import yaml

import stoker

HERE = Path(__file__).resolve().parent
FAKE_MDADM = HERE.parent / "tests" / "fake_mdadm"


def sh(*args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout.strip()


def main(work: Path) -> int:
    if os.geteuid() != 0:
        print("node set-up: skipped (needs root for loop devices and mount)")
        return 0
    if work.exists():
        subprocess.run(["chattr", "-R", "-i", str(work)], check=False, capture_output=True)
        shutil.rmtree(work)
    (work / "bin").mkdir(parents=True)
    (work / "bin" / "mdadm").symlink_to(FAKE_MDADM)
    # The 64-VM example with its data on Managed Lustre: scratch, a Lustre mount and health units.
    spec = tomllib.loads((HERE / "pretrain-64vm.toml").read_text("utf-8"))
    spec["name"], spec["data"]["tier"] = "node-demo", "lustre"
    (work / "job.toml").write_text(tomli_w.dumps(spec))
    stoker.provision(work / "job.toml", work / "deploy")
    files = yaml.safe_load((work / "deploy" / "cloud-init.yaml").read_text())["write_files"]
    script = work / "stoker-node"
    script.write_text(next(f["content"] for f in files if f["path"].endswith("/stoker-node")))
    scratch, lustre = work / "mnt" / "nvme", work / "lustre" / "data"
    (work / "etc").mkdir()
    (work / "etc" / "node.conf").write_text(f"STOKER_SCRATCH={scratch}\nSTOKER_FSTYPE=ext4\n")
    # The deployment's Lustre line, with an address where no server answers.
    (work / "etc" / "mounts").write_text(f"10.255.255.1@tcp:/lustrefs {lustre} lustre _netdev\n")
    (work / "etc" / "fstab").write_text("LABEL=cloudimg-rootfs / ext4 defaults 0 1\n")
    disks: list[str] = []
    for i in range(2):
        with (work / f"nvme{i}.img").open("wb") as f:
            f.truncate(64 << 20)
    loops: list[str] = []
    env = {
        **os.environ,
        "PATH": f"{work / 'bin'}:{os.environ['PATH']}",
        "FAKE_MDADM_STATE": str(work / "md-state"),
        "FAKE_MDADM_DEV": str(work / "dev"),
        "STOKER_NODE_CONF": str(work / "etc" / "node.conf"),
        "STOKER_FSTAB": str(work / "etc" / "fstab"),
        "STOKER_MDADM_CONF": str(work / "etc" / "mdadm.conf"),
        "STOKER_MOUNTS": str(work / "etc" / "mounts"),
        "STOKER_RUN": str(work / "run"),
        "STOKER_MOUNT_TRIES": "1",
        # libblkid's cache of which device holds which UUID lives on /run: a reboot loses it.
        "BLKID_FILE": str(work / "blkid.tab"),
    }

    def attach(order: list[int]) -> str:
        disks[:] = [sh("losetup", "-f", "--show", str(work / f"nvme{i}.img")) for i in order]
        loops.extend(disks)
        env["STOKER_DISKS"] = " ".join(disks)
        return ", ".join(f"nvme{i} as {d}" for i, d in zip(order, disks, strict=True))

    def step(verb: str) -> bool:
        r = subprocess.run(["bash", str(script), verb], env=env, capture_output=True, text=True)
        last = (r.stderr.strip().splitlines() or ["ok"])[-1]
        print(f"  stoker-node {verb}: {'ok' if r.returncode == 0 else 'FAILED'} ({last})")
        return r.returncode == 0

    def digest() -> str:
        return hashlib.sha256((scratch / "shard-0").read_bytes()).hexdigest()[:16]

    try:
        attach([0, 1])
        print("boot 0: new disks")
        step("scratch")
        (scratch / "shard-0").write_bytes(os.urandom(1 << 20))
        want = digest()
        print(f"  wrote shard-0 ({want}) to {scratch}")
        for boot, how in enumerate(("plain", "udev names it md127", "mdadm.conf lost"), 1):
            sh("umount", str(scratch))
            sh(str(FAKE_MDADM), "--stop", "--scan", env=env)
            for d in disks:
                sh("losetup", "-d", d)
            (work / "blkid.tab").unlink(missing_ok=True)
            names = attach([1, 0] if boot % 2 else [0, 1])
            print(f"boot {boot}: {how}; disks back: {names}")
            if boot == 2:
                uuid = (work / "etc" / "mdadm.conf").read_text().split("UUID=")[1].strip()
                sh(str(FAKE_MDADM), "--assemble", "/dev/md127", f"--uuid={uuid}", *disks, env=env)
            if boot == 3:
                (work / "etc" / "mdadm.conf").write_text("")
            step("scratch")
            source = sh("findmnt", "-n", "-o", "SOURCE", "-M", str(scratch))
            same = "intact" if digest() == want else "CHANGED"
            print(f"  {scratch} mounted from {source}; shard-0 {same}")
        print("Lustre server missing:")
        step("mounts")
        step("ready")
        print(f"  {work / 'run' / 'ready'} exists: {(work / 'run' / 'ready').exists()}")
    finally:
        subprocess.run(["umount", str(scratch)], check=False, capture_output=True)
        subprocess.run([str(FAKE_MDADM), "--stop", "--scan"], env=env, capture_output=True)
        for d in loops:
            subprocess.run(["losetup", "-d", d], check=False, capture_output=True)
        # The script made the mount points immutable; `make clean` must be able to remove them.
        subprocess.run(["chattr", "-R", "-i", str(work)], check=False, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
