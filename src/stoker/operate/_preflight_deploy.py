"""ARM's own verdict on the template, where the resource group exists: ``validate`` (POST
``.../deployments/{name}/validate``: 200 valid, 400 with the error, or 202 and a ``Location``)
and ``whatIf`` (202, then the ``Location`` answers the ``WhatIfOperationResult``:
``properties.changes[].changeType`` one of Create, Delete, Ignore, Deploy, NoChange, Modify,
Unsupported). Neither changes anything; both need the group, so a group that does not exist yet
is a line saying they were not run."""

from __future__ import annotations

from typing import Any

from ._arm import RESOURCES_API
from ._preflight_live import WHAT_IF_KINDS, Live
from ._preflight_needs import Needs, PreflightCheck


def group_exists(live: Live, needs: Needs) -> PreflightCheck | None:
    """None when the group exists; else the line that says validate and what-if were not run."""
    ans = live.call("GET", f"{live.sub}/resourcegroups/{needs.group}", RESOURCES_API)
    if ans.status == 200:
        return None
    if ans.status == 404:
        why = (
            f"resource group {needs.group} does not exist yet: create it "
            f"(`az group create -n {needs.group} -l {needs.region}`) and run preflight again"
        )
    else:
        why = f"resource group {needs.group}: {ans.error()}"
    return PreflightCheck("validate", "unchecked", f"ARM validation and what-if not run: {why}")


def _deployment(needs: Needs) -> dict[str, Any]:
    return {
        "properties": {
            "mode": "Incremental",
            "template": needs.template,
            "parameters": needs.parameters,
        }
    }


def _url(live: Live, needs: Needs, action: str) -> str:
    return (
        f"{live.sub}/resourcegroups/{needs.group}/providers/Microsoft.Resources/deployments/"
        f"{needs.deployment_name}/{action}"
    )


def validate(live: Live, needs: Needs) -> PreflightCheck:
    ans = live.call("POST", _url(live, needs, "validate"), RESOURCES_API, _deployment(needs))
    ans = live.wait(ans, "validate")
    if ans.status in (200, 204):
        return PreflightCheck(
            "validate", "ok", f"ARM validation of the template in {needs.group}: passed"
        )
    return PreflightCheck(
        "validate",
        "failed",
        f"ARM validation of the template in {needs.group}: "
        f"{ans.error()}; fix the template (or provision again) before deploying",
        {"status": ans.status},
    )


def what_if(live: Live, needs: Needs) -> PreflightCheck:
    ans = live.call("POST", _url(live, needs, "whatIf"), RESOURCES_API, _deployment(needs))
    ans = live.wait(ans, "what-if")
    if ans.status != 200:
        return PreflightCheck("what-if", "unchecked", f"what-if in {needs.group}: {ans.error()}")
    body = ans.body if isinstance(ans.body, dict) else {}
    if body.get("status") == "Failed" or body.get("error"):
        err = body.get("error") or {}
        return PreflightCheck(
            "what-if",
            "failed",
            f"what-if in {needs.group}: {err.get('code')}: {err.get('message')}",
            {"status": body.get("status")},
        )
    changes = [
        c for c in (body.get("properties") or {}).get("changes") or [] if isinstance(c, dict)
    ]
    counts = {k: sum(1 for c in changes if c.get("changeType") == k) for k in WHAT_IF_KINDS}
    counts = {k: v for k, v in counts.items() if v}
    words = {
        "Create": "create",
        "Modify": "modify",
        "Delete": "delete",
        "Deploy": "redeploy",
        "NoChange": "unchanged",
        "Ignore": "ignored",
        "Unsupported": "unsupported",
    }
    summary = ", ".join(f"{v} {words[k]}" for k, v in counts.items()) or "no changes"
    # A delete or modify of something already there is what a re-deploy would do to live
    # resources: shown, not a failure (incremental mode deletes nothing the template omits).
    status = "warning" if counts.get("Delete") or counts.get("Modify") else "ok"
    return PreflightCheck(
        "what-if",
        status,
        f"what-if in {needs.group}: {summary}",
        {"changes": {words[k]: v for k, v in counts.items()}},
    )
