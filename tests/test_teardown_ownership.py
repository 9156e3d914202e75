"""teardown acts only on what is provably its own, against the loopback ARM: resources of the
template's names with another owner's tag (or none), a resource group changed on the command
line, a tag changed between the inventory and the mutating call, a group of two deployments, an
id-less folder, and a file system still mounted by running compute of the deployment. Every
test asserts from the server's log that no mutating request reached a resource that did not
carry the deployment's id at that moment."""

from __future__ import annotations

from pathlib import Path

import pytest

from arm_server import AMLFS, VMSS, ArmServer
from stoker.errors import TeardownError
from test_teardown import DID, FS_TAGS, OWN, TAGS, run, write_template

OTHER = {"stoker-deployment-id": "0123456789abcdef0123456789abcdef", "stoker-plan": "theirs"}


@pytest.fixture(autouse=True)
def no_env_subscription(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


@pytest.fixture
def deploy(tmp_path: Path) -> Path:
    return write_template(tmp_path / "deploy", group="rg-train")


def state(arm: ArmServer, group: str = "rg-train") -> tuple[str, bool]:
    """(the scale set's power, whether the file system still exists)."""
    vmss = arm.body(arm.rid(group, VMSS, "gpus"))["_power"]
    return vmss, arm.exists(arm.rid(group, AMLFS, "lustre"))


def test_same_names_with_another_owner_are_left_alone(deploy: Path) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", OTHER)
        arm.add_amlfs("rg-train", "lustre", {"stoker-usd-per-hour": "21.5"})  # no tag at all
        for dry in (True, False):
            with pytest.raises(TeardownError) as info:
                run(arm, deploy, dry_run=dry)
            message = str(info.value)
            assert "not stoker's: left alone: scale set gpus (stoker-deployment-id 0123" in message
            assert "Lustre lustre (no stoker-deployment-id tag)" in message
            assert f"resource group rg-train (subscription {arm.subscription})" not in message
            assert f"subscription {arm.subscription}, resource group rg-train" in message
            report = info.value.report  # type: ignore[attr-defined]
            assert [f.resource.name for f in report.foreign] == ["gpus", "lustre"]
            assert report.queried_azure and report.deployment_id == DID
        assert arm.state.log and not arm.mutating()
        assert state(arm) == ("running", True)


def test_skip_foreign_tears_down_the_rest_only(deploy: Path) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", OTHER)
        report = run(arm, deploy, skip_foreign=True)
        assert [(s.action, s.resource.name, s.status) for s in report.steps] == [
            ("deallocate", "gpus", "done"), ("keep", "acct", "kept"),
        ]  # fmt: skip
        assert [f.resource.name for f in report.foreign] == ["lustre"]
        assert "not stoker's: left alone (--skip-foreign)" in report.note
        assert len(arm.mutating()) == 1 and not arm.changed_not_owned(DID)
        assert state(arm) == ("deallocated", True)


def test_a_foreign_running_scale_set_of_the_template_keeps_the_file_system(deploy: Path) -> None:
    # Skipped as foreign, the scale set named like ours still runs and may mount the file system.
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", OTHER)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        with pytest.raises(TeardownError, match=r"not archived, it may still be mounted by "
                           r"scale set gpus \(running 2\)"):  # fmt: skip
            run(arm, deploy, skip_foreign=True)
        assert not arm.mutating()
        assert state(arm) == ("running", True)


