"""The process group a collective sweep runs in, started from torchrun's environment (nccl
when CUDA is there, else gloo), with a clear error for a launch that is not torchrun's."""

from __future__ import annotations

import sys

from .._dist_env import torchrun_env
from ..errors import StokerError

LAUNCH = "torchrun --nproc-per-node N --no-python stoker bench allreduce"


def init_from_env() -> bool:
    """Start the default process group from torchrun's environment (nccl when CUDA is
    available, else gloo). Returns True if it started one, False if one was already running."""
    env = torchrun_env(launch=LAUNCH)  # (one rule for the package: stoker/_dist_env.py)
    if not env.launched and not _initialized():
        raise StokerError(
            f"not started by torchrun (WORLD_SIZE is unset): run it as `{LAUNCH} ...` "
            "(or `torchrun --nproc-per-node N -m stoker.cli.bench_allreduce ...`), one process "
            "per GPU, or per CPU rank with gloo"
        )
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    local = env.local_rank
    try:
        if torch.cuda.is_available():
            torch.cuda.set_device(local)
            dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        else:
            dist.init_process_group("gloo")
    except ValueError as exc:  # a missing MASTER_ADDR or MASTER_PORT: not torchrun's launch
        raise StokerError(f"torch.distributed did not start ({exc}): run it as `{LAUNCH}`") from exc
    return True


def _initialized() -> bool:
    # Only a process that already imported torch.distributed can have a group; importing torch
    # just to learn that nobody launched us would cost seconds.
    dist = sys.modules.get("torch.distributed")
    return bool(dist and dist.is_available() and dist.is_initialized())
