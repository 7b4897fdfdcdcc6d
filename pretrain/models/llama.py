"""A Llama-style decoder: RMSNorm, rotary embeddings, SwiGLU, grouped-query attention.

The model knows nothing of parallelism (pretrain/distributed/parallelize.py shards it from outside). Attention infers
its number of local heads from the projection width, so tensor parallelism can split heads without
the model knowing. Initialisation (``init_weights``): every weight is N(0, init_std); under the default
``init: scaled_normal`` the two projections that write into the residual stream (``attention.wo``,
``feed_forward.w2``) use init_std / sqrt(2 * n_layers) as in GPT-2 and Megatron, so the residual variance
does not grow with depth (``init: normal`` keeps them at init_std, as OLMo 2 does); norms start at 1.
``qk_norm`` adds an RMSNorm over each head of q and k before RoPE. ``probe`` (the model's, each attention's): None
except on a step that measures per-layer diagnostics, when the run sets it to see each layer's output and
each attention's q and k. Parameters are created uninitialised so the model can be built on the meta device, and
initialised where they live: a sharded parameter (DTensor) draws only its own rows and columns, with the
same values a whole tensor would hold, so no process ever builds the full model.
"""

from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from pretrain.config.model import ModelConfig
from pretrain.models.documents import DocumentMask, document_positions


