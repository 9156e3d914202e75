"""Azure credentials, resolved the way the Azure CLI resolves them, so existing scripts work:

1. ``AZURE_STORAGE_CONNECTION_STRING`` (its ``BlobEndpoint`` is how the emulator is reached),
   when it names the URL's account;
2. a SAS in the URL itself;
3. ``AZURE_STORAGE_ACCOUNT`` (or ``AZURE_STORAGE_ACCOUNT_NAME``, as obstore and adlfs read it)
   with ``AZURE_STORAGE_KEY`` (or ``AZURE_STORAGE_ACCOUNT_KEY``) or ``AZURE_STORAGE_SAS_TOKEN``,
   when the account variables name the URL's account (or none is set);
4. otherwise Azure AD through ``DefaultAzureCredential`` (managed identity, CLI, workload id).

The endpoint is the Location's (``parse_url`` resolves it, from the URL or the environment).
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
from ._env_account import (
    ACCOUNT_VARS,
    CONN_VAR,
    DEV_ACCOUNT,
    DEV_KEY,
    conn_account,
    connection_endpoint,
    parse_connection_string,
)
from ._url import Location, is_loopback

KEY_VARS = ("AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY")


@dataclass(frozen=True)
class AzureAuth:
    account: str
    endpoint: str  # e.g. https://acct.blob.core.windows.net or http://127.0.0.1:10000/acct
    key: str | None = field(default=None, repr=False)
    sas: str | None = field(default=None, repr=False)

    @property
    def uses_aad(self) -> bool:
        return not self.key and not self.sas


def azure_auth(loc: Location, allow_http: bool = False) -> AzureAuth:
    env = os.environ
    conn = parse_connection_string(env.get(CONN_VAR, ""))
    key = sas = None
    key_from = f"AccountKey in {CONN_VAR}"
    endpoint = loc.endpoint
    if conn and (conn_account(conn) or loc.account) == loc.account:
        key, sas = conn.get("AccountKey"), conn.get("SharedAccessSignature")
        endpoint = endpoint or connection_endpoint(conn, loc.account)
    named = {env[var].strip() for var in ACCOUNT_VARS if env.get(var, "").strip()}
    if loc.sas:
        key, sas = None, loc.sas
    elif not key and not sas and named <= {loc.account}:
        keys = {var: env[var] for var in KEY_VARS if env.get(var)}
        if len(set(keys.values())) > 1:
            remember(*keys.values())
            raise StoreError(
                f"{' and '.join(keys)} hold different keys for account {loc.account!r}: unset one"
            )
        key_from, key = next(iter(keys.items()), (KEY_VARS[0], None))
        sas = env.get("AZURE_STORAGE_SAS_TOKEN")
    if loc.account == DEV_ACCOUNT and not key and not sas:
        key = DEV_KEY
    remember(key, sas, env.get(CONN_VAR))
    if key and not _is_base64(key):  # else every request fails deep in the client, a Rust dump
        raise StoreError(
            f"{key_from} is not an account key (keys are base64, e.g. 88 characters ending in "
            "'=='): copy key1 or key2 from the storage account's Access keys"
        )
    from_env = loc.endpoint_from or (bool(endpoint) and not loc.endpoint)
    endpoint = (endpoint or f"https://{loc.account}.blob.core.windows.net").rstrip("/")
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        where = f"BlobEndpoint in {CONN_VAR}" if from_env else "the URL"
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
            f"{CONN_VAR} (its account name must match the URL's), or add a SAS to the URL"
        )
    return AzureAuth(loc.account, endpoint, key, (sas or "").lstrip("?") or None)


def _is_base64(text: str) -> bool:
    try:
        binascii.a2b_base64(text.encode(), strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return True
