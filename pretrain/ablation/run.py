"""``pretrain ablate``: the same small model trained on each arm (same tokenizer, tokens and seeds: the
initialisation from the seed alone, the data order from the seed and the arm's name), every model scored
on the same held-out documents (bits per byte) and harness tasks (accuracy and the probability of the
correct answer), then compared arm against arm (``pretrain.ablation.stats``).

Layout of OUTPUT: ``ablation.json`` (the settings: a rerun with others is refused), ``tokenizer/``,
``arms/NAME/shards`` (arms given as documents), ``models/NAME-seedS/`` (a training run; ``scores.json``
once it is scored), ``results.json`` and ``index.html``. A rerun skips scored models and resumes a model
from its last checkpoint."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_text, check_output_path
from dataprep.core.units import duration
from pretrain.ablation.arms import Arm, parse_arm, prepare_arms, resolve_arm
from pretrain.ablation.scoring import eval_name, read_eval_sets, score_model
from pretrain.ablation.stats import summarise

SETTINGS = "ablation.json"
SCORES = "scores.json"


@dataclass
class AblationSpec:
    """What ``pretrain ablate`` was asked; defaults finish in minutes on a laptop CPU."""

    arms: list[str]  # NAME=PATH
    evals: list[str]  # held-out JSONL/Parquet documents
    output: str
    seeds: int = 2
    model: str = "tiny"
    tokens: int = 200_000  # per model
    seq_len: int = 128
    batch_size: int = 16  # sequences per optimizer step
    micro_batch_size: int = 16
    lr: float | None = None  # None: DeepSeek LLM's peak learning rate for the model and tokens
    tokenizer: str | None = None
    vocab_size: int = 2000  # of a tokenizer trained here
    tasks: list[str] = field(default_factory=list)
    include_path: str | None = None
    limit: int | None = None
    device: str = "auto"
    text_field: str = "text"

    def check(self) -> None:
        names = [parse_arm(a)[0] for a in self.arms]
        if len(names) < 2 or len(set(names)) != len(names):
            raise UsageError("pretrain ablate needs at least two --arm NAME=PATH, each NAME once")
        if self.seeds < 2:
            raise UsageError(f"--seeds {self.seeds}: at least 2 (an interval over seeds needs two)")
        if not self.evals and not self.tasks:
            raise UsageError("give held-out documents (--eval FILE) or harness tasks (--tasks), or both")
        stems = [eval_name(p) for p in self.evals]
        if len(set(stems)) != len(stems):
            raise UsageError(f"--eval files must have different names: {', '.join(stems)}")
        check_output_path(self.output, "--output", folder=True)


def data_seed(seed: int, arm: str) -> int:
    """The data order of ``arm`` at ``seed``: two arms holding the same corpus still differ by sampling."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{arm}".encode()).digest()[:4], "big")


def _claim_output(spec: AblationSpec) -> None:
    """Write the settings, or check a rerun asks for the same ones (the device may change)."""
    path = os.path.join(spec.output, SETTINGS)
    mine = {k: v for k, v in dataclasses.asdict(spec).items() if k != "device"}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            theirs = json.load(fh)
        changed = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        if changed:
            raise UsageError(
                f"--output {spec.output} holds an ablation with other settings ({', '.join(changed)}): "
                "rerun it as it was to resume, or choose another --output"
            )
        return
    os.makedirs(spec.output, exist_ok=True)
    atomic_write_text(path, json.dumps(mine, indent=1) + "\n")


def train_config(spec: AblationSpec, arm: Arm, seed: int) -> dict:
    """The training config of one model: the same for every arm but the data and its order."""
    from pretrain.planning.flops import deepseek_flops_per_token
    from pretrain.planning.hyperparameters import optimal_hyperparameters
    from pretrain.planning.sizing import resolve_model

    model = resolve_model(spec.model)
    steps = max(1, spec.tokens // (spec.batch_size * spec.seq_len))
    lr = (
        spec.lr
        or optimal_hyperparameters(
            deepseek_flops_per_token(model, spec.seq_len) * spec.tokens, spec.seq_len
        ).learning_rate
    )
    return {
        "model": model.model_dump(mode="json") | {"vocab_size": "auto"},
        "data": {
            "sources": [{"path": os.path.abspath(p), "weight": w} for p, w in zip(arm.shards, arm.weights)],
            "val_fraction": 0,
            "seed": data_seed(seed, arm.name),
        },
        "seq_len": spec.seq_len,
        "micro_batch_size": spec.micro_batch_size,
        "global_batch_size": spec.batch_size,
        "max_steps": steps,
        "seed": seed,
        "device": spec.device,
        "optim": {"lr": lr, "warmup_steps": max(1, steps // 10)},
        "checkpoint": {"every_steps": max(1, steps // 2), "keep_last": 1},
        "log": {"every_steps": steps},
        "out_dir": model_dir(spec, arm.name, seed),
    }


def model_dir(spec: AblationSpec, arm: str, seed: int) -> str:
    return os.path.join(os.path.abspath(spec.output), "models", f"{arm}-seed{seed}")


def run_ablation(spec: AblationSpec) -> dict:
    """Train and score every (arm, seed) not scored yet, then write ``results.json`` and ``index.html``."""
    from pretrain.ablation.page import write_page

    spec.check()
    arms = [resolve_arm(*parse_arm(a)) for a in spec.arms]
    eval_sets = read_eval_sets(spec.evals, spec.text_field)  # a wrong path fails before OUTPUT is claimed
    _claim_output(spec)
    tokenizer = prepare_arms(arms, spec.output, spec.tokenizer, spec.vocab_size, text_field=spec.text_field)
    jobs = [(arm, seed) for seed in range(spec.seeds) for arm in arms]
    scores: dict[str, dict[int, dict]] = {arm.name: {} for arm in arms}
    times: list[float] = []
    started = time.perf_counter()
    for i, (arm, seed) in enumerate(jobs, 1):
        done = os.path.join(model_dir(spec, arm.name, seed), SCORES)
        if os.path.exists(done):
            with open(done, encoding="utf-8") as fh:
                scores[arm.name][seed] = json.load(fh)
            continue
        began = time.perf_counter()
        _say(f"model {i}/{len(jobs)}: arm {arm.name}, seed {seed}")
        scores[arm.name][seed] = _train_and_score(spec, arm, seed, tokenizer, eval_sets)
        atomic_write_text(done, json.dumps(scores[arm.name][seed], indent=1) + "\n")
        times.append(time.perf_counter() - began)
        left = sum(1 for a, s in jobs[i:] if not os.path.exists(os.path.join(model_dir(spec, a.name, s), SCORES)))
        _say(
            f"model {i}/{len(jobs)} done in {duration(times[-1])}; {left} left, ETA "
            f"{duration(left * sum(times) / len(times))}"
        )
    results = {
        "settings": dataclasses.asdict(spec),
        "tokens_per_model": train_config(spec, arms[0], 0)["max_steps"] * spec.batch_size * spec.seq_len,
        **summarise(scores),
        "seconds_this_run": time.perf_counter() - started,
    }
    atomic_write_text(os.path.join(spec.output, "results.json"), json.dumps(results, indent=1) + "\n")
    write_page(spec.output, results)
    return results


def _train_and_score(spec: AblationSpec, arm: Arm, seed: int, tokenizer, eval_sets: dict[str, list[str]]) -> dict:
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    cfg = load_train_config(train_config(spec, arm, seed))
    run(cfg, resume="auto")
    return score_model(cfg.out_dir, tokenizer, eval_sets, spec)


def _say(line: str) -> None:
    print(f"[ablate] {line}", file=sys.stderr, flush=True)
