"""Context-parallel attention without a mask: the same outputs and gradients as the dense-mask attention it
replaced, and no tensor that grows with the square of the sequence (counted op by op, and measured as the
resident size of a process that runs this file, ``__main__`` below). One process: the inputs are built as
the all-gather hands them over (every rank's keys and values, rank by rank); the multi-process runs
(cp 2 x dp_shard 2 against one process) are in tests/pretrain/distributed/test_train_3d.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right
from torch.utils._python_dispatch import TorchDispatchMode

from pretrain.distributed.context_parallel import (
    ContextParallelAttention,
    cp_positions,
    lower_right_attention,
    split_prefix_attention,
)

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out


def _gathered(t: torch.Tensor, cp: int) -> torch.Tensor:
    """``t`` (batch, heads, seq, head_dim) as the all-gather returns it: each rank's positions, rank by rank."""
    return torch.cat([t[:, :, cp_positions(t.size(2), cp, r)] for r in range(cp)], dim=2)


def _dense_mask_attention(q, k, v, cp: int, rank: int) -> torch.Tensor:
    """What context parallelism ran before: a (local query x every key) boolean mask by global position."""
    seq_len = k.size(2)
    key_positions = torch.cat([cp_positions(seq_len, cp, r) for r in range(cp)])
    mask = key_positions[None, :] <= cp_positions(seq_len, cp, rank)[:, None]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.size(1) != q.size(1))


def _inputs(seq_len: int, cp: int, rank: int, n_heads: int, n_kv: int, head_dim: int = 8, batch: int = 2):
    """This rank's queries and the gathered keys and values of a random sequence, all requiring grad."""
    gen = torch.Generator().manual_seed(seq_len * 31 + cp * 7 + rank)
    q, k, v = (torch.randn(batch, h, seq_len, head_dim, generator=gen) for h in (n_heads, n_kv, n_kv))
    q = q[:, :, cp_positions(seq_len, cp, rank)]
    return [t.detach().requires_grad_() for t in (q, _gathered(k, cp), _gathered(v, cp))]


def _output_and_grads(attend, inputs):
    out = attend(*inputs)
    out.backward(torch.linspace(-1, 1, out.numel()).view_as(out))
    grads = [t.grad for t in inputs]
    for t in inputs:
        t.grad = None
    return out.detach(), grads


@pytest.mark.parametrize("cp", [2, 4])
@pytest.mark.parametrize("n_kv", [4, 2, 1])
def test_attention_equals_the_dense_mask_attention(one_torch_thread, cp, n_kv):
    """Every rank's output and the gradients of its queries and of the gathered keys and values, for
    multi-head, grouped-query and multi-query attention."""
    seq_len = 16 * cp
    for rank in range(cp):
        inputs = _inputs(seq_len, cp, rank, n_heads=4, n_kv=n_kv)
        new = ContextParallelAttention(None, cp, rank, seq_len).attend_gathered
        out, grads = _output_and_grads(new, inputs)
        ref_out, ref_grads = _output_and_grads(lambda q, k, v: _dense_mask_attention(q, k, v, cp, rank), inputs)
        torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
        for got, ref in zip(grads, ref_grads):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_kv", [4, 2])
