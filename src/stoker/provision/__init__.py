"""stoker provision: the plan as deployable infrastructure (ARM template, cloud-init, CCWS
parameters, a README of what it costs). Pure: plan in, files out; it never calls Azure (that is
``stoker.operate``). ``tags.py`` is the ownership tags every resource carries.

    plan (stoker.plan) -> _layout.py (typed resources; _layout_checks.py, _network.py,
    _volume_plan.py refuse what Azure would) -> writers: _template.py (+ _res_network,
    _res_storage, _res_compute, _res_volumes; names checked by _names.py, text escaped by
    _text.py), _cloud_init.py, _ccws.py, _readme.py -> _out.py (the folder, only ours);
    validate.py checks a written folder offline.

``stoker.provision(spec, out)`` is both this package and the function, as ``stoker.stage`` is.
"""

from .._callable_package import make_callable
from ._cost import idle_weekend_text
from ._options import read_ssh_key
from ._provision import Deployment, provision
from ._readme import money

__all__ = ["Deployment", "idle_weekend_text", "money", "provision", "read_ssh_key"]

make_callable(__name__, provision)
