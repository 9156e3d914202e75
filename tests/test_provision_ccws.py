"""The CCWS parameters carry what CycleCloud reads: stoker's node set-up through
``clusterInitSpecs``, the ownership tags under every key CCWS looks up (``'Node Array'`` for the
GPU VMs), GPU counts within the form's 0..1000; and the README's cluster-init script, cut out
with the README's own ``sed`` line, really writes cloud-init's files and runs its commands."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

import stoker
from lustre_spec import LUSTRE_DATA
from stoker.errors import ProvisionError
from stoker.provision import _ccws, _ccws_init, _readme_access, validate
from stoker.provision.tags import TAG_AFTER, TAG_DEPLOYMENT, TAG_PLAN

EXAMPLES = Path(__file__).parent.parent / "examples"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def lustre(tmp_path_factory) -> tuple[stoker.Deployment, Path]:
    root = tmp_path_factory.mktemp("ccws")
    spec = root / "job.toml"
    spec.write_text(LUSTRE_DATA)
    out = root / "out"
    return stoker.provision(spec, out, now=NOW), out


def _params(out: Path) -> dict:
    return json.loads((out / "ccws.parameters.json").read_text())


def _sh_lines(readme: str) -> list[str]:
    return [x for b in re.findall(r"```sh\n(.*?)```", readme, flags=re.S) for x in b.splitlines()]


@pytest.mark.parametrize(
    "spec", ["pretrain-64vm", "moe-3d-parallel-128vm", "finetune-1vm", "vision-32vm"]
)
def test_every_example_validates_with_node_set_up_tags_and_bounded_nodes(spec, tmp_path):
    d = stoker.provision(EXAMPLES / f"{spec}.toml", tmp_path / "out", now=NOW)
    params = _params(tmp_path / "out")
    assert validate.ccws_errors(params) == []
    p = params["parameters"]
    assert p["clusterInitSpecs"]["value"] == [
        {
            "type": "gitHubReleaseURL",
            "gitHubReleaseURL": _ccws_init.URL_PLACEHOLDER,
            "spec": "default",
            "target": ["gpu"],
        }
    ]
    want = {
        TAG_DEPLOYMENT: d.layout.deployment_id,
        TAG_PLAN: d.layout.plan_name,
        TAG_AFTER: d.layout.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    tags = p["tags"]["value"]
    # 'Node Array' is what ccw.bicep hands CycleCloud as NodeTags: the GPU VMs' tags.
    assert tags["Node Array"] == want
    assert {k for k in tags} == set(_ccws.TAGGED)
    assert all(v[TAG_DEPLOYMENT] == d.layout.deployment_id for v in tags.values())
    assert 0 <= p["gpu"]["value"]["maxNodes"] == min(d.layout.nodes, 1000) <= 1000


def test_a_plan_past_the_forms_bound_is_capped_and_the_readme_says_so(lustre):
    d, _ = lustre
    big = dataclasses.replace(d.layout, nodes=2048)
    params = _ccws.parameters(big, stoker.catalog.load_catalog().provision)
    assert params["parameters"]["gpu"]["value"]["maxNodes"] == 1000
    assert validate.ccws_errors(params) == []
    text = "\n".join(_readme_access.ccws_sections(big, stoker.catalog.load_catalog().provision, ""))
    assert "deploy this plan with main.json, not CCWS" in text
    assert "HPCMaxScalesetSize" in text and "support request" in text


def test_the_schema_holds_gpu_counts_to_the_forms_bounds(lustre):
    _, out = lustre
    for bad in (1001, -1):
        params = _params(out)
        params["parameters"]["gpu"]["value"]["maxNodes"] = bad
        assert any("maxNodes" in e for e in validate.ccws_errors(params)), bad


def test_the_readme_lists_the_marketplace_terms_and_the_scale_set_split(lustre):
    _, out = lustre
    readme = (out / "README.md").read_text()
    lines = _sh_lines(readme)
    terms = [x for x in lines if x.startswith("az vm image terms accept")]
    assert terms == [
        "az vm image terms accept --urn azurecyclecloud:azure-cyclecloud:cyclecloud8-gen2:latest"
        "   # once per subscription"
    ]
    assert lines.index(terms[0]) < next(
        i for i, x in enumerate(lines) if x.startswith("az deployment sub create")
    )
    assert "`HPCMaxScalesetSize` (100 in CCWS's defaults)" in readme
    assert "InfiniBand does not cross scale sets" in readme


def _stubs(tmp_path: Path, log: Path, more: tuple[str, ...] = ()) -> dict[str, str]:
    """Stand-ins that record their arguments for az (answering an address), chown and the
    ``more`` commands; everything else the script does (install, printf, chmod) is real."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    bodies = {"az": 'echo "az $*" >> "$LOG"; echo 10.0.9.4', "chown": 'echo "chown $*" >> "$LOG"'}
    for name in more:
        bodies.setdefault(name, f'echo "{name} $*" >> "$LOG"')
    for name, body in bodies.items():
        tool = bin_ / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "LOG": str(log)}


