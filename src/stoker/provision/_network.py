"""The VNet's address plan: a compute subnet for the GPU VMs, one subnet per Managed Lustre
sized as AMLFS requires, a small one for a CycleCloud server, one delegated to NetApp, and the
way in's subnets when there is one (``AzureBastionSubnet``, a login VM's, a private endpoint's).

Pure; refuses (ProvisionError naming ``address_space``) a range that overlaps what the RDMA
network reserves, or that cannot hold the subnets.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

from ..catalog import Provisioning
from ..errors import ProvisionError

AZURE_RESERVED_IPS = 5  # per subnet: network, gateway, two DNS, broadcast
CYCLECLOUD_PREFIX = 28
NETAPP_PREFIX = 26  # a delegated subnet; Microsoft recommends /26 for NetApp


@dataclass(frozen=True)
class Subnet:
    name: str
    cidr: str

    @property
    def usable(self) -> int:
        return ipaddress.ip_network(self.cidr).num_addresses - AZURE_RESERVED_IPS


@dataclass(frozen=True)
class AddressPlan:
    compute: Subnet
    lustre: tuple[Subnet, ...]
    cyclecloud: Subnet
    netapp: Subnet
    notes: list[str] = field(default_factory=list)
    access: tuple[Subnet, ...] = ()  # what ``extra`` asked for, in its order


def compute_prefix(vms: int) -> int:
    """The longest prefix whose subnet holds ``vms`` NICs besides Azure's 5 reserved addresses
    (with room for a replacement VM per hundred while a bad node is swapped)."""
    need = vms + math.ceil(vms / 100) + AZURE_RESERVED_IPS
    return min(29, 32 - math.ceil(math.log2(need)))


def lustre_prefix(capacity_tib: int, facts: Provisioning) -> tuple[int, str | None]:
    """The subnet prefix AMLFS asks for at this capacity, and a note when extrapolated."""
    for up_to, prefix in facts.amlfs_subnet_prefixes:
        if capacity_tib <= up_to:
            return prefix, None
    top, prefix = facts.amlfs_subnet_prefixes[-1]
    extra = math.ceil(math.log2(capacity_tib / top))
    return prefix - extra, (
        f"AMLFS of {capacity_tib} TiB: Microsoft's subnet table stops at {top} TiB; /"
        f"{prefix - extra} is extrapolated (one bit per doubling). Check it before deploying: "
        "az rest --method post --url 'https://management.azure.com/subscriptions/<sub>/providers/"
        "Microsoft.StorageCache/getRequiredAmlFSSubnetsSize?api-version=2026-01-01'"
    )


def address_plan(
    space: str,
    vms: int,
    lustre_tib: list[int],
    facts: Provisioning,
    extra: tuple[tuple[str, int], ...] = (),
) -> AddressPlan:
    """``extra``: further (name, prefix length) subnets, e.g. the way in's (``_access.py``)."""
    net = ipaddress.ip_network(space)
    reserved = ipaddress.ip_network(facts.rdma_reserved_range)
    if net.overlaps(reserved):
        raise ProvisionError(
            f"address_space: {space} overlaps {reserved}, which the InfiniBand (RDMA) network "
            "reserves on every ND VM; pick a range outside it, e.g. 10.0.0.0/16"
        )
    notes: list[str] = []
    wanted = [("compute", compute_prefix(vms))]
    for i, tib in enumerate(lustre_tib):
        prefix, note = lustre_prefix(tib, facts)
        wanted.append((f"lustre-{i}", prefix))
        if note:
            notes.append(note)
    wanted += [("cyclecloud", CYCLECLOUD_PREFIX), ("netapp", NETAPP_PREFIX), *extra]
    # Largest first keeps every block aligned with no gaps.
    order = sorted(range(len(wanted)), key=lambda i: wanted[i][1])
    cursor = int(net.network_address)
    end = int(net.broadcast_address) + 1
    placed: dict[int, Subnet] = {}
    for i in order:
        name, prefix = wanted[i]
        size = 2 ** (32 - prefix)
        if prefix < net.prefixlen or cursor + size > end:
            total = sum(2 ** (32 - p) for _, p in wanted)
            raise ProvisionError(
                f"address_space: {space} is too small for the subnets this deployment needs "
                f"({', '.join(f'{n} /{p}' for n, p in wanted)}: {total:,} addresses); "
                f"give a larger range, at least /{32 - math.ceil(math.log2(total))}"
            )
        placed[i] = Subnet(name, f"{ipaddress.ip_address(cursor)}/{prefix}")
        cursor += size
    subnets = [placed[i] for i in range(len(wanted))]
    base, more = subnets[: len(subnets) - len(extra)], tuple(subnets[len(subnets) - len(extra) :])
    return AddressPlan(base[0], tuple(base[1:-2]), base[-2], base[-1], notes, more)