def rope_tables(head_dim: int, max_seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, shape (max_seq_len, head_dim // 2), in fp32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (batch, seq, heads, head_dim) by the position's angles (the first ``seq`` rows of the
    tables, or per sequence when they are (batch, seq, head_dim // 2)); the two halves of each head form the
    pairs (the Hugging Face Llama layout, so an export needs no weight permutation)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    seq = x.size(1)
    if cos.ndim == 3:  # positions per sequence (positions restarting at each document)
        cos, sin = cos[:, :seq, None, :], sin[:, :seq, None, :]
    else:
        cos, sin = cos[None, :seq, None, :], sin[None, :seq, None, :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).type_as(x)


INIT_BLOCK = 1 << 22  # elements drawn per generator seed: bounds the host memory of initialisation


def parameter_name(name: str) -> str:
    """A parameter's name without the wrappers parallelism adds (``_checkpoint_wrapped_module``,
    ``_orig_mod``): the same name for every layout."""
    return ".".join(part for part in name.split(".") if not part.startswith("_"))


def fill_normal(p: torch.Tensor, std: float, key: str) -> None:
    """Fill the 2-D parameter ``p`` (a tensor or this rank's shard of a DTensor) with N(0, std) values that
    depend only on ``key`` and the element's position in the full tensor. The full tensor is drawn in
    blocks of whole rows, each from a generator seeded by (key, block), on the CPU (the same numbers on
    every device); a shard draws only the blocks that overlap its rows."""
    from torch.distributed.tensor import DTensor

    rows, cols = p.shape
    if isinstance(p, DTensor):
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        (n_rows, n_cols), (row0, col0) = compute_local_shape_and_global_offset(p.shape, p.device_mesh, p.placements)
        local = p.to_local()
    else:
        (n_rows, n_cols), (row0, col0), local = (rows, cols), (0, 0), p
    if n_rows == 0 or n_cols == 0:
        return
    per_block = max(1, INIT_BLOCK // cols)
    gen = torch.Generator()
    for block in range(row0 // per_block, (row0 + n_rows - 1) // per_block + 1):
        digest = hashlib.blake2b(f"{key}/{block}".encode(), digest_size=8).digest()
        gen.manual_seed(int.from_bytes(digest, "little") >> 1)
        first, last = block * per_block, min(rows, (block + 1) * per_block)
        values = torch.empty(last - first, cols).normal_(0.0, std, generator=gen)
        lo, hi = max(first, row0), min(last, row0 + n_rows)
        local[lo - row0 : hi - row0].copy_(values[lo - first : hi - first, col0 : col0 + n_cols])


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal SDPA over (batch, heads, seq, head_dim). Grouped-query attention: each kv head serves a group
    of q heads; SDPA broadcasts them itself, so neither the forward nor the saved activations hold
    repeated copies of k and v."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.size(1) != q.size(1))


class Attention(nn.Module):
    # set for a diagnostics step: called with the step's q and k (batch, heads, seq, head_dim)
    probe = None

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attend = (
            causal_attention  # context parallelism swaps in its own (pretrain/distributed/context_parallel.py)
        )
        self.head_dim = cfg.head_dim
        self.wq = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        # one weight per head dimension, shared by the heads, so tensor parallelism splitting heads keeps it whole
        self.q_norm = nn.RMSNorm(cfg.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = nn.RMSNorm(cfg.head_dim, eps=cfg.norm_eps) if cfg.qk_norm else None

    def forward(self, x: torch.Tensor, rope: tuple) -> torch.Tensor:
        """``rope``: the rotary tables (cos, sin) and the document mask (None: causal over the window)."""
        bsz, seq, _ = x.shape
        # -1: the local head count, which tensor parallelism divides by its degree
        q = self.wq(x).view(bsz, seq, -1, self.head_dim)
        k = self.wk(x).view(bsz, seq, -1, self.head_dim)
        v = self.wv(x).view(bsz, seq, -1, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin, mask = rope
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (batch, heads, seq, head_dim)
        if self.probe is not None:
            self.probe(q.detach(), k.detach())
        out = self.attend(q, k, v) if mask is None else mask.attend(q, k, v)
        return self.wo(out.transpose(1, 2).reshape(bsz, seq, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w3 = nn.Linear(cfg.d_model, cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, rope: tuple) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), rope)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    """The decoder. A pipeline stage is a Llama with some blocks deleted and, away from the ends,
    ``tok_embeddings`` or ``norm``/``output`` set to None: its parameters keep their names. Context
    parallelism sets ``positions``, this rank's token positions in the sequence (RoPE angles)."""

    positions: torch.Tensor | None = None
    # diagnostics set it for one step: called with each layer's output into the residual stream
    probe = None

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # a ModuleDict keeps parameter names stable ("layers.3....") when blocks are wrapped
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.n_layers)})
        self.norm = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.tie_weights()
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(
        self, tokens: torch.Tensor, documents: torch.Tensor | None = None, restart_positions: bool = True
    ) -> torch.Tensor:
        """Logits (batch, seq, vocab) for token ids (batch, seq); a pipeline stage takes or returns the
        hidden states (batch, seq, d_model) where it lacks the embeddings or the head. ``documents``: each
        token's document number in its window (pretrain/models/documents.py): attention stays within
        documents and, with ``restart_positions``, rotary positions restart at each one."""
        if self.tok_embeddings is not None and tokens.size(1) > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {tokens.size(1)} exceeds max_seq_len {self.cfg.max_seq_len}")
        # each attention takes the first seq rows (seq as it sees it: sequence parallel splits the stream
        # between blocks); under context parallelism the rows of this rank's positions
        mask = None
        if documents is not None:
            mask = DocumentMask(documents)
        if documents is not None and restart_positions:
            positions = document_positions(documents)
            rope = (self.rope_cos[positions], self.rope_sin[positions], mask)
        elif self.positions is None:
            rope = (self.rope_cos, self.rope_sin, mask)
        else:
            positions = self.positions.to(self.rope_cos.device)
            rope = (self.rope_cos[positions], self.rope_sin[positions], mask)
        if self.tok_embeddings is not None:
            h = self.tok_embeddings(tokens)
            if self.probe is not None:
                self.probe("embeddings", h)
        else:
            h = tokens
        for name, block in self.layers.items():
            h = block(h, rope)
            if self.probe is not None:
                self.probe(f"block.{name}", h)
        return self.output(self.norm(h)) if self.output is not None else h

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> None:
        """Initialise as described in the module docstring, deterministic given ``seed`` and independent of
        how the parameters are sharded: each rank fills only its own shard (``fill_normal``)."""
        seed = 0 if seed is None else seed
        std = self.cfg.init_std
        out_std = std / math.sqrt(2 * self.cfg.n_layers) if self.cfg.init == "scaled_normal" else std
        for name, p in self.named_parameters():
            name = parameter_name(name)
            if p.ndim == 1:
                p.fill_(1.0)
            else:
                fill_normal(p, out_std if name.endswith(("wo.weight", "w2.weight")) else std, f"{seed}/{name}")
        self.reset_buffers()

    @torch.no_grad()
    def tie_weights(self) -> None:
        """Share the output projection with the embedding again (``to_empty`` unties them)."""
        if self.cfg.tie_embeddings and self.output is not None and self.tok_embeddings is not None:
            self.output.weight = self.tok_embeddings.weight

    def reset_buffers(self) -> None:
        """Recompute the rotary tables (needed after ``to_empty`` from the meta device)."""
        cos, sin = rope_tables(self.cfg.head_dim, self.cfg.max_seq_len, self.cfg.rope_theta)
        self.rope_cos = cos.to(self.rope_cos.device)
        self.rope_sin = sin.to(self.rope_sin.device)

    def num_params(self, exclude_embedding: bool = False) -> int:
        """Parameter count; ``exclude_embedding`` drops the input table (a lookup costs no FLOPs) unless
        it is tied to the output projection."""
        n = sum(p.numel() for p in self.parameters())
        if exclude_embedding and not self.cfg.tie_embeddings:
            n -= self.tok_embeddings.weight.numel()
        return n


def block_params(cfg: ModelConfig, norms: bool = True) -> int:
    """Parameters of one block: four attention projections and three SwiGLU matrices, plus (``norms``) the
    two RMSNorm gains and, with ``qk_norm``, the q and k norms' (head_dim each), which hold no matmul and so
    cost no FLOPs."""
    d, kv = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    matrices = 2 * d * d + 2 * d * kv + 3 * d * cfg.ffn_dim
    return matrices + ((2 * d + (2 * cfg.head_dim if cfg.qk_norm else 0)) if norms else 0)


def num_params(cfg: ModelConfig, exclude_embedding: bool = False) -> int:
    """Parameter count of a config without building the model."""
    d, emb = cfg.d_model, cfg.vocab_size * cfg.d_model
    n = cfg.n_layers * block_params(cfg) + d + emb + (0 if cfg.tie_embeddings else emb)
    if exclude_embedding and not cfg.tie_embeddings:
        n -= emb
    return n
