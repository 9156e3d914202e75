"""Where a Blob URL's storage account comes from when the URL does not name it
(``az://CONTAINER/PATH``): the environment's account variables and connection string, which
must agree (see ``_url``); and the account a Blob host name (``ACCOUNT.blob.SUFFIX``) names."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from ..errors import StoreError

ACCOUNT_VARS = ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT")
CONN_VAR = "AZURE_STORAGE_CONNECTION_STRING"
CONN_ACCOUNT = f"AccountName in {CONN_VAR}"

# Azurite's well-known development account (public, documented by Microsoft).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


# ACCOUNT.blob.SUFFIX, ACCOUNT.dfs.SUFFIX, ACCOUNT.zNN.blob.SUFFIX (Azure DNS-zone endpoints)
ACCOUNT_HOST = re.compile(
    r"([a-z0-9]{3,24})\.((?:z\d\d\.)?)(blob|dfs)\.([a-z0-9-]+(?:\.[a-z0-9-]+)+)"
)


def account_host(host: str) -> tuple[str, str] | None:
    """(account, Blob host) for ``ACCOUNT.blob|dfs.SUFFIX``, else None."""
    m = ACCOUNT_HOST.fullmatch(host)
    if not m:
        return None
    account, zone, _, suffix = m.groups()
    return account, f"{account}.{zone}blob.{suffix}"


def parse_connection_string(text: str) -> dict[str, str]:
    fields = {}
    for part in text.split(";"):
        if "=" in part:
            name, value = part.split("=", 1)
            fields[name.strip()] = value.strip()
    if fields.get("UseDevelopmentStorage", "").lower() == "true":
        fields.setdefault("AccountName", DEV_ACCOUNT)
        fields.setdefault("AccountKey", DEV_KEY)
        fields.setdefault("BlobEndpoint", f"http://127.0.0.1:10000/{DEV_ACCOUNT}")
    return fields


def connection_endpoint(conn: dict[str, str], account: str) -> str:
    """The Blob endpoint a connection string gives ``account`` ("" when it gives none)."""
    if conn.get("BlobEndpoint"):
        return conn["BlobEndpoint"].rstrip("/")
    if conn.get("EndpointSuffix"):
        protocol = conn.get("DefaultEndpointsProtocol", "https")
        return f"{protocol}://{account}.blob.{conn['EndpointSuffix']}"
    return ""


def env_accounts() -> dict[str, str]:
    """The storage account each variable of the environment names: {where: account}."""
    env = os.environ
    named = {var: env[var].strip() for var in ACCOUNT_VARS if env.get(var, "").strip()}
    conn = parse_connection_string(os.environ.get(CONN_VAR, ""))
    if conn_account(conn):
        named[CONN_ACCOUNT] = conn_account(conn)
    return named


def conn_account(conn: dict[str, str]) -> str:
    """A connection string's account: its AccountName, or, in one that holds only a SAS, its
    BlobEndpoint's (ACCOUNT.blob.SUFFIX, or the first part of a path-style endpoint)."""
    if conn.get("AccountName"):
        return conn["AccountName"]
    parts = urlsplit(conn.get("BlobEndpoint", ""))
    found = account_host((parts.hostname or "").lower())
    if found:
        return found[0]
    return parts.path.strip("/").split("/")[0] if parts.hostname else ""


def env_account(shown: str, container: str, path: str) -> tuple[str, str, str]:
    """The account, endpoint and the endpoint's source for ``az://CONTAINER/PATH``."""
    named = env_accounts()
    accounts = sorted(set(named.values()))
    rest = f"/{path}" if path else ""
    if not accounts:
        unread = (
            f" ({CONN_VAR} is set but names none: no AccountName, nor a BlobEndpoint with one)"
            if os.environ.get(CONN_VAR, "").strip()
            else ""
        )
        raise StoreError(
            f"{shown}: az://CONTAINER/PATH takes the storage account from the environment, and "
            f"none is set{unread}: set AZURE_STORAGE_ACCOUNT_NAME (or AZURE_STORAGE_ACCOUNT, or "
            "AZURE_STORAGE_CONNECTION_STRING), or name the account in the URL: "
            f"https://ACCOUNT.blob.core.windows.net/{container}{rest}. (az://ACCOUNT/CONTAINER, "
            f"stoker's earlier form, is now https://ACCOUNT.blob.core.windows.net/CONTAINER.)"
        )
    if len(accounts) > 1:
        which = ", ".join(f"{where}={name}" for where, name in sorted(named.items()))
        raise StoreError(
            f"{shown}: the environment names more than one storage account ({which}), and "
            "az://CONTAINER/PATH does not say which: unset all but one, or name the account in "
            f"the URL: https://ACCOUNT.blob.core.windows.net/{container}{rest}"
        )
    account = accounts[0]
    endpoint, source = f"https://{account}.blob.core.windows.net", ""
    conn = parse_connection_string(os.environ.get(CONN_VAR, ""))
    if conn_account(conn) == account and connection_endpoint(conn, account):
        endpoint = connection_endpoint(conn, account)
        source = f"BlobEndpoint in {CONN_VAR}" if conn.get("BlobEndpoint") else CONN_VAR
    if container == account:  # stoker's earlier az://ACCOUNT/CONTAINER, or a container so named
        where = " and ".join(sorted(w for w, a in named.items() if a == account))
        head, _, tail = path.partition("/")
        instead = (
            f"For container {head!r} of that account write az://{head}{'/' if tail else ''}{tail}; "
            if head
            else "Name a container there, az://CONTAINER/PATH; "
        )
        raise StoreError(
            f"{shown}: ambiguous: {account!r} is the storage account ({where}), and az:// "
            "names the container first (az://CONTAINER/PATH, as obstore, adlfs and fsspec read "
            f"it). {instead}for a container named {account!r}, "
            f"{endpoint}/{account}{rest}"
        )
    return account, endpoint, source
