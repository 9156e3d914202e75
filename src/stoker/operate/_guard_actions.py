"""What ``guard`` does, once, when it finds the GPUs idle: each action takes the idle
``Verdict`` and hands on the evidence (how long, which GPUs, the peak utilization, the last
step, and the readings it rests on: time and utilization per GPU, with their count and span)
as JSON. Only an idle verdict reaches an action; "unknown" (missing or invalid data) never does:
``Guard`` checks the state, and each action here checks it again.

- ``print_action``: to a callback (the CLI prints it);
- ``command_action``: runs a shell command with the evidence in ``$STOKER_GUARD_EVIDENCE``;
- ``webhook_action``: POSTs the evidence as JSON (the URL, which may hold a token, is never
  shown whole);
- ``teardown_action``: ``stoker.teardown(..., dry_run=False)`` on the deployment. Run such a
  guard outside the scale set it tears down (it reads the nodes' ``stoker watch`` endpoints):
  a guard on a GPU node would deallocate itself before the Lustre archive.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

from .._redact import shown
from ..errors import StokerError
from ._urls import check_url
from .guard import Verdict

ENV_MAX_BYTES = 64 << 10  # Linux caps one environment string at 128 KiB


def evidence(verdict: Verdict) -> dict[str, Any]:
    if not verdict.idle:  # a second gate: an action never runs on a verdict that is not idle
        raise StokerError(f"guard: no action on a {verdict.state} verdict ({verdict.reason})")
    return {"event": "idle", "host": os.uname().nodename, **verdict.to_dict()}


def _env_evidence(verdict: Verdict) -> str:
    """The evidence for ``$STOKER_GUARD_EVIDENCE``: whole, or where the readings would not fit
    an environment string, their count and span (``span``) without each reading."""
    found = evidence(verdict)
    whole = json.dumps(found)
    if len(whole.encode()) <= ENV_MAX_BYTES:
        return whole
    return json.dumps(found | {"samples": [], "samples_left_out": len(found["samples"])})


def print_action(emit: Callable[[dict[str, Any]], None]) -> Callable[[Verdict], None]:
    return lambda verdict: emit(evidence(verdict))


def command_action(command: str, *, timeout_s: float = 3600.0) -> Callable[[Verdict], None]:
    def act(verdict: Verdict) -> None:
        env = {**os.environ, "STOKER_GUARD_EVIDENCE": _env_evidence(verdict)}
        try:
            done = subprocess.run(command, shell=True, env=env, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StokerError(f"guard action `{command}` ran past {timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise StokerError(f"guard action `{command}` exited {done.returncode}")

    return act


def check_webhook(url: object) -> None:
    """Refuse, before the guard starts watching, a webhook the evidence must not go to
    (_urls.py); the URL is shown redacted (a token in its query or a password never is)."""
    check_url(url, "--webhook", StokerError, sends="the evidence")


def webhook_action(url: str, *, timeout_s: float = 30.0) -> Callable[[Verdict], None]:
    check_webhook(url)

    def act(verdict: Verdict) -> None:
        import httpx

        try:
            response = httpx.post(url, json=evidence(verdict), timeout=timeout_s)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise StokerError(
                f"guard webhook {shown(url)} failed ({type(exc).__name__}); the GPUs are still "
                "idle: act by hand"
            ) from exc

    return act


def teardown_action(deployment: str, **options: Any) -> Callable[[Verdict], Any]:
    """``options`` as for ``stoker.teardown`` (resource_group, subscription, ...)."""

    def act(verdict: Verdict) -> Any:
        from .teardown import teardown

        evidence(verdict)  # raises unless the verdict is idle
        return teardown(deployment, dry_run=False, **options)

    return act
