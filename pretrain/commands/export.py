"""``pretrain export CHECKPOINT --to hf --output DIR``, and back with ``--to ccpretrain``
(``pretrain.inference.export``)."""

from __future__ import annotations

import argparse
import json
import os

from dataprep.core.storage import check_output_path
from pretrain.inference.export import DTYPES, export_hf, import_hf
from pretrain.inference.loading import find_tokenizer, load_trained
from pretrain.models.hf_adapter import check_hf_exportable


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "checkpoint",
        help="step-* checkpoint, run out_dir, or model.safetensors (with --to ccpretrain: a Hugging Face Llama folder)",
    )
    parser.add_argument(
        "--to",
        choices=["hf", "ccpretrain"],
        default="hf",
        help="hf: a transformers folder; ccpretrain: import a Hugging Face Llama folder",
    )
    parser.add_argument("--output", required=True, help="output folder (must not exist unless --overwrite)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the run's data sources' tokenizer/)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32", help="weights dtype to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def main(args: argparse.Namespace) -> int:
    check_output_path(args.output, "--output", folder=True)
    if args.to == "ccpretrain":
        cfg = import_hf(args.checkpoint, args.output, args.overwrite)
        _report(
            args,
            f"imported {args.checkpoint} -> {args.output} ({cfg.n_layers} layers, d_model {cfg.d_model})",
            {
                "to": "ccpretrain",
                "source": os.path.abspath(args.checkpoint),
                "output": os.path.abspath(args.output),
                "model": cfg.model_dump(mode="json"),
            },
        )
        return 0
    trained = load_trained(args.checkpoint)
    check_hf_exportable(trained.model)
    tokenizer, manifest = find_tokenizer(trained, args.tokenizer)
    export_hf(trained, tokenizer, args.output, manifest, args.dtype, args.overwrite)
    _report(
        args,
        f"exported {trained.path} (step {trained.step}) -> {args.output}",
        {
            "to": "hf",
            "source": os.path.abspath(trained.path),
            "step": trained.step,
            "output": os.path.abspath(args.output),
            "files": sorted(os.listdir(args.output)),
        },
    )
    return 0


def _report(args: argparse.Namespace, line: str, record: dict) -> None:
    print(json.dumps(record) if args.json else line)
