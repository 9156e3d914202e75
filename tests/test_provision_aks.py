"""``stoker provision --target aks``: an AKS cluster in ARM (the plan's GPUs as node pools, one
per fabric, the VM path's tags and prices) and kustomize manifests an AKS team applies as they
are. Everything validated offline (ARM strict schemas, the Kubernetes schemas of the declared
version, the PyTorchJob CRD's schema), and the checks are shown to fail on a broken file."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import stoker
from stoker.catalog import load_catalog
from stoker.cli import app
from stoker.errors import ProvisionError
from stoker.plan import plan_job
from stoker.provision.aks import KUBERNETES_VERSION, check

EXAMPLES = Path(__file__).parent.parent / "examples"
INFERENCE = EXAMPLES / "inference-cache.toml"
NOW = dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC)
runner = CliRunner()

TRAIN = """
name = "train-aks"
[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 8
[workload]
kind = "pretrain"
params = "8B"
tokens_per_s_per_gpu = 3000
seq_len = 4096
global_batch = 256
dataset_size = "20 TB"
[data]
source = "az://pretrain/tokens/v1"
tier = "lustre"
[run]
length = "24 h"
"""


def _docs(out: Path, name: str) -> list[dict]:
    return list(yaml.safe_load_all((out / name).read_text()))


def _kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def _cluster(out: Path) -> dict:
    main = json.loads((out / "main.json").read_text())
    (mc,) = [r for r in main["resources"] if r["type"].endswith("managedClusters")]
    return mc


@pytest.fixture(scope="module")
def serve(tmp_path_factory) -> tuple[stoker.Deployment, Path]:
    out = tmp_path_factory.mktemp("serve")
    return stoker.provision(INFERENCE, out, now=NOW, target="aks"), out


@pytest.fixture(scope="module")
def train(tmp_path_factory) -> tuple[stoker.Deployment, Path]:
    out = tmp_path_factory.mktemp("train")
    spec = out.parent / "train-aks.toml"
    spec.write_text(TRAIN)
    return stoker.provision(spec, out, now=NOW, target="aks"), out


def test_inference_deployment_validates_offline(serve) -> None:
    d, out = serve
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["main.json", "main.parameters.json", "namespace.yaml", "storage.yaml",
         "cache-warmup.yaml", "kustomization.yaml", "README.md", "stoker-deployment.json"]
    )  # fmt: skip
    report = check(out, checkov=False)
    assert report.errors == []
    assert (
        report.kubernetes_version
        == KUBERNETES_VERSION
        == _cluster(out)["properties"]["kubernetesVersion"]
    )
    assert report.manifests == 4 and report.resources >= 5
    kust = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kust["resources"] == ["namespace.yaml", "storage.yaml", "cache-warmup.yaml"]


def test_gpu_pool_is_the_plans_vms_with_its_price_and_tags(serve) -> None:
    d, out = serve
    cat = load_catalog()
    plan = plan_job(stoker.plan.load_spec(INFERENCE), cat)
    mc = _cluster(out)
    pools = {p["name"]: p for p in mc["properties"]["agentPoolProfiles"]}
    gpu = pools["gpu0"]
    assert gpu["count"] == plan.nodes == 16 and gpu["vmSize"] == "Standard_ND96isr_H100_v5"
    assert gpu["gpuProfile"] == {"driver": "None"}  # the GPU Operator's driver
    assert pools["system"]["mode"] == "System" and gpu["mode"] == "User"
    price = float(gpu["tags"]["stoker-usd-per-hour"])
    assert price == pytest.approx(plan.cost.price_per_vm_hour_usd * 16, abs=0.01)
    assert (
        mc["tags"]["stoker-deployment-id"]
        == d.layout.deployment_id
        == gpu["tags"]["stoker-deployment-id"]
    )
    record = json.loads((out / "stoker-deployment.json").read_text())
    assert record["target"] == "aks" and record["scale_sets"] == []
    assert record["cost_per_hour_usd"] == pytest.approx(d.bill.per_hour_usd, abs=0.01)
    types = {r["type"] for r in record["resources"]}
    assert "Microsoft.ContainerService/managedClusters" in types
    assert "Microsoft.Compute/virtualMachineScaleSets" not in types


def test_model_cache_is_a_rwm_files_share_sized_from_the_plan(serve) -> None:
    d, out = serve
    docs = _docs(out, "storage.yaml")
    (sc,) = _kind(docs, "StorageClass")
    assert sc["provisioner"] == "file.csi.azure.com"
    assert sc["parameters"]["protocol"] == "nfs" and sc["parameters"]["skuName"] == "Premium_LRS"
    # The share the driver makes carries the ownership tag and teardown-after, as ARM's do.
    tags = dict(kv.split("=", 1) for kv in sc["parameters"]["tags"].split(","))
    after = d.layout.teardown_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert tags == {"stoker-deployment-id": d.layout.deployment_id, "teardown-after": after}
    (pvc,) = _kind(docs, "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    share_gib = -(-d.plan.inference.files_share_bytes // 2**30)
    assert pvc["spec"]["resources"]["requests"]["storage"] == f"{int(share_gib)}Gi"
    (job,) = _docs(out, "cache-warmup.yaml")
    assert job["spec"]["completions"] == 1 and job["spec"]["parallelism"] == 1
    pod = job["spec"]["template"]["spec"]
    script = pod["containers"][0]["command"][2]
    words = shlex.split(script.split("&& exec ", 1)[1])
    assert words[1:] == ["cache", "pull", "az://models/llama-70b-instruct", "/models", "--name",
                         "llama-70b-instruct"]  # fmt: skip
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_readme_prices_the_idle_cluster_meter_by_meter(train) -> None:
    """GPU pools at 0 leave the system pool, the cluster fee, Lustre and Blob billed: the
    README says so line by line (the VM path's idle bill), not 'storage only'."""
    d, out = train
    text = (out / "README.md").read_text()
    assert "storage only" not in text
    idle = d.bill.idle_per_hour_usd
    assert f"**Idle, GPU pools scaled to 0: ${idle:,.2f} an hour, ${idle * 24:,.2f} a day**" in text
    # the system pool and the cluster run on, unpriced here: named, never counted as free
    cluster = next(ln.name for ln in d.bill.lines if ln.resource == "managedCluster")
    assert {cluster, f"{cluster}/system"} <= set(d.bill.idle_unknown)
    assert f"(not priced: {', '.join(d.bill.idle_unknown)})" in text
    kept = [ln for ln in d.bill.lines if ln.while_idle and ln.per_hour_usd]
    assert any(ln.resource == "storageAccount" for ln in kept)
    for ln in kept:  # each priced meter that stays up, by name
        assert f"- `{ln.name}` {ln.resource}: ${ln.per_hour_usd:,.2f} an hour" in text
    assert "idle weekend (48 h)" in text
    assert "after teardown" not in text  # stoker teardown does not delete a cluster
    gpu = [ln for ln in d.bill.lines if ln.resource == "agentPool" and ln.per_hour_usd]
    assert gpu and not any(f"`{ln.name}`" in text.split("**Idle,")[1] for ln in gpu)


def test_readme_states_the_cache_plan_and_the_command_order(serve) -> None:
    d, out = serve
    text = (out / "README.md").read_text()
    order = ["az deployment group create", "az aks get-credentials", "kubectl apply -k ."]
    at = [text.index(c) for c in order]
    assert at == sorted(at)
    assert "| model downloads from Blob | 16 | 1 |" in text
    assert "storage-files-scale-targets.md" in text  # the figures' source
    assert "Not covered" in text
    lines = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    for line in lines:
        subprocess.run(["bash", "-n", "-c", line], check=True)


def test_training_job_runs_torchrun_on_one_fabric(train) -> None:
    d, out = train
    assert check(out, checkov=False).errors == []
    service, job = _docs(out, "training.yaml")
    assert service["spec"]["clusterIP"] == "None"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 8
    pod = spec["template"]["spec"]
    assert pod["nodeSelector"] == {"stoker.io/pool": "gpu0"} and pod["subdomain"] == "train"
    c = pod["containers"][0]
    vm = load_catalog().vm["ND96isr_H100_v5"]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": vm.gpus, "rdma/ib": vm.ib_links}
    assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
    cmd = c["command"][2]
    assert "torchrun --nnodes 8 --nproc-per-node 8 --node-rank $JOB_COMPLETION_INDEX" in cmd
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["STOKER_CKPT_FAST"] == "/mnt/nvme/checkpoints"  # the node's NVMe
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert env["STOKER_DATA"] == "/lustre/data" and "/lustre/data" in mounts
    durable = env["STOKER_CKPT_DURABLE"]
    if any(lu.role == "checkpoints" for lu in d.layout.lustres):
        assert durable == "/lustre/checkpoints" and durable in mounts
    else:  # the deployment's own account, named in full
        accounts = [ln.name for ln in d.bill.lines if ln.resource == "storageAccount"]
        assert durable in [f"https://{a}.blob.core.windows.net/checkpoints" for a in accounts]


def test_lustre_is_a_csi_volume_filled_from_the_arm_outputs(train) -> None:
    d, out = train
    pv, pvc = _docs(out, "storage.yaml")
    assert pv["spec"]["csi"]["driver"] == "azurelustre.csi.azure.com"
    assert pv["spec"]["csi"]["volumeAttributes"]["mgs-ip-address"] == "__LUSTRE_MGS_DATA__"
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["capacity"]["storage"] == f"{d.layout.lustres[0].capacity_tib}Ti"
    text = (out / "README.md").read_text()
    assert "s/__LUSTRE_MGS_DATA__/" in text and "lustreMgsAddress_data" in text


def _checked(tmp_path: Path, spec_text: str, **options: str) -> Path:
    """``spec_text`` provisioned for AKS with ``options``; its folder, which the checks pass."""
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text)
    out = tmp_path / "out"
    stoker.provision(spec, out, now=NOW, target="aks", **options)
    assert check(out, checkov=False).errors == []
    return out


def test_pytorchjob_checked_against_its_crd(tmp_path: Path) -> None:
    out = _checked(tmp_path, TRAIN, trainer="pytorchjob")
    (job,) = _docs(out, "training.yaml")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] + replicas["Worker"]["replicas"] == 8
    # A misspelled field is caught by the CRD's (closed) schema.
    replicas["Worker"]["replica"] = replicas["Worker"].pop("replicas")
    (out / "training.yaml").write_text(yaml.safe_dump(job))
    errors = check(out, checkov=False).errors
    assert any("PyTorchJob" in e and "replica" in e for e in errors), errors


