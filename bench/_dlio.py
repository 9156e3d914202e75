"""DLIO (MLPerf Storage's engine) in its own virtual environment, and how to run it.

``_peers.ensure_dlio()`` installs it once into ``.bench/dlio-venv`` (ignored by git); DLIO is
started as ``mpiexec -n 1 python bench/_dlio.py <hydra overrides>``, one rank, as MLPerf Storage
starts it with one accelerator. ``run_dlio`` runs one training (or data generation) with the
loader bench's configuration and reads DLIO's own summary and step timeline.

Run as a script (with the DLIO interpreter), this file is DLIO's ``dlio_benchmark`` entry
point with one change: ``dlio_benchmark.profiler.profiler_factory`` imports its TensorBoard
profiler, hence TensorFlow, at module level although it is used only with
``profiling.profiler=tensorboard``; that one module is replaced by a stub that says so when
used, so that TensorFlow need not be installed.

One fix on the measured path, on unless ``STOKER_BENCH_DLIO_AS_SHIPPED=1``: DLIO 2.0.0's
``FormatReader.read_index`` (``reader/reader_handler.py``, line 115) starts with
``logging.debug(f"{self.global_index_map}")``, an f-string evaluated whatever the log level,
which formats the whole sample map (every file path) for every sample read: about 10 ms per
sample at 4,000 files on this machine, so O(files) CPU per sample and O(files^2) per epoch, which
makes DLIO's PyTorch path CPU-bound on any dataset of more than a few hundred files (a later
upstream version keeps the line, as ``self.logger.debug``). ``read_index`` is replaced by the same body
without that line; everything else (the file open, ``get_sample``, ``preprocess``, the close,
the returned resized image) is DLIO's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

from _peers import DLIO_VENV
from _peers import ensure_dlio as ensure  # noqa: F401 (the install lives with every peer's)

VENV = DLIO_VENV
PYTHON = VENV / "bin" / "python"
MPIEXEC = VENV / "bin" / "mpiexec"
DLIO_BASE = {"resnet50": "resnet50_h100", "unet3d": "unet3d_h100", "cosmoflow": "cosmoflow_h100"}


def versions() -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({p: m.version(p) for p in "
        "('dlio-benchmark', 'torch', 'mpi4py', 'mpich', 'hydra-core', 'numpy', 'pydftracer')}))"
    )
    out = subprocess.run([str(PYTHON), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def command(overrides: list[str]) -> list[str]:
    """``mpiexec -n 1`` DLIO with these Hydra overrides (run it with ``env()``)."""
    return [str(MPIEXEC), "-n", "1", str(PYTHON), str(Path(__file__).resolve()), *overrides]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{VENV / 'bin'}{os.pathsep}{e.get('PATH', '')}"
    e["DFTRACER_ENABLE"] = "0"  # no I/O tracing: it would cost both loaders' time unevenly
    e.setdefault("OMP_NUM_THREADS", "1")
    return e


def dlio_overrides(cfg: dict, *, compute_s: float, out: Path, generate: bool) -> list[str]:
    """DLIO's own workload config for the model, moved onto its PyTorch + NPZ path and set to
    the compared configuration (batch, compute time, reader threads, samples, sample size)."""
    p, w = cfg["preset"], "++workload"
    return [
        f"workload={DLIO_BASE[cfg['workload']]}",
        f"{w}.framework=pytorch",
        f"{w}.reader.data_loader=pytorch",
        f"{w}.dataset.format=npz",
        f"{w}.dataset.data_folder={cfg['dlio_data']}",
        f"{w}.dataset.num_files_train={cfg['samples']}",
        f"{w}.dataset.num_files_eval=0",
        f"{w}.dataset.num_samples_per_file=1",
        f"{w}.dataset.record_length={p['sample_bytes']}",
        f"{w}.dataset.record_length_stdev={p['sample_sd']}",
        f"{w}.dataset.record_length_resize={cfg['dlio_resize']}",
        f"{w}.reader.batch_size={cfg['batch']}",
        f"{w}.reader.read_threads={cfg['workers']}",
        # torch's DataLoader default, which stoker's run_loader keeps: 2 batches per worker
        f"{w}.reader.prefetch_size={2 * cfg['workers']}",
        f"{w}.train.computation_time={compute_s}",
        f"{w}.train.epochs=1",
        f"{w}.workflow.generate_data={generate}",
        f"{w}.workflow.train={not generate}",
        f"{w}.workflow.evaluation=False",
        f"{w}.workflow.checkpoint=False",
        f"{w}.workflow.profiling=False",
        f"hydra.run.dir={out}",
    ]


def run_dlio(
    cfg: dict, *, compute_s: float, out: Path, generate: bool = False, as_shipped: bool = False
) -> dict:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = command(dlio_overrides(cfg, compute_s=compute_s, out=out, generate=generate))
    env_ = env() | ({"STOKER_BENCH_DLIO_AS_SHIPPED": "1"} if as_shipped else {})
    began = time.perf_counter()
    with open(out / "stdout.log", "w") as log:
        proc = subprocess.run(cmd, cwd=out, env=env_, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - began
    if proc.returncode:
        tail = (out / "stdout.log").read_text()[-3000:]
        raise RuntimeError(f"DLIO failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    if generate:
        return {"wall_s": wall}
    m = json.loads((out / "summary.json").read_text())["metric"]
    au = m["train_au_mean_percentage"] / 100
    # DLIO's own timeline: per step, load = waiting for the batch, proc = load + compute.
    # AU = sum(nominal compute[1:]) / T with T = block time - proc[0]; stoker's formula on the
    # same timeline counts as compute all that is not waiting: 1 - sum(load[1:]) / T.
    ep = json.loads((out / "0_output.json").read_text())["1"]
    load, nominal = ep["load"]["block1"], ep["compute"]["block1"]
    total = sum(nominal[1:]) / au if au > 0 else None
    return {
        "au": au,
        "au_stoker_formula": 1 - sum(load[1:]) / total if total else None,
        "steps": len(load),
        "samples_per_s": m["train_throughput_mean_samples_per_second"],
        "mb_per_s": m.get("train_io_mean_MB_per_second"),
        "wall_s": wall,
    }


def _stub_tf_profiler() -> None:
    mod = types.ModuleType("dlio_benchmark.profiler.tf_profiler")

    class TFProfiler:  # noqa: D401 - a stand-in
        @staticmethod
        def get_instance():
            raise RuntimeError("the TensorBoard profiler needs TensorFlow, not installed here")

    mod.TFProfiler = TFProfiler
    sys.modules[mod.__name__] = mod


def _drop_index_map_debug() -> None:
    import logging

    from dlio_benchmark.common.enumerations import ReadType
    from dlio_benchmark.reader.reader_handler import FormatReader
    from dlio_benchmark.utils.utility import utcnow

    def read_index(self, global_sample_idx, step):  # DLIO 2.0.0's, less its line 115
        self.step = step
        self.image_idx = global_sample_idx
        filename, sample_index = self.global_index_map[global_sample_idx]
        logging.debug(f"{utcnow()} read_index {filename}, {sample_index}")
        FormatReader.read_images += 1
        if (
            self._args.read_type is ReadType.ON_DEMAND
            or filename not in self.open_file_map
            or self.open_file_map[filename] is None
        ):
            self.open_file_map[filename] = self.open(filename)
        self.get_sample(filename, sample_index)
        self.preprocess()
        if self._args.read_type is ReadType.ON_DEMAND:
            self.close(filename)
            self.open_file_map[filename] = None
        return self._args.resized_image

    FormatReader.read_index = read_index


if __name__ == "__main__":
    _stub_tf_profiler()
    if os.environ.get("STOKER_BENCH_DLIO_AS_SHIPPED") != "1":
        _drop_index_map_debug()
    from dlio_benchmark.main import main

    main()
