"""Attention within documents under FSDP x TP (2 x 2 gloo processes on CPU) and under pipeline parallelism (2
stages, 1F1B, 2 processes), one torchrun launch each of this file as the worker (``__main__`` below): a packed
window of three documents gives each token the loss its document gives alone on one process, and a training
run with ``data.document_mask`` (FSDP x TP: with block activation checkpointing) logs the losses one process
logs."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from document_windows import alone_losses, packed_losses, packed_row, packed_window, within_documents
from parallel_runs import MODEL, STEPS, metric_records, run_single_process, torchrun
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

LAYOUT = {"dp_shard": 2, "tp": 2, "activation_checkpointing": "block"}
PIPELINE = {"pp": 2, "pp_schedule": "1f1b"}


def _config(data, out, parallel: dict) -> dict:
    return tiny_config(
        data,
        out,
        model=MODEL,
        max_steps=STEPS,
        parallel=parallel,
        data={"sources": [{"path": data}], "val_fraction": 0.1, "document_mask": True},
        checkpoint={"every_steps": STEPS},
    )


def _worker(root: str, data: str) -> None:
    from pretrain.config.loading import load_train_config
    from pretrain.distributed.parallel_dims import ParallelDims
    from pretrain.models.llama import Llama
    from pretrain.train import run
    from pretrain.train_setup import build_parallel_model

    cfg = load_train_config(_config(data, os.path.join(root, "2x2"), LAYOUT))
    dims = ParallelDims.from_config(cfg.parallel, 4)
    dims.build_mesh("cpu")
    model_cfg = cfg.model.model_copy(update={"max_seq_len": 128})
    sharded = build_parallel_model(cfg.model_copy(update={"model": model_cfg}), dims, torch.device("cpu"), "fp32")
    whole = Llama(model_cfg)
    whole.init_weights(cfg.seed)
    source, docs = packed_window(os.path.join(root, "window"))
    with torch.no_grad():
        alone = alone_losses(whole, docs)
        packed = packed_losses(sharded, source, docs)  # a window of 106 inputs: sequence parallel splits it evenly
    if torch.distributed.get_rank() == 0:
        with open(os.path.join(root, "window.json"), "w") as fh:
            json.dump({"tokens": len(alone), "max_error": (packed - alone).abs().max().item()}, fh)
    run(cfg)
    torch.distributed.destroy_process_group()


def _pipeline_worker(root: str, data: str) -> None:
    """The packed window through two pipeline stages (the documents reach the second stage with the hidden
    states it receives), then a training run at that layout."""
    from pretrain.config.loading import load_train_config
    from pretrain.distributed.parallel_dims import ParallelDims
    from pretrain.distributed.pipeline_parallel import build_pipeline
    from pretrain.models.llama import Llama
    from pretrain.train import run

    cfg = load_train_config(_config(data, os.path.join(root, "pp2"), PIPELINE))
    dims = ParallelDims.from_config(cfg.parallel, 2)
    dims.build_mesh("cpu")
    model_cfg = cfg.model.model_copy(update={"max_seq_len": 128})
    pipe = build_pipeline(cfg.model_copy(update={"model": model_cfg}), dims, torch.device("cpu"), None, 2)
    whole = Llama(model_cfg)
    whole.init_weights(cfg.seed)
    source, docs = packed_window(os.path.join(root, "window"))
    rows = packed_row(source)[:, None].expand(-1, 2, -1)  # the window twice: 1F1B's two micro-batches
    tokens, documents = rows[0], rows[1, :, :-1]
    with torch.no_grad():
        alone = alone_losses(whole, docs)
        logits = pipe.schedule.eval(
            *([tokens[:, :-1]] if pipe.has_first else []),
            documents=documents,
            target=tokens[:, 1:] if pipe.has_last else None,
        )
    if pipe.has_last:
        packed = within_documents(torch.nn.functional.cross_entropy(logits[0], tokens[0, 1:], reduction="none"), docs)
        with open(os.path.join(root, "pipeline_window.json"), "w") as fh:
            json.dump({"tokens": len(alone), "max_error": (packed - alone).abs().max().item()}, fh)
    run(cfg)
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("document_mask_parallel")
    data = make_token_dataset(root / "tokens", n_docs=300, max_len=24)  # several documents per window
    packed_window(root / "window")  # written once, before the workers read it
    torchrun([os.path.abspath(__file__), str(root), data])
    torchrun([os.path.abspath(__file__), str(root), data, "pipeline"], processes=2)
    run_single_process(_config(data, root / "single", {}))
    return root


def test_document_mask_under_fsdp_x_tp_gives_each_document_its_losses_alone(runs):
    result = json.loads((runs / "window.json").read_text())
    assert result["tokens"] > 60 and result["max_error"] < 1e-5


def test_document_mask_training_under_fsdp_x_tp_matches_one_process(runs):
    for kind in ("train", "val"):
        ref, got = metric_records(runs / "single", kind), metric_records(runs / "2x2", kind)
        assert sorted(got) == sorted(ref) and len(ref) >= (STEPS if kind == "train" else 2)
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (kind, step)


def test_document_mask_under_pipeline_parallelism_gives_each_document_its_losses_alone(runs):
    result = json.loads((runs / "pipeline_window.json").read_text())
    assert result["tokens"] > 60 and result["max_error"] < 1e-5


def test_document_mask_training_under_pipeline_parallelism_matches_one_process(runs):
    for kind in ("train", "val"):
        ref, got = metric_records(runs / "single", kind), metric_records(runs / "pp2", kind)
        assert sorted(got) == sorted(ref) and len(ref) >= (STEPS if kind == "train" else 2)
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (kind, step)


if __name__ == "__main__":
    (_pipeline_worker if sys.argv[3:] == ["pipeline"] else _worker)(sys.argv[1], sys.argv[2])
