"""Azure Scheduled Events, read and acknowledged through the instance metadata service (IMDS).

    GET  {imds}/metadata/scheduledevents?api-version=2020-07-01      header Metadata: true
         -> {"DocumentIncarnation": 3, "Events": [{"EventId", "EventType", "ResourceType",
             "Resources": [...], "EventStatus", "NotBefore", "Description", "EventSource",
             "DurationInSeconds"}]}
    POST the same URL, body {"StartRequests": [{"EventId": "..."}]}: "go ahead now"

``NotBefore`` is an RFC 1123 time ("Mon, 19 Sep 2016 18:29:47 GMT"), empty once the event has
started. Minimum notice: Preempt (Spot eviction) 30 s, Terminate 5-15 min (set on the scale
set), Redeploy 10 min, Reboot 15 min; a host failure arrives as Reboot already Started. Every
member of a placement group gets events for the others too, so ``Resources`` must be checked.
The first request turns the service on for the VM and can take up to two minutes to answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from .._redact import redact
from ..measure import ImdsUnreachable, fetch_instance

IMDS = "http://169.254.169.254"
EVENTS_PATH = "/metadata/scheduledevents?api-version=2020-07-01"
INSTANCE_PATH = "/metadata/instance?api-version=2021-02-01"
# Events that end this VM's memory or its local disks: the job must save and stop. Freeze
# (a pause of seconds, memory kept) is not among them.
STOPPING = frozenset({"Preempt", "Terminate", "Reboot", "Redeploy"})
FIRST_TIMEOUT_S = 120.0  # the first request turns the service on: up to two minutes
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ScheduledEvent:
    event_id: str
    event_type: str
    resources: tuple[str, ...]
    status: str  # Scheduled or Started
    not_before: float | None  # epoch seconds; None once started (or never given)
    source: str = ""
    description: str = ""

    def aims_at(self, vm_name: str) -> bool:
        return self.event_type in STOPPING and vm_name in self.resources


def parse_events(doc: Any) -> tuple[int, list[ScheduledEvent]]:
    """(DocumentIncarnation, events) of a Scheduled Events document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("Events"), list):
        raise ImdsUnreachable("the answer has no Events list: not a Scheduled Events document")
    events = []
    for raw in doc["Events"]:
        if not isinstance(raw, dict) or not raw.get("EventId"):
            continue
        resources = raw.get("Resources") or []
        events.append(
            ScheduledEvent(
                event_id=str(raw["EventId"]),
                event_type=str(raw.get("EventType") or ""),
                resources=tuple(str(r) for r in resources if isinstance(r, str)),
                status=str(raw.get("EventStatus") or ""),
                not_before=parse_not_before(raw.get("NotBefore")),
                source=str(raw.get("EventSource") or ""),
                description=str(raw.get("Description") or ""),
            )
        )
    return int(doc.get("DocumentIncarnation") or 0), events


def parse_not_before(text: Any) -> float | None:
    """Epoch seconds of an RFC 1123 ``NotBefore``; None when empty or unreadable (an event
    already started: no time is left)."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError):
        return None


class EventsClient:
    """Reads and acknowledges this VM's Scheduled Events at ``imds`` (the service's base URL).

    Polled through the standard library rather than httpx: httpx logs every request at INFO,
    which would be a line a second in a training job's log."""

    def __init__(self, imds: str = IMDS) -> None:
        import urllib.request

        self.imds = imds.rstrip("/")
        self.url = self.imds + EVENTS_PATH
        # No proxy handler: IMDS must be reached directly; an HTTP proxy would answer for it.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._first = True

    def vm_name(self) -> str:
        """This VM's name (IMDS ``compute.name``; ``{scaleSet}_{instanceId}`` in a scale set),
        as event ``Resources`` name it."""
        name = fetch_instance(self.imds + INSTANCE_PATH).name
        if not name:
            raise ImdsUnreachable(f"{self.where}: the instance metadata has no compute.name")
        return name

    def poll(self) -> tuple[int, list[ScheduledEvent]]:
        timeout = FIRST_TIMEOUT_S if self._first else TIMEOUT_S
        body = self._request("GET", timeout)
        self._first = False
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise ImdsUnreachable(f"{self.where} answered, but not with JSON") from exc
        return parse_events(doc)

    def acknowledge(self, event_ids: list[str]) -> None:
        """Let the events start now (StartRequests): call only once the state is saved."""
        body = {"StartRequests": [{"EventId": e} for e in event_ids]}
        self._request("POST", TIMEOUT_S, json.dumps(body).encode())

    def _request(self, method: str, timeout: float, data: bytes | None = None) -> bytes:
        import urllib.error
        import urllib.request

        headers = {"Metadata": "true"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            raise ImdsUnreachable(f"{self.where} answered {method} with HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                raise ImdsUnreachable(f"no answer from {self.where} within {timeout:g} s") from exc
            raise ImdsUnreachable(f"{self.where}: {reason}") from exc

    @property
    def where(self) -> str:
        netloc = urlsplit(self.imds).netloc.rpartition("@")[2]
        return f"Scheduled Events at {netloc or redact(self.imds)}"

    def close(self) -> None:
        self._opener.close()