def test_the_checks_fail_on_broken_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stoker.provision(INFERENCE, out, now=NOW, target="aks")
    job = _docs(out, "cache-warmup.yaml")[0]
    job["spec"]["completion"] = 1  # misspelled: the strict Kubernetes schema refuses it
    (out / "cache-warmup.yaml").write_text(yaml.safe_dump(job))
    (out / "extra.yaml").write_text("{}\n")
    main = json.loads((out / "main.json").read_text())
    mc = next(r for r in main["resources"] if r["type"].endswith("managedClusters"))
    mc["properties"]["kubernetesVersio"] = "1.33"
    (out / "main.json").write_text(json.dumps(main))
    errors = check(out, checkov=False).errors
    assert any("cache-warmup.yaml" in e and "completion" in e for e in errors), errors
    assert any("extra.yaml is not listed" in e for e in errors), errors
    assert any("managedClusters" in e and "kubernetesVersio" in e for e in errors), errors


def test_a_training_job_larger_than_one_fabric_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "big.toml"
    # The plan runs it as independent jobs per scale set; AKS writes one torchrun job only.
    spec.write_text(TRAIN.replace("nodes = 8", 'nodes = 150\nfabric = "independent-jobs"'))
    out = tmp_path / "out"
    result = runner.invoke(app, ["provision", str(spec), "--out", str(out), "--target", "aks"])
    assert result.exit_code == 2
    assert "cluster.nodes: 150 VMs exceed one InfiniBand fabric on AKS (100 VMs" in result.output
    assert not out.exists()  # nothing written


