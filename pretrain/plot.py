"""``pretrain plot RUN_DIR``: loss (train and validation) and throughput curves of a run, as one PNG."""

from __future__ import annotations

import argparse
import os

from pretrain.metrics import read_metrics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a training run's out_dir (holding metrics.jsonl)")
    parser.add_argument("--metrics", default="metrics.jsonl", help="metrics file name inside RUN_DIR")
    parser.add_argument("-o", "--output", help="PNG path (default: RUN_DIR/curves.png)")


def plot(metrics_path: str, png_path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("kind", "train") == "train" and "loss" in r]
    val = [r for r in records if r.get("kind") == "val"]
    if not train:
        raise ValueError(f"{metrics_path} holds no training records")
    fig, (ax_loss, ax_tps) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label="train")
    if val:
        ax_loss.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label="validation")
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    ax_tps.plot([r["step"] for r in train], [r["tokens_per_s"] for r in train], color="tab:green")
    ax_tps.set_ylabel("tokens / s")
    if any("mfu" in r for r in train):
        ax_mfu = ax_tps.twinx()
        ax_mfu.plot([r["step"] for r in train if "mfu" in r], [100 * r["mfu"] for r in train if "mfu" in r],
                    color="tab:red", alpha=0.6)
        ax_mfu.set_ylabel("MFU %")
    ax_tps.set_xlabel("step")
    ax_tps.grid(alpha=0.3)
    fig.suptitle(os.path.basename(os.path.dirname(os.path.abspath(metrics_path))))
    fig.tight_layout()
    from dataprep.io import atomic_output

    with atomic_output(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return png_path


def main(args: argparse.Namespace) -> int:
    path = os.path.join(args.run_dir, args.metrics)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: is {args.run_dir} a training run directory?")
    print(plot(path, args.output or os.path.join(args.run_dir, "curves.png")))
    return 0
