"""``stoker provision`` writes only what it may: a user's text is refused or written escaped
for where it lands (a shell word, an ARM string, YAML), proved with bash and PyYAML, and the
--out folder is written only when it is this same deployment's (edits kept, id kept)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest
import tomli_w
import yaml
from typer.testing import CliRunner

import stoker
from stoker.cli import app
from stoker.errors import ProvisionError
from stoker.provision.tags import TAG_DEPLOYMENT
from stoker.provision.validate import ccws_errors, check

EXAMPLES = Path(__file__).parent.parent / "examples"
SMALL = EXAMPLES / "finetune-1vm.toml"
runner = CliRunner()

# Names a user could give the job; each must reach the files as that very text.
HOSTILE = [
    "$(touch {marker})",
    "`touch {marker}`",
    "x; touch {marker}",
    'it\'s "quoted" $HOME {marker}',
    "[parameters('sshPublicKey')]",
    "[listKeys(resourceId('Microsoft.Storage/storageAccounts', 'st'), '2023-01-01').keys[0]]",
    "[concat('a', 'b')] trailing",
]


def _spec(tmp_path: Path, name: str, **data: str) -> Path:
    spec = tomllib.loads(SMALL.read_text())
    spec["name"] = name
    spec["data"].update(data)
    path = tmp_path / "job.toml"
    path.write_bytes(tomli_w.dumps(spec).encode())
    return path


def _shell_blocks(readme: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", readme, flags=re.S)


def _expressions(value: object) -> set[str]:
    """Every string in a template that ARM would evaluate (starts with [ and ends with ])."""
    if isinstance(value, dict):
        return set().union(*(_expressions(v) for v in value.values()), set())
    if isinstance(value, list):
        return set().union(*(_expressions(v) for v in value), set())
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        return {value}
    return set()


@pytest.fixture(scope="module")
def benign(tmp_path_factory) -> set[str]:
    """stoker's own expressions, from the same deployment under a plain name."""
    out = tmp_path_factory.mktemp("benign") / "out"
    stoker.provision(SMALL, out, name="evil")
    return _expressions(json.loads((out / "main.json").read_text()))


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_hostile_plan_name_is_written_as_text_everywhere(pattern, tmp_path, benign):
    marker = tmp_path / "ran"
    name = pattern.format(marker=marker)
    out = tmp_path / "out"
    d = stoker.provision(_spec(tmp_path, name), out, name="evil")
    assert d.layout.plan_name == name

    # README: every shell block parses, and the deploy line, run with az stubbed to print its
    # arguments, hands az the name as one literal argument and runs nothing else.
    readme = (out / "README.md").read_text()
    blocks = _shell_blocks(readme)
    assert blocks
    for block in blocks:
        parsed = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
        assert parsed.returncode == 0, (parsed.stderr, block)
    (create,) = [line for line in blocks[0].splitlines() if line.startswith("az group create")]
    word = shlex.quote(f"stoker-plan={name}")
    assert word in create
    printed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, text=True)
    assert printed.stdout == f"stoker-plan={name}"
    stub = 'az() { printf "%s\\0" "$@"; }; '
    ran = subprocess.run(["bash", "-c", stub + create], capture_output=True, text=True)
    args = ran.stdout.split("\0")[:-1]
    assert ran.returncode == 0, ran.stderr
    assert f"stoker-plan={name}" in args
    assert f"{TAG_DEPLOYMENT}={d.layout.deployment_id}" in args
    assert args[:4] == ["group", "create", "--name", "rg-evil"]
    assert not marker.exists()  # nothing in the name was executed

    # main.json: every string ARM evaluates is one of stoker's own expressions or escaped.
    template = json.loads((out / "main.json").read_text())
    for expr in _expressions(template) - benign:
        assert expr.startswith("[["), expr
    tag = template["resources"][0]["tags"]["stoker-plan"]
    arm_sees = tag[1:] if tag.startswith("[[") else tag  # ARM's unescape of a literal
    assert arm_sees == name
    assert template["metadata"]["plan"] in (name, "[" + name)

    # cloud-init parses as YAML and carries no user text outside quoting; CCWS is valid.
    config = yaml.safe_load((out / "cloud-init.yaml").read_text())
    assert {"write_files", "runcmd"} <= set(config)
    ccws = json.loads((out / "ccws.parameters.json").read_text())
    assert ccws_errors(ccws) == []
    assert check(out).schema_errors == []


def test_an_install_url_round_trips_through_yaml_and_bash(tmp_path):
    marker = tmp_path / "ran"
    install = f"stoker @ https://example.test/a b'\"$(touch {marker})`x`.whl"
    out = tmp_path / "out"
    stoker.provision(SMALL, out, install=install)
    text = (out / "cloud-init.yaml").read_text()
    config = yaml.safe_load(text)
    # The node's set-up script sources node.conf and gives pip "$STOKER_INSTALL", one word.
    (conf,) = [f for f in config["write_files"] if f["path"] == "/etc/stoker/node.conf"]
    word = shlex.quote(install)
    assert f"STOKER_INSTALL={word}\n" in conf["content"]  # YAML gave back the exact line
    (tmp_path / "node.conf").write_text(conf["content"])
    printed = subprocess.run(
        ["bash", "-c", f'. {tmp_path / "node.conf"} && printf %s "$STOKER_INSTALL"'],
        capture_output=True,
        text=True,
    )
    assert printed.stdout == install and not marker.exists()
    # ARM passes the same text to the nodes: the template's variable is the file, unchanged.
    assert json.loads((out / "main.json").read_text())["variables"]["cloudInit"] == text
    # The README's own pip line quotes it the same way.
    assert f"pip install {word}" in (out / "README.md").read_text()


