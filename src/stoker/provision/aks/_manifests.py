"""The Kubernetes side of ``--target aks``: one kustomization of plain manifests, written by
PyYAML (never by formatting text), every user-given word a value, never a piece of syntax.

- ``namespace.yaml``: the namespace, with the deployment's ownership record as annotations.
- ``storage.yaml``: an Azure Files (premium, NFS) StorageClass and ReadWriteMany claims sized
  from the plan (the model cache; data or checkpoints the plan put on Files), and each Managed
  Lustre file system of the ARM template as a PersistentVolume of the Azure Lustre CSI driver.
- ``cache-warmup.yaml`` (inference): one Job running ``stoker cache pull`` into the shared
  claim once; serving pods then find the model there (cache_pull's lock holds across pods).
- ``training.yaml`` (training): torchrun on one GPU pool as an Indexed Job with a headless
  Service, or a Kubeflow PyTorchJob; stoker's stream reads the data tier, the checkpointer's
  fast tier is the node's NVMe, its durable tier the plan's.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import yaml

from ...errors import ProvisionError
from ...plan import JobSpec
from .._layout import Layout, Lustre
from .._refs import account_name
from .._text import refuse_controls, sh, shown
from .._volume_plan import Volume
from ..tags import TAG_AFTER, TAG_DEPLOYMENT, TAG_PLAN
from ._arm import GPU_TAINT, POOL_LABEL
from ._pools import Cluster

Trainer = Literal["job", "pytorchjob"]
# Images the pods start from; stoker is pip-installed at start (the deployment's --install).
TRAIN_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
CACHE_IMAGE = "python:3.12-slim"
# The script each training pod runs; the README says how to put the user's own there.
TRAIN_SCRIPT = "/workspace/train.py"
NVME = "/mnt/nvme"  # the GPU nodes' NVMe RAID (the azhpc images' and ai-infra's mount point)
MODELS = "/models"
RDZV_PORT = 29500
# NFS mount options AKS documents for Azure Files NFS shares (nconnect for throughput).
FILES_MOUNT_OPTIONS = ["nconnect=4", "noresvport", "actimeo=30"]
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MANAGED_BY = {"app.kubernetes.io/managed-by": "stoker"}


def namespace_name(lay: Layout) -> str:
    name = lay.prefix
    if not _DNS_LABEL.fullmatch(name):
        raise ProvisionError(
            f"name: {shown(name)} is no Kubernetes namespace name (lowercase letters, digits "
            "and '-', starting and ending with a letter or digit); pass --name"
        )
    return name


def dump(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True, width=100)


def _meta(name: str, ns: str | None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if ns is not None:
        meta["namespace"] = ns
    meta["labels"] = {**MANAGED_BY, **labels}
    return meta


def namespace(lay: Layout, ns: str) -> dict[str, Any]:
    meta = _meta(ns, None)
    meta["annotations"] = {
        f"stoker.io/{TAG_DEPLOYMENT}": lay.deployment_id,
        f"stoker.io/{TAG_PLAN}": lay.plan_name,  # user text: a YAML string, quoted as needed
        f"stoker.io/{TAG_AFTER}": lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def files_class(lay: Layout, ns: str) -> dict[str, Any]:
    # The CSI driver's tags parameter is "k=v,k=v": only values stoker made (no , or =), in
    # the format stoker teardown --expired reads.
    after = lay.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    tags = f"{TAG_DEPLOYMENT}={lay.deployment_id},{TAG_AFTER}={after}"
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": _meta(f"{ns}-files-nfs", None),
        "provisioner": "file.csi.azure.com",
        "parameters": {"skuName": "Premium_LRS", "protocol": "nfs", "tags": tags},
        "mountOptions": list(FILES_MOUNT_OPTIONS),
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def files_claim(v: Volume, ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(name, ns),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": f"{ns}-files-nfs",
            "resources": {"requests": {"storage": f"{v.size_gib}Gi"}},
        },
    }


def mgs_placeholder(lu: Lustre) -> str:
    """Replaced at apply time by the file system's MGS address (the README's command)."""
    return f"__LUSTRE_MGS_{lu.role.upper()}__"


def lustre_volume(lu: Lustre, ns: str) -> list[dict[str, Any]]:
    name = f"{ns}-lustre-{lu.role}"
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": _meta(name, None),
        "spec": {
            "capacity": {"storage": f"{lu.capacity_tib}Ti"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["noatime", "flock"],
            "csi": {
                "driver": "azurelustre.csi.azure.com",
                "volumeHandle": name,
                "volumeAttributes": {"mgs-ip-address": mgs_placeholder(lu), "fs-name": "lustrefs"},
            },
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(f"lustre-{lu.role}", ns),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": name,
            "resources": {"requests": {"storage": f"{lu.capacity_tib}Ti"}},
        },
    }
    return [pv, pvc]


def claims(lay: Layout, c: Cluster) -> dict[str, str]:
    """Mount path -> claim name of every shared volume the pods mount."""
    out = {lu.mount_path: f"lustre-{lu.role}" for lu in lay.lustres}
    out |= {v.mount_path: f"files-{v.role}" for v in lay.volumes if v.kind == "files"}
    if c.model_cache is not None:
        out[MODELS] = "model-cache"
    return out


def storage(lay: Layout, c: Cluster, ns: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    shares = [v for v in lay.volumes if v.kind == "files" and v.role != "models"]
    if shares or c.model_cache is not None:
        docs.append(files_class(lay, ns))
    docs += [files_claim(v, ns, f"files-{v.role}") for v in shares]
    if c.model_cache is not None:
        docs.append(files_claim(c.model_cache, ns, "model-cache"))
    for lu in lay.lustres:
        docs += lustre_volume(lu, ns)
    return docs


def _mounts(lay: Layout, c: Cluster) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes, mounts = [], []
    for i, (path, claim) in enumerate(sorted(claims(lay, c).items())):
        volumes.append({"name": f"shared{i}", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": f"shared{i}", "mountPath": path})
    return volumes, mounts


def _blob_env() -> dict[str, Any]:
    # Blob credentials as the Azure CLI names them, from a Secret the user makes (README).
    return {"secretRef": {"name": "stoker-blob", "optional": True}}


def cache_name(source: str) -> str:
    """The model's folder in the cache: the source's last path segment, never its query."""
    path = source.split("?", 1)[0].rstrip("/")
    name = path.rsplit("/", 1)[-1]
    if name in ("", ".", "..") or "\\" in name:
        raise ProvisionError(f"data.source: {shown(source)} names no model folder to cache")
    return name


def warmup(lay: Layout, spec: JobSpec, ns: str) -> dict[str, Any]:
    source = spec.data.source
    if not source:
        raise ProvisionError(
            "data.source: an inference deployment on AKS needs the model's URL "
            "(e.g. az://models/llama-70b) for the cache warm-up"
        )
    refuse_controls("data.source", source)
    venv = "/tmp/stoker"
    script = (
        f"python -m venv {venv} && {venv}/bin/pip install --quiet {sh(lay.install)} && "
        f"exec {venv}/bin/stoker cache pull {sh(source)} {MODELS} --name {sh(cache_name(source))}"
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta("model-cache-warmup", ns),
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 4,
            "template": {
                "metadata": {"labels": dict(MANAGED_BY)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "nodeSelector": {POOL_LABEL: "system"},
                    "containers": [
                        {
                            "name": "pull",
                            "image": CACHE_IMAGE,
                            "command": ["/bin/sh", "-c", script],
                            "envFrom": [_blob_env()],
                            "volumeMounts": [{"name": "cache", "mountPath": MODELS}],
                        }
                    ],
                    "volumes": [
                        {"name": "cache", "persistentVolumeClaim": {"claimName": "model-cache"}}
                    ],
                },
            },
        },
    }


def _train_env(lay: Layout, spec: JobSpec, c: Cluster) -> list[dict[str, str]]:
    paths = claims(lay, c)
    data = next((p for p in paths if p.endswith("/data")), None) or spec.data.source or ""
    durable = next((p for p in paths if p.endswith("/checkpoints")), None)
    # Else the checkpoints container of the deployment's own account (named in full: the
    # stoker-blob Secret's credentials may be for another account too).
    blob = f"https://{account_name(lay, 'main')}.blob.core.windows.net/checkpoints"
    env = {
        "STOKER_DATA": data,
        "STOKER_CKPT_FAST": f"{NVME}/checkpoints",
        "STOKER_CKPT_DURABLE": durable or blob,
        "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    }
    return [{"name": k, "value": v} for k, v in env.items()]


def _pod(lay: Layout, spec: JobSpec, c: Cluster, command: str, name: str) -> dict[str, Any]:
    pool = c.pools[0]
    volumes, mounts = _mounts(lay, c)
    volumes += [
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        {"name": "nvme", "hostPath": {"path": NVME, "type": "DirectoryOrCreate"}},
    ]
    mounts += [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "nvme", "mountPath": NVME}]
    limits: dict[str, Any] = {"nvidia.com/gpu": c.gpus_per_vm}
    if pool.infiniband:
        limits["rdma/ib"] = c.hcas_per_vm
    return {
        "metadata": {"labels": dict(MANAGED_BY)},
        "spec": {
            "nodeSelector": {POOL_LABEL: pool.name},  # one pool: one InfiniBand fabric
            "tolerations": [
                {"key": GPU_TAINT.split("=")[0], "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": name,
                    "image": TRAIN_IMAGE,
                    "command": ["/bin/bash", "-c", command],
                    "env": _train_env(lay, spec, c),
                    "envFrom": [_blob_env()],
                    "resources": {"limits": limits, "requests": dict(limits)},
                    "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
        },
    }


def _torchrun(lay: Layout, c: Cluster, rank: str, master: str, port: str) -> str:
    nodes = c.pools[0].nodes
    return (
        f"pip install --quiet {sh(lay.install)} && exec torchrun --nnodes {nodes} "
        f"--nproc-per-node {c.gpus_per_vm} --node-rank {rank} --master-addr {master} "
        f"--master-port {port} {TRAIN_SCRIPT}"
    )


def training(lay: Layout, spec: JobSpec, c: Cluster, ns: str, trainer: Trainer) -> list[dict]:
    nodes = c.pools[0].nodes
    if trainer == "pytorchjob":
        cmd = _torchrun(lay, c, "$RANK", "$MASTER_ADDR", "$MASTER_PORT")
        specs: dict[str, Any] = {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure",
                       "template": _pod(lay, spec, c, cmd, "pytorch")},
        }  # fmt: skip
        if nodes > 1:
            specs["Worker"] = {"replicas": nodes - 1, "restartPolicy": "OnFailure",
                               "template": _pod(lay, spec, c, cmd, "pytorch")}  # fmt: skip
        return [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": _meta("train", ns),
                "spec": {"runPolicy": {"backoffLimit": 3}, "pytorchReplicaSpecs": specs},
            }
        ]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta("train", ns),
        "spec": {
            "clusterIP": "None",  # headless: pod train-0 is train-0.train for the rendezvous
            "selector": {"job-name": "train"},
            "ports": [{"name": "rdzv", "port": RDZV_PORT}],
        },
    }
    cmd = _torchrun(lay, c, "$JOB_COMPLETION_INDEX", "train-0.train", str(RDZV_PORT))
    pod = _pod(lay, spec, c, cmd, "train")
    pod["spec"] |= {"subdomain": "train", "restartPolicy": "Never"}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta("train", ns),
        "spec": {
            "completionMode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "backoffLimit": 3,
            "template": pod,
        },
    }
    return [service, job]


def kustomization(files: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": files,
    }


def manifests(
    lay: Layout, spec: JobSpec, c: Cluster, trainer: Trainer
) -> dict[str, list[dict[str, Any]]]:
    """File name -> its documents, in apply order; ``kustomization.yaml`` lists them."""
    ns = namespace_name(lay)
    files: dict[str, list[dict[str, Any]]] = {"namespace.yaml": [namespace(lay, ns)]}
    docs = storage(lay, c, ns)
    if docs:
        files["storage.yaml"] = docs
    if c.training:
        files["training.yaml"] = training(lay, spec, c, ns, trainer)
    else:
        files["cache-warmup.yaml"] = [warmup(lay, spec, ns)]
    return files
