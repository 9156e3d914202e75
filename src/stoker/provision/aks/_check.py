"""Check an AKS deployment folder offline: the ARM template against the strict schemas (as the
VM path), every Kubernetes manifest against the schemas of the Kubernetes version the cluster
declares (``kubernetes-validate`` bundles them), a PyTorchJob against its CRD's schema kept in
``provision/schemas`` (closed, as the ARM ones: a misspelled field fails), the kustomization
against the files beside it, and checkov over ``main.json`` when it is installed."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._redact import printable
from ..._user_files import load_user_json, read_user_text
from ...errors import ProvisionError, StokerError
from .. import validate

CRD_FILE = "kubeflow.org_pytorchjobs.v1.json"


@dataclass
class AksReport:
    resources: int = 0  # ARM resources checked
    manifests: int = 0  # Kubernetes documents checked
    kubernetes_version: str = ""
    errors: list[str] = field(default_factory=list)
    checkov_passed: int | None = None
    checkov_failed: list[str] = field(default_factory=list)
    checkov_skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.checkov_failed


@functools.cache
def _crd_schema() -> dict[str, Any]:
    doc = json.loads((validate._schema_root() / CRD_FILE).read_text("utf-8"))
    schema = doc["openAPIV3Schema"]
    validate._close(schema)
    return schema


def manifest_errors(doc: Any, where: str, version: str) -> list[str]:
    """One line per error in one Kubernetes document."""
    import jsonschema
    from kubernetes_validate import utils as kv

    if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
        return [f"{where}: not a Kubernetes object (no kind and apiVersion)"]
    name = f"{where}: {doc['kind']} {doc.get('metadata', {}).get('name')}"
    if doc["apiVersion"] == "kubeflow.org/v1" and doc["kind"] == "PyTorchJob":
        # The CRD's schema leaves metadata open; Kubernetes checks its names as for any object.
        v = jsonschema.Draft7Validator(_crd_schema())
        return [
            f"{name}: {'.'.join(str(p) for p in e.absolute_path) or '(object)'}: {e.message[:300]}"
            for e in v.iter_errors(doc)
        ]
    try:
        kv.validate(doc, version, strict=True)
    except kv.ValidationError as e:
        path = ".".join(str(p) for p in e.path) or "(object)"
        return [f"{name}: {path}: {e.message[:300]}"]
    except kv.SchemaNotFoundError:
        return [f"{name}: no Kubernetes {version} schema for {doc['apiVersion']}"]
    return []


def check(out: str | Path, *, checkov: bool | str = True) -> AksReport:
    """Validate the AKS deployment in folder ``out`` (written by ``--target aks``)."""
    import yaml

    out = Path(out)
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError as exc:
        raise ProvisionError(
            "--check of an AKS deployment needs kubernetes-validate: pip install "
            "kubernetes-validate (it comes with stoker's test extra)"
        ) from exc
    report = AksReport()
    try:
        template = load_user_json(out / "main.json", "deployment file", max_bytes=64 << 20)
        kust = yaml.safe_load(read_user_text(out / "kustomization.yaml", "deployment file"))
    except (StokerError, yaml.YAMLError) as exc:
        raise ProvisionError(
            f"{printable(str(out), lines=False)}: not a stoker AKS deployment folder ({exc})"
        ) from exc
    if not isinstance(template, dict) or template.get("metadata", {}).get("target") != "aks":
        raise ProvisionError(
            f"{printable(str(out), lines=False)}: main.json is not an AKS deployment's "
            "(metadata.target is not 'aks')"
        )
    report.resources, report.errors = validate.schema_errors(template)
    clusters = [r for r in template["resources"] if r.get("type", "").endswith("managedClusters")]
    version = str(clusters[0]["properties"]["kubernetesVersion"]) if clusters else ""
    report.kubernetes_version = version
    listed = kust.get("resources", []) if isinstance(kust, dict) else []
    present = sorted(p.name for p in out.glob("*.yaml") if p.name != "kustomization.yaml")
    for name in sorted(set(present) ^ set(listed)):
        where = "listed but missing" if name in listed else "not listed"
        report.errors.append(f"kustomization.yaml: {name} is {where}")
    for name in listed:
        path = out / name
        if not path.is_file():
            continue
        for i, doc in enumerate(yaml.safe_load_all(read_user_text(path, "manifest"))):
            report.manifests += 1
            report.errors += manifest_errors(doc, f"{name}[{i}]", version)
    if checkov:
        binary = checkov if isinstance(checkov, str) else validate.find_checkov()
        if binary:
            passed, failed, skipped = validate.run_checkov(out / "main.json", binary)
            report.checkov_passed, report.checkov_failed = passed, failed
            report.checkov_skipped = skipped
    return report
