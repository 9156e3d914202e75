"""``cloud-init.yaml`` for the GPU nodes: it installs stoker's node set-up as systemd units that
run at every boot, not as ``runcmd`` lines that run once per instance.

cloud-init writes ``/usr/local/sbin/stoker-node`` (``node/stoker-node.sh``), its settings
(``/etc/stoker/node.conf``), the shared file systems to mount (``/etc/stoker/mounts``, fstab
lines with ``_netdev``) and the units of ``node/``; ``runcmd`` only enables them and starts
``stoker-node-ready.service``, whose failure is cloud-init's failure. After a reboot or a
deallocate-and-start the same units assemble (or, on new disks, create) the NVMe array, mount
scratch and Lustre, install stoker if needed, run the health checks, and only then let slurmd
start. A failing check drains the node and leaves ``/run/stoker/unhealthy`` behind; while the node
passed set-up and health, ``/run/stoker/ready`` (``stoker.node_markers``, where doctor and guard
read them).

The Lustre MGS address is only known once Azure has created the file system, so the file holds
a placeholder per file system (``__LUSTRE_MGS_DATA__``, ``__NETAPP_IP_DATA__``); the ARM
template fills each in from ``reference(...)`` (``clientInfo.mgsAddress``, a NetApp volume's
``mountTargets[0].ipAddress``) when it passes the file to the scale sets as customData, so the
deployed nodes never see a placeholder.
"""

from __future__ import annotations

import shlex
from importlib import resources
from importlib.metadata import metadata
from typing import Any

import yaml

from ._layout import Layout, Lustre
from ._refs import account_name
from ._volume_plan import Volume

DOCTOR_JSON = "/var/log/stoker-doctor.json"
NODE_SCRIPT = "/usr/local/sbin/stoker-node"
NODE_CONF = "/etc/stoker/node.conf"
NODE_MOUNTS = "/etc/stoker/mounts"
# XFS, as Microsoft's image script formats the same array (azhpc-images setup_nvme.sh).
SCRATCH_FS = "xfs"

UNITS = (
    "stoker-scratch.service",
    "stoker-mounts.service",
    "stoker-install.service",
    "stoker-health.service",
    "stoker-health.timer",
    "stoker-node-ready.service",
)
SLURMD_DROP_IN = "/etc/systemd/system/slurmd.service.d/stoker-node-ready.conf"


def node_file(name: str) -> str:
    """A file of the node set-up, as shipped in the package (``provision/node/``)."""
    return resources.files(__package__).joinpath("node", name).read_text(encoding="utf-8")


def placeholder(lu: Lustre) -> str:
    return f"__LUSTRE_MGS_{lu.role.upper()}__"


def nfs_placeholder(v: Volume) -> str:
    return f"__NETAPP_IP_{v.role.upper()}__"


def _nfs_line(lay: Layout, v: Volume) -> str:
    if v.kind == "netapp":
        source = f"{nfs_placeholder(v)}:/{v.role}"
        opts = "rw,hard,rsize=262144,wsize=262144,vers=4.1,tcp,nconnect=8"
    else:
        account = account_name(lay, "files")
        source = f"{account}.file.core.windows.net:/{account}/{v.role}"
        opts = "vers=4,minorversion=1,sec=sys,nconnect=4"
    return f"{source} {v.mount_path} nfs {opts},_netdev"


def _lustre_line(lu: Lustre) -> str:
    # _netdev: mounted once the network is up (azure-managed-lustre automount-clients-fstab.md).
    return f"{placeholder(lu)}@tcp:/lustrefs {lu.mount_path} lustre noatime,flock,_netdev"


def mounts_text(lay: Layout) -> str:
    """``/etc/stoker/mounts``: one fstab line (source, target, type, options) per shared file
    system; ``stoker-node mounts`` copies each into fstab and mounts it."""
    lines = [_lustre_line(lu) for lu in lay.lustres] + [_nfs_line(lay, v) for v in lay.volumes]
    head = "# stoker provision: shared file systems; stoker-node mounts adds each to fstab\n"
    return head + "".join(line + "\n" for line in lines)


def python_min() -> str:
    """The oldest Python stoker runs on (its Requires-Python, ">=3.11"), checked on the node
    before pip runs: Ubuntu 22.04 images have 3.10."""
    return metadata("stoker")["Requires-Python"].removeprefix(">=")


def conf_text(lay: Layout) -> str:
    """``/etc/stoker/node.conf``, sourced by the script: every value one shell word."""
    return (
        "# stoker provision: settings of /usr/local/sbin/stoker-node\n"
        f"STOKER_SCRATCH={shlex.quote(lay.scratch_path)}\n"
        f"STOKER_FSTYPE={SCRATCH_FS}\n"
        f"STOKER_INSTALL={shlex.quote(lay.install)}\n"
        f"STOKER_PYTHON_MIN={python_min()}\n"
        f"STOKER_DOCTOR_JSON={DOCTOR_JSON}\n"
    )


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with multi-line text (scripts, units) as a literal block."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


class _Flow(list):
    """A runcmd entry, written on one line as cloud-init's docs write them."""


def _flow(dumper: yaml.SafeDumper, items: _Flow) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=True)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Flow, _flow)


def _file(path: str, content: str, permissions: str = "0644") -> dict[str, str]:
    return {"path": path, "permissions": permissions, "owner": "root:root", "content": content}


def config(lay: Layout) -> dict[str, Any]:
    """The cloud-config as data; user text (the install requirement) reaches the node only as
    one shell word in node.conf, and YAML quoting is PyYAML's."""
    write_files = [
        _file(NODE_SCRIPT, node_file("stoker-node.sh"), "0755"),
        _file(NODE_CONF, conf_text(lay)),
        _file(NODE_MOUNTS, mounts_text(lay)),
        *(_file(f"/etc/systemd/system/{unit}", node_file(unit)) for unit in UNITS),
        _file(SLURMD_DROP_IN, node_file("slurmd-stoker.conf")),
    ]
    runcmd = [
        _Flow(["systemctl", "daemon-reload"]),
        _Flow(["systemctl", "enable", *UNITS]),
        _Flow(["systemctl", "start", "--no-block", "stoker-health.timer"]),
        # Last, so that a node whose set-up fails shows it in `cloud-init status`.
        _Flow(["systemctl", "start", "stoker-node-ready.service"]),
    ]
    return {"write_files": write_files, "runcmd": runcmd}


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
