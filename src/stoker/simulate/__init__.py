"""stoker simulate: the run event by event (failures, saves, restarts, stragglers, contention),
beside the closed-form plan. The model and its limits: docs/simulate.md.

The package is callable, like ``stoker.stage``: ``stoker.simulate(spec, runs=100)`` works
whether or not ``stoker.simulate`` was imported as a package first.
"""

from .._callable_package import make_callable
from ._knobs import CLOSED_FORM as CLOSED_FORM
from ._knobs import SimulateKnobs as SimulateKnobs
from ._result import Simulation
from ._simulate import load_job as load_job
from ._simulate import simulate
from .simulation_json import SimulationJson as SimulationJson

# CLOSED_FORM, SimulateKnobs, load_job and SimulationJson are reached as stoker.simulate.NAME.
__all__ = ["Simulation", "simulate"]

make_callable(__name__, simulate)
