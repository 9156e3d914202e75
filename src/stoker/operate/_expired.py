"""``expired``: the resource groups past their ``teardown-after`` tag (``stoker teardown
--expired``). The tag is read on the group and on every resource in it; reads only."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from ..provision.tags import TAG_AFTER, TAG_PLAN
from ._steps import Resource, parse_time


@dataclass
class Expired:
    """A resource group holding resources past their ``teardown-after`` tag."""

    group: str
    teardown_after: dt.datetime
    overdue_s: float
    plan: str | None
    usd_per_hour: float  # of the group's resources that carry a cost tag
    resources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource_group": self.group,
            "teardown_after": self.teardown_after.isoformat(),
            "overdue_s": round(self.overdue_s),
            "plan": self.plan,
            "usd_per_hour": round(self.usd_per_hour, 4),
            "resources": self.resources,
        }


def expired(
    *,
    subscription: str | None = None,
    now: dt.datetime | None = None,
    credential: Any = None,
    base_url: str | None = None,
) -> list[Expired]:
    """Resource groups of the subscription with a resource (or the group itself) whose
    ``teardown-after`` tag is in the past, most overdue first. Reads only."""
    from ._arm import ArmClients, check_endpoint, subscription_from_env, translate

    if base_url is not None:
        check_endpoint(base_url)  # before the subscription: the flag the user typed first
    now = now or dt.datetime.now(dt.UTC)
    arm = ArmClients(subscription_from_env(subscription), credential=credential, base_url=base_url)
    try:
        groups = {g.name.lower(): g for g in arm.resources.resource_groups.list(**arm.call)}
        resources = list(arm.resources.resources.list(**arm.call))
    except Exception as exc:  # noqa: BLE001 - SDK and credential errors, translated
        raise translate(exc, "listing the subscription's resources") from exc
    finally:
        arm.close()
    found: dict[str, Expired] = {}

    def add(group: str, name: str, tags: dict[str, str]) -> None:
        after = parse_time(tags.get(TAG_AFTER))
        if after is None or after > now:
            return
        entry = found.get(group.lower())
        if entry is None:
            shown = groups[group.lower()].name if group.lower() in groups else group
            entry = found[group.lower()] = Expired(shown, after, 0.0, tags.get(TAG_PLAN), 0.0)
        entry.teardown_after = min(entry.teardown_after, after)
        entry.overdue_s = (now - entry.teardown_after).total_seconds()
        entry.plan = entry.plan or tags.get(TAG_PLAN)
        if name:
            entry.resources.append(name)
            entry.usd_per_hour += Resource("", name, tags).usd_per_hour or 0.0

    for g in groups.values():
        add(g.name, "", dict(g.tags or {}))
    for r in resources:
        m = re.search(r"/resourcegroups/([^/]+)/", r.id or "", re.IGNORECASE)
        if m:
            add(m.group(1), f"{r.type.split('/')[-1]}/{r.name}", dict(r.tags or {}))
    return sorted(found.values(), key=lambda e: -e.overdue_s)
