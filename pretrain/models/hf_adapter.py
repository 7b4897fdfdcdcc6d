"""Our Llama in Hugging Face's terms and back: parameter names and ``config.json`` fields.

Our rotary layout already is Hugging Face's, so weights are only renamed, never permuted. Kept beside
the model (as torchtitan keeps ``state_dict_adapter.py``) so export and import share one mapping.
"""

from __future__ import annotations

import re

import torch
from pydantic import ValidationError

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.validation import describe
from pretrain.config.model import ModelConfig

# our parameter name -> Hugging Face Llama name; layers.N.<key>.weight <-> model.layers.N.<value>.weight
_LAYER_NAMES = {
    "attention.wq": "self_attn.q_proj",
    "attention.wk": "self_attn.k_proj",
    "attention.wv": "self_attn.v_proj",
    "attention.wo": "self_attn.o_proj",
    "feed_forward.w1": "mlp.gate_proj",
    "feed_forward.w3": "mlp.up_proj",
    "feed_forward.w2": "mlp.down_proj",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"tok_embeddings": "model.embed_tokens", "norm": "model.norm", "output": "lm_head"}
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)\.weight$")
_HF_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)\.weight$")
_HF_BUFFERS = "rotary_emb.inv_freq"  # recomputed by both models, not a weight


def to_hf_name(name: str) -> str:
    if (m := _LAYER.match(name)) and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}.weight"
    top = name.removesuffix(".weight")
    if top in _TOP_NAMES and name.endswith(".weight"):
        return f"{_TOP_NAMES[top]}.weight"
    raise ValueError(f"no Hugging Face name for parameter {name!r}")


def from_hf_name(name: str) -> str:
    back = {v: k for k, v in _LAYER_NAMES.items()}
    if (m := _HF_LAYER.match(name)) and m.group(2) in back:
        return f"layers.{m.group(1)}.{back[m.group(2)]}.weight"
    top = {v: k for k, v in _TOP_NAMES.items()}.get(name.removesuffix(".weight"))
    if top is None:
        raise UsageError(f"unsupported Hugging Face tensor {name!r} (a Llama without biases is expected)")
    return f"{top}.weight"


def to_hf(weights: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict in Hugging Face names (a tied output head is stored once, as the embedding)."""
    return {to_hf_name(k): v for k, v in weights.items() if not (cfg.tie_embeddings and k == "output.weight")}


def from_hf(tensors: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A Hugging Face Llama state dict in our names (a tied output head is left to the embedding)."""
    weights = {from_hf_name(k): v for k, v in tensors.items() if not k.endswith(_HF_BUFFERS)}
    if cfg.tie_embeddings:
        weights.pop("output.weight", None)
    return weights


def check_hf_exportable(cfg: ModelConfig) -> None:
    """Refuse, before any work, a model that Llama's Hugging Face format cannot carry."""
    if cfg.qk_norm:
        raise UsageError(
            "model.qk_norm: Llama's Hugging Face format has no q/k norms, so this model cannot be "
            "exported with --to hf (its checkpoint and model.safetensors still serve eval and generate)"
        )


def to_hf_config(cfg: ModelConfig, tokenizer, dtype: str) -> dict:
    """LlamaConfig fields (``config.json``) for our model; special token ids from ``tokenizer``."""
    check_hf_exportable(cfg)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": cfg.ffn_dim,
        "num_hidden_layers": cfg.n_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_seq_len,
        "rms_norm_eps": cfg.norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": cfg.tie_embeddings,
        "initializer_range": cfg.init_std,
        "bos_token_id": tokenizer.bos_id,
        "eos_token_id": tokenizer.eos_id,
        "pad_token_id": tokenizer.pad_id,
        "use_cache": True,
        "torch_dtype": dtype,
    }


def from_hf_config(hf: dict, source: str) -> ModelConfig:
    """Our model config for a Hugging Face ``config.json`` (``source`` names it in errors); refuses what
    our model cannot represent."""
    if hf.get("model_type") != "llama":
        raise UsageError(f"{source}: model_type {hf.get('model_type')!r}, only llama is supported")
    if hf.get("rope_scaling") or hf.get("attention_bias") or hf.get("mlp_bias"):
        raise UsageError(f"{source}: rope_scaling and biases are not supported by our model")
    n_heads = hf["num_attention_heads"]
    cfg = ModelConfig(
        vocab_size=hf["vocab_size"],
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads") or n_heads,
        ffn_dim=hf["intermediate_size"],
        max_seq_len=hf.get("max_position_embeddings", 2048),
        rope_theta=hf.get("rope_theta", 10000.0),
        norm_eps=hf.get("rms_norm_eps", 1e-5),
        tie_embeddings=hf.get("tie_word_embeddings", False),
        init_std=hf.get("initializer_range", 0.02),
    )
    if hf.get("head_dim") not in (None, cfg.head_dim):
        raise UsageError(f"{source}: head_dim {hf['head_dim']} != hidden_size / num_attention_heads")
    return cfg


def read_hf_folder(hf_dir: str) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """A Hugging Face Llama folder (``config.json`` + ``*.safetensors``) as our config and our weight names."""
    import json
    import os

    from safetensors import safe_open

    if not os.path.isdir(hf_dir):
        raise MissingPath(f"{hf_dir}: not a folder; give a Hugging Face Llama folder (config.json, *.safetensors)")
    config_path = os.path.join(hf_dir, "config.json")
    if not os.path.isfile(config_path):
        raise MissingPath(f"{hf_dir}: no config.json; give a Hugging Face Llama folder (config.json, *.safetensors)")
    try:
        with open(config_path, encoding="utf-8") as fh:
            cfg = from_hf_config(json.load(fh), hf_dir)
    except (json.JSONDecodeError, KeyError, ValidationError) as exc:  # the user's file, damaged or not a Llama's
        problem = (
            describe(exc) if isinstance(exc, ValidationError) else f"lacks {exc}" if isinstance(exc, KeyError) else exc
        )
        raise UsageError(f"{config_path}: not a usable Llama config ({problem})") from None
    files = sorted(f for f in os.listdir(hf_dir) if f.endswith(".safetensors"))
    if not files:
        raise MissingPath(f"{hf_dir}: no *.safetensors weights")
    tensors = {}
    for name in files:
        with safe_open(os.path.join(hf_dir, name), "pt") as fh:
            tensors.update({k: fh.get_tensor(k) for k in fh.keys()})
    return cfg, from_hf(tensors, cfg)


def is_hf_folder(path: str) -> bool:
    """A folder with a Hugging Face ``config.json`` (ours hold ``config.yaml`` and step-* checkpoints)."""
    import os

    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))