def _refused(tmp_path: Path, spec: Path, args: list[str], *needles: str) -> str:
    out = tmp_path / "deploy"
    result = runner.invoke(app, ["provision", str(spec), "--out", str(out), *args])
    assert result.exit_code == 2, (result.output, result.exception)
    line = result.output.strip()
    assert "\n" not in line, line  # one line
    for needle in needles:
        assert needle in line, line
    assert "Traceback" not in line and not out.exists()
    return line


@pytest.mark.parametrize(
    ("name", "shown"),
    [("bad\nname", "'\\n'"), ("bad\x1b[31mname", "'\\x1b'"), ("tab\there", "'\\t'")],
)
def test_a_control_character_in_the_name_is_refused_shown_escaped(tmp_path, name, shown):
    line = _refused(tmp_path, _spec(tmp_path, name), [], "name:", shown, "control character")
    assert "\x1b" not in line


def test_a_name_longer_than_a_tag_value_is_refused(tmp_path):
    _refused(tmp_path, _spec(tmp_path, "n" * 300), [], "name:", "300 characters", "256")
    stoker.provision(_spec(tmp_path, "n" * 256), tmp_path / "ok")  # the limit itself is fine


def test_a_region_the_catalog_does_not_list_is_refused(tmp_path):
    override = tmp_path / "regions.toml"
    override.write_text('[vm.ND96isr_H100_v5]\nregions = ["eastus"]\n')
    spec = tmp_path / "west.toml"
    spec.write_text(SMALL.read_text().replace("[cluster]", '[cluster]\nregion = "westus3"', 1))
    _refused(tmp_path, spec, ["--catalog", str(override)], "cluster.region:", "westus3")
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.read_text().replace("[cluster]", '[cluster]\nregion = "east;us"', 1))
    _refused(tmp_path, bad, [], "cluster.region:")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--install", "http://example.test/stoker.whl"], ("install:", "http://")),
        (["--install", "stoker @ ftp://example.test/s.whl"], ("install:", "ftp://")),
        (["--install", "--index-url=https://evil.test"], ("install:", "not an option")),
        (["--install", "stoker\x1b"], ("install:", "'\\x1b'")),
        (["--resource-group", "rg$(touch x)"], ("resource_group:",)),
        (["--resource-group", "rg."], ("resource_group:",)),
        (["--resource-group", "r" * 91], ("resource_group:",)),
    ],
)
def test_options_that_would_escape_their_place_are_refused(tmp_path, args, needles):
    _refused(tmp_path, SMALL, args, *needles)


def test_a_data_source_in_the_clear_is_refused(tmp_path):
    spec = _spec(tmp_path, "plain", source="http://example.test/data")
    _refused(tmp_path, spec, [], "data.source:", "http://")


def test_a_resource_group_with_parentheses_is_quoted_in_every_command(tmp_path):
    out = tmp_path / "out"
    stoker.provision(SMALL, out, resource_group="rg(a)b")
    blocks = _shell_blocks((out / "README.md").read_text())
    stub = 'az() { printf "%s\\0" "$@"; }; stoker() { printf "%s\\0" "$@"; }; git() { :; }; '
    for block in blocks:
        assert subprocess.run(["bash", "-n"], input=block, text=True).returncode == 0
    teardown = next(b for b in blocks if "stoker teardown" in b).splitlines()[0]
    ran = subprocess.run(["bash", "-c", stub + teardown], capture_output=True, text=True)
    assert ran.stdout.split("\0")[:-1][-2:] == ["--resource-group", "rg(a)b"]


def test_ccws_parameters_carry_the_deployment_id(tmp_path):
    d = stoker.provision(SMALL, tmp_path / "out")
    tags = json.loads((tmp_path / "out" / "ccws.parameters.json").read_text())["parameters"]
    tags = tags["tags"]["value"]
    for kind in ("Resource group", "Microsoft.Compute/virtualMachines"):
        assert tags[kind][TAG_DEPLOYMENT] == d.layout.deployment_id
        assert tags[kind]["stoker-plan"] == d.layout.plan_name


def test_a_derived_name_azure_refuses_is_caught_before_writing(tmp_path):
    import dataclasses

    from stoker.provision._names import check_names

    d = stoker.provision(SMALL, tmp_path / "out")
    check_names(d.layout)  # what stoker derives passes
    with pytest.raises(ProvisionError, match=r"^name: .* virtualNetworks name"):
        check_names(dataclasses.replace(d.layout, prefix="x" * 70))
    with pytest.raises(ProvisionError, match=r"^name: .*storageAccounts name"):
        check_names(dataclasses.replace(d.layout, prefix="Upper"))
