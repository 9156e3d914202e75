"""Azure's errors in stoker's words: a client error becomes a redacted StoreError, refused or
missing credentials an AccessDeniedError that says what stoker accepts, a missing container a
NoContainerError; azure-identity's own chain logs stay quiet."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ..errors import AccessDeniedError, NoContainerError, StoreError

NO_CREDENTIALS = (
    "found no credentials: no connection string, key or SAS for this account, and no Azure AD "
    "sign-in (managed identity, workload identity, Azure CLI) gave a token. Set "
    "AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or "
    "AZURE_STORAGE_SAS_TOKEN, put a SAS in the URL, or sign in (az login)"
)

DENIED_HINT = (
    "; check the credentials (for Blob: connection string, account key, SAS or Azure AD "
    "sign-in) and that they allow this operation"
)


def translate(exc: Exception, what: str) -> StoreError:
    """A StoreError with obstore's or the SDK's first line, secrets removed; an
    AccessDeniedError when the service refused the credentials."""
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "ContainerNotFound" in str(exc):
        return NoContainerError(
            f"{what}: the container does not exist (stage and shards write create a missing "
            "one when their credentials may; a container SAS may not): create it (az storage "
            "container create), or use credentials that may"
        )
    if "ClientAuthenticationError" in {t.__name__ for t in type(exc).__mro__} or (
        "credential provider: ClientAuthenticationError" in str(exc)  # obstore's wrapping
    ):
        return AccessDeniedError(f"{what}: {NO_CREDENTIALS}")
    if isinstance(exc, PermissionDeniedError | UnauthenticatedError) or getattr(
        exc, "status_code", None
    ) in (401, 403):
        return AccessDeniedError(f"{what}: {first}{DENIED_HINT}")
    return StoreError(f"{what}: {first}")


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """A client error inside becomes a redacted StoreError; stoker's own errors pass through."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        raise translate(exc, what) from exc


def quiet_identity_logs() -> None:
    """azure-identity logs its whole credential chain at WARNING on every failed attempt; the
    failure reaches the user once, as stoker's error. A level the user set is kept."""
    import logging

    logger = logging.getLogger("azure.identity")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)
