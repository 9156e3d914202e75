"""The tags ``stoker provision`` puts on every resource it writes, and ``stoker teardown``,
``stoker teardown --expired`` and ``stoker guard`` read back: the writer owns the format."""

TAG_PLAN = "stoker-plan"  # the plan (job) name
TAG_COST = "stoker-usd-per-hour"  # what the resource costs per hour, as the plan priced it
# What a scale set still costs per hour once deallocated (its VMs' OS disks); "unknown" where
# the catalog has no disk price. Teardown counts it as still billed.
TAG_STOPPED_COST = "stoker-usd-per-hour-stopped"
TAG_AFTER = "teardown-after"  # ISO 8601 time after which the deployment should be gone
# Which `stoker provision` run made the resource: the proof of ownership teardown acts on.
TAG_DEPLOYMENT = "stoker-deployment-id"

__all__ = ["TAG_AFTER", "TAG_COST", "TAG_DEPLOYMENT", "TAG_PLAN", "TAG_STOPPED_COST"]
