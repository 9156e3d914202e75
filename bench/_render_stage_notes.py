"""Notes of the ``## stage:`` section on the machine while it ran: other work on its cores, what
fresh memory costs on this VM (see bench/_machine.py), and whose account the writeback is on."""

from __future__ import annotations

KERNEL_NOTE = """\
CPU is each process's own (user + system, from `/usr/bin/time`). rclone and AzCopy leave their
pages to the kernel's flusher threads, whose work is on no process's account, while stoker
starts its writeback and fsyncs each file in its own system time; where measured, the last
column also compares each tool's CPU plus what the kernel's threads used from its start to the
end of the `sync` after it (stoker, then the command, against rclone).
"""


def quiet_note(shapes: list[dict]) -> str:
    """Whether the machine was left to the benchmark: other work skews every figure."""
    shares = {sh["shape"]: sh.get("cpu_elsewhere") for sh in shapes}
    if any(v is None for v in shares.values()):
        return ""
    worst = max(shares.values())
    text = ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
    if worst < 0.05:
        return f"Other processes used little of the CPU meanwhile ({text}).\n"
    return (
        f"**Other processes used {text} of the machine's CPU while these shapes ran**: the "
        "figures are skewed; run again on a quiet machine.\n"
    )


def memory_note(mem: dict | None) -> str:
    """What priming the memory before each run is for, with the rates measured at the start."""
    if not mem:
        return ""
    return f""" Before each run the benchmark also fills and frees {mem["prime_gib"]:g} GiB of
memory (`prime_memory` in `bench/_machine.py`): this VM hands memory freed a few seconds ago back
to its host, and taking it again is dear (1 GiB written into the page cache, measured at the
start: {mem["recycled_mb_s"]:,.0f} MB/s into memory just freed, {mem["returned_mb_s"]:,.0f} MB/s
into memory freed {mem["pause_s"]:g} s before), so without it the tool that wrote soonest after
the last run's files were deleted paid the least system time."""
