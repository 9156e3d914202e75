"""``README.md`` for ``--target aks``: what is created and what it costs, the commands in the
order they run (az deployment, az aks get-credentials, the operators, kubectl apply -k), the
model cache's plan for inference, and what is not covered. Every word a user gave is one
quoted shell word (``sh``) in a command and one code span (``_code``) in prose."""

from __future__ import annotations

from ...catalog import Provisioning
from ...plan.inference import CachePlan
from ...units import format_bytes, format_duration
from .._cost import Bill, idle_lines
from .._layout import Layout
from .._readme import _code, amlfs_principal, cost_table, group_create, money
from .._text import sh
from ._manifests import TRAIN_SCRIPT, Trainer, mgs_placeholder, namespace_name
from ._pools import Cluster

# Versions ai-infrastructure-on-azure's AKS reference deploys (scripts/deploy-aks.sh).
GPU_OPERATOR = "v25.3.4"
NETWORK_OPERATOR = "v25.7.0"
TRAINING_OPERATOR = "v1.9.0"  # the PyTorchJob CRD validated against (schemas/)
AI_INFRA = (
    "https://github.com/Azure/ai-infrastructure-on-azure/tree/main/infrastructure_references/aks"
)


def _rate(bytes_per_s: float | None) -> str:
    return "unknown" if bytes_per_s is None else f"{bytes_per_s / 1e9:,.2f} GB/s"


def apply_command(lay: Layout) -> str:
    """``kubectl apply -k .``; with Lustre, each MGS address put in from the ARM outputs."""
    if not lay.lustres:
        return "kubectl apply -k ."
    rg = sh(lay.resource_group)
    subs = " ".join(
        f'-e "s/{mgs_placeholder(lu)}/$(az deployment group show -g {rg} -n stoker --query '
        f'properties.outputs.lustreMgsAddress_{lu.role}.value -o tsv)/"'
        for lu in lay.lustres
    )
    return f"kubectl kustomize . | sed {subs} | kubectl apply -f -"


def commands(lay: Layout, c: Cluster, facts: Provisioning, trainer: Trainer) -> list[str]:
    """Every command line, in order (tests run each through bash -n)."""
    rg, ns = sh(lay.resource_group), sh(namespace_name(lay))
    extra = amlfs_principal(lay, facts)
    out = []
    if any(p.infiniband for p in c.pools):
        out.append(
            "az feature register --namespace Microsoft.ContainerService --name AKSInfinibandSupport"
        )
    out += [
        group_create(lay),
        f"az deployment group create --resource-group {rg} --name stoker "
        f"--template-file main.json --parameters @main.parameters.json{extra}",
        f"az aks get-credentials --resource-group {rg} --name {sh(c.name)}",
        "helm repo add nvidia https://helm.ngc.nvidia.com/nvidia && helm repo update",
        f"helm upgrade -i gpu-operator nvidia/gpu-operator -n gpu-operator --create-namespace "
        f"--version {GPU_OPERATOR} --wait",
    ]
    if any(p.infiniband for p in c.pools):
        out.append(
            "helm upgrade -i network-operator nvidia/network-operator -n network-operator "
            f"--create-namespace --version {NETWORK_OPERATOR} --wait"
        )
    if lay.lustres:
        out.append(
            "curl -fsSL https://raw.githubusercontent.com/kubernetes-sigs/azurelustre-csi-driver/"
            "main/deploy/install-driver.sh | bash"
        )
    if c.training and trainer == "pytorchjob":
        out.append(
            "kubectl apply --server-side -k 'github.com/kubeflow/training-operator.git/"
            f"manifests/overlays/standalone?ref={TRAINING_OPERATOR}'"
        )
    out += [
        f"kubectl create namespace {ns} --dry-run=client -o yaml | kubectl apply -f -",
        f"kubectl create secret generic stoker-blob -n {ns} "
        '--from-literal=AZURE_STORAGE_CONNECTION_STRING="$AZURE_STORAGE_CONNECTION_STRING"',
        apply_command(lay),
    ]
    if not c.training:
        out.append(
            f"kubectl wait -n {ns} --for=condition=complete job/model-cache-warmup --timeout=6h"
        )
    return out


