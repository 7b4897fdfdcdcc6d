"""What the optimizer does, asserted: gradient clipping caps the global norm exactly as
``torch.nn.utils.clip_grad_norm_`` does, matrices decay and 1-D tensors (norm gains) do not, and the
metrics carry the learning rate the optimizer itself used for each step. (Clipping under FSDP x TP and
pipeline parallelism: tests/pretrain/distributed/test_clip_parallel.py.)"""

from __future__ import annotations

import os

import pytest
import torch

from pretrain.components.loss import cross_entropy
from pretrain.components.metrics import read_metrics
from pretrain.components.optimizer import build_optimizer, clip_grad_norm
from pretrain.config.loading import load_train_config
from pretrain.config.model import ModelConfig
from pretrain.config.optim import OptimConfig
from pretrain.models.llama import Llama
from pretrain.train import Trainer
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODEL = ModelConfig(
    vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, max_seq_len=32, qk_norm=True
)


def _model_with_gradients(seed: int = 0) -> Llama:
    model = Llama(MODEL)
    model.init_weights(seed)
    tokens = torch.randint(0, MODEL.vocab_size, (4, 17), generator=torch.Generator().manual_seed(1))
    cross_entropy(model(tokens[:, :-1]), tokens[:, 1:]).backward()
    return model


def _total_norm(model: torch.nn.Module) -> float:
    return torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()


@pytest.mark.parametrize("max_norm", [1e-3, 1e3])
def test_clip_caps_the_global_norm(max_norm):
    ours = _model_with_gradients()
    before = _total_norm(ours)
    norm = clip_grad_norm(list(ours.parameters()), max_norm)
    assert norm.item() == pytest.approx(before, rel=1e-6)
    assert _total_norm(ours) == pytest.approx(min(before, max_norm), rel=1e-4)  # capped only when above it


@pytest.mark.parametrize("max_norm", [1e-3, 1e3])
def test_clip_equals_torch_clip_grad_norm(max_norm):
    ours, reference = _model_with_gradients(), _model_with_gradients()
    norm = clip_grad_norm(list(ours.parameters()), max_norm)
    expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), max_norm)
    assert norm.item() == pytest.approx(expected.item(), rel=1e-6)
    for (name, p), q in zip(ours.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=0, msg=name)


def test_clip_of_zero_measures_without_clipping():
    model = _model_with_gradients()
    before = [p.grad.clone() for p in model.parameters()]
    assert clip_grad_norm(list(model.parameters()), 0.0).item() > 0
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), before))


def test_weight_decay_skips_tensors_of_fewer_than_two_dimensions():
    model = Llama(MODEL)
    model.init_weights(0)
    optimizer = build_optimizer(model, OptimConfig(weight_decay=0.1))
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    names = dict(model.named_parameters())
    assert set(decay_of) == {id(p) for p in names.values()}  # every parameter is in exactly one group
    no_decay = {name for name, p in names.items() if decay_of[id(p)] == 0.0}
    assert no_decay == {name for name, p in names.items() if p.ndim < 2}
    assert any(name.endswith("q_norm.weight") for name in no_decay) and "norm.weight" in no_decay
    assert all(decay_of[id(p)] == 0.1 for name, p in names.items() if name not in no_decay)
    assert "tok_embeddings.weight" not in no_decay and "output.weight" not in no_decay


def test_weight_decay_shrinks_matrices_only():
    """With zero gradients AdamW's update is the decay alone: matrices shrink by lr x wd, gains stay 1."""
    model = Llama(MODEL)
    model.init_weights(0)
    optimizer = build_optimizer(model, OptimConfig(lr=0.5, weight_decay=0.1))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    for name, p in model.named_parameters():
        factor = 1.0 if p.ndim < 2 else 1 - 0.5 * 0.1
        torch.testing.assert_close(p.detach(), before[name] * factor, msg=name)


def test_metrics_write_the_learning_rate_the_optimizer_used(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=60)
    cfg = tiny_config(
        data, tmp_path / "run", optim={"lr": 3e-3, "warmup_steps": 2, "schedule": "wsd", "decay_fraction": 0.5}
    )
    trainer = Trainer(load_train_config(cfg))
    trainer.resume(None)
    trainer.start_logging()
    used: list[float] = []  # read inside optimizer.step(), for each step
    trainer.optimizer.register_step_pre_hook(lambda opt, *_: used.append(opt.param_groups[0]["lr"]))
    trainer.train(end=6)
    trainer.finish()
    logged = [r["lr"] for r in read_metrics(os.path.join(tmp_path / "run", "metrics.jsonl")) if r["kind"] == "train"]
    assert logged == used and len(set(used)) >= 4  # warmup, stable and decay: the rate moved
