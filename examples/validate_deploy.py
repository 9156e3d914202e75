"""Validate a folder written by ``stoker provision`` without Azure, and print its resources and
cost: every ARM resource against the official schema for its type and apiVersion (strict:
misspelled properties fail), the CCWS parameters against their schema, and checkov when it is
installed (``make checkov`` puts it in .bench/checkov-venv). Exit 1 on any error.

    python examples/validate_deploy.py .demo/deploy
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stoker.provision.validate import check


def main(folder: str) -> int:
    out = Path(folder)
    summary = json.loads((out / "stoker-deployment.json").read_text())
    print(f"{'#':>2}  {'resource':<24} {'name':<36} {'per hour':>12}  size")
    for i, r in enumerate(summary["resources"], 1):
        price = "unknown" if r["per_hour_usd"] is None else f"${r['per_hour_usd']:,.2f}"
        print(f"{i:>2}  {r['resource']:<24} {r['name']:<36} {price:>12}  {r['size']}")
    print(
        f"total per hour ${summary['cost_per_hour_usd']:,.2f}, per idle day "
        f"${summary['cost_per_idle_day_usd']:,.2f}"
        + (f" (unpriced: {', '.join(summary['unpriced'])})" if summary["unpriced"] else "")
    )
    report = check(out)
    checkov = (
        "checkov not installed (make checkov)"
        if report.checkov_passed is None
        else f"checkov: {report.checkov_passed} passed, {len(report.checkov_failed)} failed, "
        f"{len(report.checkov_skipped)} skipped with a reason"
    )
    errors = len(report.schema_errors)
    print(f"schemas: {report.resources} ARM resources, {errors} errors; {checkov}")
    for line in report.schema_errors + report.checkov_failed:
        print(f"  {line}", file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".demo/deploy"))
