"""stoker provision: the plan as deployable infrastructure (ARM template, cloud-init, CCWS
parameters, a README of what it costs), and the end of a run (teardown, guard).

    plan (stoker.plan) -> resources.py (typed) -> writers: _arm.py, _cloud_init.py, _ccws.py,
    _readme.py; _checks.py refuses names, regions and sizes before anything is written.
"""

from ._provision import Deployment, provision
from .teardown import Expired, TeardownReport, expired, teardown

__all__ = [
    "Deployment",
    "Expired",
    "TeardownReport",
    "expired",
    "provision",
    "teardown",
]
