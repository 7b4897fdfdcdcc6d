"""``pretrain size N``: a Llama-style model config for a parameter count (``pretrain.planning.sizing``)."""

from __future__ import annotations

import argparse
import json

from dataprep.core.cli import add_output_argument
from dataprep.core.storage import check_output_path
from dataprep.core.units import human
from pretrain.config.loading import save_yaml
from pretrain.planning.budget import parse_number
from pretrain.planning.sizing import PRESET_SIZES, describe, preset, size_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("params", nargs="?", help="target parameter count, e.g. 350M, 1.3B, 7e9")
    what.add_argument("--preset", help=f"a preset: tiny, {', '.join(PRESET_SIZES)}")
    parser.add_argument("--vocab-size", type=int, default=32000, help="tokenizer vocabulary (default 32000)")
    parser.add_argument("--seq-len", type=int, default=2048, help="max_seq_len of the model (default 2048)")
    parser.add_argument("--tie-embeddings", action="store_true", help="share input and output embeddings")
    add_output_argument(
        parser, old=("--out",), metavar="FILE", help="write the model config YAML here (for pretrain train / plan)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def main(args: argparse.Namespace) -> int:
    if args.output:
        check_output_path(args.output, "--output", folder=False)
    if args.preset:
        cfg = preset(args.preset)
    else:
        cfg = size_model(parse_number(args.params), args.vocab_size, args.seq_len, args.tie_embeddings)
    info = describe(cfg)
    if args.output:
        save_yaml(cfg, args.output)
        info["written"] = args.output
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    p = info["params"]
    rows = [
        ("layers", cfg.n_layers),
        ("d_model", cfg.d_model),
        ("heads", f"{cfg.n_heads} x {cfg.head_dim}"),
        ("kv heads", cfg.n_kv_heads),
        ("ffn (SwiGLU)", cfg.ffn_dim),
        ("vocab", cfg.vocab_size),
        ("max seq len", cfg.max_seq_len),
        ("d_model / layers", f"{info['aspect_ratio']:.0f}"),
        ("params", f"{p['total']:,} ({human(p['total'])})"),
        ("params w/o embedding", f"{p['non_embedding']:,} ({human(p['non_embedding'])})"),
        ("training FLOPs/token", f"{human(info['flops_per_token'])} (6N + attention at seq {cfg.max_seq_len})"),
    ]
    for key, value in rows:
        print(f"{key:<22} {value}")
    if args.output:
        print(f"wrote {args.output}")
    return 0