def test_bad_target_trainer_and_overlapping_ranges_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ProvisionError, match="--target 'k8s': use one of vmss, aks"):
        stoker.provision(INFERENCE, tmp_path / "a", target="k8s")
    with pytest.raises(ProvisionError, match="--trainer 'mpi': use one of job, pytorchjob"):
        stoker.provision(INFERENCE, tmp_path / "b", target="aks", trainer="mpi")
    with pytest.raises(ProvisionError, match="--address-space 192.168.0.0/20: overlaps"):
        stoker.provision(INFERENCE, tmp_path / "c", target="aks", address_space="192.168.0.0/20")
    assert not any(tmp_path.iterdir())


def test_hostile_names_stay_text(tmp_path: Path) -> None:
    name = "x $(touch /tmp/pwned) [listKeys()] 'q\""
    source = "az://models/it's $(id)"
    spec = INFERENCE.read_text().replace('name = "serve-70b"', f"name = {json.dumps(name)}")
    spec = spec.replace('"az://models/llama-70b-instruct"', json.dumps(source))
    out = _checked(tmp_path, spec, name="hostile")
    (ns,) = _docs(out, "namespace.yaml")
    assert ns["metadata"]["annotations"]["stoker.io/stoker-plan"] == name
    (job,) = _docs(out, "cache-warmup.yaml")
    words = shlex.split(job["spec"]["template"]["spec"]["containers"][0]["command"][2])
    assert source in words  # one word, taken literally
    mc = _cluster(out)
    assert mc["tags"]["stoker-plan"] == "[" + name if name.startswith("[") else name


def test_a_rerun_keeps_the_id_and_refuses_a_stranger(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = stoker.provision(INFERENCE, out, now=NOW, target="aks")
    again = stoker.provision(INFERENCE, out, now=NOW, target="aks")
    assert again.layout.deployment_id == first.layout.deployment_id
    (out / "mine.yaml").write_text("kind: Secret\n")
    with pytest.raises(ProvisionError, match="holds files stoker did not write"):
        stoker.provision(INFERENCE, out, now=NOW, target="aks")
    assert (out / "mine.yaml").read_text() == "kind: Secret\n"
