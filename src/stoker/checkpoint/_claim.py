"""One owner per durable prefix: the job id a Checkpointer claims its durable tier for.

    PREFIX/stoker-claim.json   {"format": "stoker.claim/1", "job_id": "...", "created": "..."}

The claim is created only where none is (the store's create-only put: link(2) on POSIX, Put Blob
with If-None-Match: * on Blob), so of two jobs racing for one prefix exactly one holds it. A job
with the holder's id (a restart, the job's other ranks) goes on; a job with another id is
refused before it writes anything. A look at a prefix (``check_writable=False``, no id given)
goes by its holder's id. The fast folder is not claimed: one job writes it at a time (its
lock), and with a durable tier it shows the claimed job's steps only.
A claim is never released or overwritten by stoker: a prefix is one job's for good (delete the
claim by hand to give the prefix to another job, once its steps are no longer wanted).

The job id: ``Checkpointer(job_id=...)``; else torchrun's TORCHELASTIC_RUN_ID (the same for
every rank and every restart of one torchrun job, but a new one per launch under ``torchrun
--standalone``: a job relaunched by hand passes ``job_id=``); else ``fast-`` and 16 hex digits
of the SHA-256 of the fast folder's resolved path, so the same fast folder is the same job;
under torch.distributed every rank takes rank 0's (node-local fast folders may differ in path).

Steps written by a stoker from before job ids carry none in their manifest: they belong to
whichever job holds the tier's claim (the first job to claim the prefix adopts them; a prefix
has one claim, so they never belong to two jobs), and load for a job that has no claim yet.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
from datetime import UTC, datetime
from pathlib import Path

from .._dist_env import torchrun_env
from ..errors import CheckpointError, StokerError
from ._tier import Tier

log = logging.getLogger("stoker.checkpoint")
CLAIM = "stoker-claim.json"
CLAIM_FORMAT = "stoker.claim/1"
# How long the claim (and with it the first request to the durable endpoint) may take: a host
# that refuses fails at once (store/_reach.py); one that accepts and never answers, here.
REACH_TIMEOUT_S = 8.0
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=/-]{0,127}")


def job_id_for(job_id: str | None, fast_root: Path) -> tuple[str, str]:
    """(the job id, where it came from): ``job_id=``, torchrun's run id, or the fast folder."""
    if job_id is not None:
        if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
            raise CheckpointError(
                f"job_id={job_id!r}: give 1-128 letters, digits and ._:@+=/- (starting with a "
                "letter or digit)"
            )
        return job_id, "as given"
    run_id = torchrun_env(error=CheckpointError).run_id
    if run_id is not None:
        if not JOB_ID.fullmatch(run_id):  # hashed, so that any run id names one job
            run_id = "run-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]
        return run_id, "TORCHELASTIC_RUN_ID"
    digest = hashlib.sha256(os.path.realpath(fast_root).encode()).hexdigest()[:16]
    return f"fast-{digest}", "the fast folder"


def check_durable_place(fast: Tier, durable: Tier) -> None:
    """Refuse a durable folder that is the fast folder (one copy would be counted as two), or
    whose parent is missing (an unmounted volume: its checkpoints would fill the local disk).
    The folder itself may be made, as stage makes a destination; nothing is made here."""
    assert fast.posix is not None
    if durable.posix is None:
        return
    here, there = (
        Path(os.path.realpath(fast.posix.root)),
        Path(os.path.realpath(durable.posix.root)),
    )
    if here == there:
        raise CheckpointError(
            f"durable={str(durable.posix.root)!r} is the fast folder ({here}): one copy is not "
            "two; give the durable tier another volume or a Blob URL"
        )
    if there.exists():
        if not there.is_dir():
            raise CheckpointError(f"durable={str(there)!r} is a file, not a folder")
        return
    if not there.parent.is_dir():
        what = "is not a folder" if there.parent.exists() else "does not exist"
        raise CheckpointError(
            f"durable={str(there)!r}: its folder {there.parent} {what} (is its volume "
            f"mounted?); nothing was created: mount it, or mkdir -p {there.parent}"
        )


def claim(tier: Tier, job_id: str, source: str, *, create: bool) -> str:
    """Claim ``tier`` for ``job_id`` (``create``) or only read its holder; returns the job id
    this Checkpointer goes by. Refused (CheckpointError naming the holder and the prefix) when
    another job holds it; a read-only Checkpointer whose id was not given takes the holder's.
    Bounded by REACH_TIMEOUT_S, so an unreachable endpoint fails here within seconds."""
    where = f"{tier.store}/{CLAIM}"

    async def go() -> str | None:
        holder = _parse(await tier.read_small(CLAIM, _NotAClaim), where)
        if holder is None and create:
            record = {
                "format": CLAIM_FORMAT,
                "job_id": job_id,
                "created": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            data = (json.dumps(record, indent=1) + "\n").encode()
            if await tier.store.create_bytes(CLAIM, data):
                return job_id
            for _ in range(10):  # another won the race (on SMB its data may follow its name)
                raw = await tier.read_small(CLAIM, _NotAClaim)
                if raw:
                    break
                await asyncio.sleep(0.1)
            holder = _parse(raw, where)
        return holder

    what = f"claiming it for job {job_id}" if create else "reading its claim"
    try:
        holder = tier.run_within(go(), REACH_TIMEOUT_S, what)
    except StokerError as exc:
        if not create and not isinstance(exc, _NotAClaim):  # listing and loading go on
            log.warning("%s; going on as job %s", exc, job_id)
            return job_id
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"the {tier} cannot be written, so it could not be claimed for job {job_id}: {exc}"
        ) from exc
    if holder is None or holder == job_id:
        return job_id
    if not create and source == "the fast folder":  # a look at another job's checkpoints
        return holder
    whence = source if source == "as given" else f"from {source}"
    other = "folder" if tier.posix else "prefix"
    raise CheckpointError(
        f"the {tier} holds job {holder!r}'s checkpoints, and this job is {job_id!r} ({whence}): "
        f"give this job another {other}, or job_id={holder!r} if it is that job resumed"
    )


def _parse(data: bytes | None, where: str) -> str | None:
    if data is None:
        return None
    try:
        raw = json.loads(data)
        holder = raw["job_id"] if raw.get("format") == CLAIM_FORMAT else None
    except (ValueError, TypeError, KeyError, AttributeError):
        holder = None
    if not isinstance(holder, str) or not holder:
        raise _NotAClaim(
            f"{where} is not a stoker claim (format {CLAIM_FORMAT}): this prefix may be another "
            "tool's; give the Checkpointer another one"
        )
    return holder


class _NotAClaim(CheckpointError):
    """An object at the claim's name that stoker did not write."""
