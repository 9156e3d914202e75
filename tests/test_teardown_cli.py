"""``stoker teardown`` through typer's CliRunner: the offline dry run of a provision folder, a
real teardown against the loopback ARM, exit 1 when the archive fails, --expired, bad options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arm_server import AMLFS, VMSS, ArmServer
from stoker.cli import app
from stoker.operate._arm import ArmClients
from test_teardown import DID, FS_TAGS, TAGS, TOKEN, FakeCredential, write_template


@pytest.fixture(autouse=True)
def fake_login(monkeypatch: pytest.MonkeyPatch) -> None:
    """What DefaultAzureCredential would find after `az login`, without Azure."""
    monkeypatch.setattr(ArmClients, "_credential", lambda self: FakeCredential())
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


@pytest.fixture
def arm() -> ArmServer:
    with ArmServer() as server:
        server.add_vmss("rg-train", "gpus", TAGS)
        server.add_amlfs("rg-train", "lustre", FS_TAGS)
        yield server


def live(arm: ArmServer, *args: str) -> list[str]:
    return ["teardown", *args, "--subscription", arm.subscription, "--arm-endpoint", arm.url,
            "--poll", "0.01"]  # fmt: skip


def test_dry_run_of_a_folder_is_offline_and_lists_savings(tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy")
    result = CliRunner().invoke(app, ["teardown", "--dry-run", str(deploy)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for line in ("deallocate", "scale set gpus", "$98.32", "archive", "Lustre lustre", "$21.50"):
        assert line in out
    assert "saves $119.82/h ($2,875.68/day)" in out
    assert "could not check the ownership tags or the live state" in out
    assert "ownership and live state: NOT checked (Azure was not queried)" in out
    # Where --yes would act is named even offline (the folder records no group here).
    assert "would act on: subscription unknown, resource group unknown" in out
    assert "dry run: nothing was changed" in out


def test_yes_tears_down_and_reports_json(arm: ArmServer) -> None:
    result = CliRunner().invoke(app, live(arm, "rg-train", "--yes", "--json"))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(s["action"], s["status"]) for s in report["steps"]] == [
        ("deallocate", "done"), ("archive", "done"), ("delete", "done"),
    ]  # fmt: skip
    assert report["saves_usd_per_hour"] == pytest.approx(218.14)
    assert not arm.exists(arm.rid("rg-train", AMLFS, "lustre"))
    assert TOKEN not in result.output


def test_progress_goes_to_stderr(arm: ArmServer) -> None:
    result = CliRunner().invoke(app, live(arm, "rg-train", "--yes"))
    assert result.exit_code == 0, result.output
    assert "archive lustre: InProgress 50 %" in result.stderr
    assert "delete lustre: done" in result.stderr
    assert "saves $218.14/h" in result.stdout


def test_failed_archive_exits_1_and_keeps_the_file_system(arm: ArmServer) -> None:
    arm.archive_outcome = "Failed"
    result = CliRunner().invoke(app, live(arm, "rg-train", "--yes"))
    assert result.exit_code == 1
    assert "NOT deleted" in result.stderr and "403" in result.stderr
    assert "failed" in result.stdout  # the steps so far, the archive marked failed
    assert arm.exists(arm.rid("rg-train", AMLFS, "lustre"))


def test_expired_lists_as_json(arm: ArmServer) -> None:
    arm.add_group("rg-old", {"teardown-after": "2020-01-01T00:00:00Z", "stoker-plan": "old"})
    result = CliRunner().invoke(
        app, ["teardown", "--expired", "--json", "--subscription", arm.subscription,
              "--arm-endpoint", arm.url],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [e["resource_group"] for e in json.loads(result.stdout)["expired"]] == ["rg-old"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["teardown"], "give a DEPLOYMENT"),
        (["teardown", "rg", "--yes", "--dry-run"], "contradict"),
        (["teardown", "rg", "--yes"], "AZURE_SUBSCRIPTION_ID"),
        (["teardown", "no/such/folder"], "neither a directory"),
    ],
)
def test_bad_invocations_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize("spec", ["pretrain-64vm.toml", "llama3-405b-2048vm.toml"])
def test_dry_run_reads_what_provision_writes(tmp_path: Path, spec: str) -> None:
    examples = Path(__file__).parent.parent / "examples"
    out = tmp_path / "deploy"
    made = CliRunner().invoke(app, ["provision", str(examples / spec), "--out", str(out)])
    assert made.exit_code == 0, made.output
    result = CliRunner().invoke(app, ["teardown", "--dry-run", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    template = json.loads((out / "main.json").read_text())["resources"]
    kinds = {"Microsoft.Compute/virtualMachineScaleSets", "Microsoft.StorageCache/amlFilesystems"}
    acted = [r for r in template if r["type"] in kinds]
    expected = []
    for r in acted:
        if r["type"].endswith("virtualMachineScaleSets"):
            expected.append(("deallocate", r["name"]))
        else:
            expected += [("archive", r["name"]), ("delete", r["name"])]
    got = [(s["action"], s["resource"]["name"]) for s in report["steps"] if s["action"] != "keep"]
    assert sorted(got) == sorted(expected)
    # The scale sets first, then each file system's archive before its delete.
    stops = sum(a == "deallocate" for a, _ in got)
    assert all(a == "deallocate" for a, _ in got[:stops])
    assert all(
        got.index(("archive", n)) < got.index(("delete", n)) for a, n in got if a == "archive"
    )
    # A deallocated scale set still pays its OS disks, so it saves its hour less those.
    stopped = sum(_tag(r, "stoker-usd-per-hour-stopped") for r in acted)
    known = sum(_tag(r, "stoker-usd-per-hour") for r in acted) - stopped
    assert report["saves_usd_per_hour"] == pytest.approx(known, abs=0.01)
    assert report["queried_azure"] is False
    # What goes on being billed: every priced resource teardown does not act on (the kept
    # storage, the NAT gateway and public IPs it leaves alone) and the scale sets' OS disks.
    kept = [r for r in template if r not in acted]
    stays = sum(_tag(r, "stoker-usd-per-hour") for r in kept) + stopped
    assert stays > sum(
        _tag(r, "stoker-usd-per-hour") for r in kept if "storageAccounts" in r["type"]
    )
    assert report["still_usd_per_hour"] == pytest.approx(stays, abs=0.01)
    unpriced = [r["name"] for r in kept if _tags(r).get("stoker-usd-per-hour") == "unknown"]
    assert set(unpriced) <= set(report["still_unknown"])


def _tags(resource: dict) -> dict:
    tags = resource.get("tags")
    return tags if isinstance(tags, dict) else {}


def _tag(resource: dict, key: str) -> float:
    """A cost tag's dollars; 0 where it is absent or unknown (the report names those)."""
    value = _tags(resource).get(key, "unknown")
    return 0.0 if value == "unknown" else float(value)


