"""``pretrain size``: turn a parameter count N into a Llama-style model config.

Shape rules (why):
- head size 64 below d_model 2048, 128 from there on (GPT-3 and Llama use these; wider heads keep
  attention matmuls efficient on tensor cores);
- SwiGLU hidden size ~ 8/3 d_model rounded up to a multiple of 256 (Llama: same FLOPs as a 4 d_model
  GELU MLP, tensor-core-friendly widths);
- grouped-query attention with 8 kv heads once there are 16+ heads (Llama 3 uses 8 at every size):
  a smaller KV cache at no measurable quality cost; head counts are multiples of 8 then, and both
  head counts divide every tensor-parallel degree up to 8;
- an even number of layers and d_model / n_layers near 64 at 100M growing to 128 at 7B (GPT-3 Small
  is 768/12, Llama 2 7B 4096/32; Kaplan et al. 2020 found loss flat within a few % over a wide range
  of aspect ratios, so the parameter count decides first and the aspect ratio breaks ties).

The count is exact (``pretrain.models.llama.num_params``); "without embeddings" drops the input embedding
table (a lookup, no FLOPs) but keeps the output projection, as Kaplan's non-embedding count and MFU do.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.config.loading import load_model_config
from pretrain.config.model import ModelConfig
from pretrain.models.llama import num_params
from pretrain.planning.flops import flops_per_token

PRESET_DIR = Path(__file__).resolve().parents[1] / "configs" / "model"  # ships in the package
PRESET_SIZES = {"125m": 125e6, "350m": 350e6, "1b": 1e9, "3b": 3e9, "7b": 7e9}
# The CPU test model: two layers, small enough to train a few steps in seconds on a laptop.
TINY = ModelConfig(vocab_size=32000, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=192, max_seq_len=256)


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """Exact parameter counts: total, without the input embedding table, and the embedding table."""
    return {
        "total": num_params(cfg),
        "non_embedding": num_params(cfg, exclude_embedding=True),
        "embedding": cfg.vocab_size * cfg.d_model,
    }


def _target_aspect(n: float) -> float:
    return min(128.0, max(32.0, 64.0 * (n / 1e8) ** 0.16))


def _shape(d_model: int, n_layers: int, vocab_size: int, max_seq_len: int, tie: bool) -> ModelConfig:
    head_dim = 64 if d_model < 2048 else 128
    n_heads = d_model // head_dim
    n_kv = 8 if n_heads >= 16 else n_heads
    ffn = 256 * math.ceil(8 * d_model / 3 / 256)
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        n_layers=n_layers,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        ffn_dim=ffn,
        max_seq_len=max_seq_len,
        tie_embeddings=tie,
    )


def size_model(
    n_params: float, vocab_size: int = 32000, max_seq_len: int = 2048, tie_embeddings: bool = False
) -> ModelConfig:
    """The Llama-style shape whose exact parameter count is closest to ``n_params`` (rules above)."""
    if not n_params > 0:
        raise UsageError(f"parameter count must be positive, got {n_params}")
    if vocab_size <= 0 or max_seq_len <= 0:
        raise UsageError("vocab size and sequence length must be positive")
    aspect = _target_aspect(n_params)
    best, best_cost = None, math.inf
    # even head counts below 16 heads, multiples of 8 from there on (see the module docstring)
    for d_model in [*range(128, 1024, 128), 1024, 1536, *range(2048, 32769, 1024)]:
        for n_layers in range(2, 201, 2):
            cfg = _shape(d_model, n_layers, vocab_size, max_seq_len, tie_embeddings)
            n = num_params(cfg)
            cost = abs(math.log(n / n_params)) + 0.25 * abs(math.log(d_model / n_layers / aspect))
            if cost < best_cost:
                best, best_cost = cfg, cost
            if n > 2 * n_params:
                break
    if abs(math.log(num_params(best) / n_params)) > math.log(1.25):
        raise UsageError(
            f"no Llama-style shape with a {vocab_size}-token vocabulary comes within 25% of "
            f"{human(n_params)} parameters (nearest: {human(num_params(best))}); use the 'tiny' "
            "preset or a smaller --vocab-size"
        )
    return best


def preset(name: str) -> ModelConfig:
    """The named preset: 'tiny' or a nominal size from PRESET_SIZES, as ``size_model`` shapes it."""
    key = name.lower()
    if key == "tiny":
        return TINY
    if key not in PRESET_SIZES:
        raise UsageError(f"unknown preset {name!r}; known: tiny, {', '.join(PRESET_SIZES)}")
    return size_model(PRESET_SIZES[key])


def resolve_model(spec: str) -> ModelConfig:
    """A model config from a preset name ('1b') or a YAML path."""
    if os.path.exists(spec) or spec.endswith((".yaml", ".yml")):
        return load_model_config(spec)
    return preset(spec)


def describe(cfg: ModelConfig) -> dict:
    counts = param_counts(cfg)
    return {
        "config": cfg.model_dump(),
        "params": counts,
        "head_dim": cfg.head_dim,
        "aspect_ratio": cfg.d_model / cfg.n_layers,
        "flops_per_token": flops_per_token(cfg, cfg.max_seq_len),
    }
