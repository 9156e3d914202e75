"""``cloud-init.yaml`` for the GPU nodes: local NVMe as RAID0 scratch, Lustre mounted, stoker
installed, and ``stoker doctor --json`` run at boot with its result kept for the operator.

The Lustre MGS address is only known once Azure has created the file system, so the file holds
a placeholder per file system (``__LUSTRE_MGS_DATA__``, ``__NETAPP_IP_DATA__``); the ARM
template fills each in from ``reference(...)`` (``clientInfo.mgsAddress``, a NetApp volume's
``mountTargets[0].ipAddress``) when it passes the file to the scale sets as customData, so the
deployed nodes never see a placeholder.
"""

from __future__ import annotations

import shlex
from typing import Any

import yaml

from ._layout import Layout, Lustre
from ._refs import account_name
from ._volume_plan import Volume

DOCTOR_JSON = "/var/log/stoker-doctor.json"
LOG = "/var/log/stoker-cloud-init.log"

# The 8 NVMe disks of an ND VM arrive raw (the HPC image's nvme-raid service is not enabled on
# any size), so the node assembles them itself, as Microsoft's image script would.
_NVME = """#!/bin/bash
# stoker: assemble every local NVMe disk into one RAID0 and mount it as scratch (idempotent).
set -euo pipefail
mount_point="$1"
if mountpoint -q "$mount_point"; then exit 0; fi
mapfile -t disks < <(ls /dev/nvme*n1 2>/dev/null | sort)
if [ "${#disks[@]}" -eq 0 ]; then echo "stoker: no local NVMe disk found" >&2; exit 0; fi
if [ ! -e /dev/md128 ]; then
  if [ "${#disks[@]}" -eq 1 ]; then
    ln -sf "${disks[0]}" /dev/md128
  else
    mdadm --create /dev/md128 --level 0 --force --run --raid-devices "${#disks[@]}" "${disks[@]}"
  fi
fi
blkid /dev/md128 >/dev/null 2>&1 || mkfs.xfs -f /dev/md128
mkdir -p "$mount_point"
mount -o noatime /dev/md128 "$mount_point"
chmod 1777 "$mount_point"
"""


def placeholder(lu: Lustre) -> str:
    return f"__LUSTRE_MGS_{lu.role.upper()}__"


def nfs_placeholder(v: Volume) -> str:
    return f"__NETAPP_IP_{v.role.upper()}__"


def _nfs_mount(lay: Layout, v: Volume) -> str:
    mount = shlex.quote(v.mount_path)
    if v.kind == "netapp":
        source = f"{nfs_placeholder(v)}:/{v.role}"
        opts = "rw,hard,rsize=262144,wsize=262144,vers=4.1,tcp,nconnect=8"
    else:
        account = account_name(lay, "files")
        source = f"{account}.file.core.windows.net:/{account}/{v.role}"
        opts = "vers=4,minorversion=1,sec=sys,nconnect=4"
    return (
        f"mkdir -p {mount} && (mountpoint -q {mount} || mount -t nfs -o {opts} {source} "
        f"{mount}) >> {LOG} 2>&1 || echo "
        + shlex.quote(f"stoker: {v.kind} volume {v.role} did not mount at {v.mount_path}")
        + f" >> {LOG}"
    )


def _lustre_mount(lu: Lustre) -> str:
    mount = shlex.quote(lu.mount_path)
    return (
        f"mkdir -p {mount} && "
        f"(mountpoint -q {mount} || mount -t lustre -o noatime,flock "
        f"{placeholder(lu)}@tcp:/lustrefs {mount}) >> {LOG} 2>&1 || "
        "echo "
        + shlex.quote(f"stoker: Lustre {lu.name} did not mount at {lu.mount_path}")
        + f" >> {LOG}"
    )


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with multi-line text (the RAID script) as a literal block."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


class _Flow(list):
    """A runcmd entry, written on one line as cloud-init's docs write them: [bash, -c, CMD]."""


def _flow(dumper: yaml.SafeDumper, items: _Flow) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Flow, _flow)


def _bash(command: str) -> list[str]:
    return _Flow(["bash", "-c", command])


def config(lay: Layout) -> dict[str, Any]:
    """The cloud-config as data; every command line's user text (the install requirement, a
    path) is one shell word by shlex.quote, and YAML quoting is PyYAML's."""
    scratch = shlex.quote(lay.scratch_path)
    install = shlex.quote(lay.install)
    runcmd = [
        _bash(f"echo stoker cloud-init start $(date -u +%FT%TZ) >> {LOG}"),
        _bash(f"/usr/local/sbin/stoker-nvme-raid {scratch} >> {LOG} 2>&1"),
        # The Azure HPC image ships the Lustre client; the log says so when it is missing.
        *(_bash(_lustre_mount(lu)) for lu in lay.lustres),
        *(_bash(_nfs_mount(lay, v)) for v in lay.volumes),
        _bash(
            f"python3 -m venv /opt/stoker && /opt/stoker/bin/pip install --quiet {install} "
            f">> {LOG} 2>&1"
        ),
        _bash("ln -sf /opt/stoker/bin/stoker /usr/local/bin/stoker"),
        # Kept where the operator reads it; a failing check still leaves its JSON behind.
        _bash(f"/opt/stoker/bin/stoker doctor --json > {DOCTOR_JSON} 2>> {LOG} || true"),
        _bash(f"echo stoker cloud-init done $(date -u +%FT%TZ) >> {LOG}"),
    ]
    return {
        "write_files": [
            {"path": "/usr/local/sbin/stoker-nvme-raid", "permissions": "0755", "content": _NVME}
        ],
        "runcmd": runcmd,
    }


def render(lay: Layout) -> str:
    """The cloud-config text, byte for byte what DIR/cloud-init.yaml holds."""
    # The plan's name stays out of the file: a comment is no place for text a user chose.
    head = (
        "#cloud-config\n"
        "# stoker provision: GPU node; see README.md beside it.\n"
        "# Lustre MGS addresses are filled in by the ARM template (customData), not by hand.\n"
    )
    # width: never fold a line, so each placeholder stays whole for ARM's replace().
    body = yaml.dump(
        config(lay),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=False,
        width=2**31 - 1,
    )
    return head + body
