"""Job specs: the examples load; every mistake is reported with the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.errors import SpecError, StokerError
from stoker.plan import JobSpec, load_spec, parse_spec

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.toml"))

GOOD = """
name = "t"

[cluster]
vm_size = "ND96isr_H100_v5"
nodes = 4

[workload]
kind = "pretrain"
step_time = "1.5 s"
seq_len = 4096
"""


def _spec(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert str(path) in message
    return message


# ------------------------------------------------------------------------------------ examples


def test_there_are_examples():
    names = {p.name for p in EXAMPLES}
    assert {"pretrain-64vm.toml", "llama3-405b-2048vm.toml", "finetune-1vm.toml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_loads(path):
    spec = load_spec(path)
    assert isinstance(spec, JobSpec)
    assert spec.cluster.vm_size
    assert spec.cluster.nodes or spec.cluster.gpus
    assert spec.name != "job"  # every example names itself


def test_example_quantities_are_in_base_units():
    spec = load_spec(Path(__file__).parent.parent / "examples" / "pretrain-64vm.toml")
    assert spec.cluster.nodes == 64
    assert spec.workload.params == 70e9
    assert spec.workload.dataset_size == 60e12
    assert spec.run.tokens == 2e12
    assert spec.workload.sharding == "fsdp"
    llama = load_spec(Path(__file__).parent.parent / "examples" / "llama3-405b-2048vm.toml")
    assert llama.cluster.gpus == 16384
    assert llama.workload.params == 405e9
    assert llama.run.tokens == 15e12
    assert llama.reliability.restart_time == 600.0
    vision = load_spec(Path(__file__).parent.parent / "examples" / "vision-32vm.toml")
    assert vision.workload.step_time == pytest.approx(0.224)
    assert vision.workload.sample_size == pytest.approx(114.7e3)
    assert vision.run.length == 2 * 86400.0
    assert vision.checkpoints.interval == 1800.0


def test_defaults(tmp_path):
    spec = load_spec(_spec(tmp_path, GOOD))
    assert spec.cluster.region == "eastus"
    assert spec.cluster.placement == "scale_set"
    assert spec.checkpoints.interval == "auto"
    assert spec.data.tier == "auto"
    assert spec.reliability.restart_time == 600.0
    assert spec.workload.step_time == 1.5


def test_parse_spec_takes_a_dict():
    spec = parse_spec(
        {
            "cluster": {"vm_size": "ND96isr_H100_v5", "gpus": 16},
            "workload": {"kind": "inference", "params": "70B"},
        }
    )
    assert spec.cluster.gpus == 16
    assert spec.workload.params == 70e9


# ------------------------------------------------------------------------------------ errors


def test_missing_vm_size(tmp_path):
    message = _error(_spec(tmp_path, GOOD.replace('vm_size = "ND96isr_H100_v5"\n', "")))
    assert "cluster.vm_size" in message
    assert "missing" in message


def test_unknown_field_is_refused(tmp_path):
    message = _error(_spec(tmp_path, GOOD + "global_bach = 512\n"))
    assert "workload.global_bach" in message
    assert "unknown field" in message


def test_unknown_section_is_refused(tmp_path):
    message = _error(_spec(tmp_path, GOOD + "[storage]\ntier = 'lustre'\n"))
    assert "storage" in message


@pytest.mark.parametrize(
    "line, field, says",
    [
        ('dataset_size = "60 TBB"', "workload.dataset_size", "'60 TBB'"),
        ('dataset_size = "400 Gbs"', "workload.dataset_size", "'400 Gbs'"),
        ('sample_size = "114.7 KBs"', "workload.sample_size", "28 TiB"),
        ('params = "70 billion"', "workload.params", "405B"),
        ("dataset_size = true", "workload.dataset_size", "True"),
        ('dataset_size = "0 TB"', "workload.dataset_size", "greater than zero"),
        ('dataset_size = "-1 TB"', "workload.dataset_size", "greater than zero"),
    ],
)
def test_bad_quantity_names_the_field(tmp_path, line, field, says):
    message = _error(_spec(tmp_path, GOOD + line + "\n"))
    assert field in message
    assert says in message


def test_bad_duration_names_the_field(tmp_path):
    message = _error(_spec(tmp_path, GOOD.replace('"1.5 s"', '"1.5 parsecs"')))
    assert "workload.step_time" in message
    assert "14 min" in message


def test_kind_not_allowed_lists_allowed_values(tmp_path):
    message = _error(_spec(tmp_path, GOOD.replace('"pretrain"', '"training"')))
    assert "workload.kind" in message
    assert "'training'" in message
    for kind in ("pretrain", "fine-tune", "inference", "data-prep"):
        assert f"'{kind}'" in message


def test_neither_nodes_nor_gpus(tmp_path):
    message = _error(_spec(tmp_path, GOOD.replace("nodes = 4\n", "")))
    assert "cluster" in message
    assert "'nodes'" in message and "'gpus'" in message


def test_zero_nodes(tmp_path):
    message = _error(_spec(tmp_path, GOOD.replace("nodes = 4", "nodes = 0")))
    assert "cluster.nodes" in message


def test_pretrain_without_compute(tmp_path):
    text = GOOD.replace('step_time = "1.5 s"\n', 'params = "70B"\n')
    message = _error(_spec(tmp_path, text))
    assert "workload" in message
    assert "'step_time'" in message
    assert "'tokens_per_s_per_gpu'" in message


def test_pretrain_with_params_and_rate_is_enough(tmp_path):
    text = GOOD.replace('step_time = "1.5 s"\n', 'params = "70B"\ntokens_per_s_per_gpu = 1100\n')
    spec = load_spec(_spec(tmp_path, text))
    assert spec.workload.step_time is None
    assert spec.workload.tokens_per_s_per_gpu == 1100


def test_inference_needs_no_step_time(tmp_path):
    text = GOOD.replace('kind = "pretrain"', 'kind = "inference"').replace(
        'step_time = "1.5 s"\n', 'params = "70B"\n'
    )
    assert load_spec(_spec(tmp_path, text)).workload.kind == "inference"


def test_invalid_toml(tmp_path):
    message = _error(_spec(tmp_path, "[cluster\nvm_size = 'ND96isr_H100_v5'\n"))
    assert "not valid TOML" in message
    assert "line 1" in message


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    message = _error(path)
    assert "no such job spec" in message


def test_every_problem_is_listed(tmp_path):
    text = GOOD.replace("nodes = 4", "nodes = 0") + 'dataset_size = "60 TBB"\nepochz = 2\n'
    message = _error(_spec(tmp_path, text))
    for field in ("cluster.nodes", "workload.dataset_size", "workload.epochz"):
        assert field in message


def test_spec_error_is_a_stoker_error(tmp_path):
    with pytest.raises(StokerError):
        load_spec(tmp_path / "nope.toml")


def test_host_copy_bandwidth_is_a_rate(tmp_path):
    # host_copy_bw_per_gpu is bytes per second: it must read "25 GB/s" like every other rate and
    # refuse a bare size.
    text = GOOD + '[checkpoints]\nhost_copy_bw_per_gpu = "25 GB/s"\n'
    spec = load_spec(_spec(tmp_path, text))
    assert spec.checkpoints.host_copy_bw_per_gpu == 25e9
    message = _error(
        _spec(tmp_path, GOOD + '[checkpoints]\nhost_copy_bw_per_gpu = "25 GB"\n', name="size.toml")
    )
    assert "checkpoints.host_copy_bw_per_gpu" in message


@pytest.mark.parametrize(
    "extra, message",
    [
        ("[run]\nsteps = 10\ntokens = '1T'", "run: give 'steps' or 'tokens', not both"),
        (
            "dataset_size = '1 TB'\nepochs = 2\n[run]\ntokens = '1T'",
            "workload.epochs and run.tokens both say how long to train",
        ),
    ],
)
def test_two_amounts_of_training_are_refused(tmp_path, extra, message):
    assert message in _error(_spec(tmp_path, GOOD + extra))


def test_a_missing_workload_does_not_hide_other_errors(tmp_path):
    message = _error(_spec(tmp_path, '[cluster]\nvm_size = "ND96isr_H100_v5"\nnodes = "four"\n'))
    assert "cluster.nodes:" in message
    assert "workload: give 'step_time'" in message
    assert "(top level)" not in message


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("reliability.gpu_mtbf", 0, "reliability.gpu_mtbf: Input should be greater than 0"),
        ("run.length", 0, "run.length: Input should be greater than 0"),
        ("workload.step_time", 0, "workload.step_time: Input should be greater than 0"),
        ("cluster.nodes", 10**23, "cluster.nodes: Input should be less than"),
        ("cluster.gpus", 2_000_000, "cluster.gpus: Input should be less than"),
        ("workload.tokens_per_s_per_gpu", 1e-300, "workload.tokens_per_s_per_gpu: Input"),
    ],
)
def test_zero_and_absurd_values_are_refused_not_replaced(field, value, message):
    data = {
        "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": 4},
        "workload": {"step_time": "1 s", "seq_len": 4096},
    }
    section, key = field.split(".")
    data.setdefault(section, {})[key] = value
    with pytest.raises(SpecError, match=message):
        parse_spec(data)


def test_vm_size_may_carry_the_standard_prefix(tmp_path: Path) -> None:
    from stoker.catalog import load_catalog
    from stoker.plan import plan_job

    spec = load_spec(
        _spec(tmp_path, GOOD.replace('"ND96isr_H100_v5"', '"Standard_ND96isr_H100_v5"'))
    )
    assert spec.cluster.vm_size == "ND96isr_H100_v5"
    data = {
        "cluster": {"vm_size": "standard_nd96isr_h100_v5", "nodes": 2},
        "workload": {"step_time": "1 s", "seq_len": 4096, "dataset_size": "1 TB"},
        "checkpoints": {"size": "10 GB"},
    }
    plan = plan_job(data, load_catalog(defaults=False))
    assert plan.vm_size == "ND96isr_H100_v5" and plan.cost.price_per_vm_hour_usd == 98.32


@pytest.mark.parametrize(
    "workload, field",
    [
        ({"layers": 80}, "give both 'layers' and 'hidden_size'"),
        ({"layers": 4, "hidden_size": 1024, "pp": 8}, "pp = 8 pipeline stages"),
        ({"au_target": 0}, "workload.au_target"),
        ({"au_target": 1.5}, "workload.au_target"),
    ],
)
def test_model_shape_and_au_target_are_checked(tmp_path: Path, workload: dict, field: str) -> None:
    lines = "".join(f"{k} = {v!r}\n" for k, v in workload.items())
    message = _error(_spec(tmp_path, GOOD + lines))
    assert field in message


def test_unknown_checkpoint_writers_are_refused(tmp_path: Path) -> None:
    message = _error(_spec(tmp_path, GOOD + '\n[checkpoints]\nwriters = "many"\n'))
    assert "checkpoints.writers" in message


def test_a_simulate_table_is_left_to_stoker_simulate(tmp_path):
    """`stoker plan` reads a spec that also carries the simulation's knobs; it does not judge
    them (stoker simulate does, naming simulate.KEY)."""
    from stoker.plan import load_spec

    spec = tmp_path / "job.toml"
    spec.write_text(
        (Path(__file__).parents[1] / "examples" / "pretrain-64vm.toml").read_text()
        + '\n[simulate]\nstragglers = "lognormal"\n'
    )
    assert load_spec(spec).simulate == {"stragglers": "lognormal"}
