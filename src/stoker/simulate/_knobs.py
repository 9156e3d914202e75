"""The ``[simulate]`` table of a job spec: what the simulation assumes beyond the plan.

The plan's own spec model (plan/spec.py) refuses unknown tables, so this table is read here,
from the same TOML, and taken out before the rest goes to the plan. Every knob has a default
that is either published (cited in docs/simulate.md) or stated as assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._user_files import load_user_toml
from .._validation import describe
from ..errors import SpecError

# Llama 3 (arXiv 2407.21783, section 3.3.4): GPU issues were 58.7 % of the 419 unexpected
# interruptions, and about 78 % of all were hardware: so of the rest (41.3 %), about
# (78 - 58.7) / 41.3 = 47 % needed a host swapped (derived).
GPU_FAILURE_SHARE = 0.587
NODE_REPLACE_SHARE = 0.47


class SimulateKnobs(BaseModel):
    """``[simulate]``: failure shape, stragglers, contention; defaults in docs/simulate.md."""

    # strict: TOML has types, so "0.8", true or 1 where another type goes is a slip, not a value
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    failure_shape: float = Field(
        # below 0.1 the mean's gamma factor overflows, and parts fail at once anyway
        default=1.0,
        ge=0.1,
        le=10,
        description="Weibull shape k per part; 1 = exponential",
    )
    gpu_failure_share: float = Field(
        default=GPU_FAILURE_SHARE, ge=0, le=1, description="share of failures that are a GPU's"
    )
    node_replace_share: float = Field(
        default=NODE_REPLACE_SHARE, ge=0, le=1, description="node failures that swap the VM"
    )
    stragglers: Literal["none", "lognormal", "exponential"] = "lognormal"
    straggler_cv: float = Field(
        default=0.005, ge=0, le=1, description="one rank's step-time spread / its mean"
    )
    contention: bool = Field(default=True, description="tiers' limits shared by every flow")
    restaging: bool = Field(default=True, description="a swapped VM re-stages its data shard")
    lustre_first_reads: Literal["hsm", "prestaged"] = "hsm"

    def closed_form(self) -> bool:
        """True where the plan's assumptions hold: nothing the closed form leaves out is on."""
        return (
            self.failure_shape == 1.0
            and (self.stragglers == "none" or self.straggler_cv == 0)
            and not self.contention
            and not self.restaging
            and self.lustre_first_reads == "prestaged"
        )


# The knobs that make the simulation the closed form's own model (tests, --closed-form).
CLOSED_FORM = {
    "failure_shape": 1.0,
    "stragglers": "none",
    "contention": False,
    "restaging": False,
    "lustre_first_reads": "prestaged",
}


def parse_knobs(table: Any, source: str = "<spec>") -> SimulateKnobs:
    if table is None:
        return SimulateKnobs()
    if not isinstance(table, dict):
        raise SpecError(f"{source}: [simulate] must be a table of knobs (see docs/simulate.md)")
    try:
        return SimulateKnobs.model_validate(table)
    except ValidationError as exc:
        raise SpecError(f"{source}: invalid [simulate] table\n{describe(exc, 'simulate')}") from exc


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The job spec's TOML as a dict; errors name the file, as the plan's loader does."""
    hint = "; see examples/ for some to start from"
    return load_user_toml(path, "job spec", SpecError, missing_hint=hint)


def split_spec(
    data: dict[str, Any], source: str = "<spec>"
) -> tuple[dict[str, Any], SimulateKnobs]:
    """(the spec without ``[simulate]``, the knobs): the plan never sees this table."""
    rest = {k: v for k, v in data.items() if k != "simulate"}
    return rest, parse_knobs(data.get("simulate"), source)
