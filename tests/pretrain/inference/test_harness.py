"""Downstream tasks through lm-evaluation-harness: ``pretrain eval --tasks`` scores a checkpoint as the harness's
own Hugging Face model scores its ``pretrain export`` (equal acc and acc_norm, per-item log-likelihoods within
1e-4) on local task files, and bits per byte is total nats / ln 2 / bytes, computed here by hand."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from harness_tasks import DOCUMENTS, write_tasks
from pretrain.cli import main as pretrain_main
from pretrain.inference.bits_per_byte import document_bits_per_byte, token_byte_lengths
from pretrain.inference.loading import find_tokenizer, load_trained, model_for_inference
from text_runs import make_text_run, require

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained(shared_data, tmp_path_factory):
    torch.manual_seed(0)
    return make_text_run(shared_data, tmp_path_factory.mktemp("harness"))


@pytest.fixture(scope="module")
def tasks(tmp_path_factory, monkeypatch_module):
    return write_tasks(tmp_path_factory.mktemp("tasks"))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        yield mp


def _eval(capsys, *args) -> dict:
    assert pretrain_main(["eval", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _loglikelihoods(samples: list[dict]) -> dict:
    """Per item and choice, the log-likelihood the model gave (the harness's logged responses)."""
    return {(s["doc_id"], i): float(resp[0][0]) for s in samples for i, resp in enumerate(s["resps"])}


def _assert_scores_equal_the_harness_on_the_export(run_dir: str, tasks: str, export: str) -> None:
    require("lm_eval")
    require("accelerate")
    import random

    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from pretrain.inference.harness import correct_probability, evaluate_tasks

    assert pretrain_main(["export", run_dir, "--to", "hf", "--output", export]) == 0
    names = ["tiny_mc", "tiny_docs"]
    theirs = simple_evaluate(
        "hf",
        model_args=f"pretrained={export},dtype=float32",
        tasks=names,
        device="cpu",
        batch_size=4,
        task_manager=TaskManager(include_path=tasks, include_defaults=False),
        log_samples=True,
        bootstrap_iters=0,
    )
    loaded = load_trained(run_dir)
    tokenizer, manifest = find_tokenizer(loaded)
    random.seed(7)
    ours = evaluate_tasks(
        model_for_inference(loaded), tokenizer, names, tasks, log_samples=True, add_bos=bool(manifest.get("add_bos"))
    )
    assert random.random() == random.Random(7).random()  # the caller's random state is left as it was
    for metric in ("acc", "acc_norm"):
        assert ours["tiny_mc"][metric] == theirs["results"]["tiny_mc"][f"{metric},none"]
    assert ours["tiny_docs"]["bits_per_byte"] == pytest.approx(
        theirs["results"]["tiny_docs"]["bits_per_byte,none"], rel=1e-5
    )
    mine, reference = _loglikelihoods(ours["_samples"]["tiny_mc"]), _loglikelihoods(theirs["samples"]["tiny_mc"])
    assert mine.keys() == reference.keys() and len(mine) == 24
    assert max(abs(mine[k] - reference[k]) for k in mine) < 1e-4
    assert len({round(v, 3) for v in mine.values()}) > 12  # the items differ: nothing is scored alike by accident
    by_hand = [
        math.exp(mine[(s["doc_id"], s["target"])]) / sum(math.exp(mine[(s["doc_id"], i)]) for i in range(3))
        for s in ours["_samples"]["tiny_mc"]
    ]
    assert correct_probability(ours["_samples"]["tiny_mc"]) == pytest.approx(sum(by_hand) / len(by_hand))
    assert correct_probability(ours["_samples"]["tiny_docs"]) is None


def test_scores_equal_the_harness_on_the_export(trained, tasks, tmp_path, capsys):
    _assert_scores_equal_the_harness_on_the_export(trained["run"], tasks, str(tmp_path / "hf"))
    # the command: the same scores, beside the loss, with the metric names the harness gives them
    result = _eval(capsys, trained["run"], "--tasks", "tiny_mc,tiny_gen", "--include-path", tasks, "--limit", "6")
    assert set(result) >= {"checkpoint", "step", "loss", "perplexity", "bits_per_byte", "tasks"}
    assert set(result["tasks"]) == {"tiny_mc", "tiny_gen"}
    assert set(result["tasks"]["tiny_mc"]) == {"acc", "acc_norm"} and "exact_match" in result["tasks"]["tiny_gen"]


@pytest.mark.slow  # a second model trained and exported
def test_scores_equal_the_harness_when_documents_start_with_bos(shared_data, tasks, tmp_path):
    """Shards with BOS: the export's tokenizer adds it, and so does our wrapper, before contexts and texts."""
    torch.manual_seed(0)
    run = make_text_run(shared_data, tmp_path, add_bos=True)
    _assert_scores_equal_the_harness_on_the_export(run["run"], tasks, str(tmp_path / "hf"))


@pytest.mark.slow  # an unknown name is looked for among the harness's own task files: most of a minute to index
def test_an_unknown_task_is_one_line(trained, tasks, capsys):
    require("lm_eval")
    assert pretrain_main(["eval", trained["run"], "--tasks", "no_such_task", "--include-path", tasks]) == 2
    assert "unknown task no_such_task" in capsys.readouterr().err


def test_help_groups_the_harness_flags(capsys):
    with pytest.raises(SystemExit):
        pretrain_main(["eval", "--help"])
    group = capsys.readouterr().out.split("downstream tasks (lm-evaluation-harness")[1]
    assert all(flag in group for flag in ("--tasks", "--include-path", "--limit", "--num-fewshot"))


def test_a_missing_eval_extra_is_one_line(trained, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "lm_eval", None)  # as if not installed: importing it fails
    monkeypatch.delitem(sys.modules, "pretrain.inference.harness", raising=False)
    assert pretrain_main(["eval", trained["run"], "--tasks", "tiny_mc"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith("needs 'lm_eval', which is not installed: pip install 'ccpretrain[eval]'") and "\n" not in err


def test_document_bits_per_byte_by_hand(trained):
    loaded = load_trained(trained["run"])
    tokenizer, _ = find_tokenizer(loaded)
    model = model_for_inference(loaded)
    prefix = [tokenizer.eos_id]
    result = document_bits_per_byte(model, tokenizer, DOCUMENTS, prefix, seq_len=8, batch_size=2)
    nats = 0.0
    for text in DOCUMENTS:  # every token, predicted from all of the document before it (here: one forward)
        ids = torch.tensor([prefix + tokenizer.encode(text)])
        with torch.no_grad():
            logprobs = F.log_softmax(model(ids[:, :-1]).float(), dim=-1)
        nats -= float(logprobs.gather(2, ids[:, 1:, None]).sum())
    n_bytes = sum(len(t.encode("utf-8")) for t in DOCUMENTS)
    assert result["bytes"] == n_bytes
    # windows of 8 tokens see less context than one forward: close, not equal
    assert result["bits_per_byte"] == pytest.approx(nats / math.log(2) / n_bytes, rel=0.05)
    whole = document_bits_per_byte(model, tokenizer, DOCUMENTS, prefix, seq_len=64, batch_size=2)
    assert whole["bits_per_byte"] == pytest.approx(nats / math.log(2) / n_bytes, rel=1e-5)


def test_bits_per_byte_of_the_validation_split(trained, capsys):
    result = _eval(capsys, trained["run"])
    tokenizer = trained["tokenizer"]
    lengths = token_byte_lengths(tokenizer, 1024)
    text = "héllo wörld 🧪"
    assert sum(lengths[i] for i in tokenizer.encode(text)) == len(text.encode("utf-8"))
    assert result["bits_per_byte"] == pytest.approx(result["loss"] * result["tokens"] / math.log(2) / result["bytes"])
    assert 0 < result["bytes"] < 4 * result["tokens"]


def test_an_eval_section_without_tasks_or_documents_is_refused(trained, tmp_path):
    from dataprep.core.validation import ConfigError
    from pretrain.config.loading import load_train_config
    from train_fixtures import tiny_config

    with pytest.raises(ConfigError, match="eval: names no tasks and no documents"):
        load_train_config(
            tiny_config(trained["shards"], tmp_path / "run", model={"vocab_size": 1024}, eval={"every_steps": 2})
        )


@pytest.fixture(scope="module")
def evaluating_run(trained, tasks, tmp_path_factory):
    """A 4-step run with an ``eval:`` section (the tiny task and held-out documents every 2 steps): its folder,
    the held-out documents and its ``kind: eval`` records."""
    require("lm_eval")
    from pretrain.components.metrics import read_metrics
    from pretrain.config.loading import load_train_config
    from pretrain.train import run
    from train_fixtures import tiny_config

    root = tmp_path_factory.mktemp("evaluating")
    held_out = root / "held_out.jsonl"
    held_out.write_text("".join(json.dumps({"text": t}) + "\n" for t in trained["held_out"][:12]), encoding="utf-8")
    out = root / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(
            load_train_config(
                tiny_config(
                    trained["shards"],
                    out,
                    model={"vocab_size": 1024},
                    max_steps=4,
                    checkpoint={"every_steps": 2},
                    log={"val_every_steps": 2},
                    eval={
                        "tasks": ["tiny_mc"],
                        "include_path": tasks,
                        "every_steps": 2,
                        "documents": {"held_out": str(held_out)},
                    },
                )
            )
        )
    finally:
        torch.set_num_threads(before)
    return out, held_out, [r for r in read_metrics(str(out / "metrics.jsonl")) if r["kind"] == "eval"]


def test_a_run_logs_its_eval_scores_as_it_trains(evaluating_run):
    from pretrain.components.metrics import tracker_scalars

    _, _, records = evaluating_run
    assert [r["step"] for r in records] == [2, 4]
    assert {"tiny_mc/acc", "tiny_mc/acc_norm", "held_out/bpb", "eval_seconds"} <= set(records[-1])
    scalars = tracker_scalars(records[-1])  # what TensorBoard and W&B get
    assert scalars["eval/held_out/bpb"] == records[-1]["held_out/bpb"] and "eval/tiny_mc/acc" in scalars


def test_pretrain_eval_of_the_run_gives_the_scores_it_logged(evaluating_run, capsys):
    """``pretrain eval`` gives the run's checkpoint the logged scores, scoring the run's tasks when none are
    named."""
    out, held_out, records = evaluating_run
    result = _eval(capsys, str(out))  # no --tasks: the run's eval: tasks
    assert result["step"] == 4 and result["tasks"]["tiny_mc"]["acc"] == records[-1]["tiny_mc/acc"]
    documents = _eval(capsys, str(out), "--data", str(held_out))
    assert documents["bits_per_byte"] == pytest.approx(records[-1]["held_out/bpb"], rel=1e-5)


def test_a_runs_eval_scores_reach_its_plots(evaluating_run, tmp_path):
    from pretrain.inference.plot import eval_curves, training_section

    out, _, _ = evaluating_run
    curves = eval_curves(str(out / "metrics.jsonl"))
    assert curves["held_out/bpb"][0] == [2, 4]
    section = training_section(str(out), str(tmp_path))
    assert any(row[0] == "eval held_out/bpb first → last" for row in section.tables[0][1])
    assert pretrain_main(["plot", str(out)]) == 0 and (out / "curves.png").exists()


def test_token_bytes_of_a_byte_level_tokenizer_json(tmp_path):
    """A Llama-3-style byte-level BPE: each token's bytes add up to the text's, emoji split across tokens included."""
    tokenizers = require("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from dataprep.tokenize.tokenizer import Tokenizer

    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tk.train_from_iterator(
        DOCUMENTS * 20,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<|end_of_text|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tk.save(str(tmp_path / "tokenizer.json"))
    tokenizer = Tokenizer.load(str(tmp_path))
    lengths = token_byte_lengths(tokenizer, 512)
    for text in DOCUMENTS + ["emoji 🧪🤖 and 漢字, split into bytes"]:
        assert sum(lengths[i] for i in tokenizer.encode(text)) == len(text.encode("utf-8"))
    assert lengths[tokenizer.eos_id] == 0 and lengths[400] == 0
