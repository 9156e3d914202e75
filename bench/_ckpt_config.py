"""What ``checkpoint_bench.py`` measures and holds each figure to: sizes, the training loop
that runs beside a save, and the targets. A run saves :func:`as_dict` with its results, so a
section is always rendered with the settings its numbers were measured under."""

from __future__ import annotations

MiB, GiB = 1 << 20, 1 << 30
STATES = ("tensor", "model", "small")
TOOLS = ("torch.save", "dcp.save", "dcp.async_save", "stoker")
ASYNC_TOOLS = ("dcp.async_save", "stoker")
PARTS = ("compare", "growth", "crash", "first", "preempt", "ddp")  # --parts
FIRST_STATES = ("tensor", "model")  # the first-save part's states
TARGET_BLOCKING, TARGET_CEILING, TARGET_MEMORY, TARGET_GROWTH = 0.1, 1.1, 1.1, 0.02
MLP_WIDTH, MLP_BATCH, IDLE_S = 1024, 64, 1.0
WINDOW_STEPS, WINDOW_SAVES = 30, 20  # short saves repeat until this many steps fall inside
CRASH_BYTES, CRASH_KILL_S = 32 * MiB, (0.05, 1.5)

# (tensor bytes, GPT shape: vocab, context, width, layers, small tensors, growth saves)
SIZES = {
    "full": (GiB, (50257, 1024, 768, 12), 10_000, 20),
    "quick": (128 * MiB, (32000, 512, 256, 2), 1_000, 5),
}

FIRST_TRAIN_S = 10.0  # training steps between the Checkpointer's making and its first save
TARGET_FIRST = 1.2  # first save's blocking over the median of the later ones
FIRST_ROUNDS = 3  # fresh processes per variant (2 with --quick)

PREEMPT_NOTICE_S = 30.0  # a Spot eviction's notice (Preempt)
TARGET_PREEMPT_S = PREEMPT_NOTICE_S / 2  # "well inside the notice": half of it at most
PREEMPT_POLL_S = 1.0  # the watcher's default, as Azure recommends
PREEMPT_STEP_S = 0.1  # a training step (on the GPU, say): the loop reaches should_stop this often

DDP_RANKS, DDP_PER_NODE = 4, 2  # two emulated nodes of two ranks, each node's own fast folder
TARGET_DDP_BYTES, TARGET_DDP_DURABLE = 1.0, 1.1
DDP_SIZES = {"full": 512 * MiB, "quick": 128 * MiB}


def as_dict() -> dict:
    """Every setting above, by name (saved with the results; the renderer reads them there)."""
    return {k: v for k, v in globals().items() if k.isupper() or k in ("MiB", "GiB")}
