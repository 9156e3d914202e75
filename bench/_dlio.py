"""DLIO (MLPerf Storage's engine) in its own virtual environment, and how to run it.

``ensure()`` installs it once into ``.bench/dlio-venv`` (ignored by git) and returns that
interpreter. DLIO's wheel pins a stack for every framework it can drive (TensorFlow, DALI for
CUDA 11, torchvision, torchaudio, h5py): the PyTorch data loader over NPZ files needs none of
those, so the wheel goes in with ``--no-deps`` and then only what that path imports:

    python3.11 -m venv .bench/dlio-venv
    .bench/dlio-venv/bin/pip install --no-deps dlio-benchmark==2.0.0
    .bench/dlio-venv/bin/pip install torch==2.13.0 hydra-core omegaconf pandas psutil \
        numpy PyYAML pydftracer==1.0.2 mpi4py mpich

``mpich`` is MPICH's own PyPI wheel (libmpi and ``mpiexec``), which the ``mpi4py`` wheel loads;
DLIO is started as ``mpiexec -n 1 python bench/_dlio.py <hydra overrides>``, one rank, as
MLPerf Storage starts it with one accelerator. ``pydftracer==1.0.2`` is the version the wheel
asks for (2.x moved ``dftracer.logger``, which DLIO 2.0.0 imports).

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

import os
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench" / "dlio-venv"
PYTHON = VENV / "bin" / "python"
MPIEXEC = VENV / "bin" / "mpiexec"
VERSION = "2.0.0"
NEEDS = (
    "torch==2.13.0",  # the CPU build on this disk; DLIO's pytorch loader and framework
    "hydra-core",
    "omegaconf",
    "pandas",
    "psutil",
    "numpy",
    "PyYAML",
    "pydftracer==1.0.2",
    "mpi4py",
    "mpich",
)


def install_steps(base: str = "python3.11") -> list[list[str]]:
    pip = [str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    return [
        [base, "-m", "venv", str(VENV)],
        [*pip, "--no-deps", f"dlio-benchmark=={VERSION}"],
        [*pip, *NEEDS],
    ]


def ensure() -> Path:
    """The DLIO interpreter, installed on first use (a few minutes: torch is most of it)."""
    stamp = VENV / ".bench-installed"
    if not stamp.exists():
        base = "python3.11" if _which("python3.11") else "python3"
        for step in install_steps(base):
            print("+", " ".join(step), file=sys.stderr, flush=True)
            subprocess.run(step, check=True)
        subprocess.run([str(PYTHON), "-c", "import dlio_benchmark, mpi4py.MPI, torch"], check=True)
        stamp.touch()
    return PYTHON


def _which(name: str) -> bool:
    return any((Path(d) / name).exists() for d in os.environ.get("PATH", "").split(os.pathsep))


def versions() -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json;"
        "print(json.dumps({p: m.version(p) for p in "
        "('dlio-benchmark', 'torch', 'mpi4py', 'mpich', 'hydra-core', 'numpy')}))"
    )
    out = subprocess.run([str(PYTHON), "-c", code], check=True, capture_output=True, text=True)
    import json

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
