"""stoker plan: size the interconnect, storage tiers, checkpoints and cost of a job on Azure."""

from .model import make_plan
from .result import Plan
from .spec import JobSpec, load_spec, parse_spec

__all__ = ["JobSpec", "Plan", "load_spec", "make_plan", "parse_spec"]
