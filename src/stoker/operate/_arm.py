"""The Azure Resource Manager clients teardown uses, made in one place: the management SDKs for
Managed Lustre (azure-mgmt-storagecache), scale sets (azure-mgmt-compute) and resource listing
(azure-mgmt-resource), one credential (``DefaultAzureCredential`` unless given), and the
translation of their errors into ``TeardownError`` with the resource named.

Retries are the SDK's: ``RetryPolicy`` retries 408, 429 and 5xx, honouring ``Retry-After``
(ARM's throttling answer is 429 with ``Retry-After`` in seconds), and ``ARMPolling`` waits
``Retry-After`` between the polls of a long-running operation (our ``polling_interval_s`` when
the answer has none).

``base_url`` points the clients at another endpoint (a sovereign cloud, or the tests' loopback
ARM). Bearer tokens are only ever sent over https, except to a loopback host (127.0.0.1,
localhost), for which each request opts out of azure-core's https check with its documented
``enforce_https=False`` option; nothing else can reach plain http.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .._redact import printable
from ..errors import TeardownError
from ._urls import check_url

# Listing resources and tags only reads; azure-mgmt-resource's own default is used there.
RESOURCES_API = "2025-04-01"


def api_version(namespace: str) -> str:
    """The API version stoker pins for a resource provider: the catalog's ``[provision]
    api_versions`` (the versions its templates are written and validated with; sourced there).
    StorageCache 2026-01-01 is also the version whose archive behaviour the facts describe; the
    SDKs' own defaults (2026-08-01, Compute 2026-04-01) are newer than the published schemas."""
    from ..catalog import load_catalog

    return load_catalog().provision.api_versions[namespace]


def _is_loopback(host: str) -> bool:
    from ..store import is_loopback

    return is_loopback(host)


def check_endpoint(url: Any) -> None:
    """Refuse an ARM endpoint that is not a base URL the bearer token may go to (_urls.py)."""
    check_url(url, "--arm-endpoint", TeardownError, sends="the bearer token", base_only=True)


_GUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


@dataclass
class ArmClients:
    """Lazily built SDK clients for one subscription. ``call`` holds the keyword arguments every
    request carries (``enforce_https=False`` on loopback only)."""

    subscription_id: str
    credential: Any = None
    base_url: str | None = None
    polling_interval_s: float = 10.0
    retry_total: int = 8
    call: dict[str, Any] = field(default_factory=dict)
    compute_call: dict[str, Any] = field(default_factory=dict)  # call + Compute's api_version
    _made: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.subscription_id:
            raise TeardownError(
                "no subscription: pass --subscription or set AZURE_SUBSCRIPTION_ID "
                "(`az account show --query id -o tsv` prints yours)"
            )
        if self.base_url:
            check_endpoint(self.base_url)
            if urlsplit(self.base_url).scheme == "http":
                self.call["enforce_https"] = False
        # It goes into every request's path: '/', '..' or '?' there would address another one.
        if not _GUID.fullmatch(self.subscription_id):
            raise TeardownError(
                f"subscription {printable(self.subscription_id)[:80]!r}: not a subscription id "
                "(a GUID: `az account show --query id -o tsv` prints yours)"
            )
        self.compute_call = {**self.call, "api_version": api_version("Microsoft.Compute")}

    def _credential(self) -> Any:
        if self.credential is None:
            from azure.identity import DefaultAzureCredential

            from ..store import quiet_identity_logs

            quiet_identity_logs()  # the chain's failure reaches the user once, as our error
            self.credential = DefaultAzureCredential()
        return self.credential

    def _options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "polling_interval": self.polling_interval_s,
            "retry_total": self.retry_total,
        }
        if self.base_url:
            opts["base_url"] = self.base_url
        return opts

    @property
    def lustre(self) -> Any:
        if "lustre" not in self._made:
            from azure.mgmt.storagecache import StorageCacheManagementClient

            self._made["lustre"] = StorageCacheManagementClient(
                self._credential(),
                self.subscription_id,
                api_version=api_version("Microsoft.StorageCache"),
                **self._options(),
            )
        return self._made["lustre"]

    @property
    def compute(self) -> Any:
        if "compute" not in self._made:
            from azure.mgmt.compute import ComputeManagementClient

            self._made["compute"] = ComputeManagementClient(
                self._credential(), self.subscription_id, **self._options()
            )
        return self._made["compute"]

    @property
    def resources(self) -> Any:
        if "resources" not in self._made:
            from azure.mgmt.resource.resources import ResourceManagementClient

            self._made["resources"] = ResourceManagementClient(
                self._credential(),
                self.subscription_id,
                api_version=RESOURCES_API,
                **self._options(),
            )
        return self._made["resources"]

    def close(self) -> None:
        for client in self._made.values():
            client.close()
        self._made.clear()


def subscription_from_env(given: str | None) -> str:
    return given or os.environ.get("AZURE_SUBSCRIPTION_ID", "")


def not_found(exc: BaseException) -> bool:
    """True for ARM's 404 (the resource, or its group, is gone): a done step for teardown."""
    from azure.core.exceptions import ResourceNotFoundError

    return isinstance(exc, ResourceNotFoundError) or getattr(exc, "status_code", None) == 404


def translate(exc: BaseException, doing: str) -> TeardownError:
    """An SDK or credential error as a TeardownError that says what was being done and what to
    try; the caller raises it ``from exc``."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
    )

    if isinstance(exc, ClientAuthenticationError) or getattr(exc, "status_code", 0) in (401, 403):
        return TeardownError(
            f"{doing}: Azure refused the credentials ({_reason(exc)}); sign in with `az login` "
            "or give the identity Contributor on the resource group"
        )
    if isinstance(exc, HttpResponseError):
        return TeardownError(f"{doing}: ARM answered {exc.status_code}: {_reason(exc)}")
    if isinstance(exc, ServiceRequestError):
        return TeardownError(f"{doing}: cannot reach Azure Resource Manager ({_reason(exc)})")
    name = type(exc).__name__
    if name == "CredentialUnavailableError" or "Credential" in name:
        return TeardownError(
            f"{doing}: no Azure credential found ({_reason(exc)}); run `az login`, or set "
            "AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, or use a managed identity"
        )
    return TeardownError(f"{doing}: {name}: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    error = getattr(exc, "error", None)
    code, message = getattr(error, "code", None), getattr(error, "message", None)
    if code or message:
        return f"{code or 'error'}: {message or ''}".strip()
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
