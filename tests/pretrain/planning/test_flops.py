"""FLOPs formulas: Chinchilla Appendix F on the paper's own architectures, 6ND, and our Llama blocks."""

from __future__ import annotations

import pytest

from pretrain.config.model import ModelConfig
from pretrain.models.llama import num_params
from pretrain.planning.flops import appendix_f_forward, appendix_f_training, compare, six_nd

# Table A4 of Hoffmann et al. 2022: (num_layers, d_model, ffw_size, num_heads, k/q size, printed ratio
# of the Appendix F count to 6ND per sequence). Sequence length 2048, vocabulary 32,000.
TABLE_A4 = [
    (10, 640, 2560, 10, 64, 1.03),
    (20, 1024, 4096, 16, 64, 1.10),
    (24, 1280, 5120, 10, 128, 1.08),
    (26, 1792, 7168, 14, 128, 1.04),
    (28, 2048, 8192, 16, 128, 1.03),
    (40, 3584, 14336, 28, 128, 0.99),
]


def gopher_family_params(n_layers: int, d_model: int, ffw: int, vocab: int = 32000) -> int:
    """Parameters of the Gopher/Chinchilla architecture of the paper: per layer Q, K, V, O with biases,
    Transformer-XL relative-position keys and biases, a 2-matrix MLP with biases and two LayerNorms;
    a final LayerNorm and one (tied) vocab x d_model embedding."""
    d = d_model
    layer = (4 * d * d + 4 * d) + (d * d + 2 * d) + (2 * d * ffw + ffw + d) + 4 * d
    return n_layers * layer + 2 * d + vocab * d


@pytest.mark.parametrize("layers,d,ffw,heads,kq,ratio", TABLE_A4)
def test_table_a4_ratios(layers, d, ffw, heads, kq, ratio):
    """The printed ratios come out when embeddings and logits are left out of the count (the paper's
    text includes them; the authors told nanoGPT's author the text is the typo)."""
    seq = 2048
    forward = appendix_f_forward(seq, 32000, d, layers, heads, kq, ffw, count_embeddings=False)
    ours = 3 * sum(forward.values())
    assert round(ours / six_nd(gopher_family_params(layers, d, ffw), seq), 2) == ratio


def test_table_a4_parameter_counts_match_table_a9():
    # Table A9 lists 74M, 306M, 552M, 1,143M, 1,593M and 6,796M parameters for these shapes
    printed = [74e6, 306e6, 552e6, 1143e6, 1593e6, 6796e6]
    for (layers, d, ffw, *_), n in zip(TABLE_A4, printed):
        assert gopher_family_params(layers, d, ffw) == pytest.approx(n, rel=0.005)


def test_appendix_f_components_by_hand():
    """Every term of Appendix F for a small shape, written out (seq 8, vocab 10, d 4, 2 heads of 2, ffw 16)."""
    f = appendix_f_forward(seq_len=8, vocab_size=10, d_model=4, n_layers=3, n_heads=2, key_size=2, ffw_size=16)
    assert f == {
        "embeddings": 2 * 8 * 10 * 4,
        "qkv": 3 * 2 * 3 * 8 * 4 * (2 * 2),
        "attention_logits": 3 * 2 * 8 * 8 * (2 * 2),
        "softmax": 3 * 3 * 2 * 8 * 8,
        "attention_values": 3 * 2 * 8 * 8 * (2 * 2),
        "output_projection": 3 * 2 * 8 * (2 * 2) * 4,
        "feed_forward": 3 * 2 * 8 * (4 * 16 + 4 * 16),
        "final_logits": 2 * 8 * 4 * 10,
    }


def test_llama_generalisation():
    """GQA shrinks only the K/V projections; SwiGLU has three matrices; backward = 2x forward."""
    mha = appendix_f_forward(2048, 32000, 4096, 32, 32, 128, 11008, n_kv_heads=32, ffw_matrices=3)
    gqa = appendix_f_forward(2048, 32000, 4096, 32, 32, 128, 11008, n_kv_heads=8, ffw_matrices=3)
    assert mha["qkv"] == 32 * 2 * 3 * 2048 * 4096 * 4096
    assert gqa["qkv"] == 32 * 2 * 2048 * 4096 * 128 * (32 + 16)
    assert mha["feed_forward"] == 32 * 2 * 2048 * 3 * 4096 * 11008
    assert {k: v for k, v in gqa.items() if k != "qkv"} == {k: v for k, v in mha.items() if k != "qkv"}
    cfg = ModelConfig(vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_dim=11008)
    assert appendix_f_training(cfg, tokens=2048 * 10, seq_len=2048) == pytest.approx(30 * sum(mha.values()))


def test_llama2_7b_against_6nd():
    """Llama 2 7B (6.74B parameters): the Appendix F count exceeds 6ND by the attention's seq^2 terms,
    which grow with sequence length."""
    cfg = ModelConfig(
        vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=32, ffn_dim=11008, max_seq_len=8192
    )
    assert num_params(cfg) == 6_738_415_616
    short, long = compare(cfg, 1e12, seq_len=2048), compare(cfg, 1e12, seq_len=8192)
    assert short["six_nd"] == pytest.approx(6 * 6_738_415_616 * 1e12)
    assert 1.0 < short["ratio"] < 1.1 < long["ratio"]


def test_six_nd_chinchilla():
    assert six_nd(70e9, 1.4e12) == pytest.approx(5.88e23)  # Chinchilla: 70B parameters on 1.4T tokens
