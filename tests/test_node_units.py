"""What cloud-init puts on a GPU node, checked by the tools the node itself runs: cloud-init's own
schema check (Debian's ``cloud-init``, installed by ``make test``) and ``systemd-analyze
verify`` on the units, in a root folder laid out as the node's would be. Neither check is
skipped: a missing tool fails the test.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import stoker
from lustre_spec import lustre_data_spec
from stoker.provision._cloud_init import UNITS

SCRIPT = Path(stoker.__file__).parent / "provision" / "node" / "stoker-node.sh"
SPEC = lustre_data_spec("node-units")


@pytest.fixture(scope="module")
def cloud_init(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("deploy")
    (folder / "job.toml").write_text(SPEC)
    stoker.provision(folder / "job.toml", folder / "out")
    return folder / "out" / "cloud-init.yaml"


def files_of(cloud_init: Path) -> dict[str, dict]:
    return {f["path"]: f for f in yaml.safe_load(cloud_init.read_text())["write_files"]}


def schema(path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("cloud-init")
    assert tool, "cloud-init is not installed: `make test` installs Debian's package (as root)"
    return subprocess.run(
        [tool, "schema", "--config-file", str(path)], capture_output=True, text=True
    )


def test_cloud_init_passes_cloud_inits_own_schema_check(cloud_init: Path, tmp_path: Path):
    result = schema(cloud_init)
    assert result.returncode == 0, result.stderr
    assert "Valid cloud-config" in result.stdout
    # The check has teeth: the same file with a mode written as a number is refused.
    bad = tmp_path / "bad.yaml"
    bad.write_text(cloud_init.read_text().replace("permissions: '0755'", "permissions: 0755", 1))
    refused = schema(bad)
    assert refused.returncode == 1 and "permissions: 493 is not of type 'string'" in refused.stderr


def test_cloud_init_installs_boot_units_not_one_shot_commands(cloud_init: Path):
    config = yaml.safe_load(cloud_init.read_text())
    files = files_of(cloud_init)
    assert files["/usr/local/sbin/stoker-node"]["content"] == SCRIPT.read_text()
    assert files["/usr/local/sbin/stoker-node"]["permissions"] == "0755"
    conf = files["/etc/stoker/node.conf"]["content"]
    assert f"STOKER_INSTALL=stoker=={stoker.__version__}\nSTOKER_PYTHON_MIN=3.11\n" in conf
    assert "STOKER_SCRATCH=/mnt/nvme\nSTOKER_FSTYPE=xfs\n" in conf
    mounts = files["/etc/stoker/mounts"]["content"].splitlines()[1:]
    assert mounts == ["__LUSTRE_MGS_DATA__@tcp:/lustrefs /lustre/data lustre noatime,flock,_netdev"]
    drop_in = files["/etc/systemd/system/slurmd.service.d/stoker-node-ready.conf"]["content"]
    assert "Requires=stoker-node-ready.service" in drop_in
    # runcmd only enables the units; the set-up itself runs at every boot, and its failure
    # is the last command's, so cloud-init reports it.
    assert config["runcmd"][-1] == ["systemctl", "start", "stoker-node-ready.service"]
    assert not any("mdadm" in " ".join(cmd) or "mount" in cmd for cmd in config["runcmd"])
    assert "|| true" not in cloud_init.read_text()
    # customData decodes to at most 65,535 bytes (the ARM schema's description); the scripts
    # and units travel in it, and an MGS address is no longer than its placeholder.
    assert len(cloud_init.read_bytes()) <= 65535


def node_root(cloud_init: Path, root: Path) -> list[str]:
    """The node's / as cloud-init leaves it: the host's systemd units (what the image ships),
    slurmd (what CycleCloud adds) and every file of write_files. Returns the unit names."""
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    for path, f in files_of(cloud_init).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f["content"])
        target.chmod(int(f["permissions"], 8))
    units = root / "etc/systemd/system"
    (units / "slurmd.service").write_text("[Service]\nExecStart=/usr/local/sbin/stoker-node\n")
    return sorted(p.name for p in units.iterdir() if p.suffix in (".service", ".timer"))


def verify(root: Path, units: list[str]) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is not installed"
    return subprocess.run(
        [tool, "verify", f"--root={root}", *units],
        cwd=root / "etc/systemd/system",
        capture_output=True,
        text=True,
    )


def test_units_pass_systemd_analyze_verify(cloud_init: Path, tmp_path: Path):
    units = node_root(cloud_init, tmp_path)
    assert len(UNITS) == 6 and set(units) >= {*UNITS, "slurmd.service"}  # every unit written
    result = verify(tmp_path, units)
    assert (result.returncode, result.stderr) == (0, "")
    # The check has teeth: a misspelt key and a missing program are both reported.
    timer = tmp_path / "etc/systemd/system/stoker-health.timer"
    timer.write_text(timer.read_text().replace("OnUnitInactiveSec", "OnUnitInactiveSecs"))
    (tmp_path / "usr/local/sbin/stoker-node").unlink()
    result = verify(tmp_path, units)
    assert "Unknown key 'OnUnitInactiveSecs'" in result.stderr
    assert "Command /usr/local/sbin/stoker-node is not executable" in result.stderr


def test_the_readme_names_the_units_cloud_init_writes_and_their_journal(cloud_init: Path):
    readme = (cloud_init.parent / "README.md").read_text()
    node = readme.split("## On the nodes", 1)[1].split("\n## ", 1)[0]
    written = sorted(
        Path(path).name
        for path in files_of(cloud_init)
        if path.startswith("/etc/systemd/system/") and path.endswith((".service", ".timer"))
    )
    assert written  # the units are what cloud-init writes, and the README names every one
    for unit in written:
        assert f"`{unit}`" in node, unit
    assert "journalctl -b -u 'stoker-*'" in node
    assert "/var/log/stoker-doctor.json" in node and "/lustre/data" in node
    # the set-up is no longer a cloud-init script with a log of its own
    assert "cloud-init.log" not in readme and "stoker-cloud-init" not in readme
