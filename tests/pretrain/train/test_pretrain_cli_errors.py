"""Bad input to the ``pretrain`` commands, run as a user runs them: each mistake ends in one
clear line naming the bad value, exit status 2, no traceback; a damaged newest checkpoint names the newest
one that loads, and ``--resume latest-intact`` resumes from it; a run says where its model went."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

BAD_MODEL = {"vocab_size": 128, "d_model": 100, "n_layers": 2, "n_heads": 3, "n_kv_heads": 3, "ffn_dim": 64}
HEADS = "d_model 100 is not divisible by n_heads 3"
DCP_NOTE = "assuming the intent is to"  # torch's note on every one-process checkpoint save and load


def pretrain(cwd, *argv: str) -> subprocess.CompletedProcess:
    """The real command in a fresh process (``pretrain`` is ``python -m pretrain.cli``)."""
    return subprocess.run(
        [sys.executable, "-m", "pretrain.cli", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A folder holding shards, a training config, a bad model YAML, a file that is no YAML, a plain file and
    an empty folder."""
    root = tmp_path_factory.mktemp("pretrain-errors")
    make_token_dataset(root / "tokens", n_docs=60)
    cfg = tiny_config(
        str(root / "tokens"),
        str(root / "run"),
        max_steps=4,
        checkpoint={"every_steps": 2, "keep_last": 3},
        log={"every_steps": 2, "val_every_steps": 4, "val_batches": 1},
    )
    (root / "train.yaml").write_text(yaml.safe_dump(cfg))
    (root / "heads.yaml").write_text(yaml.safe_dump(BAD_MODEL))
    (root / "train_heads.yaml").write_text(yaml.safe_dump({**cfg, "model": "heads.yaml"}))
    (root / "broken.yaml").write_text(": : [\n")
    (root / "a_file").write_text("x")
    (root / "a_folder").mkdir()
    make_token_dataset(root / "tokens2", n_docs=30, seed=1)
    for name, weights in (
        ("zero", (0, 0)),
        ("negative", (-1, 1)),
        ("nan", (float("nan"), 1)),
        ("huge", (1e308, 1e308)),
    ):
        (root / f"{name}.yaml").write_text(
            yaml.safe_dump(
                {"sources": [{"path": "tokens", "weight": weights[0]}, {"path": "tokens2", "weight": weights[1]}]}
            )
        )
    (root / "twice.yaml").write_text(yaml.safe_dump({"sources": [{"path": "tokens"}, {"path": "tokens"}]}))
    (root / "train_twice.yaml").write_text(
        yaml.safe_dump({**cfg, "data": {"sources": [{"path": "tokens"}, {"path": "tokens"}]}})
    )
    return root


@pytest.fixture(scope="module")
def trained(root) -> subprocess.CompletedProcess:
    """``pretrain train train.yaml``: the run folder ``run``, with checkpoints at steps 2 and 4."""
    proc = pretrain(root, "train", "train.yaml")
    assert proc.returncode == 0, proc.stderr
    return proc


