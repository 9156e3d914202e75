"""The plan against published results. Every row keeps its source (URL and date) and its
tolerance: 10 % unless the source says otherwise.

MLPerf Storage v3.0 on Azure Managed Lustre:
https://learn.microsoft.com/azure/azure-managed-lustre/mlperf-storage-v3-results (ms.date
2026-09-01). The UNET3D workload (B200): https://github.com/mlcommons/storage
configs/dlio/workload/unet3d_b200.yaml (batch 7, 146,600,628 B per sample, 0.162 s of compute
per batch, AU >= 0.90), read 2026-12-02.
"""

from pathlib import Path

import pytest

from stoker.catalog import load_catalog
from stoker.plan import lustre, plan_job

TIB = 2**40
TOLERANCE = 0.10
MLPERF_V3 = "learn.microsoft.com/azure/azure-managed-lustre/mlperf-storage-v3-results, 2026-09-01"

# (public id, AMLFS tier, capacity TiB, simulated B200 accelerators, read GB/s) - training.
TRAINING = [
    ("v3.0-0041", 20, 960, 3, 18.6),
    ("v3.0-0045", 40, 480, 3, 18.6),
    ("v3.0-0033", 125, 160, 3, 18.6),
    ("v3.0-0043", 250, 80, 3, 18.7),
    ("v3.0-0047", 500, 40, 3, 18.6),
    ("v3.0-0040", 20, 4800, 16, 97.0),
    ("v3.0-0044", 40, 2400, 16, 95.6),
    ("v3.0-0038", 125, 800, 16, 97.2),
    ("v3.0-0042", 250, 400, 16, 97.3),
    ("v3.0-0046", 500, 200, 16, 96.9),
    ("v3.0-0034", 125, 2400, 46, 270.1),
    ("v3.0-0039", 20, 25632, 70, 405.9),
    ("v3.0-0037", 125, 4096, 70, 407.1),
]
# (public id, model parameters, capacity TiB on AMLFS 125, write GB/s, write duration s).
# v3.0-0035 (1250B, 689.6 GB/s on a 512 GB/s rating) is left out: a burst above the rating,
# which the page warns not to size from.
CHECKPOINTS = [
    ("v3.0-0032", 8e9, 160, 14.3, 7.86),
    ("v3.0-0031", 70e9, 1280, 113.3, 8.65),
    ("v3.0-0036", 405e9, 4096, 490.7, 11.76),
]
UNET3D_B200 = {"batch": 7, "sample_bytes": 146_600_628, "compute_s": 0.162}


@pytest.fixture(scope="module")
def cat():
    return load_catalog(defaults=False)


def unet3d(accelerators: int, au_target: float | None = None) -> dict:
    """The UNET3D B200 workload as a job spec: one simulated accelerator per GPU, no gradient
    exchange (DLIO emulates compute with a sleep)."""
    workload = {
        "step_time": UNET3D_B200["compute_s"],
        "global_batch": UNET3D_B200["batch"] * accelerators,
        "sample_size": UNET3D_B200["sample_bytes"],
        "dataset_size": "984 GiB",
    }
    if au_target is not None:
        workload["au_target"] = au_target
    return {
        "cluster": {"vm_size": "ND128isr_NDR_GB200_v6", "gpus": accelerators},
        "workload": workload,
        "data": {"tier": "lustre"},
        "checkpoints": {"size": "1 GB"},  # DLIO's training run takes none worth planning
    }


@pytest.mark.parametrize("row", TRAINING, ids=[r[0] for r in TRAINING])
def test_training_read_rate_at_the_au_target_matches_mlperf(cat, row):
    public_id, _, _, accelerators, read_gbps = row
    need = plan_job(unet3d(accelerators), cat).data.required_bps / 1e9
    # The run passed MLPerf's AU >= 90 %: what it read meets the need at that target ...
    assert need <= read_gbps, f"{public_id} ({MLPERF_V3})"
    assert need == pytest.approx(read_gbps, rel=TOLERANCE), f"{public_id} ({MLPERF_V3})"


def test_planning_for_full_utilization_asks_more_than_the_passing_runs_read(cat):
    # ... while the AU 100 % rate (the plan before the target existed) is more than the largest
    # passing runs delivered: it oversizes the tier.
    full = plan_job(unet3d(70, au_target=1.0), cat).data.required_bps / 1e9
    assert full > 407.1 and full > 405.9  # v3.0-0037, v3.0-0039 (MLPERF_V3)


@pytest.mark.parametrize("row", TRAINING, ids=[r[0] for r in TRAINING])
def test_lustre_read_delivery_by_size_matches_mlperf(cat, row):
    public_id, tier, tib, _, read_gbps = row
    sku = cat.lustre[f"AMLFS-Durable-Premium-{tier}"]
    got = lustre.delivered(tib * TIB, sku, cat.lustre_common) / 1e9
    # Reads are what the accelerators asked for: the file system delivered at least that.
    assert got == pytest.approx(read_gbps, rel=TOLERANCE), f"{public_id} ({MLPERF_V3})"


