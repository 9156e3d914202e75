"""The idle bill: an idle hour, day and weekend, and what teardown leaves billed, each line one
catalog price times a count and traced to its catalog figure. Prices come from an override file
(made-up round figures), so every meter has one and the sums can be checked one by one."""

from __future__ import annotations

import json

import pytest

import stoker
from stoker.catalog import HOURS_PER_MONTH, load_catalog
from stoker.plan import load_spec, plan_job
from stoker.plan.cost import (
    BLOB_SOFT_DELETE_DAYS,
    checkpoint_steady_bytes,
    idle_bill,
    plan_idle_bill,
)
from stoker.provision import provision
from stoker.provision._cost import bill, idle_lines, idle_weekend_text
from stoker.provision._res_compute import OS_DISK_GB
from stoker.provision._res_lifecycle import DEFAULT_VERSION_DAYS, RULE, longest_billed_days
from stoker.provision._res_storage import SOFT_DELETE_DAYS
from stoker.provision._template import network_lines

SKU = "AMLFS-Durable-Premium-500"
TIB = 2**40


@pytest.fixture
def lustre_spec(tmp_path):
    """The 64-VM example with its checkpoints on Managed Lustre (a fast tier that idles)."""
    import tomllib

    import tomli_w

    spec = tomllib.loads(open("examples/pretrain-64vm.toml", "rb").read().decode())
    spec.setdefault("checkpoints", {})["tier"] = "lustre"
    path = tmp_path / "lustre-64vm.toml"
    path.write_text(tomli_w.dumps(spec), "utf-8")
    return str(path)


