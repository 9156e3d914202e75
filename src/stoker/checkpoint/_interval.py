"""How often to checkpoint: the renewal model's optimum from the measured blocking time and an
MTBF (the same function the plan uses, stoker.plan.optimal_interval: the exact optimum that
Daly's 2006 series approximates, and gives up on, returning the MTBF, once a save blocks for
twice the MTBF or more), never more often than a save takes to finish."""

from __future__ import annotations

from ..errors import CheckpointError
from ..units import parse_duration


def _seconds(value: float | str | None) -> float | None:
    return parse_duration(value) if isinstance(value, str) else value


def checkpoint_interval(
    blocking_s: float,
    write_s: float = 0.0,
    *,
    mtbf: float | str | None = None,
    gpus: int | None = None,
    gpu_mtbf: float | str | None = None,
) -> float:
    """Seconds between checkpoints that keep the most training, for a save that blocks training
    for ``blocking_s`` and takes ``write_s`` to be safe. Give the job's ``mtbf`` ("3h", or
    seconds), or ``gpus`` and one GPU's ``gpu_mtbf`` (failures add up across GPUs; by default
    the catalog's figure, as the plan uses)."""
    from ..plan import optimal_interval
    from ..plan.reliability import job_mtbf

    mtbf_s, gpu_mtbf_s = _seconds(mtbf), _seconds(gpu_mtbf)
    if mtbf_s is None and gpus and gpu_mtbf_s is None:
        from ..catalog import load_catalog

        gpu_mtbf_s = load_catalog().reliability.gpu_mtbf
    if mtbf_s is None and gpus and gpu_mtbf_s:
        mtbf_s = job_mtbf(gpu_mtbf_s, gpus)
    if not mtbf_s or mtbf_s <= 0:
        raise CheckpointError(
            "checkpoint_interval needs the job's mtbf (e.g. mtbf='3h') or gpus= (and, if not "
            "the catalog's, gpu_mtbf=)"
        )
    if blocking_s < 0 or write_s < 0:
        raise CheckpointError(f"blocking_s={blocking_s}, write_s={write_s}: times are >= 0")
    return max(optimal_interval(max(blocking_s, 1e-6), mtbf_s), write_s)
