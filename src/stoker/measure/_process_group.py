"""The process group a collective sweep runs in, started from torchrun's environment (nccl
when CUDA is there, else gloo), with a clear error for a launch that is not torchrun's."""

from __future__ import annotations

import os
import sys

from ..errors import StokerError

LAUNCH = "torchrun --nproc-per-node N --no-python stoker bench allreduce"


def init_from_env() -> bool:
    """Start the default process group from torchrun's environment (nccl when CUDA is
    available, else gloo). Returns True if it started one, False if one was already running."""
    if "WORLD_SIZE" not in os.environ and not _initialized():
        raise StokerError(
            f"not started by torchrun (WORLD_SIZE is unset): run it as `{LAUNCH} ...` "
            "(or `torchrun --nproc-per-node N -m stoker.measure.collectives ...`), one process "
            "per GPU, or per CPU rank with gloo"
        )
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    world = _env_int("WORLD_SIZE", 1)
    _env_int("RANK", 0, below=world)
    local = _env_int("LOCAL_RANK", 0, default=0, below=world)
    try:
        if torch.cuda.is_available():
            torch.cuda.set_device(local)
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        else:
            dist.init_process_group("gloo")
    except ValueError as exc:  # a missing MASTER_ADDR or MASTER_PORT: not torchrun's launch
        raise StokerError(f"torch.distributed did not start ({exc}): run it as `{LAUNCH}`") from exc
    return True


def _env_int(name: str, least: int, *, default: int | None = None, below: int | None = None) -> int:
    """A whole number torchrun sets; a clear error when someone set it by hand wrongly."""
    text = os.environ.get(name)
    if text is None and default is not None:
        return default
    try:
        value = int(text or "")
    except ValueError:
        value = None
    if value is None or value < least or (below is not None and value >= below):
        upper = f" and below WORLD_SIZE ({below})" if below is not None else ""
        raise StokerError(
            f"{name}={text if text is not None else '(unset)'}: torchrun sets a whole number "
            f">= {least}{upper}; run it as `{LAUNCH}`"
        )
    return value


def _initialized() -> bool:
    # Only a process that already imported torch.distributed can have a group; importing torch
    # just to learn that nobody launched us would cost seconds.
    dist = sys.modules.get("torch.distributed")
    return bool(dist and dist.is_available() and dist.is_initialized())
