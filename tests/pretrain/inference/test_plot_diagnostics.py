"""``pretrain plot`` draws a run's per-layer diagnostics as heat maps (layer x step) beside its curves: the
grid it draws holds every logged value, and the PNG is written (and shown in the report's Training section);
a run without diagnostics gets none."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pretrain.cli import main as pretrain_main
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.inference.plot import diagnostics_grid, training_section
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_heat_maps_hold_every_diagnostic_value(tmp_path, capsys):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    out = tmp_path / "run"
    run(
        load_train_config(
            tiny_config(
                data,
                out,
                max_steps=4,
                checkpoint={"every_steps": 100},
                log={"every_steps": 1, "val_every_steps": 100, "diagnostics_every_steps": 2},
            )
        )
    )
    metrics = os.path.join(out, "metrics.jsonl")
    records = [r for r in read_metrics(metrics) if r["kind"] == "diagnostics"]
    assert [r["step"] for r in records] == [2, 4]

    grids = diagnostics_grid(metrics)
    assert sorted(grids) == sorted(["grad_norm", "param_norm", "update_ratio", "act_rms", "act_max", "attn_logit_max"])
    layers, steps, values = grids["grad_norm"]
    assert layers == ["embeddings", "block.0", "block.1", "head"] and steps == [2, 4] and values.shape == (4, 2)
    assert grids["act_rms"][0] == ["embeddings", "block.0", "block.1"]
    assert grids["attn_logit_max"][0] == ["block.0", "block.1"]
    for quantity, (layers, steps, values) in grids.items():
        for i, layer in enumerate(layers):
            assert values[i].tolist() == [r[f"{quantity}/{layer}"] for r in records], (quantity, layer)

    capsys.readouterr()
    assert pretrain_main(["plot", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["diagnostics_png"] == str(out / "curves-diagnostics.png")
    from matplotlib.image import imread

    image = imread(result["diagnostics_png"])
    assert image.ndim == 3 and image.shape[0] > 600 and np.ptp(image) > 0  # three rows of maps, not blank

    section = training_section(str(out), str(tmp_path))  # the report's Training section shows them too
    assert section.images == ["training.png", "training-diagnostics.png"]
    assert (tmp_path / "training-diagnostics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the same run without its diagnostics records: the curves only
    (tmp_path / "plain.jsonl").write_text("".join(line for line in open(metrics) if '"diagnostics"' not in line))
    assert (
        pretrain_main(
            ["plot", str(out), "--metrics", str(tmp_path / "plain.jsonl"), "-o", str(tmp_path / "plain.png"), "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["diagnostics_png"] is None
    assert not (tmp_path / "plain-diagnostics.png").exists()