def test_cpu_and_cuda_formulations_agree_on_a_prefix(one_torch_thread, n_kv):
    """The last 8 positions of a 24-token prefix: the CPU split, and CUDA's lower-right causal bias (run
    here on CPU, where torch materialises it; with enable_gqa as such, and as the trainer calls it), give
    the dense mask's outputs and gradients."""
    gen = torch.Generator().manual_seed(n_kv)
    inputs = [torch.randn(2, h, n, 8, generator=gen).requires_grad_() for h, n in ((4, 8), (n_kv, 24), (n_kv, 24))]
    mask = torch.ones(8, 24, dtype=torch.bool).tril(diagonal=16)
    ref_out, ref_grads = _output_and_grads(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=n_kv != 4), inputs
    )
    as_such = partial(F.scaled_dot_product_attention, attn_mask=causal_lower_right(8, 24), enable_gqa=n_kv != 4)
    for attend in (split_prefix_attention, lower_right_attention, as_such):
        out, grads = _output_and_grads(attend, inputs)
        torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
        for got, ref in zip(grads, ref_grads):
            torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_selective_checkpointing_recomputes_to_the_same_gradients(one_torch_thread):
    """Under the trainer's selective checkpointing policy (attention kernels kept, the rest recomputed in
    the backward pass) the gradients are those of the plain pass."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    from pretrain.distributed.activation_checkpoint import _save_matmuls_policy

    cp, seq_len = 2, 32
    attend = ContextParallelAttention(None, cp, 1, seq_len).attend_gathered
    inputs = _inputs(seq_len, cp, 1, n_heads=4, n_kv=2)
    _, plain = _output_and_grads(attend, inputs)
    context = partial(create_selective_checkpoint_contexts, _save_matmuls_policy())
    _, checkpointed = _output_and_grads(
        lambda *t: checkpoint(attend, *t, use_reentrant=False, context_fn=context), inputs
    )
    for got, ref in zip(checkpointed, plain):
        torch.testing.assert_close(got, ref)


class _LargestTensor(TorchDispatchMode):
    """The most elements any op returns in one tensor: what a dense mask (or a score matrix) would show."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def _largest_tensor(attend, seq_len: int, cp: int) -> int:
    """Elements of the largest tensor a forward and backward pass of rank 0 allocates."""
    inputs = _inputs(seq_len, cp, rank=0, n_heads=2, n_kv=1, head_dim=4, batch=1)
    probe = _LargestTensor()
    with probe:
        attend(*inputs).sum().backward()
    return probe.largest


@pytest.mark.parametrize("cp", [2, 4])
def test_no_tensor_grows_with_the_square_of_the_sequence(one_torch_thread, cp):
    """The size of every tensor the attention's ops return (torch 2.13 keeps no allocator statistics on
    CPU): doubling the sequence doubles the largest one (the sequence's keys), where the dense mask
    (local queries x all keys) quadrupled; the probe sees the old mask, so it would see a new one."""
    new, old = {}, {}
    for seq_len in (1024, 2048):
        attend = ContextParallelAttention(None, cp, 0, seq_len).attend_gathered
        new[seq_len] = _largest_tensor(attend, seq_len, cp)
        old[seq_len] = _largest_tensor(lambda q, k, v: _dense_mask_attention(q, k, v, cp, 0), seq_len, cp)
        assert old[seq_len] >= seq_len // cp * seq_len  # the mask
        assert new[seq_len] <= seq_len * 4  # the keys of the sequence (1 kv head of 4 dims)
    assert new[2048] == 2 * new[1024] and old[2048] == 4 * old[1024]


def test_resident_size_stays_flat_where_the_mask_grew_with_the_square():
    """The peak resident size of rank 0's forward and backward pass at cp 2, with glibc returning every
    allocation of 64 KiB or more to the system (as in tests/pretrain/distributed/test_train_scale.py): the dense mask's
    peak quadruples when the sequence doubles (~170 MB at 8192 tokens), the new attention's stays under a twentieth of
    it (~1.5 MB: the sequence's keys and values, their gradients and copies)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    peaks = json.loads(proc.stdout.splitlines()[-1])
    assert peaks["dense_8192"] > 3.5 * peaks["dense_4096"], peaks
    assert peaks["new_8192"] < peaks["dense_8192"] / 20, peaks


def _resident_peaks() -> dict[str, int]:
    """Bytes the resident size peaks above its start during a forward and backward pass, per attention and
    sequence length (the least of two passes, after one that allocates once-only state)."""
    from memory_peaks import peak_growth

    peaks = {}
    for seq_len in (4096, 8192):
        inputs = _inputs(seq_len, 2, 0, n_heads=2, n_kv=1, head_dim=4, batch=1)
        new = ContextParallelAttention(None, 2, 0, seq_len).attend_gathered
        for name, attend in (("new", new), ("dense", partial(_dense_mask_attention, cp=2, rank=0))):
            attend(*inputs).sum().backward()
            peaks[f"{name}_{seq_len}"] = min(peak_growth(lambda: attend(*inputs).sum().backward())[1] for _ in range(2))
    return peaks


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(json.dumps(_resident_peaks()))
