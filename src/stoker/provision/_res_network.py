"""ARM resources for the network: NSG, NAT gateway (outbound only; the GPU VMs get no public
IP), and the VNet with its compute, Lustre, CycleCloud and NetApp subnets and the way in's
(``_access.py``: AzureBastionSubnet, the login VM's, the private endpoints')."""

from __future__ import annotations

from typing import Any

from ._access import BASTION_SUBNET, ENDPOINT_SUBNET, LOGIN_SUBNET, deployer_ip_value
from ._layout import Layout
from ._refs import api, rid, tags


def nsg_name(lay: Layout) -> str:
    return f"nsg-{lay.prefix}"


def nat_name(lay: Layout) -> str:
    return f"ng-{lay.prefix}"


def pip_name(lay: Layout) -> str:
    return f"pip-{lay.prefix}-nat"


def _rule(name: str, priority: int, direction: str, access: str, **kw: Any) -> dict[str, Any]:
    props = {
        "priority": priority,
        "direction": direction,
        "access": access,
        "protocol": kw.pop("protocol", "*"),
        "sourceAddressPrefix": kw.pop("source", "*"),
        "sourcePortRange": "*",
        "destinationAddressPrefix": kw.pop("destination", "*"),
    }
    ports = kw.pop("ports", "*")
    if isinstance(ports, list):
        props["destinationPortRanges"] = ports
    else:
        props["destinationPortRange"] = ports
    return {"name": name, "properties": props}


def nsg(lay: Layout, facts: Any, hourly: dict[str, str]) -> dict[str, Any]:
    space = lay.address_space
    # Inside the VNet everything flows (Lustre 988 and 1019-1023, NCCL bootstrap, SSH from a
    # jump host); nothing comes in from the Internet; out: AMLFS needs AzureCloud.
    rules = [
        _rule("allow-vnet-in", 100, "Inbound", "Allow", source=space, destination=space),
        _rule("deny-internet-in", 4000, "Inbound", "Deny", source="Internet"),
    ]
    if lay.access.kind == "login-vm":
        # The one door from outside: SSH, from the deployer's address, to the login subnet.
        login = lay.access.subnet(LOGIN_SUBNET).cidr
        rules.append(
            _rule(
                "allow-ssh-deployer-to-login",
                200,
                "Inbound",
                "Allow",
                protocol="Tcp",
                source=deployer_ip_value(lay.access),
                destination=login,
                ports="22",
            )
        )
    rules += [
        _rule("allow-azurecloud-out", 100, "Outbound", "Allow", destination="AzureCloud"),
    ]
    return {
        "type": "Microsoft.Network/networkSecurityGroups",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": nsg_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, "0"),
        "properties": {"securityRules": rules},
    }


def public_ip(lay: Layout, facts: Any, hourly: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "Microsoft.Network/publicIPAddresses",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": pip_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, None),
        "sku": {"name": "Standard", "tier": "Regional"},
        "properties": {"publicIPAllocationMethod": "Static", "publicIPAddressVersion": "IPv4"},
    }


def nat_gateway(lay: Layout, facts: Any, hourly: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "Microsoft.Network/natGateways",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": nat_name(lay),
        "location": lay.region,
        "tags": tags(lay, hourly, None),
        "sku": {"name": "Standard"},
        "properties": {
            "idleTimeoutInMinutes": 10,
            "publicIpAddresses": [
                {"id": rid("Microsoft.Network/publicIPAddresses", pip_name(lay))}
            ],
        },
        "dependsOn": [rid("Microsoft.Network/publicIPAddresses", pip_name(lay))],
    }


def _subnet(name: str, cidr: str, lay: Layout, **extra: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "addressPrefix": cidr,
        "networkSecurityGroup": {
            "id": rid("Microsoft.Network/networkSecurityGroups", nsg_name(lay))
        },
        "natGateway": {"id": rid("Microsoft.Network/natGateways", nat_name(lay))},
        "defaultOutboundAccess": False,
        "privateEndpointNetworkPolicies": "Enabled",
    }
    props.update(extra)
    return {"name": name, "properties": props}


def vnet(lay: Layout, facts: Any, hourly: dict[str, str]) -> dict[str, Any]:
    storage = [{"service": "Microsoft.Storage", "locations": [lay.region]}]
    subnets = [
        _subnet("compute", lay.compute_subnet.cidr, lay, serviceEndpoints=storage),
        *(
            _subnet(lu.subnet.name, lu.subnet.cidr, lay, serviceEndpoints=storage)
            for lu in lay.lustres
        ),
        _subnet("cyclecloud", lay.cyclecloud_subnet.cidr, lay),
        _subnet(
            "netapp",
            lay.netapp_subnet.cidr,
            lay,
            delegations=[
                {"name": "netapp", "properties": {"serviceName": "Microsoft.NetApp/volumes"}}
            ],
        ),
    ]
    # A delegated NetApp subnet takes no NAT gateway or NSG in every region; keep it bare.
    subnets[-1]["properties"].pop("natGateway")
    subnets[-1]["properties"].pop("networkSecurityGroup")
    subnets += _access_subnets(lay, storage)
    return {
        "type": "Microsoft.Network/virtualNetworks",
        "apiVersion": api(facts, "Microsoft.Network"),
        "name": lay.vnet,
        "location": lay.region,
        "tags": tags(lay, hourly, "0"),
        "properties": {
            "addressSpace": {"addressPrefixes": [lay.address_space]},
            "subnets": subnets,
        },
        "dependsOn": [
            rid("Microsoft.Network/networkSecurityGroups", nsg_name(lay)),
            rid("Microsoft.Network/natGateways", nat_name(lay)),
        ],
    }


def _access_subnets(lay: Layout, storage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for sub in lay.access.subnets:
        if sub.name == BASTION_SUBNET:
            # Bastion brings its own public IP and needs 443 in from the Internet: no NAT
            # gateway, and no NSG (one there must carry Bastion's own rule set).
            out.append({"name": sub.name, "properties": {"addressPrefix": sub.cidr}})
        elif sub.name == LOGIN_SUBNET:
            out.append(_subnet(sub.name, sub.cidr, lay, serviceEndpoints=storage))
        elif sub.name == ENDPOINT_SUBNET:
            out.append(_subnet(sub.name, sub.cidr, lay))
    return out


def network(lay: Layout, facts: Any, hourly: dict[str, str]) -> list[dict[str, Any]]:
    return [
        nsg(lay, facts, hourly),
        public_ip(lay, facts, hourly),
        nat_gateway(lay, facts, hourly),
        vnet(lay, facts, hourly),
    ]
