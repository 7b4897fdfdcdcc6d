"""Context parallelism: each sequence split over the ``cp`` ranks of the mesh, for sequences whose
activations do not fit one GPU.

Load balancing: the sequence is cut into 2 x cp chunks and rank r holds chunks r and 2cp-1-r, so under
the causal mask every rank attends to the same number of (query, key) pairs. Each rank embeds, normalises
and projects only its own tokens; attention all-gathers the keys and values of every layer over the cp
group (what Llama 3 trained with: Dubey et al. 2024, section 3.3.2; k/v are few with grouped-query
attention), puts them in sequence order (an index over the sequence), and lets each of the rank's two
chunks attend to the prefix of the sequence that ends with it, causally within the chunk: causal attention
aligned to the lower right (``causal_lower_right``), which CUDA's flash and memory-efficient kernels run
without a mask. No (query x key) mask is built, so nothing a rank holds grows with the square of the
sequence; each layer keeps the whole sequence's keys and values for its backward (the planner counts
them: ``context_parallel_extra`` in pretrain/planning/plan_memory.py). CPU's flash kernel aligns causal
attention to the upper left only: there a chunk's attention is two unmasked kernel calls (the earlier
keys, then the chunk's own causally) merged by their log-sum-exps. The all-gather's backward
reduce-scatters the key/value gradients back to their owners. RoPE rotates each token by its global
position (``Llama.positions``). Each rank's loss is the mean over its tokens, the same count on every
rank, so the average over cp ranks is the sequence's loss; FSDP averages gradients over dp_shard x cp
(pretrain/distributed/parallelize.py).

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

from dataprep.core.errors import UsageError


def cp_positions(seq_len: int, cp: int, rank: int) -> torch.Tensor:
    """The positions rank ``rank`` of ``cp`` holds: chunks ``rank`` and ``2cp-1-rank`` of 2cp equal chunks."""
    if seq_len % (2 * cp):
        raise UsageError(f"sequence length {seq_len} is not divisible by 2 x cp={cp}")
    chunk = seq_len // (2 * cp)
    return torch.cat([torch.arange(c * chunk, (c + 1) * chunk) for c in (rank, 2 * cp - 1 - rank)])


def _cpu_flash(q, k, v, causal: bool):
    """CPU's flash kernel: the output and each query's log-sum-exp."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)


def _cpu_flash_backward(grad, q, k, v, out, lse, causal: bool):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(grad, q, k, v, out, lse, 0.0, causal)


class _SplitPrefixAttention(torch.autograd.Function):
    """Lower-right causal attention on CPU without a mask: the earlier keys unmasked and the chunk's own
    keys causally (a square, where both alignments agree), merged by log-sum-exp. The backward runs the
    kernel's backward on each part with the merged output and log-sum-exp: the exact gradients (ring
    attention's rule)."""

    @staticmethod
    def forward(ctx, q, k_earlier, v_earlier, k_own, v_own):
        out_earlier, lse_earlier = _cpu_flash(q, k_earlier, v_earlier, causal=False)
        out_own, lse_own = _cpu_flash(q, k_own, v_own, causal=True)
        lse = torch.logaddexp(lse_earlier, lse_own)
        out = (
            out_earlier * (lse_earlier - lse).exp().unsqueeze(-1) + out_own * (lse_own - lse).exp().unsqueeze(-1)
        ).to(q.dtype)
        ctx.save_for_backward(q, k_earlier, v_earlier, k_own, v_own, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k_earlier, v_earlier, k_own, v_own, out, lse = ctx.saved_tensors
        grad = grad.contiguous()
        dq_earlier, dk_earlier, dv_earlier = _cpu_flash_backward(grad, q, k_earlier, v_earlier, out, lse, False)
        dq_own, dk_own, dv_own = _cpu_flash_backward(grad, q, k_own, v_own, out, lse, True)
        return dq_earlier + dq_own, dk_earlier, dv_earlier, dk_own, dv_own


def _repeat_kv(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Each kv head once per q head of its group, for a kernel that takes no grouped kv heads."""
    return t.repeat_interleave(n_heads // t.size(1), dim=1) if t.size(1) != n_heads else t


def prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of ``q``, the last ``q.size(2)`` positions of a prefix, over the prefix's keys and
    values ``k``, ``v`` (batch, heads, seq, head_dim), built without a mask (see the module doc)."""
    if q.size(2) == k.size(2):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.size(1) != q.size(1))
    if q.device.type == "cpu":
        return split_prefix_attention(q, k, v)
    return lower_right_attention(q, k, v)


def split_prefix_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``prefix_attention`` on CPU: two flash-kernel calls merged by log-sum-exp (the kernel takes grouped
    kv heads itself)."""
    n_q = q.size(2)
    return _SplitPrefixAttention.apply(q, k[:, :, :-n_q], v[:, :, :-n_q], k[:, :, -n_q:], v[:, :, -n_q:])


def lower_right_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``prefix_attention`` on CUDA: SDPA with torch's lower-right causal bias (a mask only where neither
    the flash nor the memory-efficient kernel runs, e.g. on CPU)."""
    # imported here: torch.nn.attention.bias loads torch._dynamo, which the training side's import needs not
    from torch.nn.attention.bias import causal_lower_right

    gqa = k.size(1) != q.size(1)
    if gqa and not _flash_takes(q, k, v):
        k, v, gqa = _repeat_kv(k, q.size(1)), _repeat_kv(v, q.size(1)), False
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q.size(2), k.size(2)), enable_gqa=gqa)


