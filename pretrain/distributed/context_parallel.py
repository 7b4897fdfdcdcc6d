"""Context parallelism: each sequence split over the ``cp`` ranks of the mesh, for sequences whose
activations do not fit one GPU.

Load balancing: the sequence is cut into 2 x cp chunks and rank r holds chunks r and 2cp-1-r, so under
the causal mask every rank attends to the same number of (query, key) pairs. Each rank embeds, normalises
and projects only its own tokens; attention all-gathers the keys and values of every layer over the cp
group (what Llama 3 trained with: Dubey et al. 2024, section 3.3.2; k/v are few with grouped-query
attention) and masks by global position. The all-gather's backward reduce-scatters the key/value
gradients back to their owners. RoPE rotates each token by its global position (``Llama.positions``).
Each rank's loss is the mean over its tokens, the same count on every rank, so the average over cp
ranks is the sequence's loss; FSDP averages gradients over dp_shard x cp (pretrain/distributed/parallel_dims.py).

This runs on any backend (gloo included, our tests). torch's ring attention
(``torch.distributed.tensor.experimental.context_parallel``) has no CPU kernel in torch 2.13; it
overlaps the key/value exchange with compute on CUDA, and is the step to take when the all-gather's
memory (the full sequence's k and v per layer) becomes the limit.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh


def cp_positions(seq_len: int, cp: int, rank: int) -> torch.Tensor:
    """The positions rank ``rank`` of ``cp`` holds: chunks ``rank`` and ``2cp-1-rank`` of 2cp equal chunks."""
    if seq_len % (2 * cp):
        raise ValueError(f"sequence length {seq_len} is not divisible by 2 x cp={cp}")
    chunk = seq_len // (2 * cp)
    return torch.cat([torch.arange(c * chunk, (c + 1) * chunk) for c in (rank, 2 * cp - 1 - rank)])


class ContextParallelAttention:
    """Causal attention of this rank's queries over the keys and values of the whole sequence."""

    def __init__(self, mesh: DeviceMesh, positions: torch.Tensor):
        self.group, self.cp = mesh.get_group(), mesh.size()
        self.positions = positions
        # the key positions in gather order: every rank's positions, rank by rank
        self.key_positions = torch.cat([cp_positions(len(positions) * self.cp, self.cp, r) for r in range(self.cp)])

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        from torch.distributed._functional_collectives import all_gather_tensor_autograd

        # gathered rank by rank along the sequence; the backward reduce-scatters the gradients
        k = all_gather_tensor_autograd(k.contiguous(), gather_dim=2, group=self.group)
        v = all_gather_tensor_autograd(v.contiguous(), gather_dim=2, group=self.group)
        mask = self.key_positions.to(q.device)[None, :] <= self.positions.to(q.device)[:, None]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.size(1) != q.size(1))


def apply_cp(model: nn.Module, cp_mesh: DeviceMesh, seq_len: int) -> None:
    """Install this rank's positions of ``seq_len``-token sequences (RoPE angles) and the context-parallel
    attention in every block. Inputs and targets are cut with ``model.positions`` (``TrainStepContext``)."""
    model.positions = cp_positions(seq_len, cp_mesh.size(), cp_mesh.get_local_rank())
    attend = ContextParallelAttention(cp_mesh, model.positions)
    for block in model.layers.values():
        block.attention.attend = attend
