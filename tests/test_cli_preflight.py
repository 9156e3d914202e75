"""``stoker preflight`` through typer's CliRunner against the loopback ARM: exit 0 when nothing
failed, 1 when a check failed, 2 for bad input; one line per check; --json; --offline;
progress on stderr; the token never printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arm_server import ArmServer
from preflight_arm import CONTRIBUTOR
from stoker.cli import app
from stoker.operate._arm import ArmClients
from test_preflight import CCWS_URN, TOKEN, FakeCredential, azure, folders, group_of, required

__all__ = ["azure", "folders"]  # test_preflight's fixtures: the loopback ARM, the deployments


@pytest.fixture(autouse=True)
def fake_login(monkeypatch: pytest.MonkeyPatch) -> None:
    """What DefaultAzureCredential would find after `az login`, without Azure."""
    monkeypatch.setattr(ArmClients, "_credential", lambda self: FakeCredential())
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


def live(arm: ArmServer, folder: Path, *args: str) -> list[str]:
    params = [f"--parameter={k}={v}" for k, v in required(folder).items()]
    return [
        "preflight",
        str(folder),
        "--subscription",
        arm.subscription,
        "--arm-endpoint",
        arm.url,
        *params,
        *args,
    ]


def test_nothing_failed_exits_0_with_a_line_per_check(azure, folders: dict[str, Path]) -> None:
    arm, _ = azure
    folder = folders["64"]
    arm.add_group(group_of(folder))
    result = CliRunner().invoke(app, live(arm, folder))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert out[0] == (
        f"preflight of {folder}: eastus, subscription {arm.subscription}, "
        f"resource group {group_of(folder)}"
    )
    assert (
        "  ok   vCPU quota, regional total (cores) in eastus: needs 6,144, 249,900 free "
        "(100 used of 250,000)" in out
    )
    assert (
        f"  ok   marketplace terms of {CCWS_URN} accepted (the CycleCloud VM of "
        "ccws.parameters.json)" in out
    )
    assert out[-1].startswith("safe to deploy: 0 failed, ")
    assert "checking quota ..." in result.stderr
    assert TOKEN not in result.output


def test_a_failed_check_exits_1_and_says_what_to_do(azure, folders: dict[str, Path]) -> None:
    arm, az = azure
    az.permissions = [CONTRIBUTOR]
    result = CliRunner().invoke(app, live(arm, folders["64"]))
    assert result.exit_code == 1, result.output
    (fail,) = [x for x in result.stdout.splitlines() if x.startswith("  FAIL ")]
    assert fail.startswith(
        "  FAIL rights: may not create role assignments on the subscription "
        "(Microsoft.Authorization/roleAssignments/write)"
    )
    assert fail.endswith("; ask for Owner or User Access Administrator there")
    assert result.stdout.splitlines()[-1].startswith("NOT safe to deploy: 1 failed, ")


def test_json_report(azure, folders: dict[str, Path]) -> None:
    arm, az = azure
    az.accepted[CCWS_URN] = False
    result = CliRunner().invoke(app, live(arm, folders["64"], "--json"))
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["failed"] == 1
    (terms,) = [c for c in report["checks"] if c["kind"] == "terms"]
    assert terms["status"] == "failed" and terms["urn"] == CCWS_URN
    assert result.stderr == ""  # no progress lines in JSON mode


def test_offline_lists_the_unchecked_and_exits_0(folders: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["preflight", str(folders["2048"]), "--offline"])
    assert result.exit_code == 0, result.output
    skips = [x for x in result.stdout.splitlines() if x.startswith("  skip ")]
    assert len(skips) == 8 and all(x.endswith("(--offline)") for x in skips)
    assert "  ok   needs 196,608 vCPUs of the ND H100 v5 family in eastus" in result.stdout
    assert result.stdout.splitlines()[-1].startswith(
        "nothing failed, but not all was checked: 0 failed, "
    )


def test_bad_input_exits_2_with_one_line(tmp_path: Path, folders: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["preflight", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: ") and len(result.stderr.splitlines()) == 1
    result = CliRunner().invoke(app, ["preflight", str(folders["64"]), "--parameter", "novalue"])
    assert result.exit_code == 2
    assert "--parameter novalue: give NAME=VALUE" in result.stderr
    result = CliRunner().invoke(
        app, ["preflight", str(folders["64"]), "--arm-endpoint", "http://example.com"]
    )
    assert result.exit_code == 2 and "plain http" in result.stderr


def test_provision_check_runs_preflight_on_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    spec = Path(__file__).resolve().parents[1] / "examples" / "pretrain-64vm.toml"
    args = ["provision", str(spec), "--out", str(out), "--check"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    pre = json.loads(result.stdout)["preflight"]
    assert pre["ok"] is True and pre["deployment"] == str(out)
    assert pre["unchecked"] == 8  # no subscription here: the offline part only
    assert [c["kind"] for c in pre["checks"]][0] == "vcpus"
    text = CliRunner().invoke(app, [*args]).stdout
    assert f"preflight of {out}: eastus, subscription unknown" in text
    assert "  ok   needs 6,144 vCPUs of the ND H100 v5 family in eastus" in text
