"""``stoker provision --out DIR`` writes only into a folder it proves is this same deployment's:
a user's own files and another deployment are refused (nothing changed, one line, exit 2), a
re-run keeps the deployment id and the user's edits to main.parameters.json, --force writes
over all of it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import stoker
from stoker.cli import app
from stoker.errors import ProvisionError
from stoker.provision.tags import TAG_DEPLOYMENT

EXAMPLES = Path(__file__).parent.parent / "examples"
SMALL = EXAMPLES / "finetune-1vm.toml"
OTHER = EXAMPLES / "pretrain-64vm.toml"
runner = CliRunner()


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def _cli(spec: Path, out: Path, *args: str):
    return runner.invoke(app, ["provision", str(spec), "--out", str(out), *args])


def _refused(spec: Path, out: Path, *needles: str) -> None:
    before = _snapshot(out)
    result = _cli(spec, out)
    assert result.exit_code == 2, (result.output, result.exception)
    line = result.output.strip()
    assert "\n" not in line and "--force" in line, line
    for needle in needles:
        assert needle in line, line
    assert _snapshot(out) == before  # bytes and mtimes: nothing written, nothing left behind


def _tag_ids(out: Path) -> set[str]:
    template = json.loads((out / "main.json").read_text())
    return {r["tags"][TAG_DEPLOYMENT] for r in template["resources"] if "tags" in r}


@pytest.mark.parametrize("own", [["main.json"], ["README.md"], ["main.json", "cloud-init.yaml"]])
def test_a_users_own_files_are_refused_and_force_writes_over_them(tmp_path, own):
    out = tmp_path / "deploy"
    out.mkdir()
    for name in own:
        (out / name).write_text('{"mine": true}\n')
    _refused(SMALL, out, *own, "no stoker-deployment.json")
    with pytest.raises(ProvisionError, match=r"^--out .*stoker did not write"):
        stoker.provision(SMALL, out)  # the Python twin refuses the same way
    result = _cli(SMALL, out, "--force")
    assert result.exit_code == 0, result.output
    assert all('"mine"' not in (out / name).read_text() for name in own)


def test_files_stoker_never_writes_are_named_and_kept_under_force(tmp_path):
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    _refused(SMALL, out, "notes.txt", "did not write")
    assert _cli(SMALL, out, "--force").exit_code == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "main.json").is_file()


def test_another_deployments_folder_is_refused(tmp_path):
    out = tmp_path / "deploy"
    first = stoker.provision(SMALL, out)
    _refused(OTHER, out, "finetune-8b-1vm", "pretrain-70b-64vm", "another folder")
    # Same plan, another resource group: another deployment too.
    before = _snapshot(out)
    result = _cli(SMALL, out, "--resource-group", "rg-elsewhere")
    assert result.exit_code == 2 and "rg-elsewhere" in result.output, result.output
    assert _snapshot(out) == before
    # --force replaces it, under a new deployment id (the old resources are not this one's).
    forced = stoker.provision(OTHER, out, force=True)
    assert forced.layout.deployment_id != first.layout.deployment_id
    assert _tag_ids(out) == {forced.layout.deployment_id}


def test_a_record_that_is_not_stokers_is_refused(tmp_path):
    out = tmp_path / "deploy"
    stoker.provision(SMALL, out)
    record = out / "stoker-deployment.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps(data | {"schema": "something/9"}))
    _refused(SMALL, out, "not a stoker.deployment/1 record")
    record.write_text(json.dumps(data | {"deployment_id": "../../x"}))
    _refused(SMALL, out, "deployment_id")
    record.write_text("{not json")
    _refused(SMALL, out, "cannot be read as JSON")


def test_a_rerun_keeps_the_id_and_the_users_parameters_until_force(tmp_path):
    out = tmp_path / "deploy"
    first = stoker.provision(SMALL, out)
    ident = first.layout.deployment_id
    record = json.loads((out / "stoker-deployment.json").read_text())
    for name in ("main.json", "README.md", "main.parameters.json"):
        assert record["sha256"][name] == hashlib.sha256((out / name).read_bytes()).hexdigest()

    again = stoker.provision(SMALL, out)
    assert again.layout.deployment_id == ident and again.kept == []
    assert _tag_ids(out) == {ident}
    assert f"stoker-deployment-id={ident}" in (out / "README.md").read_text()

    params = out / "main.parameters.json"
    edited = json.loads(params.read_text())
    edited["parameters"]["sshPublicKey"] = {"value": "ssh-ed25519 AAAAmine me@host"}
    params.write_text(json.dumps(edited, indent=2) + "\n")
    mine = params.read_bytes()
    result = _cli(SMALL, out)
    assert result.exit_code == 0, result.output
    assert "kept main.parameters.json as you edited it" in result.output
    assert params.read_bytes() == mine
    record = json.loads((out / "stoker-deployment.json").read_text())
    assert record["deployment_id"] == ident and record["kept"] == ["main.parameters.json"]
    # The record keeps stoker's hash, so the edit is still told apart on the next run.
    assert record["sha256"]["main.parameters.json"] != hashlib.sha256(mine).hexdigest()
    assert stoker.provision(SMALL, out).kept == ["main.parameters.json"]
    assert params.read_bytes() == mine

    forced = stoker.provision(SMALL, out, force=True)
    assert forced.kept == [] and forced.layout.deployment_id == ident
    assert "sshPublicKey" not in json.loads(params.read_text())["parameters"]


def test_an_edited_template_is_refused_and_force_overwrites_it(tmp_path):
    out = tmp_path / "deploy"
    stoker.provision(SMALL, out)
    main = out / "main.json"
    main.write_text(main.read_text().replace('"Standard_LRS"', '"Standard_ZRS"'))
    _refused(SMALL, out, "main.json changed since stoker wrote it")
    assert _cli(SMALL, out, "--force").exit_code == 0
    assert '"Standard_ZRS"' not in main.read_text()


def test_nothing_but_the_six_files_is_left_in_the_folder(tmp_path):
    out = tmp_path / "deploy"
    stoker.provision(SMALL, out)
    stoker.provision(SMALL, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "main.json",
            "main.parameters.json",
            "cloud-init.yaml",
            "ccws.parameters.json",
            "README.md",
            "stoker-deployment.json",
        ]
    )