@pytest.fixture
def priced(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text(
        '[sources.mine]\ntitle = "test prices"\nwhere = "here"\nretrieved = "2026-12-01"\n'
        f'[lustre.{SKU}]\nprice_per_tib_hour = 0.5\nsource = "mine"\n'
        '[meter.os_disk]\nprice = 36.5\nsource = "mine"\n'
        '[meter.nat_gateway]\nprice = 0.05\nsource = "mine"\n'
        '[meter.public_ip]\nprice = 0.01\nsource = "mine"\n',
        "utf-8",
    )
    return load_catalog([path], defaults=False)


def test_the_catalogs_os_disk_is_the_one_provision_writes():
    cat = load_catalog(defaults=False)
    assert f"{OS_DISK_GB} GiB" in cat.meter["os_disk"].name
    assert cat.meter["os_disk"].unit == "month"


def test_the_plans_soft_delete_is_the_one_provision_writes():
    assert BLOB_SOFT_DELETE_DAYS == SOFT_DELETE_DAYS
    assert longest_billed_days(DEFAULT_VERSION_DAYS) == DEFAULT_VERSION_DAYS + SOFT_DELETE_DAYS


def test_plan_idle_cost_is_the_sum_of_the_priced_meters(priced, lustre_spec):
    spec = load_spec(lustre_spec)
    plan = plan_job(spec, priced)
    idle = plan_idle_bill(spec, priced, plan)
    vol = plan.checkpoints.volume
    assert vol.sku == SKU
    wall = plan.run.wall_s
    stored = plan.data.dataset_bytes + checkpoint_steady_bytes(
        plan.checkpoints, wall, DEFAULT_VERSION_DAYS
    )
    expected = {
        "OS disks": plan.nodes * 36.5 / HOURS_PER_MONTH,
        "NAT gateway": 0.05,
        "public IP": 0.01,
        "checkpoints": vol.price_per_hour_usd,
        "Blob": priced.blob["standard"].price_hot_gb_month * stored / 1e9 / HOURS_PER_MONTH,
    }
    assert vol.price_per_hour_usd == pytest.approx(0.5 * vol.size_bytes / TIB)
    got = {}
    for meter in idle.meters:
        key = next(k for k in expected if k in meter.item)
        got[key] = meter.per_hour_usd
    assert got == pytest.approx(expected)
    assert idle.per_hour_usd * 24 == pytest.approx(sum(expected.values()) * 24)
    # every line names the catalog figure and the source it comes from
    sources = {m.item: m.source for m in idle.meters}
    assert any("meter.os_disk.price from mine" in s for s in sources.values())
    assert any(f"lustre.{SKU}.price_per_tib_hour from mine" in s for s in sources.values())
    assert any("blob.standard.price_hot_gb_month from retail-api-blob-eastus" in s
               for s in sources.values())  # fmt: skip
    # teardown deletes Lustre: the rest stays billed
    assert idle.after_teardown_per_hour_usd == pytest.approx(
        sum(expected.values()) - vol.price_per_hour_usd
    )
    assert idle.fast_tier_weekend_usd == pytest.approx(
        vol.price_per_hour_usd * spec.run.idle_storage / 3600
    )


def test_an_unpriced_meter_makes_the_idle_total_unknown_not_smaller(lustre_spec):
    cat = load_catalog(defaults=False)  # the built-in has no OS disk price
    spec = load_spec(lustre_spec)
    plan = plan_job(spec, cat)
    idle = plan_idle_bill(spec, cat, plan)
    assert idle.per_hour_usd is None
    assert any("OS disks" in name for name in idle.unknown)
    assert idle.known_per_hour_usd > 0


def test_checkpoint_versions_are_counted_until_the_lifecycle_rule_and_soft_delete_end(
    priced, lustre_spec
):
    plan = plan_job(load_spec(lustre_spec), priced)
    ck = plan.checkpoints
    long_run = ck.interval_s * 1e6
    week = checkpoint_steady_bytes(ck, long_run, 7)
    month = checkpoint_steady_bytes(ck, long_run, 30)
    assert week > ck.size_bytes * ck.keep  # the deleted ones are billed a while
    saves_held = (7 + SOFT_DELETE_DAYS) * 86400 / ck.interval_s
    assert week == pytest.approx(ck.size_bytes * (ck.keep + saves_held))
    assert month > week
    # never more versions than the run saves
    short = checkpoint_steady_bytes(ck, ck.interval_s * 2, 30)
    assert short == pytest.approx(ck.size_bytes * (ck.keep + 2))


def test_no_fast_tier_no_weekend_line(priced):
    spec = load_spec("examples/finetune-1vm.toml")
    plan = plan_job(spec, priced)
    idle = idle_bill(spec, priced, plan.nodes, plan.data, plan.checkpoints, 1e12)
    assert idle.fast_tier_weekend_usd is None
    assert idle.per_hour_usd == pytest.approx(
        plan.nodes * 36.5 / HOURS_PER_MONTH
        + 0.06
        + priced.blob["standard"].price_hot_gb_month * 1e12 / 1e9 / HOURS_PER_MONTH
    )


@pytest.fixture
def deployed(priced, tmp_path, lustre_spec):
    return provision(lustre_spec, tmp_path / "deploy", priced)


def _idle_hour(lay, the_bill) -> float:
    """An idle hour counted meter by meter from the override's round prices."""
    vms = sum(s.vms for s in lay.scale_sets)
    disks = vms * 36.5 / HOURS_PER_MONTH
    lustre = sum(0.5 * lu.capacity_tib for lu in lay.lustres)
    storage = sum(
        line.per_hour_usd or 0.0 for line in the_bill.lines if line.resource == "storageAccount"
    )
    pips = sum(1 for line in the_bill.lines if line.resource == "publicIPAddress")
    others = sum(
        line.per_hour_usd or 0.0
        for line in the_bill.lines
        if line.while_idle
        and line.resource
        not in ("storageAccount", "amlFilesystem", "publicIPAddress", "natGateway")
    )
    return disks + lustre + storage + 0.05 + 0.01 * pips + others


def test_the_deployments_readme_carries_the_idle_bill(deployed, priced):
    readme = (deployed.out / "README.md").read_text("utf-8")
    lay = deployed.layout
    the_bill = bill(lay, network_lines(lay), priced)
    hour = _idle_hour(lay, the_bill)
    assert f"scale sets deallocated: ${hour:,.2f} an hour, ${hour * 24:,.2f} a day**" in readme
    lustre = sum(0.5 * lu.capacity_tib for lu in lay.lustres)
    assert lustre > 0 and f"idle weekend (48 h): ${lustre * 48:,.2f}**" in readme
    after = f"(Lustre deleted; OS disks, Blob and network kept): ${(hour - lustre) * 24:,.2f} a day"
    assert f"after teardown {after}**" in readme
    for line in idle_lines(the_bill):  # every meter's line, with its catalog figure
        assert line in readme.splitlines(), line
    assert "storage only" not in readme
    # the lifecycle rule: its default, what it deletes and how long a dropped checkpoint bills
    rule = f"deletes previous versions {DEFAULT_VERSION_DAYS} days after they were made"
    assert f"{rule} (`checkpoints.version_days`, default {DEFAULT_VERSION_DAYS})" in readme
    assert f"at most {DEFAULT_VERSION_DAYS + SOFT_DELETE_DAYS} days" in readme
    assert "never deletes a current blob" in readme


def test_a_version_days_the_spec_sets_reaches_the_rule_and_the_readme(
    tmp_path, lustre_spec, priced
):
    import tomllib

    import tomli_w

    spec = tomllib.loads(open(lustre_spec, "rb").read().decode())
    spec["checkpoints"]["version_days"] = 3
    path = tmp_path / "three.toml"
    path.write_text(tomli_w.dumps(spec), "utf-8")
    dep = provision(str(path), tmp_path / "three", priced)
    readme = (dep.out / "README.md").read_text("utf-8")
    setting = f"(`checkpoints.version_days` = 3; the default is {DEFAULT_VERSION_DAYS})"
    assert f"deletes previous versions 3 days after they were made {setting}" in readme
    assert f"at most {3 + SOFT_DELETE_DAYS} days" in readme
    main = json.loads((dep.out / "main.json").read_text("utf-8"))
    days = {
        r["properties"]["policy"]["rules"][0]["definition"]["actions"]["version"]["delete"][
            "daysAfterCreationGreaterThan"
        ]
        for r in main["resources"]
        if r["type"] == "Microsoft.Storage/storageAccounts/managementPolicies"
    }
    assert days == {3}


def test_readme_idle_lines_are_the_sum_of_the_priced_resources(deployed, priced):
    lay = deployed.layout
    the_bill = bill(lay, network_lines(lay), priced)
    lustre = sum(0.5 * lu.capacity_tib for lu in lay.lustres)
    expected = _idle_hour(lay, the_bill)
    assert the_bill.idle_per_hour_usd == pytest.approx(expected)
    assert the_bill.idle_unknown == [
        line.name for line in the_bill.lines if line.while_idle and line.per_hour_usd is None
    ]
    text = "\n".join(idle_lines(the_bill))
    assert f"${expected * 24:,.2f} a day" in text
    assert f"${lustre * 48:,.2f}" in text  # the idle weekend of Lustre
    after, _ = the_bill.after_teardown_per_hour_usd()
    assert after == pytest.approx(expected - lustre)
    assert f"${after * 24:,.2f} a day" in text
    # each line is traceable to its catalog figure
    assert f"lustre.{SKU}.price_per_tib_hour from mine (2026-12-01)" in text
    assert "meter.os_disk.price from mine" in text
    assert "meter.nat_gateway.price from mine" in text
    # teardown reads what a deallocated scale set still costs from its tags
    tags = the_bill.tag_values()
    first = lay.scale_sets[0]
    assert float(tags[f"{first.name}:stopped"]) == pytest.approx(
        first.vms * 36.5 / HOURS_PER_MONTH, abs=0.005
    )


def test_without_an_os_disk_price_the_idle_bill_says_so(deployed):
    cat = load_catalog(defaults=False)
    lay = deployed.layout
    the_bill = bill(lay, network_lines(lay), cat)
    assert {s.name for s in lay.scale_sets} <= set(the_bill.idle_unknown)
    assert "not priced" in idle_lines(the_bill)[0]


def test_make_demo_line_reads_the_record(deployed, priced, tmp_path, lustre_spec):
    lay = deployed.layout
    the_bill = bill(lay, network_lines(lay), priced)
    record = {"resources": [vars(line) for line in the_bill.lines]}
    line = idle_weekend_text(json.loads(json.dumps(record)))
    weekend = sum(0.5 * lu.capacity_tib for lu in lay.lustres) * 48
    assert f"${weekend:,.2f}" in line and "from mine" in line
    cat = load_catalog(defaults=False)  # no Lustre price
    bare = provision(lustre_spec, tmp_path / "bare", cat).layout
    unpriced = bill(bare, network_lines(bare), cat)
    assert "unknown" in idle_weekend_text({"resources": [vars(x) for x in unpriced.lines]})


def test_every_storage_account_gets_the_lifecycle_rule(deployed):
    main = json.loads((deployed.out / "main.json").read_text("utf-8"))
    accounts = [r["name"] for r in main["resources"]
                if r["type"] == "Microsoft.Storage/storageAccounts"]  # fmt: skip
    policies = {
        r["name"].split("/")[0]: r
        for r in main["resources"]
        if r["type"] == "Microsoft.Storage/storageAccounts/managementPolicies"
    }
    assert sorted(policies) == sorted(accounts)
    for policy in policies.values():
        (rule,) = policy["properties"]["policy"]["rules"]
        assert rule["name"] == RULE and rule["enabled"] is True
        delete = rule["definition"]["actions"]["version"]["delete"]
        assert delete["daysAfterCreationGreaterThan"] == DEFAULT_VERSION_DAYS


def test_teardown_counts_the_deallocated_os_disks_as_still_billed(deployed):
    from stoker.operate._steps import left_alone, plan_steps, read_template, still_billed

    lay = deployed.layout
    resources = read_template(deployed.out)
    steps = plan_steps(resources)
    disks = {s.name: s.vms * 36.5 / HOURS_PER_MONTH for s in lay.scale_sets}
    for step in steps:
        if step.action == "deallocate":
            r = step.resource
            assert r.stopped_usd_per_hour == pytest.approx(disks[r.name], abs=0.005)
            # deallocating saves the GPUs, not the disks
            assert step.saves_usd_per_hour == pytest.approx(r.usd_per_hour - r.stopped_usd_per_hour)
    still, unknown = still_billed(steps, left_alone(resources))
    kept = sum(
        r.usd_per_hour or 0.0
        for r in [s.resource for s in steps if s.action == "keep"] + left_alone(resources)
        if r.usd_per_hour is not None
    )
    assert still == pytest.approx(kept + sum(disks.values()), abs=0.01 * len(disks) + 0.01)
    assert not any("OS disks" in name for name in unknown)
    # the NAT gateway and public IP carry the price the catalog's meters give them
    network = [r for r in resources if r.short_type in ("natGateways", "publicIPAddresses")]
    assert network and all(r.usd_per_hour is not None for r in network)
    assert not any(r.name in unknown for r in network)
    # and it is what the README's "after teardown" line says, to the cent per hour
    the_bill = deployed.bill
    after, _ = the_bill.after_teardown_per_hour_usd()
    assert still == pytest.approx(after, abs=0.01 * len(the_bill.lines))


def test_teardown_names_unpriced_disks_as_unknown(tmp_path, lustre_spec):
    from stoker.operate._steps import left_alone, plan_steps, read_template, still_billed

    dep = provision(lustre_spec, tmp_path / "bare", load_catalog(defaults=False))
    resources = read_template(dep.out)
    steps = plan_steps(resources)
    _, unknown = still_billed(steps, left_alone(resources))
    assert {f"{s.name} (OS disks)" for s in dep.layout.scale_sets} <= set(unknown)


def test_offline_preflight_prints_the_idle_weekend_of_its_lustre(deployed, priced):
    """`make demo`'s line: the preflight of a written deployment prices its Lustre's weekend."""
    from typer.testing import CliRunner

    from stoker.cli import app

    weekend = sum(0.5 * lu.capacity_tib for lu in deployed.layout.lustres) * 48
    report = stoker.preflight(deployed.out, offline=True, catalog=priced)
    assert f"${weekend:,.2f}" in report.idle_weekend and report.to_dict()["idle_weekend"]
    out = CliRunner().invoke(app, ["preflight", str(deployed.out), "--offline"])
    assert out.exit_code == 0, out.output
    assert "over an idle weekend (48 h)" in out.stdout