# ---------------------------------------------------------------------------------- ownership


def test_dry_run_shows_where_and_each_resource_checked(arm: ArmServer, tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-train")
    result = CliRunner().invoke(app, live(arm, str(deploy)))
    assert result.exit_code == 0, result.output
    out = result.stdout
    where = f"would act on: subscription {arm.subscription}, resource group rg-train"
    assert out.startswith(f"{where}, deployment {DID}\n")
    assert "checked in Azure:\n  scale set gpus: running 2; tag matches\n" in out
    assert "  Lustre lustre: Succeeded; last archive none; tag matches\n" in out
    assert "  storage acct: not found\n" in out
    assert not arm.mutating()


def test_foreign_resources_exit_2_and_are_listed(tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-train")
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", {"stoker-deployment-id": "someone-else"})
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        for extra in ([], ["--yes"]):
            result = CliRunner().invoke(app, live(arm, str(deploy), *extra))
            assert result.exit_code == 2, result.output
            errors = [line for line in result.stderr.splitlines() if "error:" in line]
            assert len(errors) == 1  # one line, naming the resources
            assert errors[0].startswith(
                "error: not stoker's: left alone: scale set gpus (stoker-deployment-id "
                "someone-else) in subscription "
            )
            assert "--skip-foreign" in errors[0]
            if not extra:  # the dry run still reads and shows what is there
                assert "  Lustre lustre: Succeeded; last archive none; tag matches" in result.stdout
            assert (
                "  scale set gpus: not stoker's (stoker-deployment-id someone-else): left alone"
                in (result.stdout)
            )
        assert not arm.mutating()
        # Skipping it, the file system is still refused: the scale set of its name runs.
        result = CliRunner().invoke(app, live(arm, str(deploy), "--yes", "--skip-foreign"))
        assert result.exit_code == 2
        assert "may still be mounted by scale set gpus (running 2)" in result.stderr
        assert not arm.mutating()


def test_group_of_two_deployments_exit_2_until_one_is_chosen(arm: ArmServer) -> None:
    arm.add_vmss("rg-train", "theirs", {"stoker-deployment-id": "another"})
    result = CliRunner().invoke(app, live(arm, "rg-train", "--yes"))
    assert result.exit_code == 2
    assert f"rg-train holds 2 deployments ({DID}, another): choose one with --deployment-id" in (
        result.stderr
    )
    assert not arm.mutating()
    result = CliRunner().invoke(app, live(arm, "rg-train", "--yes", "--deployment-id", DID))
    assert result.exit_code == 0, result.output
    assert f"acting on: subscription {arm.subscription}, resource group rg-train" in result.stdout
    assert not arm.changed_not_owned(DID) and arm.mutating()
    assert arm.body(arm.rid("rg-train", VMSS, "theirs"))["_power"] == "running"


def test_a_folder_without_a_deployment_id_exits_2(arm: ArmServer, tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-train", did=None)
    result = CliRunner().invoke(app, live(arm, str(deploy), "--yes"))
    assert result.exit_code == 2
    assert "stoker-deployment.json: no deployment_id" in result.stderr
    assert not arm.state.log
