"""Evaluation during training under FSDP, tensor and pipeline parallelism: 2 gloo processes on CPU under
torchrun (this file as the worker) score a local harness task and a held-out document set at steps 2 and 4,
and each ``kind: eval`` record equals a one-process evaluation of the checkpoint saved at that step."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from harness_tasks import write_tasks
from parallel_runs import torchrun
from pretrain.components.metrics import read_metrics
from text_runs import make_text_shards, require
from train_fixtures import tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out
STEPS = 4
LAYOUTS = {"fsdp2": {"dp_shard": 2}, "tp2": {"tp": 2}, "pp2": {"pp": 2}}


def config(data, out, tasks: str, held_out: str, parallel: dict | None = None) -> dict:
    return tiny_config(
        data,
        out,
        model={"vocab_size": 1024, "n_heads": 4, "n_kv_heads": 2},
        max_steps=STEPS,
        parallel=parallel or {},
        checkpoint={"every_steps": 2, "keep_last": 2},
        log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1},
        eval={
            "tasks": ["tiny_mc"],
            "include_path": tasks,
            "documents": {"held_out": held_out},
            "every_steps": 2,
            "batch_size": 4,
        },
    )


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
    require("lm_eval")
    root = tmp_path_factory.mktemp("eval_parallel")
    tokenizer, shards, held = make_text_shards(shared_data, root)
    held_out = root / "held_out.jsonl"
    held_out.write_text("".join(json.dumps({"text": t}) + "\n" for t in held[:24]), encoding="utf-8")
    tasks = write_tasks(root / "tasks")
    configs = {name: config(shards, root / name, tasks, str(held_out), parallel) for name, parallel in LAYOUTS.items()}
    (root / "configs.json").write_text(json.dumps(list(configs.values())))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        torchrun([os.path.abspath(__file__), str(root / "configs.json")], processes=2)
    return configs, tokenizer, held[:24]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_in_loop_eval_equals_one_process(run, layout, monkeypatch):
    from pretrain.inference.bits_per_byte import document_bits_per_byte
    from pretrain.inference.harness import evaluate_tasks
    from pretrain.inference.loading import load_trained, model_for_inference

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    configs, tokenizer, texts = run
    cfg = configs[layout]
    records = {r["step"]: r for r in read_metrics(os.path.join(cfg["out_dir"], "metrics.jsonl")) if r["kind"] == "eval"}
    assert sorted(records) == [2, 4]
    for step in sorted(records) if layout == "fsdp2" else [STEPS]:  # the last step suffices for the others
        record = records[step]
        model = model_for_inference(load_trained(os.path.join(cfg["out_dir"], "checkpoints", f"step-{step:08d}")))
        scores = evaluate_tasks(model, tokenizer, ["tiny_mc"], cfg["eval"]["include_path"], batch_size=4)
        assert (record["tiny_mc/acc"], record["tiny_mc/acc_norm"]) == (
            scores["tiny_mc"]["acc"],
            scores["tiny_mc"]["acc_norm"],
        )
        bpb = document_bits_per_byte(model, tokenizer, texts, [tokenizer.eos_id], cfg["seq_len"], 4)["bits_per_byte"]
        assert record["held_out/bpb"] == pytest.approx(bpb, rel=1e-5)
        assert 0 < bpb < 20 and record["eval_seconds"] > 0
    assert records[2]["held_out/bpb"] != records[4]["held_out/bpb"]  # the model moved between them


def _worker(config_path: str) -> None:
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    with open(config_path) as fh:
        for cfg in json.load(fh):
            run(load_train_config(cfg))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1])
