"""``pretrain eval`` reports the loop's own validation loss, and the same number for documents given as
shards or as JSONL tokenized on the fly; ``pretrain generate`` samples reproducibly (greedy, top-p,
seeds) within the tokenizer's vocabulary."""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from dataprep.tokenize.stage import Tokenize
from pretrain.cli import main as pretrain_main
from pretrain.components.metrics import read_metrics
from pretrain.inference.generate import generate, next_token
from pretrain.inference.loading import find_tokenizer, load_trained, model_for_inference
from text_runs import make_text_run
from tokenizer_texts import texts_table

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained(shared_data, tmp_path_factory):
    return make_text_run(shared_data, tmp_path_factory.mktemp("geneval"))


def _eval(capsys, *args) -> dict:
    assert pretrain_main(["eval", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_reports_the_loss_the_training_loop_logged(trained, capsys):
    logged = [r for r in read_metrics(os.path.join(trained["run"], "metrics.jsonl")) if r["kind"] == "val"]
    assert [r["step"] for r in logged] == [4]
    result = _eval(capsys, trained["run"])
    assert result["step"] == 4 and result["batches"] == 2 and result["tokens"] == 2 * 8 * 16
    assert result["loss"] == pytest.approx(logged[-1]["val_loss"], abs=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(result["loss"]))
    # an earlier checkpoint form (the consolidated final weights) gives the same number
    final = _eval(capsys, os.path.join(trained["run"], "model.safetensors"))
    assert final["loss"] == pytest.approx(result["loss"], abs=1e-6)


def test_eval_on_shards_equals_eval_on_jsonl_tokenized_on_the_fly(trained, tmp_path, capsys):
    texts = trained["held_out"][:150]
    jsonl = tmp_path / "held_out.jsonl"
    with open(jsonl, "w", encoding="utf-8") as fh:
        for i, text in enumerate(texts):
            fh.write(json.dumps({"id": str(i), "text": text}) + "\n")
        fh.write("not json\n" + json.dumps({"id": "empty", "text": ""}) + "\n")  # counted, not fatal
    tok_dir = os.path.join(trained["shards"], "tokenizer")
    Tokenize(tokenizer=tok_dir, output_dir=str(tmp_path / "shards")).run_local(texts_table(texts))
    from_shards = _eval(capsys, trained["run"], "--data", str(tmp_path / "shards"), "--batch-size", "16")
    from_jsonl = _eval(capsys, trained["run"], "--data", str(jsonl), "--batch-size", "16")
    assert from_jsonl["documents"] == len(texts) and from_jsonl["documents_dropped"] == 2
    assert from_shards["tokens"] == from_jsonl["tokens"] > 16 * 16
    assert from_shards["loss"] == pytest.approx(from_jsonl["loss"], abs=1e-6)
    assert math.log(2) < from_shards["loss"] < 1.5 * math.log(1024)  # a model that has barely trained
    capped = _eval(capsys, trained["run"], "--data", str(jsonl), "--max-batches", "1", "--batch-size", "4")
    assert capped["tokens"] == 4 * 16


def test_eval_reads_shards_at_a_url(trained, capsys):
    pytest.importorskip("aiohttp")
    from range_server import serve_folder

    args = ["--batch-size", "8", "--max-batches", "2"]
    local = _eval(capsys, trained["run"], "--data", trained["shards"], *args)
    with serve_folder(os.path.dirname(trained["shards"])) as server:
        remote = _eval(capsys, trained["run"], "--data", f"{server.url}/{os.path.basename(trained['shards'])}", *args)
    assert (remote["loss"], remote["tokens"]) == (local["loss"], local["tokens"])


def test_a_run_trained_from_a_url_keeps_its_tokenizer(trained, tmp_path, capsys):
    """The run folder gets the source's tokenizer, so generate and export need neither --tokenizer nor
    the server once training is done."""
    pytest.importorskip("aiohttp")
    from pretrain.config.loading import load_train_config
    from pretrain.train import run
    from range_server import serve_folder
    from train_fixtures import tiny_config

    out = str(tmp_path / "run")
    with serve_folder(os.path.dirname(trained["shards"])) as server:
        url = f"{server.url}/{os.path.basename(trained['shards'])}"
        run(
            load_train_config(
                tiny_config(
                    url,
                    out,
                    model={"vocab_size": 1024},
                    max_steps=1,
                    checkpoint={"every_steps": 1},
                    log={"val_every_steps": 1, "val_batches": 1},
                )
            )
        )
    tokenizer, manifest = find_tokenizer(load_trained(out))  # the server is gone: the run's own copy
    assert tokenizer.sha256 == trained["tokenizer"].sha256 == manifest["tokenizer"]["model_sha256"]
    assert pretrain_main(["generate", out, "--prompt", "Hello", "--max-new-tokens", "3"]) == 0
    assert "Hello" in capsys.readouterr().out
    assert pretrain_main(["export", out, "--to", "hf", "--output", str(tmp_path / "hf")]) == 0
    assert os.path.isfile(tmp_path / "hf" / "tokenizer.json")


def test_eval_errors_are_clear(trained, tmp_path, capsys):
    assert pretrain_main(["eval", trained["run"], "--data", str(tmp_path / "nothing.jsonl")]) == 2
    assert "not found" in capsys.readouterr().err
    damaged = tmp_path / "damaged.jsonl.gz"
    damaged.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 40)
    assert pretrain_main(["eval", trained["run"], "--data", str(damaged)]) == 2
    assert "no documents read (BadInputFile: " in capsys.readouterr().err  # the reader's reason, not a traceback
    assert pretrain_main(["eval", trained["run"], "--seq-len", "1000"]) == 2
    assert "--seq-len" in capsys.readouterr().err


def test_next_token_samples_from_the_top_p_nucleus():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    gen = torch.Generator().manual_seed(0)
    draws = {next_token(logits, 1.0, 0.6, False, gen) for _ in range(300)}
    assert draws == {0, 1}  # 0.5 alone is not 0.6 of the mass; 0.5 + 0.3 is
    assert {next_token(logits, 1.0, 1.0, False, gen) for _ in range(300)} == {0, 1, 2, 3}


def test_next_token_is_the_argmax_when_greedy_or_at_temperature_zero():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert next_token(logits, 1.0, 1.0, True) == 0 and next_token(logits, 0.0, 0.9, False) == 0


@pytest.fixture(scope="module")
def generator_parts(trained):
    """The trained run loaded for inference: the loaded run, the model, its tokenizer and a prompt."""
    loaded = load_trained(trained["run"])
    tokenizer, _ = find_tokenizer(loaded)
    return loaded, model_for_inference(loaded), tokenizer, [tokenizer.eos_id, *tokenizer.encode("The city of")]


def test_greedy_generation_takes_the_argmax_at_each_step(generator_parts):
    _, model, _, prompt = generator_parts
    greedy = generate(model, prompt, 8, greedy=True)
    tokens = torch.tensor([prompt])
    for _ in range(8):  # greedy by hand: argmax of the last position
        tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert greedy == tokens[0, len(prompt) :].tolist()
    assert generate(model, prompt, 8, top_p=1e-6) == greedy  # nucleus of one token
    assert len(generate(model, prompt * 20, 3, greedy=True)) == 3  # prompt longer than max_seq_len: windowed


def _sample(generator_parts, seed):
    _, model, tokenizer, prompt = generator_parts
    return generate(
        model,
        prompt,
        20,
        temperature=3.0,
        top_p=1.0,
        vocab_limit=tokenizer.vocab_size,
        generator=torch.Generator().manual_seed(seed),
    )


def test_sampling_is_reproducible_by_seed(generator_parts):
    assert _sample(generator_parts, 1) == _sample(generator_parts, 1) != _sample(generator_parts, 2)


def test_samples_stay_in_the_tokenizers_vocabulary(generator_parts):
    loaded, _, tokenizer, _ = generator_parts
    assert max(_sample(generator_parts, 3) + _sample(generator_parts, 4)) < tokenizer.vocab_size
    assert tokenizer.vocab_size < loaded.model.vocab_size


def test_the_generate_command_prints_each_sample(trained, capsys):
    assert (
        pretrain_main(["generate", trained["run"], "--prompt", "Hello", "--max-new-tokens", "5", "--num-samples", "2"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("Hello") == 2 and "-" * 40 in out


def test_a_run_trained_on_a_mixture_works_with_every_command(trained, tmp_path, capsys):
    """Its saved config.yaml names the mixture's sources, and loads again: eval, generate and export work on
    the run folder as the train command's last line says."""
    import yaml

    from pretrain.config.loading import load_train_config
    from train_fixtures import tiny_config

    other = str(tmp_path / "other")
    Tokenize(tokenizer=os.path.join(trained["shards"], "tokenizer"), output_dir=other).run_local(
        texts_table(trained["held_out"])
    )
    mixture = tmp_path / "two.yaml"
    mixture.write_text(
        yaml.safe_dump(
            {
                "sources": [
                    {"name": "main", "path": trained["shards"], "weight": 0.7},
                    {"name": "other", "path": other, "weight": 0.3},
                ]
            }
        )
    )
    out = str(tmp_path / "run")
    cfg = tiny_config(
        [],
        out,
        model={"vocab_size": 1024},
        max_steps=2,
        checkpoint={"every_steps": 2},
        log={"val_every_steps": 2, "val_batches": 1},
    )
    cfg["data"] = {"mixture": str(mixture), "val_fraction": 0.1}
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(tmp_path / "train.yaml")]) == 0
    saved = load_train_config(os.path.join(out, "config.yaml"))
    assert [(s.name, s.weight) for s in saved.data.sources] == [("main", 0.7), ("other", 0.3)]
    capsys.readouterr()
    assert _eval(capsys, out)["step"] == 2
    assert pretrain_main(["generate", out, "--prompt", "Hello", "--max-new-tokens", "3"]) == 0
    assert "Hello" in capsys.readouterr().out
    assert pretrain_main(["export", out, "--to", "hf", "--output", str(tmp_path / "hf")]) == 0
    assert os.path.isfile(tmp_path / "hf" / "config.json")


def test_a_run_config_that_does_not_load_says_why(trained, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained["run"], run)
    text = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(text.replace("seq_len: 16", "seq_len: -16", 1))
    assert pretrain_main(["generate", str(run), "--prompt", "Hello", "--max-new-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'config.yaml'} does not load" in err and "seq_len" in err and "not found" not in err
