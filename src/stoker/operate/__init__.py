"""stoker operate: live Azure resources, through Azure Resource Manager. The end of a run
(``teardown``: deallocate, archive Lustre, delete it), the groups past their ``teardown-after``
tag (``expired``), and action when GPUs idle (``Guard``). It acts only on resources whose
``stoker-deployment-id`` tag (``stoker.provision.tags``) proves them the deployment's, re-proven
before each change, and only on complete, valid evidence.

    teardown.py (which group, _ownership.py; the steps, _steps.py; running them, _runner.py;
    long operations, _lro.py; the ARM client, _arm.py) · _expired.py ·
    guard.py (the verdict; _guard_evidence.py, _guard_sources.py, _guard_actions.py, and what
    the idle time costs, _guard_cost.py) ·
    preflight.py (will it deploy: _preflight_needs.py offline, _preflight_live.py quota and
    SKUs, _preflight_rights.py rights and terms, _preflight_deploy.py validate and what-if)
"""

from ._expired import Expired, expired
from ._guard_actions import command_action, evidence, print_action, teardown_action, webhook_action
from ._guard_cost import IdleCost, idle_cost
from ._guard_sources import Metrics, node_health, nvml_gpus, step_file
from ._preflight_needs import PreflightCheck, parameter_pairs
from .guard import Guard, GuardPolicy, NodeReading, Verdict, decide
from .preflight import PreflightReport, preflight
from .teardown import TeardownReport, teardown

__all__ = [
    "Expired",
    "Guard",
    "GuardPolicy",
    "IdleCost",
    "Metrics",
    "NodeReading",
    "PreflightCheck",
    "PreflightReport",
    "TeardownReport",
    "Verdict",
    "command_action",
    "decide",
    "evidence",
    "expired",
    "idle_cost",
    "node_health",
    "nvml_gpus",
    "parameter_pairs",
    "preflight",
    "print_action",
    "step_file",
    "teardown",
    "teardown_action",
    "webhook_action",
]
