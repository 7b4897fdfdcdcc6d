"""``pretrain`` command line; same dispatch as ``dataprep`` (see dataprep.cli)."""

from __future__ import annotations

import sys

from dataprep.cli import dispatch

COMMANDS = {
    "budget": ("pretrain.planning.budget_cli", "compute-optimal N and D for a budget, a corpus and an inference load"),
    "size": ("pretrain.planning.sizing", "turn a parameter count into a Llama-style model config"),
    "plan": ("pretrain.planning.plan_cli", "per-GPU memory, parallel layout and time to train"),
    "train": ("pretrain.train", "train a model (one process; use torchrun -m pretrain.train for many)"),
    "plot": ("pretrain.inference.plot", "plot loss and throughput curves of a run to PNG"),
    "export": ("pretrain.inference.export", "export a checkpoint (Hugging Face Llama, safetensors)"),
    "generate": ("pretrain.inference.generate", "sample text from a checkpoint"),
    "eval": ("pretrain.inference.evaluate", "loss and perplexity of a checkpoint on held-out data"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(COMMANDS, "pretrain", "Size, plan and train a Llama-style model on token shards.", argv)


if __name__ == "__main__":
    sys.exit(main())
