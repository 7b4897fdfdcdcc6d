"""One set of layout rules (pretrain/layout_rules.py) for the config, the trainer and the planner: a layout
the trainer would refuse is refused when the config loads, when the degrees are known, and never planned."""

from __future__ import annotations

import pytest

from pretrain.config.model import ModelConfig
from pretrain.config.parallel import ParallelConfig
from pretrain.config.train import TrainConfig
from pretrain.layout_rules import layout_problems
from pretrain.planning.hardware import GPUS
from pretrain.planning.plan import plan
from train_fixtures import tiny_config

TIED = ModelConfig(
    vocab_size=1000, d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, ffn_dim=768, max_seq_len=512, tie_embeddings=True
)


def _train_config(tmp_path, **parallel) -> dict:
    cfg = tiny_config(str(tmp_path / "data"), tmp_path / "run", parallel=parallel)
    cfg["model"]["tie_embeddings"] = True
    return cfg


def test_tied_embeddings_with_fsdp_are_refused_when_the_config_loads(tmp_path):
    with pytest.raises(ValueError, match="tie_embeddings is supported in single-process training only"):
        TrainConfig.model_validate(_train_config(tmp_path, dp_shard=2))


def test_tied_embeddings_on_one_process_still_load(tmp_path):
    assert TrainConfig.model_validate(_train_config(tmp_path, dp_shard=1)).model.tie_embeddings


def test_tied_embeddings_with_a_world_size_only_the_trainer_knows_are_refused_there(tmp_path):
    cfg = TrainConfig.model_validate(_train_config(tmp_path))  # dp_shard -1: the world size is not known yet
    assert layout_problems(cfg.parallel, cfg.model) == []
    [problem] = layout_problems(cfg.parallel, cfg.model, world_size=4)
    assert "single-process training only" in problem


def test_the_planner_proposes_no_layout_the_trainer_refuses():
    assert (
        plan(TIED, gpus=1, gpu=GPUS["h100"], seq_len=512, micro_batch=8, global_batch=64)["layout"]["name"]
        == "single GPU"
    )
    with pytest.raises(ValueError, match="no layout of 4 layers on 8 GPU.* single-process training only"):
        plan(TIED, gpus=8, gpu=GPUS["h100"], seq_len=512, micro_batch=8, global_batch=64)


def test_fp16_layouts_the_planner_offers_all_pass_the_rules():
    model = TIED.model_copy(update={"tie_embeddings": False})
    result = plan(model, gpus=8, gpu=GPUS["h100"], seq_len=512, precision="fp16")
    assert all("PP" not in decision.split(":")[0] for decision in result["decisions"])


def test_offload_needs_cuda_and_sharded_ranks():
    parallel = ParallelConfig(dp_shard=2, offload=True)
    assert layout_problems(parallel, device_type="cuda") == []
    assert "needs CUDA" in layout_problems(parallel, device_type="cpu")[0]
    assert "needs CUDA" in layout_problems(ParallelConfig(dp_shard=1, offload=True), device_type="cuda")[0]


def test_the_config_names_the_rule_it_breaks():
    with pytest.raises(ValueError, match="loss_parallel needs tp > 1"):
        ParallelConfig(loss_parallel=True)


def test_document_mask_runs_under_pipeline_parallelism_but_not_context_parallelism():
    piped = ParallelConfig(pp=2, dp_shard=1)
    assert layout_problems(piped, document_mask=True) == layout_problems(piped) == []
    [problem] = layout_problems(ParallelConfig(cp=2, dp_shard=1), document_mask=True)
    assert "document_mask does not combine with context parallelism" in problem
