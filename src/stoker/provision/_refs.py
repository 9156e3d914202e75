"""Small helpers every ARM resource writer shares: API versions from the catalog, resource id
expressions, names that ARM computes, and the tags every resource carries."""

from __future__ import annotations

from typing import Any

from ..catalog import Provisioning
from ._layout import Layout
from ._text import arm_literal, check_tag
from .tags import TAG_DEPLOYMENT


def api(facts: Provisioning, namespace: str) -> str:
    return facts.api_versions[namespace]


def rid(type_: str, *names: str) -> str:
    """``[resourceId('T', 'a', 'b')]``; a name that is itself an expression goes in bare."""
    parts = ", ".join(_arg(n) for n in names)
    return f"[resourceId('{type_}', {parts})]"


def _arg(name: str) -> str:
    if name.startswith("[") and name.endswith("]"):
        return name[1:-1]
    return f"'{name}'"


def account_name(lay: Layout, role: str) -> str:
    """A storage account's name, literal so the schemas and checkov can read it: 'st' (main),
    'sl' (Lustre-linked) or 'sf' (Azure Files), up to 10 characters of the name, and 12 hex
    digits of a hash of resource group, name, region and role. Account names are global:
    the same plan deployed into a same-named group elsewhere would collide; --name changes it."""
    import hashlib

    stem = "".join(ch for ch in lay.prefix if ch.isalnum())[:10]
    lead = {"main": "st", "hsm": "sl", "files": "sf"}[role]
    seed = f"{lay.resource_group}/{lay.prefix}/{lay.region}/{role}".encode()
    return f"{lead}{stem}{hashlib.sha256(seed).hexdigest()[:12]}"


def tags(lay: Layout, hourly: dict[str, str], own: str | None) -> dict[str, str]:
    """The deployment's identity (what ``stoker teardown`` proves ownership by), plan name, the
    plan's cost per hour, this resource's (``stoker teardown`` sums these and says what each
    step saves), and when to tear it down. Values are checked against Azure's tag limits and
    escaped for ARM (a plan named ``[listKeys(...)]`` stays that text, not an expression)."""
    values = {
        TAG_DEPLOYMENT: lay.deployment_id,
        "stoker-plan": lay.plan_name,
        "stoker-plan-usd-per-hour": hourly["total"],
        "stoker-usd-per-hour": "unknown" if own is None else own,
        "teardown-after": lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    for key, value in values.items():
        check_tag("name" if key == "stoker-plan" else key, key, value)
    return {key: arm_literal(value) for key, value in values.items()}


def with_skip(resource: dict[str, Any], *skips: tuple[str, str]) -> dict[str, Any]:
    """checkov's inline skip for an ARM resource, each with its reason, next to the resource."""
    resource["metadata"] = {"checkov": [f"checkov:skip={cid}: {why}" for cid, why in skips]}
    return resource


def ssh_key_login(lay: Layout) -> dict:
    """Every VM stoker writes: the deployer's SSH key, no password."""
    keys = f"/home/{lay.admin_username}/.ssh/authorized_keys"
    return {
        "disablePasswordAuthentication": True,
        "provisionVMAgent": True,
        "ssh": {"publicKeys": [{"path": keys, "keyData": "[parameters('sshPublicKey')]"}]},
    }
