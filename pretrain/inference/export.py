"""``pretrain export CHECKPOINT --to hf --output DIR``, and back with ``--to ccpretrain``.

``--to hf`` writes a folder ``transformers`` loads as ``LlamaForCausalLM``/``AutoTokenizer``:
``config.json``, ``model.safetensors`` in Hugging Face tensor names (``pretrain.models.hf_adapter``),
``generation_config.json``, the run's tokenizer as ``tokenizer.json``
(``dataprep.tokenize.tokenizer_json_writer``: our SentencePiece model converted, or the Hugging Face
file the run was trained with; either encodes exactly as the shards were), a model card (``README.md``)
and the run's lineage (``lineage.json``). ``--to ccpretrain`` reads a
Hugging Face Llama folder into our names (``model.safetensors`` + ``model.yaml``), an initialisation
for continued pretraining. CHECKPOINT forms and tokenizer discovery: ``pretrain.inference.loading``.
"""

from __future__ import annotations

import json
import os

import torch

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_directory, atomic_write_text
from dataprep.tokenize.tokenizer import Tokenizer
from dataprep.tokenize.tokenizer_json_writer import write_hf_tokenizer
from pretrain.components.safetensors_export import write_safetensors
from pretrain.config.loading import save_yaml
from pretrain.config.model import ModelConfig
from pretrain.inference.loading import FINAL_WEIGHTS, Trained
from pretrain.models.hf_adapter import read_hf_folder, to_hf, to_hf_config

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def export_hf(
    trained: Trained,
    tokenizer: Tokenizer,
    output: str,
    manifest: dict | None = None,
    dtype: str = "float32",
    overwrite: bool = False,
) -> str:
    """Write the Hugging Face folder (built beside ``output``, renamed into place when complete), with the
    model card and the lineage (``pretrain.lineage``) when the run recorded one."""
    from pretrain.inference.model_card import model_card
    from pretrain.lineage import LINEAGE_FILE, read_lineage

    try:
        lineage = read_lineage(trained.path)
    except FileNotFoundError:  # a run from before lineage records: a card without its data
        lineage = None
    if tokenizer.vocab_size > trained.model.vocab_size:
        raise UsageError(
            f"tokenizer vocabulary {tokenizer.vocab_size} exceeds the model's vocab_size {trained.model.vocab_size}"
        )
    add_bos = bool((manifest or {}).get("add_bos", False))
    # No max_length: transformers warns on every generate() call when the saved config sets it.
    generation = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id}
    config = to_hf_config(trained.model, tokenizer, dtype)  # a model Llama's format cannot carry stops here
    with atomic_directory(output, overwrite) as tmp:
        # renamed, not copied; each tensor converted just before it is written
        write_safetensors(
            os.path.join(tmp, "model.safetensors"),
            to_hf(trained.weights, trained.model),
            {"format": "pt"},
            dtype=DTYPES[dtype],
        )
        for name, data in (("config.json", config), ("generation_config.json", generation)):
            atomic_write_text(os.path.join(tmp, name), json.dumps(data, indent=2) + "\n")
        write_hf_tokenizer(tokenizer, tmp, add_bos=add_bos, model_max_length=trained.model.max_seq_len)
        atomic_write_text(os.path.join(tmp, "README.md"), model_card(trained, lineage))
        if lineage is not None:
            exported = {k: v for k, v in lineage.items() if k != "found_in"}
            exported["model"] = {"exported_from": os.path.abspath(trained.path), "step": trained.step}
            atomic_write_text(os.path.join(tmp, LINEAGE_FILE), json.dumps(exported, indent=1) + "\n")
    return output


def import_hf(hf_dir: str, output: str, overwrite: bool = False) -> ModelConfig:
    """Convert a Hugging Face Llama folder (config.json + *.safetensors) to ``model.safetensors`` in our
    names plus ``model.yaml``, loadable by ``load_trained`` (and an initialisation for training)."""
    cfg, weights = read_hf_folder(hf_dir)
    with atomic_directory(output, overwrite) as tmp:
        write_safetensors(
            os.path.join(tmp, FINAL_WEIGHTS),
            weights,
            {"model_config": cfg.model_dump_json(), "source": os.path.abspath(hf_dir)},
        )
        save_yaml(cfg, os.path.join(tmp, "model.yaml"))
    return cfg