def _cache_section(cp: CachePlan) -> list[str]:
    share = "covers" if cp.share_covers_demand else "is below"
    return [
        "## The model cache (inference)",
        "",
        f"{cp.replicas} replicas ({cp.replicas_per_vm} per VM) of a "
        f"{format_bytes(cp.model_bytes, binary=False)} model, all starting at once:",
        "",
        "| | without the shared cache | with it |",
        "|---|---|---|",
        f"| model downloads from Blob | {cp.blob_downloads_without} | {cp.blob_downloads_with} |",
        f"| cold start of every replica | {format_duration(cp.cold_start_without_s)} | "
        f"{format_duration(cp.cold_start_with_s)} (cache warm) |",
        f"| first start | {format_duration(cp.cold_start_without_s)} | "
        f"{format_duration(cp.first_start_with_s)} (warm-up "
        f"{format_duration(cp.warmup_s)}, then the replicas) |",
        "",
        f"The share ({format_bytes(cp.share_bytes)} premium NFS) gives {_rate(cp.share_rate)} "
        f"(one share gives at most {_rate(cp.share_max_rate)}); the replicas can take in "
        f"{_rate(cp.demand_rate)} at once, so the share {share} their demand. Blob egress "
        f"{_rate(cp.blob_rate)}, one VM's frontend NIC {_rate(cp.nic_rate)}. The share costs "
        f"{money(cp.share_usd_per_hour)} per hour.",
        "",
        "Figures from the catalog:",
        "",
        *(f"- {s}" for s in cp.sources),
        "",
        "Serving pods mount the claim `model-cache` at `/models` (read-only is enough) and "
        "start after the warm-up Job completes; a pod that runs `stoker cache pull` itself "
        "(an init container) waits for the one download in flight instead of starting another.",
        "",
    ]


def render(
    lay: Layout,
    c: Cluster,
    facts: Provisioning,
    bill: Bill,
    trainer: Trainer,
    cache: CachePlan | None,
    files: list[str],
) -> str:
    out = [
        f"# AKS deployment for plan {_code(lay.plan_name)}",
        "",
        f"Written by `stoker provision --target aks` from the same plan as `stoker plan` "
        f"(region `{lay.region}`, resource group {_code(lay.resource_group)}, Kubernetes "
        f"{c.kubernetes_version}). Tagged `teardown-after` {lay.teardown_after:%Y-%m-%d %H:%M} "
        "UTC.",
        "",
    ]
    out += cost_table(bill)
    out += [
        "",
        f"**Per idle day, everything left up: {money(bill.per_hour_usd * 24)}**",
        "",
        *idle_lines(bill, stopped="GPU pools scaled to 0", teardown=False),
        "",
        f"GPU node pools hold at most {c.fabric_vms} VMs each: an AKS pool is one scale set, "
        "and InfiniBand connects VMs of one placement group only"
        + (
            ", so the training job runs on one pool (its `nodeSelector`) and its collectives "
            "never leave the fabric."
            if c.training
            else "; replicas need no collectives across pools."
        ),
        "",
        "## Deploy, in this order",
        "",
        "```sh",
        *commands(lay, c, facts, trainer),
        "```",
        "",
        f"Manifests (`kubectl apply -k .` applies them, via `kustomization.yaml`): "
        f"{', '.join(_code(f) for f in files)}.",
        "",
    ]
    if cache is not None:
        out += _cache_section(cache)
    if c.training:
        out += [
            "## Training",
            "",
            f"Each GPU pod runs `torchrun` on its VM's {c.gpus_per_vm} GPUs, rank from its index, "
            f"and the script {_code(TRAIN_SCRIPT)}: build it into the image or mount it. It "
            "reads `STOKER_DATA` with `stoker.stream`, saves with `stoker.checkpoint` to "
            "`STOKER_CKPT_FAST` (the node's NVMe) and `STOKER_CKPT_DURABLE` (the plan's tier), "
            "as on the Slurm path.",
            "",
        ]
    out += [
        "## Not covered",
        "",
        "- The NVMe RAID at `/mnt/nvme` on the GPU nodes (ai-infrastructure-on-azure's node "
        f"set-up does it: {AI_INFRA}); the Network Operator's NicClusterPolicy values from the "
        "same place.",
        "- Workload identity for pods: Blob credentials come from the `stoker-blob` Secret.",
        "- Azure NetApp Files volumes as PersistentVolumes; the serving Deployment itself.",
        "- `stoker teardown` knows scale sets and Lustre, not AKS: delete the cluster with "
        f"{_code('az aks delete -g ' + sh(lay.resource_group) + ' -n ' + sh(c.name))} after "
        "archiving Lustre.",
        "",
    ]
    if lay.notes:
        out += ["## Notes", "", *(f"- {note}" for note in lay.notes), ""]
    return "\n".join(out)
