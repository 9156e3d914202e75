"""stoker provision: the plan as deployable infrastructure (ARM template, cloud-init, CCWS
parameters, a README of what it costs), and the end of a run (teardown, guard).

    plan (stoker.plan) -> _layout.py (typed resources; _checks.py, _network.py refuse what Azure
    would) -> writers: _template.py (+ _res_network, _res_storage, _res_compute), _cloud_init.py,
    _ccws.py, _readme.py; validate.py checks a written folder offline.

``stoker.provision(spec, out)`` is both this package and the function, as ``stoker.stage`` is.
"""

import inspect as _inspect
import sys as _sys
import types as _types

from ._expired import Expired, expired
from ._provision import Deployment, provision
from .guard import Guard, GuardPolicy, Verdict, decide
from .teardown import TeardownReport, teardown

__all__ = [
    "Deployment",
    "Expired",
    "Guard",
    "GuardPolicy",
    "TeardownReport",
    "Verdict",
    "decide",
    "expired",
    "provision",
    "teardown",
]


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN204
        return provision(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
__signature__ = _inspect.signature(provision)  # what help() shows for stoker.provision(...)
