"""The model's stability options on one process: qk_norm (its parameters counted by the planner, refused by
the Hugging Face export), the z-loss (logged apart from the cross-entropy, pulling the log-partition toward 0)
and the initialisation scheme."""

from __future__ import annotations

import json
import math

import pytest
import torch

from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_train_config
from pretrain.config.model import ModelConfig
from pretrain.models.llama import Llama, num_params
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")
MODEL = {
    "vocab_size": 256,
    "d_model": 32,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 2,
    "ffn_dim": 64,
    "max_seq_len": 64,
}


def test_qk_norm_adds_per_head_norms_the_planner_counts():
    for qk_norm in (False, True):
        cfg = ModelConfig(**MODEL, qk_norm=qk_norm)
        model = Llama(cfg)
        names = {n for n, _ in model.named_parameters()}
        assert ("layers.0.attention.q_norm.weight" in names) is qk_norm
        assert num_params(cfg) == sum(p.numel() for p in model.parameters())
    model.init_weights(seed=0)
    assert model.layers["0"].attention.q_norm.weight.eq(1).all()
    # normalised heads: scaling attention's input scales only v, not the attention weights
    x = torch.randn(2, 8, 32)
    att = model.layers["0"].attention
    rope = (model.rope_cos, model.rope_sin, None)  # the rotary tables, no document mask
    with torch.no_grad():
        torch.testing.assert_close(att(100 * x, rope), 100 * att(x, rope), rtol=1e-3, atol=1e-3)


def test_the_init_scheme_sets_the_residual_projections_std():
    stds = {}
    for init in ("scaled_normal", "normal"):
        model = Llama(ModelConfig(**{**MODEL, "d_model": 128, "ffn_dim": 256}, init=init))
        model.init_weights(seed=0)
        stds[init] = (
            model.layers["0"].attention.wo.weight.std().item(),
            model.layers["0"].attention.wq.weight.std().item(),
        )
    assert stds["normal"][0] == pytest.approx(0.02, rel=0.05) and stds["normal"][1] == pytest.approx(0.02, rel=0.05)
    assert stds["scaled_normal"][0] == pytest.approx(0.02 / math.sqrt(2 * 4), rel=0.05)
    assert stds["scaled_normal"][1] == pytest.approx(0.02, rel=0.05)


def _mean_logsumexp(run_dir, data) -> float:
    from pretrain.inference.loading import load_trained, model_for_inference

    model = model_for_inference(load_trained(run_dir))
    batch = torch.randint(1, 200, (4, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return model(batch).float().logsumexp(-1).mean().item()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stability")
    data = make_token_dataset(root / "data", vocab=256)
    out = {}
    for name, model in {"plain": {}, "z_loss": {"z_loss": 1.0}, "qk_norm": {"qk_norm": True}}.items():
        torch.manual_seed(0)
        cfg = tiny_config(
            data,
            root / name,
            model={**MODEL, **model},
            max_steps=40,
            log={"every_steps": 5},
            optim={"lr": 1e-2, "warmup_steps": 2},
        )
        run(load_train_config(cfg))
        out[name] = root / name
    return out, data


def test_z_loss_is_logged_apart(runs):
    out, _ = runs
    records = [json.loads(line) for line in open(out["z_loss"] / "metrics.jsonl")]
    train = [r for r in records if r["kind"] == "train"]
    assert train and all(r["z_loss"] > 0 for r in train)
    assert all("z_loss" not in r for r in (json.loads(line) for line in open(out["plain"] / "metrics.jsonl")))


def test_z_loss_pulls_the_log_partition_toward_zero(runs):
    out, data = runs
    pulled, free = _mean_logsumexp(out["z_loss"], data), _mean_logsumexp(out["plain"], data)
    assert abs(pulled) < 0.5 * abs(free)


def test_the_hugging_face_export_refuses_qk_norm_without_writing(runs, tmp_path, capsys):
    out, _ = runs
    target = tmp_path / "hf"
    assert pretrain_main(["export", str(out["qk_norm"]), "--to", "hf", "--output", str(target)]) == 2
    assert "qk_norm" in capsys.readouterr().err and not target.exists()


def test_z_loss_with_pipeline_parallelism_is_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="z_loss is not supported with pipeline parallelism"):
        load_train_config(tiny_config(tmp_path, tmp_path / "run", model={**MODEL, "z_loss": 1e-4}, parallel={"pp": 2}))
