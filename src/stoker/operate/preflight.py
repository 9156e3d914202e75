"""``preflight``: will this deployment deploy? (``stoker preflight``, ``provision --check``)

    report = stoker.preflight(".demo/deploy")              # the folder provision wrote
    report = stoker.preflight("examples/pretrain-64vm.toml", offline=True)
    report.ok, [c.line for c in report.failed]

The most common failures of a GPU cluster deployment are not in the template, and a failed
deployment may already have started billing a Lustre file system. Before anything is created,
with read-only Azure calls (``DefaultAzureCredential`` unless ``credential`` is given):

- **quota**: free vCPUs of each VM family in the region (Compute usages) and the regional
  total, against what the scale sets need (VMs x the catalog's vCPUs);
- **SKUs**: the VM size offered in the region and in the zones the template pins (Resource
  SKUs ``restrictions``, type Location or Zone), and each Lustre SKU in its region and zone
  (StorageCache's SKU list; AMLFS takes zone 1 where the template names none);
- **rights**: role assignment creation (``Microsoft.Authorization/roleAssignments/write``: Owner
  or User Access Administrator) on the group, or the subscription while the group is not there;
- **terms**: the marketplace terms of every image with a plan (CCWS's CycleCloud image when the
  folder has ``ccws.parameters.json``);
- **ARM**: ``validate`` and ``what-if`` (creates / modifies / deletes), where the group exists.

The catalog's own limits are checked first, with or without Azure: vCPUs needed per family,
scale sets above the placement-group limit, Lustre above its self-service size, template
parameters without a value. Without a subscription, or with ``offline=True``, the report says
which checks it could not do; a check Azure could not answer is ``unchecked``, never passed.

``ok`` is False when any check failed (the CLI exits 1); bad input is ``PreflightError``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._arg_types import NUMBER, PATH, check_args
from .._redact import printable
from ..catalog import Catalog, load_catalog
from ..errors import PreflightError, TeardownError
from ._preflight_needs import Needs, PreflightCheck, offline_checks, read_needs

Progress = Callable[[dict[str, Any]], None]
LIVE = ("quota", "sku", "lustre-sku", "rights", "terms", "validate", "what-if")


@dataclass
class PreflightReport:
    deployment: str
    region: str
    subscription: str | None
    group: str | None
    queried_azure: bool
    checks: list[PreflightCheck] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def failed(self) -> list[PreflightCheck]:
        return [c for c in self.checks if c.status == "failed"]

    @property
    def unchecked(self) -> list[PreflightCheck]:
        return [c for c in self.checks if c.status == "unchecked"]

    @property
    def ok(self) -> bool:
        """Nothing failed (what was not checked is listed in ``unchecked``)."""
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": self.deployment,
            "region": self.region,
            "subscription": self.subscription,
            "resource_group": self.group,
            "queried_azure": self.queried_azure,
            "ok": self.ok,
            "failed": len(self.failed),
            "unchecked": len(self.unchecked),
            "checks": [c.to_dict() for c in self.checks],
            "elapsed_s": round(self.elapsed_s, 3),
        }


def preflight(
    deployment: str | Path,
    *,
    subscription: str | None = None,
    resource_group: str | None = None,
    parameters: dict[str, Any] | None = None,
    offline: bool = False,
    credential: Any = None,
    base_url: str | None = None,
    polling_interval_s: float = 10.0,
    timeout_s: float = 600.0,
    catalog: Catalog | str | Path | list[str | Path] | tuple[str | Path, ...] = (),
    progress: Progress | None = None,
) -> PreflightReport:
    """PreflightCheck ``deployment`` (a ``stoker provision --out`` folder, or a job spec that is
    provisioned into a temporary folder first) before it is deployed; see the module docstring.
    ``subscription`` falls back to the folder's record, then ``AZURE_SUBSCRIPTION_ID``;
    ``parameters`` (name -> value) fill template parameters the parameters file leaves empty."""
    from ._arm import check_endpoint

    _check_types(deployment, locals())
    if base_url is not None:
        check_endpoint(base_url)
    started = time.monotonic()
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(_layers(catalog))
    path = Path(deployment)
    if path.is_file() and path.suffix.lower() == ".toml":
        with tempfile.TemporaryDirectory(prefix="stoker-preflight-") as tmp:
            from ..provision import provision

            provision(path, Path(tmp) / "deploy", cat, resource_group=resource_group)
            needs = read_needs(Path(tmp) / "deploy", cat, parameters)
            needs.folder = path
            report = _run(
                needs,
                cat,
                subscription,
                resource_group,
                offline,
                credential,
                base_url,
                polling_interval_s,
                timeout_s,
                progress,
            )
    elif path.is_dir():
        needs = read_needs(path, cat, parameters)
        report = _run(
            needs,
            cat,
            subscription,
            resource_group,
            offline,
            credential,
            base_url,
            polling_interval_s,
            timeout_s,
            progress,
        )
    else:
        raise PreflightError(
            f"{printable(str(deployment))}: neither a folder `stoker provision --out` wrote nor "
            "a job spec (.toml)"
        )
    report.elapsed_s = time.monotonic() - started
    return report


def _run(
    needs: Needs,
    cat: Any,
    sub: str | None,
    group: str | None,
    offline: bool,
    credential: Any,
    base_url: str | None,
    poll_s: float,
    timeout_s: float,
    progress: Progress | None,
) -> PreflightReport:
    from ._arm import subscription_from_env

    needs.group = group or needs.group
    sub = sub or needs.subscription or subscription_from_env(None) or None
    say = progress or (lambda e: None)
    report = PreflightReport(
        printable(str(needs.folder)),
        needs.region,
        sub,
        needs.group,
        False,
        offline_checks(needs, cat),
    )
    why = ""
    if offline:
        why = "--offline"
    elif not sub:
        why = "no subscription: pass --subscription or set AZURE_SUBSCRIPTION_ID"
    elif not needs.group:
        why = "no resource group: pass --resource-group"
    if why:
        report.checks += [_not_checked(kind, why) for kind in LIVE]
        return report
    report.queried_azure = True
    report.checks += _live(needs, cat, sub or "", credential, base_url, poll_s, timeout_s, say)
    return report


def _live(
    needs: Needs,
    cat: Any,
    sub: str,
    credential: Any,
    base_url: str | None,
    poll_s: float,
    timeout_s: float,
    say: Progress,
) -> list[PreflightCheck]:
    from . import _preflight_deploy as deploy
    from . import _preflight_live as lv
    from ._arm import ArmClients

    arm = ArmClients(sub, credential=credential, base_url=base_url, polling_interval_s=poll_s)
    live = lv.Live(arm, poll_s=poll_s, timeout_s=timeout_s)
    out: list[PreflightCheck] = []
    families: dict[str, lv.Sku] = {}

    def skus() -> list[PreflightCheck]:
        checks, found = lv.vm_skus(live, needs)
        families.update(found)
        return checks

    def arm_checks() -> list[PreflightCheck]:
        missing = deploy.group_exists(live, needs)
        if missing is not None:
            return [missing, _not_checked("what-if", "the resource group does not exist yet")]
        return [deploy.validate(live, needs), deploy.what_if(live, needs)]

    steps: list[tuple[str, Callable[[], list[PreflightCheck]]]] = [
        ("sku", skus),
        ("quota", lambda: lv.quota(live, needs, cat, families)),
        ("lustre-sku", lambda: lv.lustre_skus(live, needs)),
        ("rights", lambda: lv.rights(live, needs)),
        ("terms", lambda: lv.terms(live, needs)),
        ("validate", arm_checks),
    ]
    try:
        for i, (kind, step) in enumerate(steps):
            say({"event": "check", "kind": kind, "status": "checking"})
            try:
                found = step()
            except TeardownError as exc:  # no credential, Azure unreachable: the rest too
                left = [k for k, _ in steps[i:]] + (["what-if"] if kind != "validate" else [])
                out += [_not_checked(k, str(exc)) for k in left]
                break
            out += found
            say({"event": "check", "kind": kind, "status": "done", "checks": found})
    finally:
        arm.close()
    return out


def _not_checked(kind: str, why: str) -> PreflightCheck:
    what = {
        "quota": "vCPU quota per family and in the region",
        "sku": "the VM size offered in the region and zone",
        "lustre-sku": "the Lustre SKU offered in the region and zone",
        "rights": "the right to create role assignments",
        "terms": "marketplace terms of images with a plan",
        "validate": "ARM's validation of the template",
        "what-if": "what-if (creates, modifies, deletes)",
    }[kind]
    return PreflightCheck(kind, "unchecked", f"not checked: {what} ({why})")


def _layers(catalog: Any) -> tuple[Any, ...]:
    if isinstance(catalog, str | Path):
        return (catalog,)
    return tuple(catalog or ())


def _check_types(deployment: Any, given: dict[str, Any]) -> None:
    text = (str, type(None))
    check_args(
        PreflightError,
        deployment=(deployment, PATH),
        subscription=(given["subscription"], text),
        resource_group=(given["resource_group"], text),
        parameters=(given["parameters"], (dict, type(None))),
        offline=(given["offline"], bool),
        polling_interval_s=(given["polling_interval_s"], NUMBER),
        timeout_s=(given["timeout_s"], NUMBER),
    )


__all__ = ["PreflightCheck", "PreflightReport", "preflight"]
