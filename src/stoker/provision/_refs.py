"""Small helpers every ARM resource writer shares: API versions from the catalog, resource id
expressions, names that ARM computes, and the tags every resource carries."""

from __future__ import annotations

from typing import Any

from ..catalog._schema import Provisioning
from ._layout import Layout


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


def account_var(role: str) -> str:
    return f"storage_{role}"


def account_name(role: str) -> str:
    """The expression for a storage account's name (globally unique: uniqueString of the RG)."""
    return f"[variables('{account_var(role)}')]"


def account_name_value(lay: Layout, role: str) -> str:
    """The variable's value: 'st' or 'sl' + up to 9 letters of the name + 13 of uniqueString."""
    stem = "".join(ch for ch in lay.prefix if ch.isalnum())[:9]
    lead = "st" if role == "main" else "sl"
    return f"[format('{lead}{stem}{{0}}', uniqueString(resourceGroup().id, '{lay.prefix}'))]"


def child_name(parent_expr: str, *children: str) -> str:
    """``[format('{0}/default/data', variables(...))]`` for a child of an expression-named parent."""
    inner = parent_expr[1:-1]
    path = "/".join(children)
    return f"[format('{{0}}/{path}', {inner})]"


def tags(lay: Layout, hourly: dict[str, str], own: str | None) -> dict[str, str]:
    """Plan name, the deployment's cost per hour, this resource's, and when to tear it down."""
    out = {
        "stoker-plan": lay.plan_name,
        "stoker-cost-per-hour-usd": hourly["total"],
        "teardown-after": lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    out["stoker-resource-cost-per-hour-usd"] = "unknown" if own is None else own
    return out


def with_skip(resource: dict[str, Any], *skips: tuple[str, str]) -> dict[str, Any]:
    """checkov's inline skip for an ARM resource, each with its reason, next to the resource."""
    resource["metadata"] = {"checkov": [f"checkov:skip={cid}: {why}" for cid, why in skips]}
    return resource
