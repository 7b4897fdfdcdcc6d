"""The profiler under 2 gloo processes (torchrun, this file as the worker, FSDP over both): each rank writes
its trace, the traces name the collectives, and the summary splits every rank's steps, collectives by kind
included, adding up to the stopwatch's step time."""

from __future__ import annotations

import json
import os
import sys

import pytest

from parallel_runs import torchrun
from profiles import check_split, profile_config, trace_names
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out


def test_profile_under_two_ranks_names_the_collectives(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    torchrun([os.path.abspath(__file__), data, str(tmp_path / "run")], processes=2)
    folder = tmp_path / "run" / "profile"
    assert sorted(os.listdir(folder)) == ["profile.json", "rank0.trace.json", "rank1.trace.json"]
    for rank in (0, 1):
        names = trace_names(folder / f"rank{rank}.trace.json")
        assert {"gloo:all_gather", "aten::mm"} <= names
        assert {n for n in names if n.startswith("train_step#")} == {"train_step#2", "train_step#3"}
    report = json.loads((folder / "profile.json").read_text())
    assert report["ranks"] == 2 and [r["rank"] for r in report["per_rank"]] == [0, 1]
    check_split(report, [2, 3])
    # FSDP gathers the weights and reduce-scatters the gradients (gloo runs that as an all-reduce)
    assert report["mean"]["collectives"]["all_gather"] > 0 and len(report["mean"]["collectives"]) >= 2


if __name__ == "__main__":
    import torch

    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    run(
        load_train_config(
            profile_config(sys.argv[1], sys.argv[2], profile_steps=[2, 3]) | {"parallel": {"dp_shard": 2}}
        )
    )
    torch.distributed.destroy_process_group()
