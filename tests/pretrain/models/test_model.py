"""The Llama decoder: shapes, causality, GQA, rotary embeddings, init, parameter and FLOP counts."""

from __future__ import annotations

import math

import pytest
import torch

from pretrain.config.model import ModelConfig
from pretrain.models.llama import Llama, apply_rope, num_params, rope_tables
from pretrain.planning.flops import flops_per_token

CFG = ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48, max_seq_len=32)


def _model(cfg=CFG, seed=0) -> Llama:
    model = Llama(cfg)
    model.init_weights(seed)
    return model


def test_logits_have_one_row_per_token_over_the_vocabulary():
    assert _model()(torch.randint(0, 100, (2, 12))).shape == (2, 12, 100)


def test_the_future_does_not_leak_into_the_past():
    model = _model()
    tokens = torch.randint(0, 100, (2, 12))
    logits = model(tokens)
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 100
    out = model(changed)
    torch.testing.assert_close(out[:, :8], logits[:, :8])  # the future does not leak into the past
    assert not torch.allclose(out[:, 8:], logits[:, 8:])


def test_grouped_query_attention_equals_mha_with_repeated_kv_heads():
    gqa = _model()
    mha = Llama(CFG.model_copy(update={"n_kv_heads": 4}))
    state = gqa.state_dict()
    for name, value in list(state.items()):
        if name.endswith(("wk.weight", "wv.weight")):  # (kv_heads*hd, d) -> each kv head serves 2 q heads
            state[name] = value.view(2, 8, 32).repeat_interleave(2, dim=0).reshape(32, 32)
    mha.load_state_dict(state)
    tokens = torch.randint(0, 100, (1, 10))
    torch.testing.assert_close(mha(tokens), gqa(tokens))


def test_rope_is_a_rotation_that_depends_on_relative_position():
    cos, sin = rope_tables(8, 16, 10000.0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def at(x, pos):
        return apply_rope(x, cos[pos : pos + 1], sin[pos : pos + 1])

    torch.testing.assert_close(at(q, 5).norm(), q.norm())
    score = lambda i, j: (at(q, i) * at(k, j)).sum()  # noqa: E731
    torch.testing.assert_close(score(3, 1), score(9, 7))  # only i - j matters
    assert not torch.allclose(score(3, 1), score(3, 2))


def test_init_is_seeded():
    a, b, c = _model(seed=1), _model(seed=1), _model(seed=2)
    torch.testing.assert_close(a.state_dict(), b.state_dict())
    assert not torch.equal(a.output.weight, c.output.weight)


def test_init_scales_residual_projections():
    big = _model(ModelConfig(vocab_size=64, d_model=256, n_layers=8, n_heads=4, n_kv_heads=4, ffn_dim=512))
    block = big.layers["0"]
    assert block.attention.wq.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert block.feed_forward.w2.weight.std().item() == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    assert torch.equal(block.attention_norm.weight, torch.ones(256))


def test_param_count_of_untied_embeddings():
    model = _model()
    assert model.num_params() == num_params(CFG) == sum(p.numel() for p in model.parameters())
    assert num_params(CFG, exclude_embedding=True) == num_params(CFG) - 100 * 32


def test_param_count_of_tied_embeddings_counts_them_once():
    tied_cfg = CFG.model_copy(update={"tie_embeddings": True})
    tied = _model(tied_cfg)
    assert tied.output.weight is tied.tok_embeddings.weight
    assert tied.num_params() == num_params(tied_cfg) == num_params(CFG) - 100 * 32


def test_flops_per_token():
    n = num_params(CFG, exclude_embedding=True)
    assert flops_per_token(CFG, 32) == 6 * n + 12 * 2 * 4 * 8 * 32


def test_too_long_sequence_is_rejected():
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        _model()(torch.zeros(1, 33, dtype=torch.long))


def test_meta_build_then_materialise_matches_direct_build():
    with torch.device("meta"):
        model = Llama(CFG)
    model.to_empty(device="cpu")
    model.init_weights(0)
    ref = _model()
    tokens = torch.randint(0, 100, (1, 8))
    torch.testing.assert_close(model(tokens), ref(tokens))
