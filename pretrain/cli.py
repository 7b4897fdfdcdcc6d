"""``pretrain`` command line: one module of ``pretrain.commands`` per subcommand, run by the dispatch
``dataprep`` uses too (``dataprep.core.cli``)."""

from __future__ import annotations

import sys

from dataprep.core.cli import dispatch

COMMANDS = {
    "budget": ("pretrain.commands.budget", "compute-optimal N and D for a budget, a corpus and an inference load"),
    "size": ("pretrain.commands.size", "turn a parameter count into a Llama-style model config"),
    "plan": ("pretrain.commands.plan", "per-GPU memory, parallel layout and time to train"),
    "train": ("pretrain.commands.train", "train a model (one process; use torchrun -m pretrain.train for many)"),
    "plot": ("pretrain.commands.plot", "plot a run's loss and throughput curves (and per-layer diagnostics) to PNG"),
    "export": ("pretrain.commands.export", "export a checkpoint (Hugging Face Llama, safetensors)"),
    "generate": ("pretrain.commands.generate", "sample text from a checkpoint"),
    "ablate": ("pretrain.commands.ablate", "train the same small model on each data arm and compare them over seeds"),
    "eval": ("pretrain.commands.eval", "loss and perplexity of a checkpoint on held-out data"),
    "lineage": (
        "pretrain.commands.lineage",
        "the data a model was trained on, back to the crawl; runs that used a corpus",
    ),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(COMMANDS, "pretrain", "Size, plan and train a Llama-style model on token shards.", argv)


if __name__ == "__main__":
    sys.exit(main())
