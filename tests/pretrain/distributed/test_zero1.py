"""ZeRO-1 (``parallel.shard_optimizer``): replicated weights over 4 gloo processes, AdamW's moments sharded
over them. This file is the torchrun worker (``__main__`` below): a 6-step run, a run stopped at step 3 that
a second launch of 2 processes resumes (another data-parallel size), and one step whose optimizer states
each rank reports. The losses equal one process's within 1e-5."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from dataprep.core.validation import ConfigError
from parallel_runs import MODEL, config, metric_records, run_single_process, torchrun
from pretrain.config.loading import load_train_config
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out


def zero1(replicas: int) -> dict:
    return {"dp_replicate": replicas, "dp_shard": 1, "shard_optimizer": True}


def _worker(root: str, data: str, mode: str) -> None:
    from pretrain.train import Trainer, run

    if mode == "resume":  # 2 processes: the 4-process run's checkpoint, at another data-parallel size
        run(load_train_config(config(data, os.path.join(root, "resized"), zero1(2))), resume="auto")
    else:
        run(load_train_config(config(data, os.path.join(root, "zero1"), zero1(4))))
        run(load_train_config(config(data, os.path.join(root, "resized"), zero1(4))), stop_at=3)
        trainer = Trainer(load_train_config(config(data, os.path.join(root, "states"), zero1(4))))
        trainer.resume(None)
        trainer.start_logging()
        trainer.train(end=1)
        held = {
            "moments": sum(s["exp_avg"].numel() for s in trainer.optimizer.optim.state.values()),
            "params": sum(p.numel() for p in trainer.model.parameters()),
            "steps": len(trainer.optimizer.optim.state),
        }
        with open(os.path.join(root, f"states-rank{torch.distributed.get_rank()}.json"), "w") as fh:
            json.dump(held, fh)
        trainer.finish()
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("zero1")
    data = make_token_dataset(root / "tokens", n_docs=200)
    run_single_process(config(data, root / "single"))
    torchrun([os.path.abspath(__file__), str(root), data, "run"])
    torchrun([os.path.abspath(__file__), str(root), data, "resume"], processes=2)
    return root


def _assert_same_losses(root, name: str) -> None:
    for kind in ("train", "val"):
        ref, got = metric_records(root / "single", kind), metric_records(root / name, kind)
        assert sorted(got) == sorted(ref) and len(ref) >= 2
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (name, kind, step)


def test_zero1_on_4_ranks_matches_one_process(runs):
    _assert_same_losses(runs, "zero1")


def test_zero1_resumes_at_another_data_parallel_size(runs):
    first = json.loads((runs / "resized/checkpoints/step-00000003/train_state.json").read_text())
    last = json.loads((runs / "resized/checkpoints/step-00000006/train_state.json").read_text())
    assert first["parallel"]["dp_replicate"] == 4 and last["parallel"]["dp_replicate"] == 2
    _assert_same_losses(runs, "resized")


def test_zero1_each_rank_holds_only_its_share_of_the_adam_states(runs):
    ranks = [json.loads((runs / f"states-rank{r}.json").read_text()) for r in range(4)]
    total = ranks[0]["params"]
    assert all(r["params"] == total for r in ranks)  # the weights are whole on every rank
    assert sum(r["moments"] for r in ranks) == total  # each moment lives on exactly one rank
    assert all(0 < r["moments"] < total / 2 for r in ranks)


def test_zero1_refuses_layouts_it_does_not_shard():
    with pytest.raises(ConfigError, match="shard_optimizer"):
        load_train_config(config("/unused", "/unused", {"dp_replicate": 2, "dp_shard": 2, "shard_optimizer": True}))
    with pytest.raises(ConfigError, match="shard_optimizer"):
        load_train_config(config("/unused", "/unused", {**zero1(2), "tp": 2}))
    assert MODEL["n_layers"] == 2


if __name__ == "__main__":
    _worker(*sys.argv[1:4])
