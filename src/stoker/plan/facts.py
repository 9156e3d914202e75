"""Typed facts the plan reasons with: what limits a tier, how the data is read, which network a
collective level runs on, how a job larger than one InfiniBand fabric can be laid out.

The advice (recommend.py) and the simulation decide on these values, never on the words of the
display strings beside them. They are ``str`` enums, so the JSON holds their plain values.
"""

from __future__ import annotations

from enum import StrEnum


class Limit(StrEnum):
    """What sets a tier's deliverable rate (``TierChoice.limit``)."""

    EGRESS = "egress"  # Blob account egress (or ingress, for writes)
    REQUESTS = "requests"  # Blob account request rate at this GET size
    IOPS = "iops"  # a file share's IOPS at this IO size
    NIC = "nic"  # the VMs' frontend NICs
    PROVISIONED = "provisioned"  # the size provisioned x its rate (Lustre, NetApp, Files)
    PER_FILE = "per_file"  # one file's rate x the readers
    MEDIA = "media"  # the VMs' own NVMe
    STREAMS = "streams"  # writer processes x one stream's rate
    UNKNOWN = "unknown"  # no published figure: measure it

    @property
    def request_bound(self) -> bool:
        """Capped by how many reads, not how many bytes: larger reads help."""
        return self in (Limit.REQUESTS, Limit.IOPS)


class ReadPattern(StrEnum):
    """How the loader reads the dataset (``DataPlan.read_pattern``)."""

    PACKED = "packed"  # samples packed in shards, read in ranges
    PER_SAMPLE = "per_sample"  # one object or file per sample


class Network(StrEnum):
    """What a collective level runs over (``levels[].network``)."""

    SCALEUP = "scaleup"  # NVLink / NVSwitch / Infinity Fabric / PCIe inside the domain
    INFINIBAND = "infiniband"
    ETHERNET = "ethernet"  # the frontend NIC


class FabricLayout(StrEnum):
    """How a job is laid out over InfiniBand fabrics (``FabricOption.layout``)."""

    ONE_FABRIC = "one_fabric"  # every VM in one InfiniBand fabric (one scale set)
    APPROVED_LIMIT = "approved_limit"  # one scale set past 100 VMs: a support request's limit
    INDEPENDENT_JOBS = "independent_jobs"  # one job per scale set, each of the spec's batch
    INDEPENDENT_REPLICAS = "independent_replicas"  # replicas that never talk across scale sets
    FLAT_ETHERNET = "flat_ethernet"  # one job with InfiniBand off: all of it at Ethernet pace
    MICROSOFT_ARRANGED = "microsoft_arranged"  # one fabric past the limit, arranged with Azure


# How to measure a figure no source publishes: the VMs' own NVMe feeds `--measured`; a shared
# tier's figure goes into a catalog override file.
MEASURE_STORAGE = "`stoker bench storage --json` on the VMs, then `stoker plan --measured FILE`"
MEASURE_SHARED = (
    "a read or write from the VMs (`stoker bench storage` on the mount, `stoker stage --json` "
    "for Blob), set in a catalog override file (`stoker plan --catalog mine.toml`)"
)
