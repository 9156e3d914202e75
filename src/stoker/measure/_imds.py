"""Ask the Azure Instance Metadata Service (IMDS) which VM this is.

IMDS answers only from inside an Azure VM, at a link-local address that never leaves the host.
Elsewhere the request is refused, times out, or meets a proxy's error page: each of those means
"not on Azure", which the doctor reports as a skip, never as a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._redact import redact
from ..errors import StokerError

IMDS_URL = "http://169.254.169.254/metadata/instance?api-version=2021-02-01"
# IMDS answers in milliseconds on a VM; off Azure the address may swallow packets, so wait
# briefly rather than hang the doctor.
TIMEOUT_S = 2.0


# IMDS field (under "compute") -> Instance attribute
_FIELDS = {
    "vmSize": "vm_size",
    "location": "location",
    "zone": "zone",
    "name": "name",
    "vmId": "vm_id",
    "vmScaleSetName": "scale_set",
    "placementGroupId": "placement_group",
    "priority": "priority",
}


@dataclass(frozen=True)
class Instance:
    """The ``compute`` fields the doctor uses; ``""`` where IMDS leaves one empty."""

    vm_size: str
    location: str = ""
    zone: str = ""
    name: str = ""
    vm_id: str = ""
    scale_set: str = ""
    placement_group: str = ""
    priority: str = ""

    def to_dict(self) -> dict[str, str]:
        """Keyed by the IMDS names (``compute.vmSize``...), so JSON readers know them."""
        return {imds: getattr(self, attr) for imds, attr in _FIELDS.items()}


class ImdsUnreachable(Exception):
    """No usable answer from IMDS; the message says what happened."""


def fetch_instance(url: str = IMDS_URL, timeout_s: float = TIMEOUT_S) -> Instance:
    """GET the instance metadata; raise ``ImdsUnreachable`` with a plain reason otherwise."""
    import httpx

    try:
        # trust_env=False: IMDS must be reached directly; an HTTP proxy would answer for it.
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            response = client.get(url, headers={"Metadata": "true"})
    except httpx.TimeoutException as exc:
        raise ImdsUnreachable(f"no answer from {_host(url)} within {timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise ImdsUnreachable(f"{_host(url)}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise ImdsUnreachable(f"{_host(url)} answered HTTP {response.status_code}")
    return parse_instance(_json(response, url))


def parse_instance(doc: Any) -> Instance:
    """The ``compute`` fields of an IMDS ``/metadata/instance`` document."""
    compute = doc.get("compute") if isinstance(doc, dict) else None
    if not isinstance(compute, dict) or not compute.get("vmSize"):
        raise ImdsUnreachable("the answer has no compute.vmSize: not an IMDS instance document")
    return Instance(**{attr: str(compute.get(imds) or "") for imds, attr in _FIELDS.items()})


def _json(response: Any, url: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise ImdsUnreachable(f"{_host(url)} answered, but not with JSON") from exc


def check_url(url: str) -> None:
    """Refuse a --imds-url that is not an http(s) URL with a host, before anything is asked."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise StokerError(f"--imds-url {url}: not a URL ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise StokerError(f"--imds-url {url}: give an http:// URL with a host, like {IMDS_URL}")


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    return f"IMDS at {urlsplit(url).netloc.rpartition('@')[2] or redact(url)}"
