"""stoker.teardown and stoker.expired against the loopback ARM (tests/arm_server.py): the order
(scale sets stopped, archive Completed, only then the file system deleted), idempotent re-runs,
resume after a crash, failed and cancelled archives, 429 throttling, Retry-After, dry runs that
send nothing mutating, and --expired."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
from azure.core.credentials import AccessToken

from arm_server import AMLFS, VMSS, ArmServer
from stoker.errors import ArchiveError, TeardownError
from stoker.operate import expired, teardown
from stoker.operate._arm import ArmClients
from stoker.operate._lro import ArchiveState, wait_archive, wait_gone

TOKEN = "fake-token-must-not-show-0123456789"
DID = "5f0c2a7e9b8d4e1f8a3c6b2d1e0f9a87"  # the deployment's stoker-deployment-id
OWN = {"stoker-deployment-id": DID}
TAGS = OWN | {"stoker-plan": "pretrain", "stoker-usd-per-hour": "196.64"}
FS_TAGS = OWN | {"stoker-plan": "pretrain", "stoker-usd-per-hour": "21.5"}


class FakeCredential:
    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)


@pytest.fixture(autouse=True)
def no_env_subscription(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


@pytest.fixture
def arm() -> ArmServer:
    with ArmServer() as server:
        server.add_vmss("rg-train", "gpus", TAGS)
        server.add_amlfs("rg-train", "lustre", FS_TAGS)
        server.add_other(
            "rg-train", "Microsoft.Storage/storageAccounts", "acct", OWN | {"stoker-plan": "p"}
        )
        server.add_other(
            "rg-train", "Microsoft.Network/virtualNetworks", "vnet", OWN | {"stoker-plan": "p"}
        )
        yield server


def run(arm: ArmServer, deployment: str | Path = "rg-train", **kw: object):
    kw.setdefault("dry_run", False)
    return teardown(deployment, subscription=arm.subscription, credential=FakeCredential(),
                    base_url=arm.url, polling_interval_s=0.01, **kw)  # type: ignore[arg-type]  # fmt: skip


def index(arm: ArmServer, method: str, ending: str) -> list[int]:
    return [
        i for i, r in enumerate(arm.state.log) if r.method == method and r.path.endswith(ending)
    ]


def test_order_scale_sets_archive_completed_then_delete(arm: ArmServer) -> None:
    report = run(arm)
    assert [(s.action, s.resource.name, s.status) for s in report.steps] == [
        ("deallocate", "gpus", "done"),
        ("archive", "lustre", "done"),
        ("delete", "lustre", "done"),
        ("keep", "acct", "kept"),
    ]
    deallocate = index(arm, "POST", "/gpus/deallocate")
    archive = index(arm, "POST", "/lustre/archive")
    delete = index(arm, "DELETE", "/amlfilesystems/lustre")
    completed = arm.event_index("archive Completed lustre")
    assert len(deallocate) == len(archive) == len(delete) == 1
    assert deallocate[0] < archive[0] < completed < delete[0]
    assert not arm.exists(arm.rid("rg-train", AMLFS, "lustre"))
    assert arm.state.resources[arm.rid("rg-train", VMSS, "gpus").lower()]["_power"] == "deallocated"
    # Blob and the network are never touched; every request carried the bearer token.
    assert not [
        r for r in arm.state.log if "storageaccounts" in r.path or "virtualnetworks" in r.path
    ]
    assert all(r.authorized for r in arm.state.log)
    # The pinned API versions (catalog [provision] api_versions) are the ones sent.
    assert {r.api_version for r in arm.requests(contains="amlfilesystems")} == {"2026-01-01"}
    assert {r.api_version for r in arm.requests(contains="virtualmachinescalesets")} == {
        "2025-04-01"
    }
    assert report.saves_usd_per_hour == pytest.approx(196.64 + 21.5)
    assert TOKEN not in json.dumps(report.to_dict())


def test_rerun_is_idempotent(arm: ArmServer) -> None:
    run(arm)
    before = len(arm.mutating())
    again = run(arm)
    assert len(arm.mutating()) == before  # nothing asked twice
    # The group no longer lists the file system; the scale set is found deallocated.
    assert [(s.action, s.status) for s in again.steps] == [
        ("deallocate", "already"),
        ("keep", "kept"),
    ]


def test_resume_after_a_crash_mid_archive(arm: ArmServer) -> None:
    arm.archive_polls = 4

    def crash(event: dict) -> None:
        if event["event"] == "archive" and event["state"] == "InProgress":
            raise KeyboardInterrupt  # the operator's laptop went to sleep

    with pytest.raises(KeyboardInterrupt):
        run(arm, progress=crash)
    assert arm.exists(arm.rid("rg-train", AMLFS, "lustre"))
    assert not index(arm, "DELETE", "/amlfilesystems/lustre")
    report = run(arm)
    # The scale set is not deallocated again, the running archive is waited on (not asked for
    # twice), and the file system is deleted once, after it completed.
    assert len(index(arm, "POST", "/gpus/deallocate")) == 1
    assert len(index(arm, "POST", "/lustre/archive")) == 1
    assert (
        arm.event_index("archive Completed lustre")
        < index(arm, "DELETE", "/amlfilesystems/lustre")[0]
    )
    assert [s.status for s in report.steps[:3]] == ["already", "done", "done"]
    assert "already running" in report.steps[1].detail


def test_resume_waits_for_a_deallocation_under_way(arm: ArmServer) -> None:
    body = arm.state.resources[arm.rid("rg-train", VMSS, "gpus").lower()]
    body["_power"], body["_settle_reads"] = "deallocating", 2  # the crashed run's operation
    report = run(arm)
    assert not index(arm, "POST", "/gpus/deallocate")  # not asked again (it would conflict)
    assert report.steps[0].status == "done" and "under way" in report.steps[0].detail
    assert len(index(arm, "GET", "/gpus/instanceview")) >= 3


@pytest.mark.parametrize("outcome", ["Failed", "Canceled"])
def test_failed_or_cancelled_archive_leaves_the_file_system(arm: ArmServer, outcome: str) -> None:
    arm.archive_outcome = outcome
    with pytest.raises(ArchiveError) as info:
        run(arm)
    message = str(info.value)
    assert "lustre" in message and outcome.lower() in message and "NOT deleted" in message
    if outcome == "Failed":
        assert "blob container refused the write (403)" in message
    assert not arm.requests("DELETE", "amlfilesystems")
    assert arm.exists(arm.rid("rg-train", AMLFS, "lustre"))
    steps = info.value.report.steps  # type: ignore[attr-defined]
    assert [(s.action, s.status) for s in steps[:3]] == [
        ("deallocate", "done"), ("archive", "failed"), ("delete", "planned"),
    ]  # fmt: skip
    # Once the cause is fixed a re-run archives again and finishes.
    arm.archive_outcome = "Completed"
    report = run(arm)
    assert [s.status for s in report.steps[:3]] == ["already", "done", "done"]


def test_a_group_without_stoker_resources_is_left_alone() -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-other", "theirs", {})
        arm.add_amlfs("rg-other", "old", {"stoker-plan": "p"})  # an older stoker's: no id
        report = run(arm, "rg-other")
        assert not report.steps and "carries a stoker-deployment-id tag" in report.note
        assert "old carry only stoker-plan" in report.note
        assert not arm.mutating()


def test_file_system_without_blob_integration_is_not_deleted() -> None:
    with ArmServer() as arm:
        arm.add_amlfs("rg-train", "scratch", FS_TAGS, hsm=False)
        with pytest.raises(ArchiveError, match="no Blob integration"):
            run(arm)
        assert not arm.mutating()
        report = run(arm, archive=False)  # the operator's explicit choice
        assert [(s.action, s.status) for s in report.steps] == [("delete", "done")]


def test_throttled_request_is_retried_after_retry_after(arm: ArmServer) -> None:
    arm.throttle(1, method="POST", contains="/archive", retry_after=1)
    run(arm)
    posts = arm.requests("POST", "/lustre/archive")
    assert [p.status for p in posts] == [429, 200]
    assert posts[1].at - posts[0].at >= 0.95


def test_retry_after_spaces_the_polls_of_an_operation(arm: ArmServer) -> None:
    arm.op_retry_after, arm.op_polls = 1, 1
    run(arm)
    polls = [r.at for r in arm.state.log if "/operations/op1" in r.path]
    assert len(polls) >= 2
    assert polls[1] - polls[0] >= 0.95  # the header's second, not our 0.01 s interval


def test_dry_run_sends_nothing_that_changes_azure(arm: ArmServer) -> None:
    report = run(arm, dry_run=True)
    assert report.queried_azure and report.dry_run
    assert arm.state.log and not arm.mutating()
    assert [(s.action, s.status) for s in report.steps] == [
        ("deallocate", "planned"), ("archive", "planned"), ("delete", "planned"), ("keep", "kept"),
    ]  # fmt: skip
    assert report.steps[0].detail == "running 2"


def test_delete_scale_sets_instead_of_deallocating(arm: ArmServer) -> None:
    report = run(arm, delete_scale_sets=True)
    assert report.steps[0].action == "delete" and report.steps[0].status == "done"
    assert not arm.exists(arm.rid("rg-train", VMSS, "gpus"))
    assert not index(arm, "POST", "/deallocate")


def write_template(
    directory: Path, group: str | None = None, did: str | None = DID, sub: str | None = None
) -> Path:
    """A provision folder: main.json, its parameters, and stoker-deployment.json recording
    ``did``, ``group`` and ``sub`` (as `stoker provision` writes them)."""
    directory.mkdir(parents=True, exist_ok=True)
    template = {
        "parameters": {"prefix": {"type": "string", "defaultValue": "demo"},
                       "id": {"type": "string", "defaultValue": str(did)},
                       "tags": {"type": "object", "defaultValue": {}}},
        "variables": {"fsName": "lustre"},
        "resources": [
            {"type": "Microsoft.Network/virtualNetworks", "name": "[format('{0}-vnet', 'x')]"},
            {"type": "Microsoft.Compute/virtualMachineScaleSets", "name": "[parameters('prefix')]",
             "tags": {"stoker-plan": "demo", "stoker-usd-per-hour": "98.32",
                      "stoker-deployment-id": "[parameters('id')]"}},
            {"type": "Microsoft.StorageCache/amlFilesystems", "name": "[variables('fsName')]",
             "tags": "[parameters('tags')]"},
            {"type": "Microsoft.Storage/storageAccounts", "name": "acct", "tags": {}},
        ],
    }  # fmt: skip
    (directory / "main.json").write_text(json.dumps(template))
    params = {"parameters": {"prefix": {"value": "gpus"},
                             "tags": {"value": {"stoker-usd-per-hour": "21.5"}}}}  # fmt: skip
    (directory / "main.parameters.json").write_text(json.dumps(params))
    record = {"schema": "stoker.deployment/1", "deployment_id": did, "subscription": sub,
              "resource_group": group}  # fmt: skip
    (directory / "stoker-deployment.json").write_text(json.dumps(record))
    return directory


def test_dry_run_of_a_provision_directory_is_offline(tmp_path: Path) -> None:
    report = teardown(write_template(tmp_path / "deploy"))
    assert not report.queried_azure and "could not check the ownership tags" in report.note
    assert [(s.action, s.resource.name, s.saves_usd_per_hour) for s in report.steps] == [
        ("deallocate", "gpus", 98.32), ("archive", "lustre", 0.0), ("delete", "lustre", 21.5),
        ("keep", "acct", 0.0),
    ]  # fmt: skip
    assert report.saves_usd_per_hour == pytest.approx(119.82)
    assert [r.type for r in report.left_alone] == ["Microsoft.Network/virtualNetworks"]
    assert report.still_usd_per_hour == 0.0 and report.still_unknown == []
    with pytest.raises(TeardownError, match="names no resource group; name it with --resource"):
        teardown(tmp_path / "deploy", dry_run=False)


def test_provision_directory_acts_only_on_its_own_resources(arm: ArmServer, tmp_path: Path) -> None:
    arm.add_vmss("rg-train", "someone-elses", TAGS | {"stoker-deployment-id": "another-run"})
    deploy = write_template(tmp_path / "deploy")
    report = run(arm, deploy, resource_group="rg-train")
    assert [s.resource.name for s in report.steps] == ["gpus", "lustre", "lustre", "acct"]
    assert not index(arm, "POST", "/someone-elses/deallocate")
    # Re-run from the directory: the template still names the file system, found gone.
    before = len(arm.mutating())
    again = run(arm, deploy, resource_group="rg-train")
    assert len(arm.mutating()) == before
    assert [s.status for s in again.steps] == ["already", "already", "already", "kept"]


def test_expired_lists_only_groups_past_their_tag() -> None:
    now = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
    with ArmServer() as arm:
        arm.add_group("rg-old", {"teardown-after": "2026-12-01T18:00:00Z", "stoker-plan": "a"})
        arm.add_vmss("rg-old", "gpus", {"stoker-usd-per-hour": "98.32"})
        arm.add_group("rg-res")
        fs_tags = {"teardown-after": "2026-12-02T11:00:00Z", "stoker-usd-per-hour": "21.5"}
        arm.add_amlfs("rg-res", "fs", fs_tags | {"stoker-plan": "b"})
        arm.add_group("rg-later", {"teardown-after": "2026-12-03T00:00:00Z"})
        arm.add_vmss("rg-later", "gpus", {"teardown-after": "2026-12-04"})
        arm.add_group("rg-untagged")
        arm.add_vmss("rg-untagged", "gpus", {})
        found = expired(subscription=arm.subscription, now=now, credential=FakeCredential(),
                        base_url=arm.url)  # fmt: skip
        assert not arm.mutating()
    assert [(e.group, e.plan, round(e.overdue_s)) for e in found] == [
        ("rg-old", "a", 18 * 3600), ("rg-res", "b", 3600),
    ]  # fmt: skip
    assert found[1].resources == ["amlFilesystems/fs"] and found[1].usd_per_hour == 21.5


SUB = "00000000-0000-0000-0000-00000000000b"


def test_plain_http_only_to_loopback() -> None:
    with pytest.raises(TeardownError, match="clear"):
        ArmClients(SUB, base_url="http://management.example.com")
    with pytest.raises(TeardownError, match="AZURE_SUBSCRIPTION_ID"):
        ArmClients("")
    assert ArmClients(SUB, base_url="http://127.0.0.1:1").call == {"enforce_https": False}
    assert "enforce_https" not in ArmClients(SUB, base_url="https://management.azure.com").call


# ---------------------------------------------------------------------------------- waiting


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_wait_archive_waits_past_an_older_completed_archive() -> None:
    old = ArchiveState("Completed", 100, "2026-12-01T00:00:00Z")
    reads = iter([old, old, ArchiveState("InProgress", 10, "2026-12-02T09:00:00Z"),
                  ArchiveState("Completed", 100, "2026-12-02T09:00:00Z")])  # fmt: skip
    clock = Clock()
    done = wait_archive(lambda: next(reads), name="fs", before=old, interval_s=5,
                        sleep=clock.sleep, clock=clock)  # fmt: skip
    assert done.started == "2026-12-02T09:00:00Z" and clock.t == 15


def test_wait_archive_times_out_without_deleting_anything() -> None:
    clock = Clock()
    with pytest.raises(TeardownError, match="still InProgress after 60 s"):
        wait_archive(lambda: ArchiveState("InProgress", 30), name="fs", interval_s=10,
                     timeout_s=60, sleep=clock.sleep, clock=clock)  # fmt: skip


def test_wait_gone_polls_until_404() -> None:
    answers, clock = iter([True, True, False]), Clock()
    wait_gone(lambda: next(answers), name="fs", interval_s=3, sleep=clock.sleep, clock=clock)
    assert clock.t == 6


def test_wait_archive_takes_a_completion_seen_after_running_as_ours() -> None:
    # The service may keep the start time of a retried archive: seen running, it is ours.
    old = ArchiveState("Failed", 40, "2026-12-02T09:00:00Z", error_code="X")
    reads = iter([old, ArchiveState("InProgress", 5, old.started),
                  ArchiveState("Completed", 100, old.started)])  # fmt: skip
    clock = Clock()
    done = wait_archive(lambda: next(reads), name="fs", before=old, interval_s=1,
                        sleep=clock.sleep, clock=clock)  # fmt: skip
    assert done.state == "Completed"
