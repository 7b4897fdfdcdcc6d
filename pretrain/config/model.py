"""The model config: a Llama-style decoder's shape, its initialisation and its stability options."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dataprep.core.validation import StrictModel


class ModelConfig(StrictModel):
    """A Llama-style decoder: RMSNorm, RoPE, SwiGLU, grouped-query attention."""

    vocab_size: int = Field(gt=0)  # in a training config, auto (or left out): the data's tokenizer's
    d_model: int = Field(gt=0)
    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    n_kv_heads: int = Field(gt=0)
    ffn_dim: int = Field(gt=0)
    max_seq_len: int = Field(2048, gt=0)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    init_std: float = 0.02
    # scaled_normal: N(0, init_std), the projections into the residual stream (wo, w2) scaled by
    # 1/sqrt(2 n_layers) (GPT-2, Megatron); normal: N(0, init_std) for every matrix (OLMo 2)
    init: Literal["scaled_normal", "normal"] = "scaled_normal"
    qk_norm: bool = False  # RMSNorm over each head of q and k before RoPE (OLMo 2, Qwen3): bounds attention logits
    z_loss: float = Field(0.0, ge=0.0)  # coefficient of mean(logsumexp(logits)^2) added to the loss (PaLM)

    @model_validator(mode="after")
    def _check_heads(self) -> "ModelConfig":
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension must be even for rotary embeddings")
        return self

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads
