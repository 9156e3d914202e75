"""An nccl-tests-style sweep of all-reduce, all-gather and reduce-scatter over torch.distributed,
beside the plan's prediction and the catalog's floor for a VM size.

Sizes follow nccl-tests (doc/PERFORMANCE.md): ``S`` is the buffer each rank reduces for
all-reduce, and the *total* array (``count per rank x ranks``) for all-gather (output) and
reduce-scatter (input). ``algbw = S / t`` and ``busbw = algbw x bus_factor``, both from
``plan/collectives.py``. Each iteration is timed on every rank (CUDA events on GPU, the wall
clock on CPU), the slowest rank's time is kept per iteration (``across="max"``; nccl-tests'
default ``-a 1`` averages the ranks' mean times instead: ``across="avg"``), and ``t`` is the mean
over iterations (nccl-tests times the whole loop and divides; the mean is the same when no
rank lags). Buffers are float32 and the ops out-of-place, except all-reduce, which torch runs in
place. Each size runs once first and is checked, like nccl-tests' ``#wrong``.

All-gather and reduce-scatter use the single-tensor calls (``all_gather_single`` /
``reduce_scatter_single`` in torch 2.13, formerly ``*_into_tensor`` / ``*_tensor``), which gloo
has in torch 2.13; where a backend refuses them the list forms (``all_gather`` /
``reduce_scatter`` over a list of chunks) run instead and ``methods`` names the call; a backend
with neither reports the collective in ``unsupported``.

Run it with ``torchrun --nproc-per-node N -m stoker.cli.bench_allreduce [options]``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from .._dist_env import torchrun_env
from ..errors import StokerError
from ..plan import collectives as c
from ._process_group import LAUNCH
from ._process_group import init_from_env as init_from_env  # (part of this module's API)

if TYPE_CHECKING:
    import torch

    from ..catalog import Catalog

Measured = Literal["all_reduce", "all_gather", "reduce_scatter"]
COLLECTIVES: tuple[Measured, ...] = ("all_reduce", "all_gather", "reduce_scatter")
ELEMENT = 4  # float32


def sweep_sizes(min_bytes: int = 8, max_bytes: int = 128 * 2**20, factor: int = 4) -> list[int]:
    """``min, min*f, min*f^2, ... <= max``, as nccl-tests' ``-b -e -f``."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise StokerError("sizes: need 1 <= --min <= --max and --factor >= 2")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def parse_collectives(names: list[str] | tuple[str, ...]) -> tuple[Measured, ...]:
    unknown = [n for n in names if n not in COLLECTIVES]
    if unknown or not names:
        what = f"unknown collective {unknown[0]!r}" if unknown else "no collective"
        raise StokerError(f"{what}; choose from {', '.join(COLLECTIVES)}")
    return tuple(names)  # type: ignore[return-value]


