"""A data-moving process keeps the memory it frees (stoker._malloc): buffers freed and made
again come from the heap, not from fresh pages the kernel faults in and zeroes."""

from __future__ import annotations

import subprocess
import sys

import pytest

# 20 rounds of 16 buffers of 4 MiB, each written, then all freed: the pattern of a copy's
# pieces. Prints the minor page faults the rounds after the first cost.
CHURN = """
import resource, sys
from stoker._malloc import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
def round_():
    held = [bytearray(4 << 20) for _ in range(16)]
    for b in held:
        b[::4096] = b"x" * len(b[::4096])
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc is Linux's")
def test_buffers_freed_and_made_again_reuse_the_heap() -> None:
    default, kept = _faults("default"), _faults("kept")
    # By default each round's 64 MiB comes back as fresh pages (16,384 faults a round).
    assert default > 20 * 16 * 1024 // 2
    assert kept < default // 10
