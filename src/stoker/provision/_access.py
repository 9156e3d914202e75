"""The way in: how a person reaches the nodes, and how data gets into the Blob account from
outside, when the nodes have no public address and the storage firewall denies by default.

``--access`` (else the spec's ``cluster.access``) picks the first:

- ``bastion`` (the default for a new network): Azure Bastion, Standard SKU, in
  ``AzureBastionSubnet``. Chosen over a login VM because it opens no SSH port to the Internet
  and leaves no VM to patch: sessions go over TLS to Azure's service and are allowed by Azure
  RBAC, and with the Standard SKU's native-client tunnelling (``az network bastion ssh`` /
  ``tunnel``) and IP connect a scale-set instance is reached by its private address, with
  scp/rsync through the tunnel. It costs more per hour than a small VM; ``login-vm`` is there
  for that.
- ``login-vm``: one small Linux VM with a public IP whose NSG admits SSH only from the
  deployer's address (``--deployer-ip``, else a deploy-time parameter).
- ``none``: nothing; the user brings a VPN, ExpressRoute or peering.

``--blob-access`` (else ``cluster.blob_access``) picks the second: ``firewall-ip`` (an IP rule
for the deployer's address on each account), ``private-endpoint`` (a blob private endpoint in
its own subnet, for networks that reach the VNet privately) or ``none``.

Pure: a value that the layout carries and the writers read.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..plan.spec import AccessKind, BlobAccess
from ._network import Subnet

BASTION_SUBNET = "AzureBastionSubnet"  # Azure requires this exact name
BASTION_PREFIX = 26  # Azure Bastion needs /26 or larger
LOGIN_SUBNET = "login"
LOGIN_PREFIX = 28
ENDPOINT_SUBNET = "endpoints"
ENDPOINT_PREFIX = 28
# 2 vCPU, 8 GiB, steady CPU for azcopy; a size in the published Compute schema's enum (newer
# ones such as D2as_v5 are not, and the template keeps literals the schema can check).
LOGIN_VM_SIZE = "Standard_D2s_v3"
# The login VM's image: Ubuntu 22.04 LTS Gen2 from Canonical at its latest version (one VM,
# rebuilt rarely, running no stoker node set-up: the GPU nodes' image is the pinned one).
LOGIN_IMAGE = ("Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2")
# Where the template takes the deployer's address when it was not given to provision.
DEPLOYER_PARAM = "deployerIp"


@dataclass(frozen=True)
class Access:
    kind: AccessKind = "none"
    blob: BlobAccess = "none"
    deployer_ip: str | None = None  # an IPv4 address or CIDR; None: a deploy-time parameter
    subnets: tuple[Subnet, ...] = ()  # the way in's own, as address_plan placed them

    @property
    def needs_deployer_ip(self) -> bool:
        return self.kind == "login-vm" or self.blob == "firewall-ip"

    def subnet(self, name: str) -> Subnet:
        return next(s for s in self.subnets if s.name == name)


def wanted_subnets(kind: AccessKind, blob: BlobAccess) -> tuple[tuple[str, int], ...]:
    """The (name, prefix length) subnets this way in needs, for ``address_plan``."""
    out: list[tuple[str, int]] = []
    if kind == "bastion":
        out.append((BASTION_SUBNET, BASTION_PREFIX))
    elif kind == "login-vm":
        out.append((LOGIN_SUBNET, LOGIN_PREFIX))
    if blob == "private-endpoint":
        out.append((ENDPOINT_SUBNET, ENDPOINT_PREFIX))
    return tuple(out)


def deployer_ip_value(access: Access) -> str:
    """The deployer's address as the template writes it: literal when given, else the
    parameter's expression."""
    return access.deployer_ip or f"[parameters('{DEPLOYER_PARAM}')]"


def check_deployer_ip(value: str) -> str:
    """A public IPv4 address, or a public range of /8 to /30, as the storage firewall takes it
    (it refuses /31 and /32 ranges and private addresses); ``a.b.c.d/32`` becomes the address.
    Raises ValueError (ProvisionOptions names the field)."""
    text = value.strip()
    try:
        net = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise ValueError(f"{text[:60]!r} is not an IPv4 address or range") from exc
    if net.version != 4 or not net.is_global:
        raise ValueError(f"{text}: give your public IPv4 address (curl -fsS https://ifconfig.me)")
    if net.prefixlen == 32:
        return str(net.network_address)
    if net.prefixlen > 30 or net.prefixlen < 8:
        raise ValueError(f"{text}: a range must be /8 to /30 (or give one address)")
    return str(net)