# (command line, run in the root folder; text its one line must hold)
CASES = [
    ("budget --compute 1e21 --mfu 0", "--mfu 0"),
    ("budget --compute 1e21 --mfu nan", "--mfu nan"),
    ("budget --compute 1e21 --seq-len 0", "--seq-len 0"),
    ("budget --compute 1e21 --peak-flops garbage", "garbage"),
    ("budget --compute 1e21 --gpu no-such-gpu", "no-such-gpu"),
    ("budget --compute 1e21 --gpu h1000", "unknown GPU 'h1000'; did you mean 'h100'?"),
    ("budget --data zero.yaml --tokens 1M", "sources.0.weight: Input should be greater than 0"),
    ("budget --data negative.yaml --tokens 1M", "sources.0.weight: Input should be greater than 0"),
    ("budget --data nan.yaml --tokens 1M", "sources.0.weight: Input should be a finite number"),
    ("budget --data huge.yaml --tokens 1M", "do not add up to a finite number"),
    ("budget --data twice.yaml --tokens 1M", "source 1 has the path 'tokens' of source 0"),
    ("budget --data tokens --data tokens --compute 1e21", "names a folder twice"),
    ("train train_twice.yaml", "source 1 has the path 'tokens' of source 0"),
    ("plan 125m --gpu h1000", "did you mean 'h100'?"),
    ("plan 125m --data nowhere", "--data nowhere: no such folder"),
    ("size 125M --output a_file/model.yaml", "a_file"),
    ("size 125M --output a_folder", "a_folder"),
    ("plan heads.yaml", HEADS),
    ("plan garbage", "preset"),
    ("plan broken.yaml", "broken.yaml"),
    ("plan a_folder", "a_folder"),
    ("plan 125m --peak-flops -1", "--peak-flops"),
    ("plan 125m --gpus-per-node 0", "GPUs per node"),
    ("plan 125m --seq-len 0", "sequence length"),
    ("plan 125m --max-bubble -1", "bubble"),
    ("plan 125m --data a_file", "a_file"),
    ("plan 125m --data tokens --output a_folder", "a_folder"),
    ("plan 125m --data tokens --output a_file/train.yaml", "a_file"),
    ("train train.yaml --set model=heads.yaml", HEADS),
    ("train train_heads.yaml", f"model: {HEADS}"),  # the model's own error, not every branch of a union
    ("train train.yaml --set model=missing.yaml", "missing.yaml"),
    ("train a_folder", "a_folder"),
    ("train broken.yaml", "broken.yaml"),
    ("train train.yaml --output a_file", "a_file"),
    ("train train.yaml --output fresh --set checkpoint.dir={root}/a_file", "a_file"),
    ("train train.yaml --output fresh --set log.jsonl={root}/a_file/metrics.jsonl", "a_file"),
    ("train train.yaml --resume nowhere", "nowhere"),
    ("train train.yaml --output fresh --set data.cache.dir={root}/a_file", "a_file"),
    (
        "train train.yaml --output fresh --set data.sources.0.path=http://127.0.0.1:9/shards --set "
        "data.cache.retries=0",
        "http://127.0.0.1:9/shards",
    ),  # nothing listens on the discard port
    ("plot run -o a_folder", "a_folder"),
    ("plot run -o a_file/curves.png", "a_file"),
    ("eval a_file", "a_file"),
    ("eval run --seq-len 0", "--seq-len"),
    ("eval run --max-batches 0", "--max-batches"),
    ("generate a_file", "a_file"),
    ("export run --output a_file", "a_file"),
    ("export a_file --to ccpretrain --output imported", "a_file"),
]


def test_every_bad_value_is_one_line_naming_it_with_exit_2(root, trained):
    def check(case):
        line, named = case
        proc = pretrain(root, *shlex.split(line.format(root=root)))
        err = proc.stderr.strip()
        if proc.returncode != 2 or "Traceback" in err or len(err.splitlines()) > 3 or named not in err:
            return f"pretrain {line}: exit {proc.returncode}, stderr:\n{err[-600:]}"
        return None

    with ThreadPoolExecutor(max_workers=4) as pool:  # independent processes, mostly starting Python
        failures = [f for f in pool.map(check, CASES) if f]
    assert not failures, "\n\n".join(failures)


def test_a_run_says_where_its_model_went_without_torch_notes(root, trained):
    out = trained.stdout.strip().splitlines()[-1]
    assert out.startswith(f"model: {root / 'run' / 'model.safetensors'}")
    assert "pretrain eval" in out and "pretrain generate" in out and "pretrain export" in out
    assert DCP_NOTE not in trained.stderr and "UserWarning" not in trained.stderr


def test_latest_intact_resumes_past_a_damaged_newest_checkpoint_that_auto_refuses(root, trained):
    run = root / "damaged"
    shutil.copytree(root / "run", run)
    os.remove(run / "model.safetensors")
    newest, older = run / "checkpoints" / "step-00000004", run / "checkpoints" / "step-00000002"
    shard = next(newest.glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # cut short after the save

    strict = pretrain(root, "train", "train.yaml", "--output", str(run), "--resume", "auto")
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert str(newest) in strict.stderr and f"the newest checkpoint that loads is {older}" in strict.stderr
    assert "--resume latest-intact" in strict.stderr
    assert not (run / "model.safetensors").exists()  # nothing ran

    requeued = pretrain(root, "train", "train.yaml", "--output", str(run), "--resume", "latest-intact")
    assert requeued.returncode == 0, requeued.stderr
    assert (
        f"resuming from {older}: passed over newer checkpoint(s) that do not load: checkpoint {newest}"
        in requeued.stderr
    )
    assert "starting at step 2" in requeued.stderr and DCP_NOTE not in requeued.stderr
    assert (run / "model.safetensors").exists()
    # its own save at step 4 replaced the damaged one: a plain --resume auto now loads it
    again = pretrain(root, "train", "train.yaml", "--output", str(run), "--resume", "auto", "--max-steps", "5")
    assert again.returncode == 0 and "starting at step 4" in again.stderr, again.stderr


def test_a_model_file_given_with_set_is_read_as_the_yaml_reads_it(root):
    from pretrain.config.loading import load_model_config, load_train_config

    tiny = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "configs", "model", "tiny.yaml")
    cfg = load_train_config(str(root / "train.yaml"), sets=[f"model={tiny}", "model.vocab_size=128"])
    assert cfg.model == load_model_config(tiny).model_copy(update={"vocab_size": 128})