def nccl_count(collective: Measured, size: int, ranks: int) -> tuple[int, int]:
    """(elements per rank in the per-rank buffer, S in bytes) as nccl-tests rounds them: at
    least one element per rank; S is rounded down to whole elements (x ranks for AG/RS)."""
    if collective == "all_reduce":
        count = max(1, size // ELEMENT)
        return count, count * ELEMENT
    per_rank = max(1, size // ELEMENT // ranks)
    return per_rank, per_rank * ranks * ELEMENT


@dataclass(frozen=True)
class Row:
    collective: str
    size: int  # S in bytes, nccl-tests' definition for this collective
    time_s: float
    algbw: float  # bytes/s
    busbw: float
    wrong: int = 0  # elements that differed from the expected result (worst rank)
    predicted_s: float | None = None
    predicted_busbw: float | None = None


def make_row(collective: Measured, size: int, ranks: int, seconds: float, wrong: int = 0) -> Row:
    return Row(
        collective,
        size,
        seconds,
        c.algbw(size, seconds),
        c.busbw(collective, size, ranks, seconds),
        wrong,
    )


@dataclass(frozen=True)
class SweepResult:
    backend: str
    device: str
    world_size: int
    ranks_per_node: int
    iters: int
    warmup: int
    across: str
    rows: tuple[Row, ...]
    methods: dict[str, str]  # collective -> the torch call that ran it
    unsupported: dict[str, str] = field(default_factory=dict)  # collective -> why
    vm: str | None = None
    # NCCL_NET as the run saw it: "Socket" sends every collective between VMs over TCP (the
    # Ethernet figure `stoker plan --measured` takes); NCCL_IB_DISABLE alone is not enough on
    # Azure's ND sizes, whose RDMA plugin keeps NCCL on InfiniBand.
    nccl_net: str = ""
    floor_busbw: float | None = None  # catalog: node health check, one VM, large messages
    published_busbw: float | None = None  # catalog: a published one-VM nccl-tests figure

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"rows": [asdict(r) for r in self.rows]}


# ---------------------------------------------------------------------------------- the sweep


def sweep(
    collectives: tuple[Measured, ...] | list[Measured] = COLLECTIVES,
    sizes: list[int] | None = None,
    iters: int = 20,
    warmup: int = 5,
    device: torch.device | str | None = None,
    *,
    across: Literal["max", "avg"] = "max",
    group: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> SweepResult:
    """Time each collective at each size. Every rank of ``group`` must call it with the same
    arguments; every rank gets the same result (times are reduced across ranks). ``device``
    defaults to the current CUDA device with nccl, else the CPU; ``sizes`` to 8 B .. 128 MiB x 4.
    ``progress`` hears (what runs now, steps done, steps in all) before each step."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        raise StokerError(f"no process group: call init_process_group() first, or run {LAUNCH}")
    if iters < 1 or warmup < 0:
        raise StokerError("--iters must be at least 1 and --warmup at least 0")
    if across not in ("max", "avg"):
        raise StokerError(f"--across {across!r}: max (the slowest rank) or avg (nccl-tests')")
    backend = str(dist.get_backend(group))
    dev = torch.device(device) if device is not None else _default_device(backend)
    ranks = dist.get_world_size(group)
    rows: list[Row] = []
    methods: dict[str, str] = {}
    unsupported: dict[str, str] = {}
    names = parse_collectives(collectives)
    sizes = sizes or sweep_sizes()
    done, total = 0, len(names) * len(sizes)
    for name in names:
        op = _pick(name, dev, ranks, group)
        if isinstance(op, str):
            unsupported[name] = op
            continue
        methods[name] = op.method
        seen: set[int] = set()
        for size in sizes:
            count, nbytes = nccl_count(name, size, ranks)
            done += 1
            if nbytes in seen:  # small sizes round up to the same buffer
                continue
            if progress:
                progress(f"{name} {nbytes:,} B", done - 1, total)
            seen.add(nbytes)
            seconds, wrong = _time(op, count, dev, iters, warmup, across, group)
            rows.append(make_row(name, nbytes, ranks, seconds, wrong))
    env = torchrun_env(launch=LAUNCH)
    per_node = env.local_world_size if "LOCAL_WORLD_SIZE" in env.given else ranks
    return SweepResult(
        backend,
        str(dev),
        ranks,
        per_node,
        iters,
        warmup,
        across,
        tuple(rows),
        methods,
        unsupported,
        nccl_net=os.environ.get("NCCL_NET", ""),
    )


def _default_device(backend: str) -> torch.device:
    import torch

    if "nccl" in backend:  # "nccl", or "cpu:gloo,cuda:nccl" for a two-backend group
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


@dataclass
class _Op:
    """One collective: ``call(out, inp)`` issues it; the flags size its two buffers."""

    method: str
    call: Any  # (out, inp) -> None
    out_per_rank: bool  # output holds count elements (RS) or count x ranks (AG)
    in_per_rank: bool


def _pick(name: Measured, dev: Any, ranks: int, group: Any) -> _Op | str:
    """The torch call for ``name``: the single-tensor form, else the list form (older gloo),
    else the reason it cannot run on this backend. Probed once with one element per rank."""
    import torch.distributed as dist

    if name == "all_reduce":
        return _Op("all_reduce", lambda out, inp: dist.all_reduce(out, group=group), True, True)
    if name == "all_gather":
        # torch 2.13 renamed all_gather_into_tensor to all_gather_single.
        single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        options = [
            _Op(single.__name__, lambda out, inp: single(out, inp, group=group), False, True),
            _Op(
                "all_gather (list)",
                lambda out, inp: dist.all_gather(list(out.chunk(ranks)), inp, group=group),
                False,
                True,
            ),
        ]
    else:
        single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        options = [
            _Op(single.__name__, lambda out, inp: single(out, inp, group=group), True, False),
            _Op(
                "reduce_scatter (list)",
                lambda out, inp: dist.reduce_scatter(out, list(inp.chunk(ranks)), group=group),
                True,
                False,
            ),
        ]
    reasons = []
    for op in options:
        out, inp = _buffers(op, 1, dev, ranks, dist.get_rank(group))
        try:
            op.call(out, inp)
            return op
        except (RuntimeError, NotImplementedError, ValueError) as exc:
            reasons.append(f"{op.method}: {str(exc).splitlines()[0][:120]}")
    return f"not supported by {dist.get_backend(group)} ({'; '.join(reasons)})"


def _buffers(op: _Op, count: int, dev: Any, ranks: int, rank: int) -> tuple[Any, Any]:
    """Output zeroed, input filled with ``rank + 1`` (all-reduce: one tensor, in place)."""
    import torch

    try:
        out = torch.zeros(count if op.out_per_rank else count * ranks, device=dev)
        inp = out if op.method == "all_reduce" else None
        if inp is None:
            inp = torch.empty(count if op.in_per_rank else count * ranks, device=dev)
    except RuntimeError as exc:  # torch.OutOfMemoryError, or the CPU allocator's refusal
        raise StokerError(
            f"{op.method}: cannot allocate {count * ELEMENT:,} B per rank on {dev}: "
            f"use a smaller --maxbytes (-e) ({str(exc).splitlines()[0][:120]})"
        ) from exc
    inp.fill_(rank + 1)
    return out, inp


def _wrong(op: _Op, out: Any, ranks: int) -> int:
    """Elements of ``out`` that differ from the expected result of inputs filled with rank + 1."""
    import torch

    if op.out_per_rank:  # all-reduce, reduce-scatter: a sum over ranks
        expected = torch.full_like(out, ranks * (ranks + 1) / 2)
    else:  # all-gather: rank r's chunk holds r + 1
        per = out.numel() // ranks
        expected = torch.arange(1, ranks + 1, device=out.device, dtype=out.dtype)
        expected = expected.repeat_interleave(per)
    return int((out != expected).sum().item())


def _time(
    op: _Op, count: int, dev: Any, iters: int, warmup: int, across: str, group: Any
) -> tuple[float, int]:
    """Mean per-iteration time (the slowest rank's, or the ranks' mean) and the worst rank's
    wrong-element count from one checked run before the timed ones."""
    import torch
    import torch.distributed as dist

    ranks = dist.get_world_size(group)
    out, inp = _buffers(op, count, dev, ranks, dist.get_rank(group))
    op.call(out, inp)
    wrong = _wrong(op, out, ranks)
    out.zero_()  # all-reduce runs in place: keep the values from growing each iteration
    for _ in range(warmup):
        op.call(out, inp)
    dist.barrier(group=group)
    cuda = dev.type == "cuda"
    if cuda:
        stream = torch.cuda.current_stream(dev)  # sync collectives make it wait for NCCL's
        events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
        events[0].record(stream)
        for i in range(iters):
            op.call(out, inp)
            events[i + 1].record(stream)
        events[-1].synchronize()  # one wait per size; the loop itself never blocks
        times = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(iters)]
    else:
        marks = [time.perf_counter()]
        for _ in range(iters):
            op.call(out, inp)
            marks.append(time.perf_counter())
        times = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    # One MAX all-reduce carries the per-iteration times and the wrong count.
    packed = torch.tensor([*times, float(wrong)], dtype=torch.float64, device=dev)
    if across == "max":
        dist.all_reduce(packed, op=dist.ReduceOp.MAX, group=group)
        seconds = float(packed[:-1].mean())
    else:
        mean = torch.tensor([sum(times) / iters], dtype=torch.float64, device=dev)
        dist.all_reduce(mean, group=group)
        dist.all_reduce(packed, op=dist.ReduceOp.MAX, group=group)
        seconds = float(mean.item()) / ranks
    return seconds, int(packed[-1].item())


# ----------------------------------------------------------------------- the plan's prediction


def predicted_seconds(
    collective: Measured,
    size: float,
    world: int,
    ranks_per_node: int,
    vm: Any,
    fabric: Any,
    sockets: bool = False,
) -> float:
    """What the plan's model says this collective takes for ``world`` ranks, ``ranks_per_node``
    on each VM of size ``vm`` (``sockets``: InfiniBand off, NCCL over TCP). All-reduce is the
    plan's own (hierarchical, NVLS, flat ring); all-gather and reduce-scatter are one flat ring
    at the slowest level's rate, which the plan does not model further, so those are rougher."""
    from ..plan.interconnect import Layout, allreduce, levels, without_infiniband

    if world <= 1:
        return 0.0
    if sockets:
        vm = without_infiniband(vm)
    per_node = max(1, min(ranks_per_node, vm.gpus, world))
    per_domain = min(world, per_node * vm.nvlink_domain_vms)
    domains = math.ceil(world / per_domain)
    nodes = math.ceil(world / per_node)
    boundary = fabric.scale_set_vms
    fabrics = min(domains, math.ceil(nodes / boundary)) if domains > 1 else 1
    lvls = levels(vm, fabric, Layout(world, per_domain, domains, fabrics, nodes, boundary), False)
    if collective == "all_reduce":
        return allreduce(size, lvls, world).seconds
    bw = lvls[0].bw_bps if len(lvls) == 1 else min(lvls[0].bw_bps, lvls[1].bw_bps * lvls[0].ranks)
    return c.scatter_gather_time(size, world, bw, lvls[-1].alpha_s)


def with_plan(result: SweepResult, vm_size: str, catalog: Catalog | None = None) -> SweepResult:
    """``result`` with each row's predicted time and busbw for ``vm_size``, and the catalog's
    floor and published one-VM all-reduce busbw."""
    from ..catalog import load_catalog

    cat = catalog or load_catalog()
    if vm_size not in cat.vm:
        raise StokerError(f"unknown VM size {vm_size!r}; known: {', '.join(sorted(cat.vm))}")
    vm = cat.vm[vm_size]
    rows = []
    for row in result.rows:
        name: Measured = row.collective  # type: ignore[assignment]
        sockets = result.nccl_net.lower() == "socket"
        t = predicted_seconds(
            name, row.size, result.world_size, result.ranks_per_node, vm, cat.fabric, sockets
        )
        bus = c.busbw(name, row.size, result.world_size, t) if t > 0 else None
        rows.append(replace(row, predicted_s=t, predicted_busbw=bus))
    return replace(
        result,
        rows=tuple(rows),
        vm=vm_size,
        floor_busbw=vm.allreduce_busbw_floor,
        published_busbw=vm.allreduce_busbw_measured,
    )
