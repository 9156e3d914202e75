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
  SKUs ``restrictions``, type Location or Zone), each Lustre SKU in its region and zone
  (StorageCache's SKU list; AMLFS takes zone 1 where the template names none), and each storage
  account SKU in the region (Storage's SKU list);
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

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._arg_types import NUMBER, PATH, check_args
from .._redact import printable
from ..catalog import Catalog, load_catalog
from ..errors import PreflightError
from ._preflight_live import Live
from ._preflight_needs import Needs, PreflightCheck, offline_checks, read_needs

Progress = Callable[[dict[str, Any]], None]
# The checks that ask Azure, in the order they run.
LIVE = ("sku", "quota", "lustre-sku", "storage-sku", "rights", "terms", "validate", "what-if")


@dataclass
class PreflightReport:
    deployment: str
    region: str
    subscription: str | None
    group: str | None
    queried_azure: bool
    checks: list[PreflightCheck] = field(default_factory=list)
    elapsed_s: float = 0.0
    # What its Managed Lustre bills left up over an idle weekend: the seed's warning, priced.
    idle_weekend: str = ""

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
            "idle_weekend": self.idle_weekend,
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
    """Check ``deployment`` (a ``stoker provision --out`` folder, or a job spec that is
    provisioned into a temporary folder first) before it is deployed; see the module docstring.
    ``subscription`` falls back to the folder's record, then ``AZURE_SUBSCRIPTION_ID``;
    ``parameters`` (name -> value) fill template parameters the parameters file leaves empty."""
    from ._arm import check_endpoint, subscription_from_env

    _check_types(deployment, locals())
    if base_url is not None:
        check_endpoint(base_url)
    started = time.monotonic()
    cat = catalog if isinstance(catalog, Catalog) else load_catalog(_layers(catalog))
    with _folder(Path(deployment), cat, resource_group) as folder:
        needs = read_needs(folder, cat, parameters)
        idle = _idle_weekend(folder)
    needs.folder = Path(deployment)
    needs.group = resource_group or needs.group
    sub = subscription or needs.subscription or subscription_from_env(None) or None
    report = PreflightReport(printable(str(deployment)), needs.region, sub, needs.group, False,
                             offline_checks(needs, cat), idle_weekend=idle)  # fmt: skip
    why = ""
    if offline:
        why = "--offline"
    elif not sub:
        why = "no subscription: pass --subscription or set AZURE_SUBSCRIPTION_ID"
    elif not needs.group:
        why = "no resource group: pass --resource-group"
    if why:
        report.checks += [_not_checked(kind, why) for kind in LIVE]
    else:
        from ._arm import ArmClients

        report.queried_azure = True
        arm = ArmClients(sub or "", credential=credential, base_url=base_url,
                         polling_interval_s=polling_interval_s)  # fmt: skip
        try:
            live = Live(arm, poll_s=polling_interval_s, timeout_s=timeout_s)
            report.checks += _live(live, needs, cat, progress or (lambda e: None))
        finally:
            arm.close()
    report.elapsed_s = time.monotonic() - started
    return report


@contextmanager
def _folder(path: Path, cat: Catalog, group: str | None) -> Iterator[Path]:
    """The deployment folder: ``path`` itself, or a spec provisioned into a temporary one."""
    if path.is_dir():
        yield path
    elif path.is_file() and path.suffix.lower() == ".toml":
        from ..provision import provision

        with tempfile.TemporaryDirectory(prefix="stoker-preflight-") as tmp:
            yield provision(path, Path(tmp) / "deploy", cat, resource_group=group).out
    else:
        raise PreflightError(
            f"{printable(str(path))}: neither a folder `stoker provision --out` wrote nor a job "
            "spec (.toml)"
        )


def _live(live: Live, needs: Needs, cat: Catalog, say: Progress) -> list[PreflightCheck]:
    """The checks that ask Azure, in order; a credential refused or Azure out of reach leaves
    this and every later check unchecked (never passed)."""
    from . import _preflight_deploy as deploy
    from . import _preflight_live as lv
    from . import _preflight_rights as access

    skus: dict[str, lv.Sku] = {}

    def vm_skus() -> list[PreflightCheck]:
        checks, found = lv.vm_skus(live, needs)
        skus.update(found)
        return checks

    def arm_checks() -> list[PreflightCheck]:
        missing = deploy.group_exists(live, needs)
        if missing is not None:
            return [missing, _not_checked("what-if", "the resource group does not exist yet")]
        return [deploy.validate(live, needs), deploy.what_if(live, needs)]

    steps: list[tuple[str, Callable[[], list[PreflightCheck]]]] = [
        ("sku", vm_skus),
        ("quota", lambda: lv.quota(live, needs, cat, skus)),
        ("lustre-sku", lambda: lv.lustre_skus(live, needs)),
        ("storage-sku", lambda: lv.storage_skus(live, needs)),
        ("rights", lambda: access.rights(live, needs)),
        ("terms", lambda: access.terms(live, needs)),
        ("validate", arm_checks),  # and what-if
    ]
    out: list[PreflightCheck] = []
    for i, (kind, step) in enumerate(steps):
        say({"event": "check", "kind": kind, "status": "checking"})
        try:
            found = step()
        except lv.NoAzure as exc:  # the reason once, then short lines for the rest
            out.append(_not_checked(kind, str(exc)))
            out += [_not_checked(k, "as above") for k in LIVE[i + 1 :]]
            break
        out += found
        say({"event": "check", "kind": kind, "status": "done", "checks": found})
    return out


def _idle_weekend(folder: Path) -> str:
    from ..provision import idle_weekend_text

    record = folder / "stoker-deployment.json"
    try:
        return idle_weekend_text(json.loads(record.read_text("utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return ""  # an AKS folder or an older record: nothing to price here


def _not_checked(kind: str, why: str) -> PreflightCheck:
    what = {
        "quota": "vCPU quota per family and in the region",
        "sku": "the VM size offered in the region and zone",
        "lustre-sku": "the Lustre SKU offered in the region and zone",
        "storage-sku": "the storage account SKUs offered in the region",
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
