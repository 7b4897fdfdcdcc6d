"""Training FLOPs: the PaLM count per token (``flops_per_token``: MFU and the planner's step time), the 6ND
approximation, the Chinchilla Appendix F count and DeepSeek LLM's model scale M (``deepseek_flops_per_token``).

Appendix F of Hoffmann et al. 2022 counts a forward pass per sequence as embeddings + layers x
(QKV projections, key @ query logits, softmax, softmax @ value, output projection, feed-forward) +
final logits, with a multiply-accumulate = 2 FLOPs; backward = 2 x forward. Its Table A4 compares
the count with 6ND for six architectures; the printed ratios are reproduced only when embeddings and
final logits are left out (nanoGPT's scaling_laws.ipynb, citing the authors: the text has a typo),
so ``count_embeddings`` selects between the text and the table.

Generalised to our Llama blocks: grouped-query attention (K and V projections n_kv_heads wide) and
a SwiGLU feed-forward (three d_model x ffn matrices instead of two).
"""

from __future__ import annotations

from pretrain.config.model import ModelConfig
from pretrain.models.llama import num_params


def flops_per_token(cfg: ModelConfig, seq_len: int, attention_span: float | None = None) -> float:
    """Training FLOPs per token: 6N (forward + backward matmuls, N without the input embedding) plus
    12·L·H·Q·T for the attention scores and their weighted sum (PaLM appendix B; causal masking not
    subtracted, as is customary for MFU). With attention within documents, T is the ``attention_span`` the
    block mask leaves (``pretrain.models.documents.attention_span``) instead of the window. The z-loss adds
    a logsumexp over the vocabulary and its gradient, about 4 FLOPs per logit; qk_norm's norms, like the
    others, are elementwise and not counted."""
    n = num_params(cfg, exclude_embedding=True)
    z_loss = 4 * cfg.vocab_size if cfg.z_loss else 0
    span = seq_len if attention_span is None else attention_span
    return 6 * n + 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * span + z_loss


def deepseek_flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """DeepSeek LLM's model scale M: training FLOPs per token without the vocabulary, attention included,
    M = 72 n_layer d_model^2 + 6 n_layer d_model l_seq (Bi et al. 2024, arXiv:2401.02954, Section 3.2).
    Their allocation and hyperparameter laws are fitted in this unit, so a model is measured their way,
    whatever its head count or feed-forward width."""
    layers, width = cfg.n_layers, cfg.d_model
    return 72.0 * layers * width**2 + 6.0 * layers * width * seq_len


def six_nd(n_params: float, tokens: float) -> float:
    """Kaplan et al.'s C = 6 N D: 2 FLOPs per parameter per token forward, 4 backward."""
    return 6.0 * n_params * tokens


def appendix_f_forward(
    seq_len: int,
    vocab_size: int,
    d_model: int,
    n_layers: int,
    n_heads: int,
    key_size: int,
    ffw_size: int,
    n_kv_heads: int | None = None,
    ffw_matrices: int = 2,
    count_embeddings: bool = True,
) -> dict[str, float]:
    """Forward-pass FLOPs of one sequence, by component (Appendix F; per layer terms already x n_layers)."""
    kv = n_heads if n_kv_heads is None else n_kv_heads
    attn_width = key_size * n_heads
    per_layer = {
        "qkv": 2.0 * seq_len * d_model * key_size * (n_heads + 2 * kv),
        "attention_logits": 2.0 * seq_len * seq_len * attn_width,
        "softmax": 3.0 * n_heads * seq_len * seq_len,
        "attention_values": 2.0 * seq_len * seq_len * attn_width,
        "output_projection": 2.0 * seq_len * attn_width * d_model,
        "feed_forward": 2.0 * seq_len * ffw_matrices * d_model * ffw_size,
    }
    out = {name: n_layers * flops for name, flops in per_layer.items()}
    edge = 2.0 * seq_len * vocab_size * d_model if count_embeddings else 0.0
    return {"embeddings": edge, **out, "final_logits": edge}


def appendix_f_training(
    cfg: ModelConfig, tokens: float, seq_len: int | None = None, count_embeddings: bool = True
) -> float:
    """Training FLOPs for ``tokens`` tokens of a Llama config: 3 x forward (backward = 2 x forward)."""
    seq = seq_len or cfg.max_seq_len
    forward = appendix_f_forward(
        seq,
        cfg.vocab_size,
        cfg.d_model,
        cfg.n_layers,
        cfg.n_heads,
        cfg.head_dim,
        cfg.ffn_dim,
        cfg.n_kv_heads,
        ffw_matrices=3,
        count_embeddings=count_embeddings,
    )
    return 3.0 * sum(forward.values()) * tokens / seq


def compare(cfg: ModelConfig, tokens: float, seq_len: int | None = None) -> dict[str, float]:
    """6ND (N = all parameters, as Chinchilla counts them) next to the Appendix F count, and their ratio."""
    approx = six_nd(num_params(cfg), tokens)
    exact = appendix_f_training(cfg, tokens, seq_len)
    return {"six_nd": approx, "appendix_f": exact, "ratio": exact / approx}
