"""A Checkpointer's tiers, opened and checked before anything is saved: the fast one a folder,
the durable one not the fast folder, on a mounted volume, answering within seconds and this
job's (claimed, see _claim.py; or with ``check_writable=False`` only read); then both probed for
a write. One job, one id: under torch.distributed every rank takes rank 0's default, where
node-local fast folders differ in path."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import CheckpointError
from ..store import IOLoop
from . import _writers
from ._claim import check_durable_place, claim, job_id_for
from ._group import Group
from ._tier import Tier


@dataclass
class OpenTiers:
    fast: Tier
    durable: Tier | None
    group: Group
    job_id: str


def open_tiers(
    fast: str | os.PathLike[str],
    durable: str | os.PathLike[str] | None,
    job_id: str | None,
    check_writable: bool,
    io: IOLoop,
) -> OpenTiers:
    """The checked tiers; on any refusal, what was opened is closed again."""
    opened: list[Tier] = []
    try:
        fast_tier = Tier("fast", fast, io)
        opened.append(fast_tier)
        if fast_tier.posix is None:
            raise CheckpointError(
                f"fast={fast!r}: the fast tier must be a local or mounted folder; "
                "put object stores in durable="
            )
        durable_tier = Tier("durable", durable, io) if durable is not None else None
        if durable_tier is not None:
            opened.append(durable_tier)
        group = Group()
        the_id, source = job_id_for(job_id, fast_tier.posix.root)
        if source == "the fast folder" and group.world_size > 1:
            the_id = group.all_gather(the_id, "write")[0]
        if durable_tier is not None:
            check_durable_place(fast_tier, durable_tier)
            the_id = claim(durable_tier, the_id, source, create=check_writable)
            # Both tiers show this job's steps only. Without a durable tier the fast folder,
            # locked while a job writes it, shows every step (a look at it later, under
            # another id, must still find them).
            for tier in opened:
                tier.job_id = the_id
        if check_writable:  # found now, not at the first save's commit
            _writers.check_writable(opened, group)
    except BaseException:
        for tier in opened:
            tier.close()
        raise
    return OpenTiers(fast_tier, durable_tier, group, the_id)
