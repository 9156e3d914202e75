"""How requests are retried: obstore's configuration (RETRY), and the Azure SDK's calls
(List Blobs, container creation, Content-MD5, Copy Blob) made to match it: the same time
budget and backoff, with jitter, and a Retry-After honoured where a response carries one.

The storage SDK's default waited ~15 s before its first retry and gave up after 3: one
throttled listing page (503 ServerBusy, 500 OperationTimedOut, as Blob Storage answers a busy
partition) held a whole copy for 17 s. azure-core's own policy, which reads Retry-After, does
not fit the storage pipeline (its requests carry the storage policy's settings), so this is the
storage policy with another backoff: full jitter, so that copies on many nodes throttled at
once do not come back in step. (obstore, for reads and writes, backs off the same way but does
not read Retry-After; Blob Storage's throttling answers carry none.)
"""

from __future__ import annotations

import email.utils
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

RETRY = {
    # The time limit is the real bound: an emulator restart or a throttled account recovers
    # within it; a wrong endpoint fails after it.
    "max_retries": 1000,
    "retry_timeout": timedelta(minutes=2),
    "backoff": {
        "init_backoff": timedelta(milliseconds=100),
        "max_backoff": timedelta(seconds=15),
        "base": 2,
    },
}


def retry_budget_s() -> float:
    """The time one request may spend on retries: a layer above that tries again (a stream's
    shard) stops once it is spent, so the budgets do not multiply."""
    return RETRY["retry_timeout"].total_seconds()  # type: ignore[attr-defined]


def _backoff() -> tuple[float, float, float]:
    """obstore's first and longest backoff, and its whole retry budget, in seconds."""
    backoff = RETRY["backoff"]
    first = backoff["init_backoff"].total_seconds()  # type: ignore[index]
    most = backoff["max_backoff"].total_seconds()  # type: ignore[index]
    return first, most, retry_budget_s()


def sdk_retry_policy() -> Any:
    """The storage SDK's retry policy on obstore's budget (RETRY)."""
    from azure.storage.blob.aio import ExponentialRetry

    first, most, budget = _backoff()

    class Retry(ExponentialRetry):  # type: ignore[misc]
        def configure_retries(self, request: Any) -> dict[str, Any]:
            settings = super().configure_retries(request)
            settings["stoker_deadline"] = time.monotonic() + budget
            return settings

        def increment(self, settings: dict[str, Any], request: Any, **kwargs: Any) -> bool:
            error = kwargs.get("error")
            if error is not None and tls_failure(error) is not None:
                return False  # no retry mends it
            response = kwargs.get("response")
            settings["stoker_retry_after"] = retry_after(response)
            if time.monotonic() > settings["stoker_deadline"]:
                settings["total"] = 0  # spent: the increment leaves none
            return bool(super().increment(settings, request, **kwargs))

        def get_backoff_time(self, settings: dict[str, Any]) -> float:
            asked = settings.get("stoker_retry_after")
            if asked is not None:
                return asked
            return random.uniform(0, min(most, first * 2 ** settings["count"]))

    retries = RETRY["max_retries"]
    return Retry(
        retry_total=retries,
        retry_connect=retries,
        retry_read=retries,
        retry_status=retries,
        retry_to_secondary=False,
    )


def core_retry_policy() -> Any:
    """azure-core's retry policy on obstore's budget (RETRY), for the listing's pipeline: the
    same rules as ``sdk_retry_policy`` (transient statuses and connection errors, Retry-After
    honoured, jittered exponential backoff, no retry once the budget is spent), without
    importing the storage SDK (~0.6 CPU s a run)."""
    from azure.core.pipeline.policies import AsyncRetryPolicy

    first, most, budget = _backoff()

    class Retry(AsyncRetryPolicy):  # type: ignore[misc]
        def configure_retries(self, options: dict[str, Any]) -> dict[str, Any]:
            settings = super().configure_retries(options)
            settings["stoker_deadline"] = time.monotonic() + budget
            return settings

        def increment(
            self, settings: dict[str, Any], response: Any = None, error: Any = None
        ) -> bool:
            if error is not None and tls_failure(error) is not None:
                return False  # no retry mends it: the caller says so at once
            if time.monotonic() > settings["stoker_deadline"]:
                settings["total"] = 0  # spent: the increment leaves none
            return bool(super().increment(settings, response=response, error=error))

        def get_backoff_time(self, settings: dict[str, Any]) -> float:  # (Retry-After first)
            return random.uniform(0, min(most, first * 2 ** len(settings["history"])))

    retries = RETRY["max_retries"]
    return Retry(
        retry_total=retries,
        retry_connect=retries,
        retry_read=retries,
        retry_status=retries,
        retry_backoff_max=most,
    )


def tls_failure(exc: BaseException) -> Any:
    """The TLS failure no retry can mend (a certificate this machine does not trust, TLS
    spoken to a plain-HTTP endpoint) behind ``exc``, however many layers wrap it (requests,
    urllib3 and azure-core each wrap the one below), or None."""
    import ssl

    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        error = todo.pop()
        if not isinstance(error, BaseException) or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, ssl.SSLCertVerificationError) or (
            isinstance(error, ssl.SSLError) and error.reason == "WRONG_VERSION_NUMBER"
        ):
            return error
        # (azure-core keeps the transport's error as inner_exception, urllib3 as reason)
        todo += [error.__cause__, error.__context__, *error.args]
        todo += [getattr(error, "inner_exception", None), getattr(error, "reason", None)]
    return None


def retry_after(response: Any) -> float | None:
    """A response's Retry-After in seconds (a number, or an HTTP date), if it has one."""
    return retry_after_value(response.headers.get("Retry-After") if response is not None else None)


def retry_after_value(value: str | None) -> float | None:
    """A Retry-After header's value in seconds (a number, or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