def test_one_delivered_share_for_every_size_misses_the_largest_runs(cat):
    # The catalog's single 95.6 % (measured at 100 GB/s) overstates a 4,096 TiB file system by
    # more than the tolerance: 489 vs 407.1 GB/s read (v3.0-0037, MLPERF_V3).
    sku = cat.lustre["AMLFS-Durable-Premium-125"]
    constant = lustre.rated(4096 * TIB, sku) * cat.lustre_common.delivered_fraction / 1e9
    assert constant > 407.1 * (1 + TOLERANCE)
    fitted = lustre.delivered(4096 * TIB, sku, cat.lustre_common) / 1e9
    assert fitted == pytest.approx(407.1, rel=TOLERANCE)


@pytest.mark.parametrize("row", CHECKPOINTS, ids=[r[0] for r in CHECKPOINTS])
def test_lustre_checkpoint_writes_by_size_match_mlperf(cat, row):
    public_id, params, tib, write_gbps, write_s = row
    sku = cat.lustre["AMLFS-Durable-Premium-125"]
    rate = lustre.delivered(tib * TIB, sku, cat.lustre_common, write=True)
    assert rate / 1e9 == pytest.approx(write_gbps, rel=TOLERANCE), f"{public_id} ({MLPERF_V3})"
    # The checkpoint is 14 bytes per parameter (stoker's default: bf16 weights + fp32 Adam).
    assert params * 14 / rate == pytest.approx(write_s, rel=TOLERANCE), public_id


def test_writes_and_reads_differ_at_one_size(cat):
    # 1,280 TiB of AMLFS 125 (160 GB/s rated): 113.3 GB/s of checkpoint writes (v3.0-0031) but
    # reads interpolated from 95.6 % at 100 GB/s and 90 % at 300 GB/s (MLPERF_V3).
    sku = cat.lustre["AMLFS-Durable-Premium-125"]
    read = lustre.delivered(1280 * TIB, sku, cat.lustre_common)
    write = lustre.delivered(1280 * TIB, sku, cat.lustre_common, write=True)
    assert write / 1e9 == pytest.approx(113.3, rel=0.01)
    assert read > 1.2 * write


# ---- issue 54: the checkpoint interval at any MTBF (plan/_renewal.py) ----------------------
# J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
# Future Generation Computer Systems 22 (2006) 303-312, doi:10.1016/j.future.2004.11.016,
# online 2004-12-28; Figs. 3-5 (R = 10 min restart, delta = 5 min dump): "The new model
# predicts tau_opt = 117 min" at M = 24 h, 57 min at 6 h, 9.1 min at 15 min. Tolerance 2 %.
# No efficiency (goodput) figure at these MTBFs was found in a readable published source; the
# efficiency is held to a Monte Carlo of the same assumptions instead (tests/test_plan_renewal.py).
DALY_2006 = "doi:10.1016/j.future.2004.11.016 (Figs. 3-5), 2004-12-28"
DALY_INTERVALS = [(24 * 60, 117.0), (6 * 60, 57.0), (15, 9.1)]  # (MTBF min, interval min)


@pytest.mark.parametrize(("mtbf_min", "interval_min"), DALY_INTERVALS, ids=["24h", "6h", "15min"])
def test_the_plans_optimal_interval_matches_daly_2006(cat, mtbf_min, interval_min):
    from stoker.plan import make_plan, parse_spec

    # A synchronous save to Blob that blocks 5 min: plan once for the write rate, then size the
    # checkpoint so that it takes 300 s (the rate does not depend on the size).
    def job(size_bytes: float) -> dict:
        return {
            "cluster": {"vm_size": "ND96isr_H100_v5", "nodes": 2},
            "workload": {
                "kind": "pretrain",
                "step_time": "1 s",
                "global_batch": 16,
                "sample_size": "1 MB",
                "dataset_size": "1 TB",
            },
            "checkpoints": {"mode": "sync", "tier": "blob", "size": size_bytes},
            # 16 GPUs: the job MTBF is one GPU's over 16
            "reliability": {"gpu_mtbf": f"{mtbf_min * 16} min", "restart_time": "10 min"},
        }

    first = make_plan(parse_spec(job(1e12)), cat).checkpoints
    ck = make_plan(parse_spec(job(300 * first.write_bps)), cat).checkpoints
    assert ck.blocking_s == pytest.approx(300) and ck.job_mtbf_s == pytest.approx(mtbf_min * 60)
    assert ck.optimal_interval_s / 60 == pytest.approx(interval_min, rel=0.02), DALY_2006
    assert ck.interval_s == ck.optimal_interval_s  # "auto" takes it


