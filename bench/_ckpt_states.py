"""The states ``checkpoint_bench.py`` saves: one big tensor, a GPT-2-shaped model with Adam's
state, and many small tensors with Python objects; and how to compare two of them."""

from __future__ import annotations

import random

from _ckpt_config import SIZES


def build_state(kind: str, mode: str) -> dict:
    import torch

    torch.manual_seed(0)
    tensor_bytes, gpt, small, _ = SIZES[mode]
    if kind == "tensor":
        return {"weights": torch.rand(tensor_bytes // 4), "step": 1000}
    if kind == "model":
        return gpt_state(*gpt)
    return small_state(small)


def gpt_state(vocab: int, context: int, width: int, layers: int) -> dict:
    """GPT-2's parameter shapes (tied head), random values, and Adam's state for each."""
    import torch
    from torch import nn

    def block() -> nn.Module:
        return nn.ModuleDict(
            {
                "ln_1": nn.LayerNorm(width),
                "attn": nn.ModuleDict(
                    {"c_attn": nn.Linear(width, 3 * width), "c_proj": nn.Linear(width, width)}
                ),
                "ln_2": nn.LayerNorm(width),
                "mlp": nn.ModuleDict(
                    {"c_fc": nn.Linear(width, 4 * width), "c_proj": nn.Linear(4 * width, width)}
                ),
            }
        )

    with torch.device("meta"):  # skip the default init: filling once below is enough
        model = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, width),
                "wpe": nn.Embedding(context, width),
                "h": nn.ModuleList(block() for _ in range(layers)),
                "ln_f": nn.LayerNorm(width),
            }
        )
    model = model.to_empty(device="cpu")
    params = dict(model.named_parameters())
    with torch.no_grad():
        for p in params.values():
            p.uniform_(-0.02, 0.02)
    # Keyed by parameter name, as DCP's get_optimizer_state_dict gives it (DCP wants str keys).
    optim = {
        "state": {
            name: {
                "step": torch.tensor(1000.0),
                "exp_avg": torch.empty_like(p).uniform_(-1e-3, 1e-3),
                "exp_avg_sq": torch.empty_like(p).uniform_(0, 1e-6),
            }
            for name, p in params.items()
        },
        "param_groups": [
            {
                "lr": 3e-4,
                "betas": (0.9, 0.999),
                "eps": 1e-8,
                "weight_decay": 0.1,
                "amsgrad": False,
                "params": list(params),
            }
        ],
    }
    return {"model": model.state_dict(), "optim": optim, "step": 1000}


def small_state(count: int) -> dict:
    import torch

    rng = random.Random(1)
    tensors = {
        f"layer{i // 100:03d}.t{i:05d}": torch.rand(rng.randint(256, 16384))  # 1-64 KiB
        for i in range(count)
    }
    objects = {
        "epoch": 3,
        "tokens_seen": 123_456_789_000,
        "run": "gpt-bench",
        "lr_schedule": [3e-4 * 0.99**i for i in range(100)],
        "data": {"shard": "shard-0042", "offset": 1234567, "seen": list(range(0, 1000, 7))},
        "rng": {"seed": 1234, "python": list(range(32)), "name": "mt19937"},
        "flags": [True, False, None],
    }
    return {"tensors": tensors, "objects": objects, "step": 1000}


def tensor_bytes(obj) -> int:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def same_state(a, b, where: str = "") -> str | None:
    """None when ``b`` holds what ``a`` does, else where they first differ."""
    import torch

    if isinstance(a, torch.Tensor):
        ok = isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
        return None if ok else f"tensor {where or '/'}"
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            return f"keys of {where or '/'}"
        for k in a:
            if problem := same_state(a[k], b[k], f"{where}/{k}"):
                return problem
        return None
    if isinstance(a, list | tuple):
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return f"length of {where}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if problem := same_state(x, y, f"{where}/{i}"):
                return problem
        return None
    return None if a == b else f"value {where}"
