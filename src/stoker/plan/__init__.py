"""stoker plan: size the interconnect, storage tiers, checkpoints and cost of a job on Azure."""

from ._renewal import Renewal, optimal_interval, renewal
from .job import plan_job
from .model import make_plan
from .plan_json import PlanJson
from .render import markdown, markdown_compare
from .result import Plan
from .spec import JobSpec, load_spec, parse_spec

__all__ = [
    "JobSpec",
    "Plan",
    "PlanJson",
    "Renewal",
    "load_spec",
    "make_plan",
    "markdown",
    "markdown_compare",
    "optimal_interval",
    "parse_spec",
    "plan_job",
    "renewal",
]
