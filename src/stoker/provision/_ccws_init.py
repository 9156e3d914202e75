"""stoker's node set-up for CycleCloud Workspace for Slurm: a cluster-init project.

CCWS runs node set-up only through ``clusterInitSpecs`` (its ``types.bicep``); parameters
outside that never reach a node, and CCWS release 2026.07.02 fetches a spec only from a GitHub
release URL (its ``create_cc_param.py`` reads ``gitHubReleaseURL`` of every record, so a
``PreStaged`` record fails there). The project is one script, ``10-stoker-node.sh``: the same
``write_files`` and ``runcmd`` as the scale sets' ``cloud-init.yaml``, so a CCWS GPU node gets
the same boot-time units (scratch, mounts, install, health) as a stoker scale-set node.

The README carries the script between two marker lines, and its commands cut it out with
``sed``, fill in the addresses ARM decides (Lustre MGS, NetApp mount targets) and publish the
project. Pure: text in, text out.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from typing import Any

import yaml

from ..errors import ProvisionError

PROJECT = "stoker-node"
PROJECT_VERSION = "1.0.0"
SCRIPT = "10-stoker-node.sh"
SCRIPT_DIR = f"{PROJECT}/specs/default/cluster-init/scripts"
END_MARKER = f"# end of {SCRIPT}"
# What the README's sed cuts out: from the shebang to the end marker.
# (and stops at the end marker, so nothing after it can start a second range).
CUT = rf"sed -n '/^#!\/bin\/bash$/,/^{END_MARKER}$/p;/^{END_MARKER}$/q' README.md"
URL_PLACEHOLDER = "__STOKER_CLUSTER_INIT_URL__"
PROJECT_INI = f"[project]\nname = {PROJECT}\ntype = application\nversion = {PROJECT_VERSION}\n"
# cloud-init keys this script carries; any other key would be a set-up step CCWS nodes miss.
_HANDLED = ("write_files", "runcmd", "bootcmd", "packages")


def _command(cmd: Any) -> str:
    # cloud-init runs a list as argv and a string through sh.
    if isinstance(cmd, list):
        return shlex.join(str(c) for c in cmd)
    return f"sh -c {shlex.quote(str(cmd))}"


def _write(entry: dict[str, Any]) -> list[str]:
    path = str(entry["path"])
    content = entry.get("content", "")
    if str(entry.get("encoding", "")).lower() in ("b64", "base64"):
        content = base64.b64decode(content).decode()
    # Under $STOKER_ROOT when set: how the tests run the script without touching the host.
    q = f'"$root"{shlex.quote(path)}'
    lines = [
        f'install -d -m 0755 "$root"{shlex.quote(posixpath.dirname(path) or "/")}',
        f"printf '%s' {shlex.quote(str(content))} > {q}",
        f"chmod {shlex.quote(str(entry.get('permissions', '0644')))} {q}",
    ]
    if entry.get("owner"):
        lines.append(f"chown {shlex.quote(str(entry['owner']))} {q}")
    return lines


def script(cloud_init: str) -> str:
    """``10-stoker-node.sh`` from the text of ``cloud-init.yaml``, in cloud-init's order
    (bootcmd, packages, write_files, runcmd); refuses a key it would leave out."""
    config = yaml.safe_load(cloud_init) or {}
    missed = sorted(set(config) - set(_HANDLED))
    if missed:
        raise ProvisionError(
            f"cloud-init.yaml: {', '.join(missed)} has no cluster-init equivalent here; "
            "the CCWS nodes would miss that set-up step (_ccws_init.py)"
        )
    out = [
        "#!/bin/bash",
        f"# {SCRIPT}: stoker's node set-up for CycleCloud, from this deployment's cloud-init.yaml.",
        "# CycleCloud runs it as root when a node starts; every step is safe to repeat.",
        "set -euo pipefail",
        'root="${STOKER_ROOT:-}"',
    ]
    out += [_command(c) for c in config.get("bootcmd") or []]
    if config.get("packages"):
        pkgs = " ".join(shlex.quote(str(p)) for p in config["packages"])
        out += ["apt-get update -q", f"DEBIAN_FRONTEND=noninteractive apt-get install -y -q {pkgs}"]
    for entry in config.get("write_files") or []:
        out += _write(entry)
    out += [_command(c) for c in config.get("runcmd") or []]
    out.append(END_MARKER)
    return "\n".join(out) + "\n"