def _flash_takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether CUDA's flash kernel runs these grouped-query inputs. torch's lower-right bias calls it, which
    takes grouped kv heads, or else calls the memory-efficient kernel directly (fp32, for one), which in
    the torch sources we read requires as many kv heads as q heads."""
    from torch.backends.cuda import SDPAParams, can_use_flash_attention

    return can_use_flash_attention(SDPAParams(q, k, v, None, 0.0, False, True))


class ContextParallelAttention:
    """Causal attention of this rank's queries over the keys and values of the whole sequence."""

    def __init__(self, group, cp: int, rank: int, seq_len: int):
        self.group = group
        self.chunk = seq_len // (2 * cp)
        self.chunks = (rank, 2 * cp - 1 - rank)  # in the order this rank holds them
        # the gathered keys come rank by rank; this index puts them in sequence order
        gathered = torch.cat([cp_positions(seq_len, cp, r) for r in range(cp)])
        self.sequence_order = torch.argsort(gathered)

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.attend_gathered(q, self.gather(k), self.gather(v))

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's ``t``, rank by rank along the sequence; the backward reduce-scatters the gradients."""
        from torch.distributed._functional_collectives import all_gather_tensor_autograd

        return all_gather_tensor_autograd(t.contiguous(), gather_dim=2, group=self.group)

    def attend_gathered(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """This rank's attention output, given the keys and values gathered rank by rank."""
        if self.sequence_order.device != k.device:  # moved once, not per layer call
            self.sequence_order = self.sequence_order.to(k.device)
        k, v = k.index_select(2, self.sequence_order), v.index_select(2, self.sequence_order)
        outs = []
        for i, c in enumerate(self.chunks):
            end = (c + 1) * self.chunk
            q_chunk = q[:, :, i * self.chunk : (i + 1) * self.chunk]
            outs.append(prefix_attention(q_chunk, k[:, :, :end], v[:, :, :end]))
        return torch.cat(outs, dim=2)


def apply_cp(model: nn.Module, cp_mesh: DeviceMesh, seq_len: int) -> None:
    """Install this rank's positions of ``seq_len``-token sequences (RoPE angles) and the context-parallel
    attention in every block. Inputs and targets are cut with ``model.positions`` (``TrainStepContext``)."""
    cp, rank = cp_mesh.size(), cp_mesh.get_local_rank()
    model.positions = cp_positions(seq_len, cp, rank)
    attend = ContextParallelAttention(cp_mesh.get_group(), cp, rank, seq_len)
    for block in model.layers.values():
        block.attention.attend = attend
