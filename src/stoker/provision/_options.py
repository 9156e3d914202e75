"""What ``stoker provision`` takes beside the spec: names, the address space, the SSH key.

Typed at the edge (pydantic); every field a user can get wrong is refused here with its name,
before the plan is made or anything is written.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .. import __version__
from .._redact import printable
from .._user_files import read_user_text
from .._validation import describe
from ..errors import ProvisionError
from ._access import AccessKind, BlobAccess
from ._text import refuse_controls, shown

# URL schemes an --install requirement may fetch from (TLS only).
INSTALL_SCHEMES = ("https", "git+https")

# Linux admin names Azure refuses (osProfile.adminUsername), as the portal lists them.
_RESERVED_USERS = {
    "administrator",
    "admin",
    "user",
    "user1",
    "test",
    "user2",
    "test1",
    "user3",
    "admin1",
    "1",
    "123",
    "a",
    "actuser",
    "adm",
    "admin2",
    "aspnet",
    "backup",
    "console",
    "david",
    "guest",
    "john",
    "owner",
    "root",
    "server",
    "sql",
    "support",
    "support_388945a0",
    "sys",
    "test2",
    "test3",
    "user4",
    "user5",
}


class ProvisionOptions(BaseModel):
    """Inputs of ``provision`` other than the spec; the CLI's options map onto these fields."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(
        default=None, description="stem of every resource name; default from the plan's name"
    )
    resource_group: str | None = Field(default=None, description="default rg-<name>")
    address_space: str = Field(default="10.0.0.0/16", description="the VNet's IPv4 range")
    admin_username: str = "azureuser"
    ssh_public_key: str | None = Field(
        default=None, description="OpenSSH public key text; else passed at deploy time"
    )
    teardown_after: dt.datetime | None = Field(
        default=None, description="UTC time for the teardown-after tag; default end of run"
    )
    placement_group_limit: int | None = Field(
        default=None,
        gt=0,
        le=300,
        description="VMs per scale set an approved support request allows; overrides the spec's",
    )
    install: str = Field(
        default=f"stoker=={__version__}",
        description="pip requirement the nodes install stoker from (==version, a wheel URL)",
    )
    access: AccessKind | None = Field(
        default=None,
        description="the way in: bastion, login-vm or none (_access.py); default the spec's "
        "cluster.access (bastion)",
    )
    blob_access: BlobAccess | None = Field(
        default=None,
        description="staging into Blob from outside: firewall-ip, private-endpoint or none; "
        "default the spec's cluster.blob_access (firewall-ip)",
    )
    deployer_ip: str | None = Field(
        default=None,
        description="public IPv4 address (or CIDR) let through the storage firewall and to "
        "the login VM; else a deploy-time parameter",
    )

    @field_validator("deployer_ip")
    @classmethod
    def _deployer_ip(cls, v: str | None) -> str | None:
        from ._access import check_deployer_ip

        return None if v is None else check_deployer_ip(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z][a-z0-9-]{0,18}[a-z0-9]", v):
            raise ValueError(
                f"{v!r}: 2-20 lowercase letters, digits or hyphens, starting with a letter "
                "(it becomes part of every resource name, the storage account's included)"
            )
        return v

    @field_validator("resource_group")
    @classmethod
    def _rg(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[-\w.()]{0,89}[-\w()]", v):
            raise ValueError(
                f"{v!r}: 1-90 letters, digits, '-', '_', '.', '(' or ')', not ending in '.'"
            )
        return v

    @field_validator("address_space")
    @classmethod
    def _space(cls, v: str) -> str:
        try:
            net = ipaddress.ip_network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"{v!r} is not an IPv4 CIDR range such as 10.0.0.0/16") from exc
        if net.version != 4 or not net.is_private:
            raise ValueError(f"{v!r}: give a private IPv4 range (10/8, 172.16/12, 192.168/16)")
        return v

    @field_validator("admin_username")
    @classmethod
    def _user(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", v) or v in _RESERVED_USERS:
            raise ValueError(
                f"{v!r}: 1-32 lowercase letters, digits, '_' or '-'; not a name "
                "Azure reserves (root, admin, ...)"
            )
        return v

    @field_validator("ssh_public_key")
    @classmethod
    def _key(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip()
        refuse_controls("ssh_public_key", v)  # its comment reaches the parameters files
        if not re.fullmatch(
            r"(ssh-(rsa|ed25519)|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?", v
        ):
            raise ValueError("not an OpenSSH public key (ssh-rsa, ssh-ed25519 or ecdsa-sha2-...)")
        return v

    @field_validator("install")
    @classmethod
    def _install(cls, v: str) -> str:
        # One pip argument on every node, fetched as root: no option, no control character,
        # and any URL in it over TLS (https:// or git+https://).
        refuse_controls("install", v)
        if not v.strip() or v.lstrip().startswith("-") or len(v) > 2000:
            raise ValueError(
                f"{shown(v)}: give one pip requirement (stoker==X, stoker @ https://.../x.whl), "
                "not an option or an empty text"
            )
        for m in re.finditer(r"([A-Za-z][A-Za-z0-9+.-]*)://", v):
            if m.group(1).lower() not in INSTALL_SCHEMES:
                raise ValueError(
                    f"{shown(v)}: the nodes would fetch {m.group(1)}:// in the clear; "
                    f"give an {' or '.join(s + '://' for s in INSTALL_SCHEMES)} URL"
                )
        return v

    @field_validator("teardown_after")
    @classmethod
    def _utc(cls, v: dt.datetime | None) -> dt.datetime | None:
        if v is not None and v.tzinfo is None:
            return v.replace(tzinfo=dt.UTC)
        return v


def options(**fields: object) -> ProvisionOptions:
    """ProvisionOptions from keyword arguments; a bad one is a ProvisionError naming it."""
    try:
        return ProvisionOptions(**fields)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ProvisionError(describe(exc)) from exc


def read_ssh_key(path: str | Path) -> str:
    """The public key text in ``path`` (``~`` expanded); refuses a private key, and a device,
    FIFO or anything larger than a key (``--ssh-key /dev/zero`` must not hang)."""
    path = Path(path).expanduser()
    name = f"--ssh-key {path}"
    text = read_user_text(path, "SSH public key", ProvisionError, name=name, max_bytes=64 << 10)
    text = text.strip()
    if "PRIVATE KEY" in text:
        raise ProvisionError(f"{printable(name)}: is a private key; give the .pub file")
    return text
