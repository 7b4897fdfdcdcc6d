"""The planner counts the model's stability options: the z-loss's logsumexp in the FLOPs and its fp32 copy of
the logits in the activation memory at the loss."""

from __future__ import annotations

from pretrain.config.model import ModelConfig
from pretrain.planning.flops import flops_per_token
from pretrain.planning.plan_memory import LOSS_BYTES, Z_LOSS_BYTES, activations

MODEL = {
    "vocab_size": 32000,
    "d_model": 256,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 2,
    "ffn_dim": 704,
    "max_seq_len": 512,
}


def test_z_loss_adds_its_logsumexp_to_the_flops():
    plain, z = ModelConfig(**MODEL), ModelConfig(**MODEL, z_loss=1e-4)
    assert flops_per_token(z, 512) - flops_per_token(plain, 512) == 4 * MODEL["vocab_size"]


def test_z_loss_adds_its_fp32_logits_to_the_memory():
    plain, z = ModelConfig(**MODEL), ModelConfig(**MODEL, z_loss=1e-4)
    for tp, loss_parallel in ((1, False), (2, True)):
        a = activations(plain, 512, 2, "none", tp=tp, loss_parallel=loss_parallel)
        b = activations(z, 512, 2, "none", tp=tp, loss_parallel=loss_parallel)
        assert b["layers"] == a["layers"]
        assert b["logits"] == a["logits"] * (LOSS_BYTES + Z_LOSS_BYTES) / LOSS_BYTES
        assert b["logits"] == 2 * 512 * MODEL["vocab_size"] * 16 / tp
