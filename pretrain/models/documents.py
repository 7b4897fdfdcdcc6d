"""Attention within documents. A training window packs several documents end to end; with
``data.document_mask`` each token attends only to the earlier tokens of its own document, and (with
``data.document_positions``) its rotary position counts from its document's first token, so a document
packed after others is seen exactly as it would be alone.

The model takes each token's document number in the window (``documents``: (batch, seq), non-decreasing).
On CUDA the mask is a flex-attention block mask: blocks of 128 x 128 that cross no document boundary and
lie under the diagonal are computed, the rest skipped, so attention costs what the documents' own lengths
cost. Flex attention has no backward pass on the CPU in torch 2.13, so there the mask is a dense boolean
(batch, 1, seq, seq) tensor given to ``scaled_dot_product_attention``: exact, with no compute saved.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

FLEX_BLOCK = 128  # flex attention's block edge: the planner's unit of skipped work


def document_positions(documents: torch.Tensor) -> torch.Tensor:
    """Each token's position within its document: (batch, seq) from 0 at every document's first token."""
    seq = documents.size(-1)
    index = torch.arange(seq, device=documents.device).expand_as(documents)
    starts = torch.ones_like(documents, dtype=torch.bool)
    starts[:, 1:] = documents[:, 1:] != documents[:, :-1]
    return index - torch.where(starts, index, torch.zeros_like(index)).cummax(dim=-1).values


@functools.cache
def _compiled_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


class DocumentMask:
    """Causal attention restricted to each token's document, for one forward pass (every block shares it)."""

    def __init__(self, documents: torch.Tensor, flex: bool | None = None):
        self.flex = documents.is_cuda if flex is None else flex
        batch, seq = documents.shape
        if self.flex:
            from torch.nn.attention.flex_attention import create_block_mask

            def same_document_causal(b, h, q, k):
                return (q >= k) & (documents[b, q] == documents[b, k])

            self.mask = create_block_mask(same_document_causal, batch, None, seq, seq, device=documents.device)
        else:
            causal = torch.ones(seq, seq, dtype=torch.bool, device=documents.device).tril()
            self.mask = (documents[:, :, None] == documents[:, None, :]) & causal  # (batch, q, k)
            self.mask = self.mask[:, None]  # broadcast over heads

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention over (batch, heads, seq, head_dim), grouped-query heads broadcast by the kernel."""
        gqa = k.size(1) != q.size(1)
        if self.flex:
            attend = _compiled_flex() if q.is_cuda else _eager_flex()
            return attend(q, k, v, block_mask=self.mask, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, enable_gqa=gqa)


def _eager_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


def attention_span(seq_len: int, mean_document: float | None) -> float:
    """The keys per query the attention FLOPs count (seq_len, as for MFU, when unmasked): with the block mask,
    a query's blocks reach back over its document only, about the token-weighted mean document length plus
    one block, at most the window."""
    if mean_document is None:
        return float(seq_len)
    return float(min(seq_len, mean_document + FLEX_BLOCK))


def block_mask_bytes(micro_batch: int, seq_len: int) -> int:
    """Bytes of one forward's block mask: flex attention keeps, per sequence, the partial and the full blocks
    of every query row and key column, as counts and int32 indices (about 4 n^2 + 4 n numbers, n blocks a
    side); the blocks share it. The dense CPU mask is micro_batch x seq_len^2 bytes instead."""
    n = -(-seq_len // FLEX_BLOCK)
    return micro_batch * 4 * (4 * n * n + 4 * n)
