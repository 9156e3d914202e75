"""Azure credentials, resolved the way the Azure CLI resolves them, so existing scripts work:

1. ``AZURE_STORAGE_CONNECTION_STRING`` (its ``BlobEndpoint`` is how the emulator is reached),
   when it names the URL's account;
2. a SAS in the URL itself;
3. ``AZURE_STORAGE_ACCOUNT`` with ``AZURE_STORAGE_KEY`` or ``AZURE_STORAGE_SAS_TOKEN``;
4. otherwise Azure AD through ``DefaultAzureCredential`` (managed identity, CLI, workload id).

Plain ``http://`` endpoints are refused unless the host is loopback or the caller allows it.
Every secret found is registered (``stoker._redact``) so no message ever shows it.
"""

from __future__ import annotations

import binascii
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .._redact import remember
from ..errors import StoreError
from ._url import Location, is_loopback

# Azurite's well-known development account (public, documented by Microsoft).
_DEV_ACCOUNT = "devstoreaccount1"
_DEV_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


@dataclass(frozen=True)
class AzureAuth:
    account: str
    endpoint: str  # e.g. https://acct.blob.core.windows.net or http://127.0.0.1:10000/acct
    key: str | None = field(default=None, repr=False)
    sas: str | None = field(default=None, repr=False)

    @property
    def uses_aad(self) -> bool:
        return not self.key and not self.sas


def parse_connection_string(text: str) -> dict[str, str]:
    fields = {}
    for part in text.split(";"):
        if "=" in part:
            name, value = part.split("=", 1)
            fields[name.strip()] = value.strip()
    if fields.get("UseDevelopmentStorage", "").lower() == "true":
        fields.setdefault("AccountName", _DEV_ACCOUNT)
        fields.setdefault("AccountKey", _DEV_KEY)
        fields.setdefault("BlobEndpoint", f"http://127.0.0.1:10000/{_DEV_ACCOUNT}")
    return fields


def azure_auth(loc: Location, allow_http: bool = False) -> AzureAuth:
    env = os.environ
    conn = parse_connection_string(env.get("AZURE_STORAGE_CONNECTION_STRING", ""))
    key = sas = None
    key_from = "AccountKey in AZURE_STORAGE_CONNECTION_STRING"
    endpoint = loc.endpoint
    if conn and conn.get("AccountName", loc.account) == loc.account:
        key, sas = conn.get("AccountKey"), conn.get("SharedAccessSignature")
        endpoint = endpoint or conn.get("BlobEndpoint", "")
        if not endpoint and conn.get("EndpointSuffix"):
            protocol = conn.get("DefaultEndpointsProtocol", "https")
            endpoint = f"{protocol}://{loc.account}.blob.{conn['EndpointSuffix']}"
    if loc.sas:
        key, sas = None, loc.sas
    elif not key and not sas and env.get("AZURE_STORAGE_ACCOUNT", loc.account) == loc.account:
        key, key_from = env.get("AZURE_STORAGE_KEY"), "AZURE_STORAGE_KEY"
        sas = env.get("AZURE_STORAGE_SAS_TOKEN")
    if loc.account == _DEV_ACCOUNT and not key and not sas:
        key = _DEV_KEY
    remember(key, sas, env.get("AZURE_STORAGE_CONNECTION_STRING"))
    if key and not _is_base64(key):  # else every request fails deep in the client, a Rust dump
        raise StoreError(
            f"{key_from} is not an account key (keys are base64, e.g. 88 characters ending in "
            "'=='): copy key1 or key2 from the storage account's Access keys"
        )
    from_conn = bool(endpoint) and not loc.endpoint
    endpoint = (endpoint or f"https://{loc.account}.blob.core.windows.net").rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        where = "BlobEndpoint in AZURE_STORAGE_CONNECTION_STRING" if from_conn else "the URL"
        raise StoreError(
            f"{where} gives the endpoint {endpoint!r}, which is not an http(s) URL with a "
            "host: write it as https://ACCOUNT.blob.core.windows.net (or "
            "http://127.0.0.1:10000/ACCOUNT for the emulator)"
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname or "") and not allow_http:
        raise StoreError(
            f"{endpoint} is plain HTTP on a non-loopback host: secrets and data would cross the "
            "network unencrypted; use https, or pass --allow-http (STOKER_ALLOW_HTTP=1) if you "
            "mean it"
        )
    if parts.scheme == "http" and not key and not sas:
        raise StoreError(
            f"{endpoint} is plain HTTP and no account key or SAS was found for account "
            f"{loc.account!r}: Azure AD sign-in works only over HTTPS. For the emulator, set "
            "AZURE_STORAGE_CONNECTION_STRING (its account name must match the URL's), or add a "
            "SAS to the URL"
        )
    return AzureAuth(loc.account, endpoint, key, (sas or "").lstrip("?") or None)


def _is_base64(text: str) -> bool:
    try:
        binascii.a2b_base64(text.encode(), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True
