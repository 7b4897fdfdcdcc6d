"""``pretrain export CHECKPOINT --to hf --output DIR``, and back with ``--to ccpretrain``.

``--to hf`` writes a folder ``transformers`` loads as ``LlamaForCausalLM``/``AutoTokenizer``:
``config.json``, ``model.safetensors`` in Hugging Face tensor names (``pretrain.models.hf_adapter``),
``generation_config.json`` and the run's tokenizer as ``tokenizer.json``
(``dataprep.tokenize.tokenizer_json_writer``: our SentencePiece model converted, or the Hugging Face
file the run was trained with; either encodes exactly as the shards were). ``--to ccpretrain`` reads a
Hugging Face Llama folder into our names (``model.safetensors`` + ``model.yaml``), an initialisation
for continued pretraining. CHECKPOINT forms and tokenizer discovery: ``pretrain.inference.loading``.
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from dataprep.core.storage import atomic_directory, atomic_write_text, check_output_path
from dataprep.tokenize.tokenizer_json_writer import write_hf_tokenizer
from dataprep.tokenize.tokenizer import Tokenizer
from pretrain.components.safetensors_export import write_safetensors
from pretrain.config import ModelConfig, save_yaml
from pretrain.models.hf_adapter import read_hf_folder, to_hf, to_hf_config
from pretrain.inference.loading import FINAL_WEIGHTS, Trained, find_tokenizer, load_trained

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="step-* checkpoint, run out_dir, or model.safetensors "
                                           "(with --to ccpretrain: a Hugging Face Llama folder)")
    parser.add_argument("--to", choices=["hf", "ccpretrain"], default="hf",
                        help="hf: a transformers folder; ccpretrain: import a Hugging Face Llama folder")
    parser.add_argument("--output", required=True, help="output folder (must not exist unless --overwrite)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the run's data sources' tokenizer/)")
    parser.add_argument("--dtype", choices=list(DTYPES), default="float32", help="weights dtype to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def export_hf(trained: Trained, tokenizer: Tokenizer, output: str, manifest: dict | None = None,
              dtype: str = "float32", overwrite: bool = False) -> str:
    """Write the Hugging Face folder (built beside ``output``, renamed into place when complete)."""
    if tokenizer.vocab_size > trained.model.vocab_size:
        raise ValueError(f"tokenizer vocabulary {tokenizer.vocab_size} exceeds the model's vocab_size {trained.model.vocab_size}")
    add_bos = bool((manifest or {}).get("add_bos", False))
    # No max_length: transformers warns on every generate() call when the saved config sets it.
    generation = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id}
    with atomic_directory(output, overwrite) as tmp:
        # renamed, not copied; each tensor converted just before it is written
        write_safetensors(os.path.join(tmp, "model.safetensors"), to_hf(trained.weights, trained.model),
                          {"format": "pt"}, dtype=DTYPES[dtype])
        for name, data in (("config.json", to_hf_config(trained.model, tokenizer, dtype)),
                           ("generation_config.json", generation)):
            atomic_write_text(os.path.join(tmp, name), json.dumps(data, indent=2) + "\n")
        write_hf_tokenizer(tokenizer, tmp, add_bos=add_bos, model_max_length=trained.model.max_seq_len)
    return output


def import_hf(hf_dir: str, output: str, overwrite: bool = False) -> ModelConfig:
    """Convert a Hugging Face Llama folder (config.json + *.safetensors) to ``model.safetensors`` in our
    names plus ``model.yaml``, loadable by ``load_trained`` (and an initialisation for training)."""
    cfg, weights = read_hf_folder(hf_dir)
    with atomic_directory(output, overwrite) as tmp:
        write_safetensors(os.path.join(tmp, FINAL_WEIGHTS), weights,
                          {"model_config": cfg.model_dump_json(), "source": os.path.abspath(hf_dir)})
        save_yaml(cfg, os.path.join(tmp, "model.yaml"))
    return cfg


def main(args: argparse.Namespace) -> int:
    check_output_path(args.output, "--output", folder=True)
    try:
        if args.to == "ccpretrain":
            cfg = import_hf(args.checkpoint, args.output, args.overwrite)
            _report(args, f"imported {args.checkpoint} -> {args.output} ({cfg.n_layers} layers, d_model {cfg.d_model})",
                    {"to": "ccpretrain", "source": os.path.abspath(args.checkpoint), "output": os.path.abspath(args.output),
                     "model": cfg.model_dump(mode="json")})
            return 0
        trained = load_trained(args.checkpoint)
        tokenizer, manifest = find_tokenizer(trained, args.tokenizer)
        export_hf(trained, tokenizer, args.output, manifest, args.dtype, args.overwrite)
    except FileExistsError as exc:  # an output folder in the way: a usage error, reported in one line
        raise ValueError(str(exc)) from None
    _report(args, f"exported {trained.path} (step {trained.step}) -> {args.output}",
            {"to": "hf", "source": os.path.abspath(trained.path), "step": trained.step, "output": os.path.abspath(args.output),
             "files": sorted(os.listdir(args.output))})
    return 0


def _report(args: argparse.Namespace, line: str, record: dict) -> None:
    print(json.dumps(record) if args.json else line)