def test_the_cluster_init_script_is_cut_from_the_readme_and_does_what_cloud_init_does(
    lustre, tmp_path
):
    d, out = lustre
    readme = (out / "README.md").read_text()
    cloud_init = (out / "cloud-init.yaml").read_text()
    log = tmp_path / "log"
    config = yaml.safe_load(cloud_init)
    # runcmd's commands act on the host (systemctl): each is a recording stand-in here.
    assert all(isinstance(c, list) for c in config["runcmd"])
    env = _stubs(tmp_path, log, tuple(sorted({c[0] for c in config["runcmd"]})))
    # The README's own lines, in the deployment folder: the project file and the script cut
    # out with the Lustre MGS address filled in (az stubbed to answer 10.0.9.4).
    lines = _sh_lines(readme)
    start = next(i for i, x in enumerate(lines) if x.startswith("mkdir -p stoker-node/"))
    for line in lines[start : start + 4]:  # mkdir, project.ini, cut, bash -n
        ran = subprocess.run(["bash", "-c", line], cwd=out, env=env, capture_output=True, text=True)
        assert ran.returncode == 0, (line, ran.stderr)
    script = out / _ccws_init.SCRIPT_DIR / _ccws_init.SCRIPT
    cut = script.read_text()
    placeholder = "__LUSTRE_MGS_DATA__"
    assert placeholder in _ccws_init.script(cloud_init)
    assert cut == _ccws_init.script(cloud_init).replace(placeholder, "10.0.9.4")
    assert "name = stoker-node" in (out / "stoker-node" / "project.ini").read_text()

    # Run it for real under a scratch root: each write_files entry lands byte for byte with
    # its mode, and runcmd's commands run in order.
    root = tmp_path / "root"
    ran = subprocess.run(
        ["bash", str(script)], env={**env, "STOKER_ROOT": str(root)}, capture_output=True
    )
    assert ran.returncode == 0, ran.stderr
    config = yaml.safe_load(cloud_init.replace(placeholder, "10.0.9.4"))
    assert config["write_files"]
    for entry in config["write_files"]:
        written = root / entry["path"].lstrip("/")
        assert written.read_text() == entry["content"], entry["path"]
        assert stat.S_IMODE(written.stat().st_mode) == int(entry["permissions"], 8)
    calls = [x for x in log.read_text().splitlines() if not x.startswith(("az ", "chown "))]
    assert calls == [" ".join(c) for c in config["runcmd"]]
    # Running it again (the next boot) changes nothing.
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    subprocess.run(["bash", str(script)], env={**env, "STOKER_ROOT": str(root)}, check=True)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_the_parameters_get_the_published_url(lustre, tmp_path):
    _, out = lustre
    env = _stubs(tmp_path, tmp_path / "log")
    env["STOKER_NODE_URL"] = "https://github.com/me/stoker-node/releases/tag/v1.0.0"
    line = next(x for x in _sh_lines((out / "README.md").read_text()) if "ccws.deploy.json" in x)
    ran = subprocess.run(["bash", "-c", line], cwd=out, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    deployed = json.loads((out / "ccws.deploy.json").read_text())
    (init,) = deployed["parameters"]["clusterInitSpecs"]["value"]
    assert init["gitHubReleaseURL"] == env["STOKER_NODE_URL"]
    assert validate.ccws_errors(deployed) == []


def test_a_cloud_init_key_the_script_cannot_carry_is_refused():
    with pytest.raises(ProvisionError, match=r"^cloud-init.yaml: mounts "):
        _ccws_init.script("#cloud-config\nmounts: [[a, b]]\nruncmd: [[true]]\n")
    text = _ccws_init.script("bootcmd: [[echo, a b]]\nruncmd: ['echo $HOME']\npackages: [jq]\n")
    assert "echo 'a b'" in text and "sh -c 'echo $HOME'" in text and "install -y -q jq" in text
