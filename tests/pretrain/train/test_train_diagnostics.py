"""Per-layer diagnostics (``log.diagnostics_every_steps``): one step's record equals the same quantities
computed by hand from a copy of the model (its forward and backward on the step's batch, its weights before
and after the update), and a run without the setting writes none and arms no probe."""

from __future__ import annotations

import math
import os

import pytest
import torch
import torch.nn.functional as F

from pretrain.components.diagnostics import layer_of
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.models.llama import Llama, apply_rope
from pretrain.train import Trainer
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trainer(tmp_path, max_steps: int = 2, **log) -> Trainer:
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    cfg = load_train_config(
        tiny_config(
            data,
            tmp_path / "run",
            max_steps=max_steps,
            device="cpu",
            log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1, **log},
            checkpoint={"every_steps": 100, "keep_last": 1},
            health={"straggler_every_steps": 0},
        )
    )
    trainer = Trainer(cfg)
    trainer.resume(None)
    trainer.start_logging()
    return trainer


def _by_layer(named: dict[str, torch.Tensor]) -> dict[str, float]:
    """Norms of parameter-shaped tensors per diagnostics row."""
    squares: dict[str, float] = {}
    for name, t in named.items():
        squares[layer_of(name)] = squares.get(layer_of(name), 0.0) + float(t.double().pow(2).sum())
    return {layer: math.sqrt(v) for layer, v in squares.items()}


def _max_logit(attention, x, rope) -> float:
    """max over causal pairs of q.k / sqrt(head_dim), all heads at once (k repeated for grouped queries)."""
    b, s, _ = x.shape
    cos, sin, _ = rope  # the rotary tables, and the document mask (none here)
    q = apply_rope(attention.wq(x).view(b, s, -1, attention.head_dim), cos, sin)
    k = apply_rope(attention.wk(x).view(b, s, -1, attention.head_dim), cos, sin)
    k = k.repeat_interleave(q.size(2) // k.size(2), dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(attention.head_dim)
    causal = torch.ones(s, s, dtype=torch.bool).tril()
    return float(scores.masked_fill(~causal, -math.inf).amax())


def test_one_step_matches_a_hand_computation(tmp_path):
    trainer = _trainer(tmp_path, diagnostics_every_steps=1)
    cfg = trainer.cfg
    reference = Llama(cfg.model)
    reference.load_state_dict(trainer.model.state_dict())
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    micro_batches = trainer.train_loader.batch_at(0)  # the first step's batch

    sums, counts, maxima, logits = {}, {}, {}, {}

    def residual(layer):
        def hook(module, args, out):
            h = out.detach().double()
            sums[layer] = sums.get(layer, 0.0) + float(h.pow(2).sum())
            counts[layer] = counts.get(layer, 0) + h.numel()
            maxima[layer] = max(maxima.get(layer, 0.0), float(h.abs().max()))

        return hook

    def attention_input(layer):
        def hook(module, args):
            with torch.no_grad():
                logits[layer] = max(logits.get(layer, -math.inf), _max_logit(module, *args))

        return hook

    reference.tok_embeddings.register_forward_hook(residual("embeddings"))
    for name, block in reference.layers.items():
        block.register_forward_hook(residual(f"block.{name}"))
        block.attention.register_forward_pre_hook(attention_input(f"block.{name}"))
    for batch in micro_batches:
        logits_out = reference(batch[:, :-1])
        loss = F.cross_entropy(logits_out.flatten(0, 1), batch[:, 1:].flatten()) / len(micro_batches)
        loss.backward()
    grads = {name: p.grad for name, p in reference.named_parameters()}

    records = trainer.train(end=1)
    trainer.finish()
    after = {name: p.detach() for name, p in trainer.model.named_parameters()}
    got = [r for r in read_metrics(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["kind"] == "diagnostics"]
    assert [r["step"] for r in got] == [1]
    record = got[0]

    layers = ["embeddings", "block.0", "block.1", "head"]
    expected = {}
    for quantity, values in (("grad_norm", _by_layer(grads)), ("param_norm", _by_layer(after))):
        expected |= {f"{quantity}/{layer}": values[layer] for layer in layers}
    change, weights = _by_layer({n: after[n] - before[n] for n in before}), _by_layer(before)
    expected |= {f"update_ratio/{layer}": change[layer] / weights[layer] for layer in layers}
    expected |= {f"act_rms/{layer}": math.sqrt(sums[layer] / counts[layer]) for layer in layers[:3]}
    expected |= {f"act_max/{layer}": maxima[layer] for layer in layers[:3]}
    expected |= {f"attn_logit_max/{layer}": logits[layer] for layer in layers[1:3]}
    assert set(record) - {"kind", "step", "time"} == set(expected)
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, rel=1e-5), key
    # the per-layer gradient norms add up to the run's global one (before clipping)
    total = math.sqrt(sum(record[f"grad_norm/{layer}"] ** 2 for layer in layers))
    assert total == pytest.approx(records[0]["grad_norm"], rel=1e-5)


def test_diagnostics_are_off_by_default(tmp_path):
    trainer = _trainer(tmp_path)
    assert trainer.cfg.log.diagnostics_every_steps == 0 and trainer.diagnostics is None
    trainer.train(end=2)
    trainer.finish()
    assert trainer.model.probe is None
    assert all(block.attention.probe is None for block in trainer.model.layers.values())
    kinds = {r["kind"] for r in read_metrics(os.path.join(trainer.cfg.out_dir, "metrics.jsonl"))}
    assert "diagnostics" not in kinds and "train" in kinds


def test_diagnostics_run_every_n_steps_or_at_the_last(tmp_path):
    trainer = _trainer(tmp_path, diagnostics_every_steps=3)
    trainer.train(end=2)
    trainer.finish()
    got = [
        r["step"]
        for r in read_metrics(os.path.join(trainer.cfg.out_dir, "metrics.jsonl"))
        if r["kind"] == "diagnostics"
    ]
    assert got == [2]  # step 3 is past the horizon: the last step measures instead
    assert trainer.model.probe is None  # disarmed after its step


def test_steps_between_diagnostics_read_nothing_back(tmp_path):
    """Diagnostics on: an ordinary step still reads nothing back, and a diagnostic step's own read is one
    ``tolist``."""
    from host_reads import reads_recorded

    trainer = _trainer(tmp_path, max_steps=6, diagnostics_every_steps=3, every_steps=4)
    where = [None]
    step, read = trainer._step, trainer.diagnostics.read

    def located_step():
        where[0] = ("loop", trainer.state.step + 1)
        return step()

    def located_read(at):
        where[0] = ("diagnostics", at)
        record = read(at)
        where[0] = ("loop", at)
        return record

    trainer._step, trainer.diagnostics.read = located_step, located_read
    with reads_recorded(where) as calls:
        trainer.train(end=6)
    trainer.finish()
    assert sorted({at for (_, at), _ in calls}) == [3, 4, 6], calls  # diagnostics 3, 6; logging 4, 6
    assert [name for (phase, at), name in calls if phase == "diagnostics"] == ["tolist", "tolist"]  # steps 3, 6