# ---- issue 54: a Microsoft-arranged fabric against Azure's published run (fabric2) ----------
# Azure, "Azure sets a scale record in large language model training", 2023-11-08,
# https://azure.microsoft.com/en-us/blog/azure-sets-a-scale-record-in-large-language-model-training/
# : GPT-3 175B "trained to completion in 4 minutes on 1,344 ND H100 v5 VMs" (MLPerf Training
# v3.1, result 3.1-2002). The run's own logs, published with the result (MLCommons, 2023-11-08,
# https://github.com/mlcommons/training_results_v3.1, Azure+NVIDIA/results/
# ND_H100_v5_n1344_pytorch/gpt3/result_0.txt): run_start to run_stop 240.5 s (4.008 min), 220
# steps of 2,688 x 2,048 tokens, train_step_timing 0.952 s on average, 22 evaluations 24.1 s.
# The per-GPU compute rate is not taken from that run: the plan is calibrated on NVIDIA's
# 64-node run of the same benchmark and code (same repository, NVIDIA/results/
# eos_n64_ngc23.09_nemo/gpt3/result_0.txt: global batch 2,048, 128 micro-batches, 11.045 s a
# step on 512 H100s) and then predicts the 1,344-VM run. How the figures map: the plan's step
# before checkpoints (MLPerf takes none) is the logged train_step_timing; its steps (from
# run.tokens) times that step, plus the logged evaluation time the plan does not model, is the
# published run time. Tolerance 10 %. Left to the plan: the interleaved pipeline's bubble
# (7 / (8 x 12) of compute, not 7 / 8) and the gradient exchange, which with gradient
# accumulation hides only behind the last micro-batch; without either the plan misses by more.
AZURE_MLPERF_GPT3 = (
    "azure.microsoft.com/en-us/blog/azure-sets-a-scale-record-in-large-language-model-training, "
    "2023-11-08; github.com/mlcommons/training_results_v3.1 Azure+NVIDIA n1344 gpt3 result_0"
)
AZURE_RUN_S, AZURE_STEP_S, AZURE_EVAL_S, AZURE_STEPS = 240.5, 0.952, 24.1, 220
EOS_64_STEP_S, EOS_64_BATCH = 11.045, 2048
GPT3_SPEC = Path(__file__).parent / "data" / "mlperf-v3.1-gpt3-1344vm.toml"


def _gpt3(nodes: int | None = None, batch: int | None = None, rate: float | None = None, **work):
    import tomllib

    from stoker.plan import parse_spec

    data = tomllib.loads(GPT3_SPEC.read_text())
    if nodes is not None:
        data["cluster"]["nodes"] = nodes
    if batch is not None:
        data["workload"]["global_batch"] = batch
    if rate is not None:
        data["workload"]["tokens_per_s_per_gpu"] = rate
    data["workload"].update(work)
    return parse_spec(data, str(GPT3_SPEC))


def _step_s(spec, cat) -> float:
    from stoker.plan import make_plan

    step = make_plan(spec, cat).step
    return step.total_s - step.checkpoint_s  # MLPerf's timed steps save no checkpoint


def _calibrated_rate(cat) -> float:
    """The compute rate at which the plan's 64-node step is NVIDIA's measured one (the plan's
    step grows with compute time, so a fixed point converges)."""
    rate = 800.0
    for _ in range(40):
        rate *= _step_s(_gpt3(64, EOS_64_BATCH, rate), cat) / EOS_64_STEP_S
    assert _step_s(_gpt3(64, EOS_64_BATCH, rate), cat) == pytest.approx(EOS_64_STEP_S, rel=1e-3)
    return rate


def test_the_microsoft_arranged_fabric_plans_azures_mlperf_gpt3_run(cat):
    from stoker.plan import make_plan
    from stoker.plan.facts import FabricLayout

    rate = _calibrated_rate(cat)
    spec = _gpt3()
    # The spec file carries the calibrated rate, so `stoker plan` on it gives this test's plan.
    assert spec.workload.tokens_per_s_per_gpu == pytest.approx(rate, rel=0.01)
    plan = make_plan(_gpt3(rate=rate), cat)
    assert plan.interconnect.fabric_layout is FabricLayout.MICROSOFT_ARRANGED
    assert plan.run.steps == AZURE_STEPS  # run.tokens is the logged 220 steps' tokens
    step = _step_s(_gpt3(rate=rate), cat)
    assert step == pytest.approx(AZURE_STEP_S, rel=TOLERANCE), AZURE_MLPERF_GPT3
    run = plan.run.steps * step + AZURE_EVAL_S
    assert run == pytest.approx(AZURE_RUN_S, rel=TOLERANCE), AZURE_MLPERF_GPT3


@pytest.mark.parametrize(
    ("work", "why"),
    [({"virtual_stages": 1}, "the 1F1B bubble without interleaving"), ({"layers": None}, "")],
    ids=["no-interleaving", "no-model-shape"],
)
def test_without_the_runs_pipeline_schedule_the_plan_misses_azures_step(cat, work, why):
    # The same calibration without the interleaved schedule (or without the model's shape,
    # so no micro-batches and no bubble at all) moves the prediction past the tolerance: the
    # published step checks what the plan models, not only its inputs.
    if "layers" in work:
        work = {"layers": None, "hidden_size": None, "virtual_stages": 1}
    rate = 800.0
    for _ in range(40):
        rate *= _step_s(_gpt3(64, EOS_64_BATCH, rate, **work), cat) / EOS_64_STEP_S
    step = _step_s(_gpt3(rate=rate, **work), cat)
    assert abs(step / AZURE_STEP_S - 1) > TOLERANCE, why or "without the model's shape"
