"""``pretrain plot RUN_DIR``: loss and throughput curves of a run as one PNG, and its per-layer diagnostics
as heat maps in a second when it logged them (``pretrain.inference.plot``)."""

from __future__ import annotations

import argparse
import os

from pretrain.inference.plot import diagnostics_png, events, find_metrics, plot, plot_diagnostics, train_and_val


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a training run's out_dir (holding metrics.jsonl)")
    parser.add_argument("--metrics", default="metrics.jsonl", help="metrics file name inside RUN_DIR")
    parser.add_argument(
        "-o",
        "--output",
        help="PNG path (default: RUN_DIR/curves.png); the diagnostics' heat "
        "maps, when the run has them, go beside it (curves-diagnostics.png)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def main(args: argparse.Namespace) -> int:
    from dataprep.core.storage import check_output_path

    if args.output:
        check_output_path(args.output, "--output", folder=False)
    path = find_metrics(args.run_dir, args.metrics)
    png = plot(path, args.output or os.path.join(args.run_dir, "curves.png"))
    heat_maps = plot_diagnostics(path, diagnostics_png(png))
    if args.json:
        import json

        train, val = train_and_val(path)
        print(
            json.dumps(
                {
                    "png": os.path.abspath(png),
                    "metrics": os.path.abspath(path),
                    "last_step": train[-1]["step"],
                    "diagnostics_png": heat_maps and os.path.abspath(heat_maps),
                    "loss": train[-1]["loss"],
                    "val_loss": val[-1]["val_loss"] if val else None,
                    "events": {kind: len(rs) for kind, rs in events(path).items()},
                }
            )
        )
    else:
        print("\n".join(p for p in (png, heat_maps) if p))
    return 0
