"""A data-moving process keeps the memory it frees (stoker._malloc): buffers freed and made
again come from the heap, not from fresh pages the kernel faults in and zeroes."""

from __future__ import annotations

import subprocess
import sys

import pytest

# 20 rounds of 16 buffers of MIB MiB, each written, then all freed: the pattern of a copy's
# pieces (4 MiB: objects fetched whole; 1 MiB: obstore's pieces). Prints the minor page faults
# the rounds after the first cost. "kept": the commands' fixed thresholds; "raised": what a
# library's stage run does (once a process).
CHURN = """
import resource, sys
from stoker._malloc import keep_freed_memory, raise_dynamic_thresholds
mode, mib = sys.argv[1], int(sys.argv[2])
if mode == "kept":
    assert keep_freed_memory()
if mode == "raised":
    assert raise_dynamic_thresholds()
    assert not raise_dynamic_thresholds()  # (once a process)
def round_():
    held = [bytearray(mib << 20) for _ in range(16)]
    for b in held:
        b[::4096] = b"x" * len(b[::4096])
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str, mib: int = 4) -> int:
    argv = [sys.executable, "-c", CHURN, mode, str(mib)]
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_buffers_freed_and_made_again_reuse_the_heap() -> None:
    default, kept = _faults("default"), _faults("kept")
    # By default each round's 64 MiB comes back as fresh pages (16,384 faults a round).
    assert default > 20 * 16 * 1024 // 2
    assert kept < default // 10


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_a_stage_run_raises_the_thresholds_a_script_left_low() -> None:
    default, raised = _faults("default", mib=1), _faults("raised", mib=1)
    # The first 1 MiB freed sets the thresholds to ~1 and ~2 MiB: a round's 16 MiB freed at the
    # heap's top goes back to the kernel and is faulted in again (4,096 faults a round).
    assert default > 20 * 16 * 256 // 2
    assert raised < default // 10


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_stage_raises_them_once_for_its_process(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(b"x" * 1000)
    script = (
        "import sys\n"
        "from stoker._malloc import raise_dynamic_thresholds\n"
        "from stoker.stage import stage\n"
        "assert stage(sys.argv[1], sys.argv[2]).ok\n"
        "print(raise_dynamic_thresholds())\n"  # (False: the run made the call already)
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "src"), str(tmp_path / "dst")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
