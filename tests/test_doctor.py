"""``stoker doctor``: a fake ND H100 v5 node built in tmp_path, a fake NVML, and IMDS answers
served from loopback.

The IMDS answers in tests/fixtures/imds/*.json are constructed by hand from the documented IMDS
schema (``/metadata/instance``, api-version 2021-02-01); they are not captured from a VM, and
their IDs, names and addresses are made up. Each says so in its ``_comment`` key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from stoker.cli import doctor as cli_doctor
from stoker.measure._imds import IMDS_URL
from stoker.measure._node import Gpu, GpuReading, NvmlUnavailable, Pynvml, mdstat, mounts
from stoker.measure.doctor import DoctorReport, doctor

IMDS_FIXTURES = Path(__file__).parent / "fixtures" / "imds"
REFUSED = "http://127.0.0.1:9/metadata/instance?api-version=2021-02-01"  # discard port: refused
H100_MEMORY = 81559 * 2**20  # what NVML reports for an H100 80GB HBM3


# ---------------------------------------------------------------------------------------------
# a loopback IMDS


@dataclass
class Imds:
    base: str
    answer: str = "nd96isr_h100_v5.json"  # a fixture name, or "403" for a proxy's refusal
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.base + "/metadata/instance?api-version=2021-02-01"


@pytest.fixture
def imds() -> Iterator[Imds]:
    state = Imds(base="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            state.headers.append(dict(self.headers))
            state.paths.append(self.path)
            if self.headers.get("Metadata") != "true":  # IMDS refuses requests without it
                self._send(400, b'{"error": "Bad request. Required metadata header not specified"}')
            elif state.answer == "403":
                self._send(403, b"resolve_deny: denied destination", "text/plain")
            else:
                self._send(200, (IMDS_FIXTURES / state.answer).read_bytes())

        def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def test_fixtures_say_they_are_constructed_and_follow_the_schema():
    for path in IMDS_FIXTURES.glob("*.json"):
        doc = json.loads(path.read_text())
        assert "not captured" in doc["_comment"], path
        compute = doc["compute"]
        assert compute["vmSize"].startswith("Standard_"), path
        for key in ("location", "vmScaleSetName", "placementGroupId", "vmId", "resourceId"):
            assert key in compute, (path, key)
        assert doc["network"]["interface"][0]["ipv4"]["ipAddress"], path


# ---------------------------------------------------------------------------------------------
# a fake node


@dataclass
class FakeNvml:
    gpus: list[Gpu] = field(default_factory=list)
    driver: str = "550.127.05"
    error: NvmlUnavailable | None = None

    def read(self) -> GpuReading:
        if self.error:
            raise self.error
        return GpuReading(self.driver, list(self.gpus))


def h100s(n: int = 8) -> list[Gpu]:
    return [
        Gpu(
            index=i,
            name="NVIDIA H100 80GB HBM3",
            bus_id=f"0000000{i + 1}:00:00.0",
            memory_bytes=H100_MEMORY,
            temperature_c=34 + i,
            slowdown_c=90,
            ecc_uncorrected=0,
            remap_pending=False,
            remap_failed=False,
            fabric="completed",
        )
        for i in range(n)
    ]


def no_driver() -> FakeNvml:
    return FakeNvml(error=NvmlUnavailable("libnvidia-ml.so not found", no_driver=True))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@dataclass
class Node:
    """A fake ND96isr_H100_v5 under tmp_path: /sys, /proc and / (for /etc and /opt)."""

    base: Path

    @property
    def sys(self) -> Path:
        return self.base / "sys"

    @property
    def proc(self) -> Path:
        return self.base / "proc"

    @property
    def root(self) -> Path:
        return self.base / "root"

    def ib_port(self, dev: str, state="4: ACTIVE", phys="5: LinkUp", rate="400 Gb/sec (4X NDR)"):
        port = self.sys / "class" / "infiniband" / dev / "ports" / "1"
        _write(port / "state", state)
        _write(port / "phys_state", phys)
        _write(port / "rate", rate)
        _write(port / "link_layer", "InfiniBand")

    def nvme(self, name: str, model="Microsoft NVMe Direct Disk", size=3_840_000_000_000):
        dev = self.sys / "block" / name
        _write(dev / "size", str(size // 512))
        _write(dev / "device" / "model", model)
        (dev / "holders").mkdir(exist_ok=True)

    def run(self, vm: str | None = None, *, url: str = REFUSED, **kw) -> DoctorReport:
        kw.setdefault("nvml", FakeNvml(h100s()))
        kw.setdefault("env", {})
        return doctor(
            vm, sys_root=self.sys, proc_root=self.proc, root=self.root, imds_url=url, **kw
        )


@pytest.fixture
def node(tmp_path: Path) -> Node:
    """Everything an ND H100 v5 on the Azure HPC image has, healthy."""
    n = Node(tmp_path)
    for i in range(8):
        n.ib_port(f"mlx5_ib{i}")
    # Accelerated networking's HCA: an Ethernet port the doctor must not count as InfiniBand.
    eth = n.sys / "class" / "infiniband" / "mlx5_an0" / "ports" / "1"
    for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp")):
        _write(eth / name, text)
    _write(eth / "rate", "100 Gb/sec (4X EDR)")
    _write(eth / "link_layer", "Ethernet")
    (n.sys / "module" / "nvidia_peermem").mkdir(parents=True)
    for i in range(8):
        n.nvme(f"nvme{i}n1")
        (n.sys / "block" / f"nvme{i}n1" / "holders" / "md128").mkdir()
    n.nvme("nvme8n1", model="MSFT NVMe Accelerator v1.0", size=256 * 2**30)  # a remote disk
    members = " ".join(f"nvme{i}n1[{i}]" for i in range(8))
    _write(n.proc / "mdstat", f"Personalities : [raid0]\nmd128 : active raid0 {members}\n")
    _write(
        n.proc / "mounts",
        "/dev/sda1 / ext4 rw,relatime 0 0\n"
        "proc /proc proc rw 0 0\n"
        "/dev/md128 /mnt/resource_nvme xfs rw,relatime 0 0",
    )
    _write(
        n.root / "etc" / "nccl.conf",
        "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml",
    )
    _write(n.root / "opt" / "microsoft" / "ndv5" / "topo.xml", "<system version='1'/>")
    _write(n.root / "run" / "stoker" / "ready", "2026-01-02T03:04:05Z")  # set-up passed
    return n


def check(report: DoctorReport, name: str):
    return next(c for c in report.checks if c.check == name)


def statuses(report: DoctorReport) -> dict[str, str]:
    return {c.check: c.status for c in report.checks}


# ---------------------------------------------------------------------------------------------
# the healthy node


def test_a_healthy_h100_node_passes_every_check(node: Node, imds: Imds):
    report = node.run(url=imds.url)

    assert set(statuses(report).values()) == {"ok"}, [c for c in report.checks if c.status != "ok"]
    assert report.ok
    assert (report.vm, report.vm_source) == ("ND96isr_H100_v5", "imds")  # Standard_ stripped
    assert report.instance and report.instance.scale_set == "ndh100"
    assert check(report, "gpus").found == "8 x NVIDIA H100 80GB HBM3, 85.5 GB"
    assert check(report, "infiniband").found == "8 ports: " + ", ".join(
        f"mlx5_ib{i}" for i in range(8)
    )
    assert "mlx5_an0" not in check(report, "infiniband").found  # the Ethernet HCA
    assert check(report, "nvme").found == "8 x Microsoft NVMe Direct Disk: 27.9 TiB"  # no remote
    assert check(report, "nvme mounted").found == "md128 (raid0) on /mnt/resource_nvme (8 disks)"
    assert "(/etc/nccl.conf)" in check(report, "nccl topology").found
    # IMDS was asked properly: the Metadata header, the documented path and API version.
    assert imds.headers[0].get("Metadata") == "true"
    assert imds.paths == ["/metadata/instance?api-version=2021-02-01"]


def test_the_report_as_json(node: Node, imds: Imds):
    data = json.loads(json.dumps(node.run(url=imds.url).to_dict()))
    assert data["ok"] is True
    assert data["imds"]["vmSize"] == "Standard_ND96isr_H100_v5"
    assert data["imds"]["placementGroupId"] == "4d0c6f3e-9a51-4b7e-8d2a-1f6e5c3b2a90"
    assert data["counts"] == {"ok": 14, "warn": 0, "fail": 0, "skip": 0}
    assert set(data["checks"][0]) == {"check", "expected", "found", "status", "fix"}


# ---------------------------------------------------------------------------------------------
# what a broken node looks like


def test_a_port_down_at_200g_fails_and_is_named(node: Node, imds: Imds):
    node.ib_port("mlx5_ib3", state="1: DOWN", phys="3: Disabled", rate="200 Gb/sec (4X HDR)")
    report = node.run(url=imds.url)

    state, rate = check(report, "infiniband state"), check(report, "infiniband rate")
    assert (state.status, rate.status) == ("fail", "fail")
    assert state.found == "mlx5_ib3 port 1: DOWN (Disabled)"
    assert rate.found == "mlx5_ib3 port 1: 200 Gb/sec (4X HDR)"
    assert rate.expected == "400 Gb/s per port"
    assert "ibstat mlx5_ib3" in state.fix and "ibstat mlx5_ib3" in rate.fix
    assert check(report, "infiniband").status == "ok"  # all 8 ports are there
    assert not report.ok


def test_a_missing_hca_fails(node: Node, imds: Imds):
    import shutil

    shutil.rmtree(node.sys / "class" / "infiniband" / "mlx5_ib7")
    ib = check(node.run(url=imds.url), "infiniband")
    assert ib.status == "fail"
    assert ib.found.startswith("7 ports:") and ib.expected == "8 ports at 400 Gb/s"


def test_missing_peermem_fails_and_says_modprobe(node: Node, imds: Imds):
    (node.sys / "module" / "nvidia_peermem").rmdir()
    report = node.run(url=imds.url)

    rdma = check(report, "gpudirect rdma")
    assert rdma.status == "fail"
    assert "modprobe nvidia-peermem" in rdma.fix
    assert "nvidia_peermem not loaded" in rdma.found
    assert not report.ok


def test_peermem_found_in_proc_modules(node: Node, imds: Imds):
    (node.sys / "module" / "nvidia_peermem").rmdir()
    _write(node.proc / "modules", "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)")
    assert check(node.run(url=imds.url), "gpudirect rdma").status == "ok"


def test_imds_size_other_than_vm_fails(node: Node, imds: Imds):
    imds.answer = "nd96asr_v4.json"
    report = node.run("ND96isr_H100_v5", url=imds.url)

    size = check(report, "vm size")
    assert size.status == "fail"
    assert size.expected == "ND96isr_H100_v5"
    assert size.found.startswith("ND96asr_v4 (eastus")
    assert "--vm ND96asr_v4" in size.fix
    # The hardware is still held against what the user named.
    assert (report.vm, report.vm_source) == ("ND96isr_H100_v5", "--vm")
    assert not report.ok


def test_vm_size_is_matched_without_prefix_or_case(node: Node, imds: Imds):
    report = node.run("standard_nd96isr_h100_v5", url=imds.url)
    assert check(report, "vm size").status == "ok"
    assert report.vm == "ND96isr_H100_v5"


def test_a_vm_outside_a_scale_set_warns(node: Node, imds: Imds):
    imds.answer = "nd96isr_h100_v5_no_scale_set.json"
    report = node.run(url=imds.url)

    scale = check(report, "scale set")
    assert scale.status == "warn"
    assert "vmScaleSetName is empty" in scale.found
    assert "InfiniBand only works between VMs of one scale set or one availability set" in (
        scale.fix
    )
    assert report.ok  # a warning does not make the node unfit


def test_nvme_present_but_not_mounted_warns_with_the_raid_commands(node: Node, imds: Imds):
    _write(node.proc / "mounts", "/dev/sda1 / ext4 rw 0 0")
    (node.proc / "mdstat").unlink()
    for i in range(8):
        (node.sys / "block" / f"nvme{i}n1" / "holders" / "md128").rmdir()
    report = node.run(url=imds.url)

    mounted = check(report, "nvme mounted")
    assert mounted.status == "warn"
    assert mounted.found == ", ".join(f"nvme{i}n1" for i in range(8)) + " present but not mounted"
    assert "mdadm --create /dev/md128 --level=0 --raid-devices=8 /dev/nvme0n1" in mounted.fix
    assert "mount /dev/md128 /mnt/resource_nvme" in mounted.fix
    assert check(report, "nvme").status == "ok"
    assert report.ok


def test_an_array_that_is_not_mounted_warns(node: Node, imds: Imds):
    _write(node.proc / "mounts", "/dev/sda1 / ext4 rw 0 0")
    mounted = check(node.run(url=imds.url), "nvme mounted")
    assert mounted.status == "warn"
    assert mounted.found == "md128 holds NVMe disks but is not mounted"
    assert "sudo mount /dev/md128 /mnt/resource_nvme" in mounted.fix


def test_a_single_disk_mounted_by_partition_is_ok(tmp_path: Path):
    n = Node(tmp_path)
    n.nvme("nvme0n1")
    _write(n.sys / "block" / "nvme0n1" / "nvme0n1p1" / "partition", "1")
    _write(n.proc / "mounts", "/dev/nvme0n1p1 /scratch\\040space ext4 rw 0 0")
    mounted = check(n.run(nvml=no_driver()), "nvme mounted")
    assert (mounted.status, mounted.found) == ("ok", "nvme0n1p1 on /scratch space (1 disk)")


def test_gpu_faults_fail_and_name_the_gpu(node: Node, imds: Imds):
    gpus = h100s()
    gpus[2] = replace(gpus[2], remap_pending=True)
    gpus[5] = replace(gpus[5], remap_failed=True, temperature_c=88)
    gpus[7] = Gpu(index=7, name="?", bus_id="?", memory_bytes=0, lost="GPU is lost")
    report = node.run(url=imds.url, nvml=FakeNvml(gpus))

    health = check(report, "gpu health")
    assert health.status == "fail"
    assert "GPU 2 (00000003:00:00.0): remapped rows wait for a GPU reset" in health.found
    assert "GPU 5 (00000006:00:00.0): a memory row could not be remapped" in health.found
    assert "GPU 5 (00000006:00:00.0): 88 C (slows down at 90 C)" in health.found
    assert "GPU 7: NVML cannot read it (GPU is lost)" in health.found
    assert "nvidia-smi -r -i 2" in health.fix


def test_seven_gpus_fail(node: Node, imds: Imds):
    gpus = check(node.run(url=imds.url, nvml=FakeNvml(h100s(7))), "gpus")
    assert gpus.status == "fail"
    assert gpus.found.startswith("7 GPUs: 7 x NVIDIA H100")
    assert gpus.expected == "8 x H100 SXM, 80 GB"


def test_an_unregistered_nvlink_fabric_fails(node: Node, imds: Imds):
    gpus = [replace(g, fabric="not started") for g in h100s()]
    fabric = check(node.run(url=imds.url, nvml=FakeNvml(gpus)), "nvlink fabric")
    assert fabric.status == "fail"
    assert "nvidia-fabricmanager" in fabric.fix


def test_nccl_told_not_to_use_infiniband_fails(node: Node, imds: Imds):
    report = node.run(url=imds.url, env={"NCCL_IB_DISABLE": "1", "PATH": "/usr/bin"})
    env = check(report, "nccl environment")
    assert env.status == "fail"
    assert env.found.startswith("NCCL_IB_DISABLE=1 (environment): NCCL will not use InfiniBand")


def test_the_environment_wins_over_nccl_conf(node: Node, imds: Imds):
    report = node.run(url=imds.url, env={"NCCL_TOPO_FILE": "/nowhere/topo.xml"})
    topo = check(report, "nccl topology")
    assert topo.status == "warn"
    assert topo.found == "NCCL_TOPO_FILE=/nowhere/topo.xml (environment): no such file"
    assert "/opt/microsoft/ndv5/topo.xml" in topo.fix


def test_no_topology_setting_points_at_the_image_file(node: Node, imds: Imds):
    (node.root / "etc" / "nccl.conf").unlink()
    report = node.run(url=imds.url)
    topo, env = check(report, "nccl topology"), check(report, "nccl environment")
    assert topo.status == "warn" and "/opt/microsoft/ndv5/topo.xml exists" in topo.found
    assert topo.fix.startswith("export NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml")
    assert env.status == "warn" and "NCCL_IB_PCI_RELAXED_ORDERING not set" in env.found


# ---------------------------------------------------------------------------------------------
# nothing there: skips, unless a size was named


def test_an_empty_node_skips_everything_with_plain_messages(tmp_path: Path):
    report = Node(tmp_path).run(nvml=no_driver())

    assert set(statuses(report).values()) == {"skip"}
    assert report.ok
    assert check(report, "vm size").found.startswith("not on Azure: IMDS unreachable (")
    assert check(report, "gpus").found == (
        "no NVIDIA driver: GPU checks skipped (libnvidia-ml.so not found)"
    )
    assert check(report, "infiniband").found.startswith(
        "no InfiniBand devices: InfiniBand checks skipped"
    )


def test_an_empty_node_fails_when_a_size_is_named(tmp_path: Path):
    report = Node(tmp_path).run("ND96isr_H100_v5", nvml=no_driver())

    got = statuses(report)
    for name in ("gpus", "infiniband", "gpudirect rdma", "nvme"):
        assert got[name] == "fail", name
    assert got["vm size"] == "skip"  # no IMDS: the named size stands in for it
    assert "install the NVIDIA driver" in check(report, "gpus").fix
    assert not report.ok


def test_a_size_without_infiniband_does_not_need_it(tmp_path: Path):
    n = Node(tmp_path)
    n.nvme("nvme0n1", size=3_840_000_000_000)
    gpus = [
        Gpu(index=0, name="NVIDIA H100 NVL", bus_id="00000001:00:00.0", memory_bytes=95830 * 2**20)
    ]
    report = n.run("NC40ads_H100_v5", nvml=FakeNvml(gpus))
    got = statuses(report)
    assert got["infiniband"] == "ok" and got["gpudirect rdma"] == "skip"
    assert got["gpus"] == "ok"
    assert report.ok


def test_an_unknown_vm_is_a_user_error(tmp_path: Path):
    from stoker.errors import CatalogError

    with pytest.raises(CatalogError, match=r"unknown VM size 'ND96_nope'.*--catalog"):
        Node(tmp_path).run("ND96_nope")


def test_imds_behind_a_proxy_error_page_is_not_azure(tmp_path: Path, imds: Imds):
    imds.answer = "403"
    size = check(Node(tmp_path).run(url=imds.url, nvml=no_driver()), "vm size")
    assert size.status == "skip"
    assert size.found.endswith("answered HTTP 403)")


def test_imds_ignores_the_proxy_settings(tmp_path: Path, imds: Imds, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # a proxy that would refuse
    report = Node(tmp_path).run(url=imds.url, nvml=no_driver())
    assert check(report, "vm size").status == "ok"


# ---------------------------------------------------------------------------------------------
# readers


def test_mdstat_and_mounts_parse_what_the_kernel_writes(tmp_path: Path):
    _write(
        tmp_path / "mdstat",
        "Personalities : [raid0] [raid1]\n"
        "md128 : active raid0 nvme1n1[1] nvme0n1[0]\n"
        "      7500967936 blocks super 1.2 512k chunks\n"
        "md0 : active (auto-read-only) raid1 sdb1[1](F) sda1[0]\n"
        "unused devices: <none>",
    )
    arrays = mdstat(tmp_path)
    assert arrays["md128"].level == "raid0"
    assert arrays["md128"].members == ["nvme0n1", "nvme1n1"]
    assert arrays["md0"].level == "raid1" and arrays["md0"].members == ["sda1", "sdb1"]
    _write(tmp_path / "mounts", "/dev/md128 /mnt/a\\040b xfs rw 0 0\ntmpfs /run tmpfs rw 0 0")
    assert mounts(tmp_path) == {"/dev/md128": "/mnt/a b"}


# ---------------------------------------------------------------------------------------------
# the NVML adapter, against pynvml's own API with the library calls replaced


@pytest.fixture
def fake_pynvml(monkeypatch):
    import pynvml as nv

    calls: list[str] = []

    def lost_on_1(h):
        if h == 1:
            raise nv.NVMLError(nv.NVML_ERROR_GPU_IS_LOST)
        return b"NVIDIA H100 80GB HBM3"

    def ecc(h, kind, counter):
        assert (kind, counter) == (nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
        return 3

    def fabric(h, ref):
        ref._obj.state, ref._obj.status = nv.NVML_GPU_FABRIC_STATE_COMPLETED, nv.NVML_SUCCESS
        return nv.NVML_SUCCESS

    def not_supported(*args):
        raise nv.NVMLError(nv.NVML_ERROR_NOT_SUPPORTED)

    replace_with = {
        "nvmlInit": lambda: calls.append("init"),
        "nvmlShutdown": lambda: calls.append("shutdown"),
        "nvmlSystemGetDriverVersion": lambda: "550.127.05",
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda i: i,
        "nvmlDeviceGetName": lost_on_1,
        "nvmlDeviceGetPciInfo": lambda h: type("Pci", (), {"busId": b"00000001:00:00.0"})(),
        "nvmlDeviceGetMemoryInfo": lambda h: type("Mem", (), {"total": H100_MEMORY})(),
        "nvmlDeviceGetRemappedRows": lambda h: (0, 0, 1, 0),
        "nvmlDeviceGetRetiredPagesPendingStatus": lambda h: calls.append("retired") or 0,
        "nvmlDeviceGetTemperature": lambda h, sensor: 41,
        "nvmlDeviceGetTemperatureThreshold": not_supported,
        "nvmlDeviceGetTotalEccErrors": ecc,
        "nvmlDeviceGetGpuFabricInfo": fabric,
    }
    for name, fn in replace_with.items():
        monkeypatch.setattr(nv, name, fn)
    return nv, calls


def test_the_nvml_adapter_reads_each_gpu(fake_pynvml):
    nv, calls = fake_pynvml
    reading = Pynvml().read()

    assert reading.driver == "550.127.05"
    good, lost = reading.gpus
    assert good == Gpu(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        bus_id="00000001:00:00.0",
        memory_bytes=H100_MEMORY,
        temperature_c=41,
        slowdown_c=None,  # NOT_SUPPORTED reads as "not reported", not as an error
        ecc_uncorrected=3,
        retired_pending=None,  # Ampere and later remap rows; retired pages are not asked
        remap_pending=True,
        remap_failed=False,
        fabric="completed",
    )
    assert lost.lost == "GPU is lost" and lost.index == 1
    assert calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("code", "no_driver"),
    [("NVML_ERROR_DRIVER_NOT_LOADED", True), ("NVML_ERROR_NO_PERMISSION", False)],
)
def test_the_nvml_adapter_tells_no_driver_from_a_broken_one(
    fake_pynvml, monkeypatch, code, no_driver
):
    nv, _ = fake_pynvml

    def fail():
        raise nv.NVMLError(getattr(nv, code))

    monkeypatch.setattr(nv, "nvmlInit", fail)
    with pytest.raises(NvmlUnavailable) as info:
        Pynvml().read()
    assert info.value.no_driver is no_driver


# ---------------------------------------------------------------------------------------------
# this machine, and the command


def _gpu_or_ib_here() -> bool:
    if Path("/sys/class/infiniband").exists():
        return True
    try:
        Pynvml().read()
    except NvmlUnavailable:
        return False
    return True


needs_bare_machine = pytest.mark.skipif(
    _gpu_or_ib_here(), reason="this machine has a GPU or InfiniBand"
)


@needs_bare_machine
def test_the_real_nvml_says_no_driver_here():
    with pytest.raises(NvmlUnavailable) as info:
        Pynvml().read()
    assert info.value.no_driver


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("doctor")(cli_doctor.doctor)
    app.command("other")(lambda: None)  # two commands, so "doctor" stays a subcommand
    return app


@needs_bare_machine
def test_this_machine_runs_and_skips_plainly(cli: typer.Typer):
    result = CliRunner().invoke(cli, ["doctor", "--imds-url", REFUSED])
    assert result.exit_code == 0, result.output
    assert "not on Azure: IMDS unreachable" in result.output
    assert "no NVIDIA driver: GPU checks skipped" in result.output
    assert "0 fail" in result.output and "node fit" in result.output


@needs_bare_machine
def test_this_machine_fails_as_an_h100_with_exit_1_and_json(cli: typer.Typer, imds: Imds):
    result = CliRunner().invoke(cli, ["doctor", "--json", "--imds-url", imds.url])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["vm_source"] == "imds"
    assert {c["check"]: c["status"] for c in data["checks"]}["gpus"] == "fail"


def test_an_unknown_vm_exits_2_with_one_line(cli: typer.Typer):
    result = CliRunner().invoke(cli, ["doctor", "--vm", "ND96_nope", "--imds-url", REFUSED])
    assert result.exit_code == 2
    assert "error: unknown VM size 'ND96_nope'" in result.output
    assert "Traceback" not in result.output


def test_the_default_imds_url_is_azures():
    assert IMDS_URL == "http://169.254.169.254/metadata/instance?api-version=2021-02-01"


@pytest.mark.parametrize(
    ("env", "status", "found"),
    [
        ({"NCCL_IB_DISABLE": " 1"}, "fail", "NCCL_IB_DISABLE= 1 (environment): NCCL will not use"),
        ({"NCCL_IB_DISABLE": "01"}, "fail", "NCCL_IB_DISABLE=01 (environment): NCCL will not use"),
        ({"NCCL_NET": "Socket"}, "fail", "NCCL_NET=Socket (environment): NCCL sends over TCP"),
        ({"NCCL_P2P_DISABLE": "1"}, "fail", "NCCL_P2P_DISABLE=1 (environment): NVLink"),
        ({"NCCL_IB_GDR_LEVEL": "0"}, "warn", "NCCL_IB_GDR_LEVEL=0 (environment): GPUDirect RDMA"),
        ({"NCCL_IB_HCA": "mlx5_an0"}, "fail", "NCCL_IB_HCA=mlx5_an0 (environment): names no"),
        ({"NCCL_IB_HCA": "^mlx5_ib"}, "fail", "names no InfiniBand HCA"),
        ({"NCCL_IB_HCA": "=mlx5_ib"}, "fail", "names no InfiniBand HCA"),
    ],
    ids=["space1", "01", "socket", "p2p", "ib-gdr", "hca-eth", "hca-exclude", "hca-exact"],
)
def test_harmful_nccl_settings_are_caught(
    node: Node, imds: Imds, env: dict, status: str, found: str
) -> None:
    report = node.run(url=imds.url, env=env)
    c = check(report, "nccl environment")
    assert c.status == status and found in c.found, c


@pytest.mark.parametrize(
    "env", [{"NCCL_IB_DISABLE": "0"}, {"NCCL_IB_HCA": "mlx5_ib"}, {"NCCL_IB_HCA": "=mlx5_ib3:1"}]
)
def test_harmless_nccl_settings_pass(node: Node, imds: Imds, env: dict) -> None:
    assert check(node.run(url=imds.url, env=env), "nccl environment").status == "ok"


def test_a_bad_imds_url_is_one_clear_error_and_a_password_is_never_echoed(
    node: Node, imds: Imds
) -> None:
    app = typer.Typer()
    app.command()(cli_doctor.doctor)
    for url, message in (("http://[::1", "not a URL"), ("ftp://x", "give an http:// URL")):
        out = CliRunner().invoke(app, ["--imds-url", url])
        assert out.exit_code == 2 and f"--imds-url {url}: {message}" in out.output, out.output
    report = node.run(url="http://user:s3cret@127.0.0.1:9/metadata")
    assert "s3cret" not in json.dumps(report.to_dict())