def test_a_changed_resource_group_is_refused_unless_the_tags_prove_it(tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-a")
    with ArmServer() as arm:
        arm.add_vmss("rg-a", "gpus", TAGS)
        arm.add_amlfs("rg-a", "lustre", FS_TAGS)
        arm.add_vmss("rg-b", "gpus", OTHER)  # the same names, someone else's
        arm.add_amlfs("rg-b", "lustre", {})
        for dry in (True, False):
            with pytest.raises(TeardownError) as info:
                run(arm, deploy, resource_group="rg-b", dry_run=dry)
            message = str(info.value)
            assert "resource group rg-b (recorded: rg-a)" in message
            assert f"nothing in resource group rg-b carries stoker-deployment-id {DID}" in message
        assert not arm.mutating()
        assert state(arm, "rg-a") == ("running", True) and state(arm, "rg-b") == ("running", True)
        # Moved there for real (the tags say so): the command line's group is acted on.
        arm.retag(arm.rid("rg-b", VMSS, "gpus"), TAGS)
        arm.retag(arm.rid("rg-b", AMLFS, "lustre"), FS_TAGS)
        report = run(arm, deploy, resource_group="rg-b")
        assert report.group == "rg-b" and report.steps[2].status == "done"
        assert arm.mutating() and not arm.changed_not_owned(DID)
        assert state(arm, "rg-b") == ("deallocated", False)
        assert state(arm, "rg-a") == ("running", True)


def test_the_recorded_group_and_subscription_are_used(tmp_path: Path) -> None:
    with ArmServer() as arm:
        deploy = write_template(tmp_path / "deploy", group="rg-train", sub=arm.subscription)
        arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        from stoker.operate import teardown
        from test_teardown import FakeCredential

        report = teardown(deploy, credential=FakeCredential(), base_url=arm.url,
                          polling_interval_s=0.01)  # fmt: skip  # a dry run, nothing given
        assert report.queried_azure and report.subscription == arm.subscription
        assert report.group == "rg-train" and not arm.mutating()
        assert [(s.action, s.owned, s.live) for s in report.steps[:2]] == [
            ("deallocate", True, "running 2"), ("archive", True, "Succeeded; last archive none"),
        ]  # fmt: skip


def test_a_tag_changed_after_the_dry_run_stops_the_mutating_run(deploy: Path) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        assert run(arm, deploy, dry_run=True).steps[0].owned is True
        arm.retag(arm.rid("rg-train", VMSS, "gpus"), OTHER)  # handed over meanwhile
        with pytest.raises(TeardownError, match="not stoker's"):
            run(arm, deploy)
        assert not arm.mutating() and state(arm) == ("running", True)


def test_a_tag_changed_just_before_the_deallocate_is_not_touched(deploy: Path) -> None:
    with ArmServer() as arm:
        gpus = arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        # After the inventory and the instance view, before the deallocate.
        arm.before("GET", "/gpus/instanceview", lambda: arm.retag(gpus, OTHER))
        with pytest.raises(TeardownError) as info:
            run(arm, deploy)
        assert "scale set gpus" in str(info.value) and "changed to 0123" in str(info.value)
        assert info.value.report.steps[0].status == "failed"  # type: ignore[attr-defined]
        assert not arm.mutating() and state(arm) == ("running", True)


def test_a_tag_changed_before_the_archive_leaves_the_file_system(deploy: Path) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        fs = arm.add_amlfs("rg-train", "lustre", FS_TAGS)

        def handed_over(event: dict) -> None:
            if event["action"] == "archive" and event.get("status") == "checking":
                arm.retag(fs, {})

        report = run(arm, deploy, skip_foreign=True, progress=handed_over)
        assert [(s.action, s.status) for s in report.steps] == [
            ("deallocate", "done"), ("archive", "skipped"), ("delete", "skipped"), ("keep", "kept"),
        ]  # fmt: skip
        assert [f.resource.name for f in report.foreign] == ["lustre"]
        assert [r.method for r in arm.mutating()] == ["POST"]  # the deallocate only
        assert not arm.changed_not_owned(DID) and state(arm) == ("deallocated", True)


@pytest.mark.parametrize("kind", ["node-array scale set", "VM"])
def test_a_file_system_still_mounted_is_not_archived_or_deleted(deploy: Path, kind: str) -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        arm.add_amlfs("rg-train", "lustre", FS_TAGS)
        arm.add_vmss("rg-train", "other-team", OTHER)  # not the deployment's: no bearing
        if kind == "VM":
            user = arm.add_vm("rg-train", "scheduler", OWN)
            named = "VM scheduler (running 1)"
        else:  # a CycleCloud node array: not in the template, carries the deployment's id
            user = arm.add_vmss("rg-train", "hpc-nodearray", OWN, capacity=3)
            named = "scale set hpc-nodearray (running 3)"
        dry = run(arm, deploy, dry_run=True)
        assert f"would refuse: still running: {named}" in dry.steps[1].detail
        with pytest.raises(TeardownError) as info:
            run(arm, deploy)
        assert f"file system lustre in subscription {arm.subscription}" in str(info.value)
        assert f"not archived, it may still be mounted by {named}" in str(info.value)
        assert not arm.requests("POST", "/archive") and not arm.requests("DELETE")
        assert not arm.changed_not_owned(DID) and state(arm) == ("deallocated", True)
        # Stopped by its owner, the file system goes; the node array itself is never touched.
        arm.body(user)["_power"] = "deallocated"
        report = run(arm, deploy)
        assert [s.status for s in report.steps] == ["already", "done", "done", "kept"]
        assert not arm.changed_not_owned(DID) and not arm.requests(contains="/hpc-nodearray/d")
        assert not arm.exists(arm.rid("rg-train", AMLFS, "lustre"))


def test_a_group_of_two_deployments_needs_one_chosen() -> None:
    with ArmServer() as arm:
        arm.add_vmss("rg-shared", "gpus", TAGS)
        arm.add_vmss("rg-shared", "theirs", OTHER)
        with pytest.raises(TeardownError, match=f"holds 2 deployments \\(0123.*, {DID}\\)"):
            run(arm, "rg-shared", dry_run=True)
        assert not arm.mutating()
        report = run(arm, "rg-shared", deployment_id=DID)
        assert [(s.resource.name, s.status) for s in report.steps] == [("gpus", "done")]
        assert len(arm.mutating()) == 1 and not arm.changed_not_owned(DID)
        assert arm.body(arm.rid("rg-shared", VMSS, "theirs"))["_power"] == "running"


def test_a_folder_without_a_deployment_id_is_refused(tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-train", did=None)
    with ArmServer() as arm:
        arm.add_vmss("rg-train", "gpus", TAGS)
        with pytest.raises(TeardownError, match="no deployment_id .* nothing is changed"):
            run(arm, deploy)
        assert not arm.state.log  # refused before asking Azure anything
        report = run(arm, deploy, dry_run=True)  # a dry run still shows what is there
        assert report.steps[0].owned is None and "--yes refuses" in report.note
        assert not arm.mutating()


def test_an_offline_dry_run_says_it_could_not_check(tmp_path: Path) -> None:
    from stoker.operate import teardown

    class NoLogin:
        def get_token(self, *scopes: str, **kwargs: object) -> None:
            from azure.core.exceptions import ClientAuthenticationError

            raise ClientAuthenticationError("no az login")

    deploy = write_template(
        tmp_path / "deploy", group="rg-train", sub="00000000-0000-0000-0000-00000000000a"
    )
    with ArmServer() as arm:
        report = teardown(deploy, credential=NoLogin(), base_url=arm.url)
        assert not report.queried_azure and report.group == "rg-train"
        assert "Azure did not answer" in report.note and "could not check" in report.note
        assert all(s.owned is None for s in report.steps) and not arm.mutating()


def test_a_changed_subscription_is_used_only_where_the_tags_prove_it(tmp_path: Path) -> None:
    deploy = write_template(tmp_path / "deploy", group="rg-train", sub="recorded-sub")
    with ArmServer() as arm:  # run() passes --subscription: the server's, not the recorded one
        arm.add_vmss("rg-train", "gpus", OTHER)
        with pytest.raises(TeardownError) as info:
            run(arm, deploy)
        assert f"subscription {arm.subscription} (recorded: recorded-sub)" in str(info.value)
        assert not arm.mutating()
        arm.retag(arm.rid("rg-train", VMSS, "gpus"), TAGS)
        report = run(arm, deploy)
        assert report.subscription == arm.subscription and report.steps[0].status == "done"
        assert not arm.changed_not_owned(DID)


def test_deployment_id_does_not_override_a_folders_own(deploy: Path, tmp_path: Path) -> None:
    with pytest.raises(TeardownError, match="deployment_id is 5f0c.*--deployment-id says x"):
        run_offline(deploy, deployment_id="x")
    old = write_template(tmp_path / "old", group="rg-train", did=None)
    with pytest.raises(TeardownError, match="deployment_id is not recorded"):
        run_offline(old, deployment_id=DID, dry_run=False)


def run_offline(deployment: Path, **kw: object):
    from stoker.operate import teardown

    return teardown(deployment, **kw)  # type: ignore[arg-type]
