"""The command-line conventions users bring from other tools: dotted ``--set`` overrides (and
torchtitan's ``--optim.lr 3e-4``), every config error at once with did-you-mean, shipped presets found
from any directory, ``dataprep stages`` as a full reference, ``--json`` on train/plot/export/generate/lineage,
exit codes 0 ok / 1 failure / 2 usage or config, ``--log-level``."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from dataprep.core.config import ConfigError, load_config
from dataprep.core.validation import apply_overrides, split_dotted_options
from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import train_tokenizer
from pipelines.cli import main as dataprep_main
from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_train_config
from tokenizer_texts import load_texts, texts_table
from train_fixtures import tiny_config


def test_dotted_overrides_reach_any_nested_key_or_list_entry():
    data = {"optim": {"lr": 1.0}, "stages": [{"stage": "a"}, {"stage": "b", "x": 1}]}
    out = apply_overrides(data, ["optim.lr=3e-4", "stages.1.x=0.5", "stages.-1.langs=[en, de]", "log.tensorboard=tb"])
    assert out == {
        "optim": {"lr": 3e-4},
        "log": {"tensorboard": "tb"},
        "stages": [{"stage": "a"}, {"stage": "b", "x": 0.5, "langs": ["en", "de"]}],
    }
    assert data["optim"]["lr"] == 1.0  # the input is not modified
    conf = {"spark": {"conf": {"spark.executor.memory": "1g"}}}
    assert apply_overrides(conf, ["spark.conf.spark.executor.memory=4g"]) == {
        "spark": {"conf": {"spark.executor.memory": "4g"}}
    }


def test_a_malformed_dotted_override_is_refused_with_its_cause():
    data = {"optim": {"lr": 1.0}, "stages": [{"stage": "a"}, {"stage": "b", "x": 1}]}
    with pytest.raises(ConfigError, match="not an index of a list of 2"):
        apply_overrides(data, ["stages.5.x=1"])
    with pytest.raises(ConfigError, match="expected KEY.PATH=VALUE"):
        apply_overrides(data, ["optim.lr"])


def test_dotted_options_are_taken_out_of_the_command_line_as_overrides():
    assert split_dotted_options(["cfg.yaml", "--optim.lr", "3e-4", "--log.every_steps=5", "--json"]) == (
        ["cfg.yaml", "--json"],
        ["optim.lr=3e-4", "log.every_steps=5"],
    )


def test_pipeline_config_reports_every_problem_at_once_with_suggestions(tmp_path):
    config = {
        "input": {"paths": ["x.jsonl"], "batch_sise": 10},
        "output": {"compression": "lz4"},
        "stages": [
            {"stage": "langid", "languages": ["en"], "treshold": 0.5},
            {"stage": "gopher_qualty"},
            {"stage": "langid", "threshold": -1},
        ],
    }
    with pytest.raises(ConfigError) as err:
        load_config(config)
    lines = str(err.value).splitlines()
    assert len(lines) == 5, lines
    text = str(err.value)
    assert "input.batch_sise: unknown key; did you mean 'batch_size'?" in text
    assert "output.compression" in text
    assert "stages[0] (langid): treshold: unknown key; did you mean 'threshold'?" in text
    assert "stages[1]: unknown stage 'gopher_qualty'; did you mean 'gopher_quality'?" in text
    assert "stages[2] (langid): threshold: Input should be greater than or equal to 0" in text


def test_set_overrides_a_stage_of_an_included_preset_from_another_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no checkout around: the preset comes from the package
    path = tmp_path / "job.yaml"
    path.write_text(
        "input: {paths: [x.jsonl]}\nstages:\n  - {stage: langid, languages: [en]}\n  - include: fineweb_filters.yaml\n"
    )
    config = load_config(str(path), sets=["stages.0.threshold=0.5", "stages.2.min_doc_words=7", "output.dir=elsewhere"])
    assert config.stages[0].threshold == 0.5 and config.output.dir == "elsewhere"
    assert [s.name for s in config.stages][:2] == ["langid", "gopher_repetition"]
    assert config.stages[2].name == "gopher_quality" and config.stages[2].min_doc_words == 7
    assert load_config("ingest").stages[0].name == "extract"  # a shipped config by name
    with pytest.raises(ConfigError, match="did you mean 'fineweb'"):
        load_config("finweb")
    with pytest.raises(
        ConfigError, match=r"stages\[0\] \(langid\): threshold: Input should be less than or equal to 1"
    ):
        load_config(str(path), sets=["stages.0.threshold=5"])


def test_stages_reference_shows_each_settings_constraints(capsys):
    assert dataprep_main(["stages", "extract"]) == 0
    out = capsys.readouterr().out
    assert 'engine: str = "auto"  # one of auto, blocks, resiliparse, trafilatura' in out
    assert "route_below: float = 0.3  # >= 0.0, <= 1.0" in out
    assert dataprep_main(["stages", "top_fraction", "--json"]) == 0
    (top_fraction,) = json.loads(capsys.readouterr().out)
    score = next(p for p in top_fraction["params"] if p["name"] == "score")
    assert score["required"] and score["description"]


def test_stages_reference_suggests_the_nearest_name_for_an_unknown_stage(capsys):
    assert dataprep_main(["stages", "langd"]) == 2
    assert "did you mean 'langid'" in capsys.readouterr().err


def test_an_unknown_log_level_is_a_usage_error():
    with pytest.raises(SystemExit) as usage:
        dataprep_main(["run", "ingest", "--log-level", "loud"])
    assert usage.value.code == 2


def test_config_problems_exit_2_with_one_line_naming_the_cause(tmp_path, capsys):
    assert dataprep_main(["run", str(tmp_path / "missing.yaml")]) == 2  # config problem: 2, one line
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: {paths: [x.jsonl]}\nstages: [{stage: langid, languages: [EN]}]\n")
    assert dataprep_main(["run", str(bad), "--log-level", "debug", "--set", "stages.0.threshold=2"]) == 2
    assert "stages[0] (langid): threshold" in capsys.readouterr().err


def test_a_bug_inside_a_command_is_reported_as_a_bug_with_its_traceback(monkeypatch, capsys):
    """A builtin error a command did not mean to raise is a bug, not the user's mistake: no one-line usage error."""

    def lost_key():
        raise KeyError("model_sha256")

    monkeypatch.delenv("CCP_DEBUG", raising=False)
    monkeypatch.setattr("dataprep.commands.stages.describe", lost_key)
    assert dataprep_main(["stages", "langid"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'model_sha256'" in err
    assert err.rstrip().endswith("ccpretrain: this is a bug; please report it with the traceback above")
    assert "error: model_sha256" not in err
    assert dataprep_main(["stages", "langid", "--json"]) == 1
    out, err = capsys.readouterr()
    failure = json.loads(out)
    assert failure["ok"] is False and failure["exit_status"] == 1 and "KeyError" in failure["error"]
    assert "Traceback" in err


@pytest.fixture(scope="module")
def text_data(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("conventions")
    lingua, docs = load_texts(shared_data)
    texts = [r["text"] for r in lingua][:400] + docs[:20]
    tok_dir = str(root / "tokenizer")
    train_tokenizer(texts, tok_dir, vocab_size=500, character_coverage=0.98, seed=1)
    Tokenize(tokenizer=tok_dir, output_dir=str(root / "tokens")).run_local(texts_table(texts))
    cfg = tiny_config(
        str(root / "tokens"),
        root / "run",
        model={"vocab_size": 512},
        max_steps=4,
        checkpoint={"every_steps": 4},
        log={"val_every_steps": 4, "val_batches": 1},
    )
    (root / "train.yaml").write_text(yaml.safe_dump(cfg))
    return root


def test_train_validates_its_overrides(text_data, capsys):
    config = str(text_data / "train.yaml")
    assert pretrain_main(["train", config, "--max-steps", "-5"]) == 2
    assert "max_steps: Input should be greater than 0" in capsys.readouterr().err
    assert pretrain_main(["train", config, "--set", "optim.lrr=1"]) == 2
    assert "did you mean 'lr'" in capsys.readouterr().err
    assert load_train_config(config, sets=["model.n_layers=1"]).model.n_layers == 1


def test_every_pretrain_command_speaks_json(text_data, capsys, monkeypatch, one_torch_thread):
    config = str(text_data / "train.yaml")
    assert pretrain_main(["train", config, "--json", "--optim.lr", "2e-3", "--set", "log.every_steps=2"]) == 0
    result = json.loads(capsys.readouterr().out)  # stdout holds the JSON only
    assert result["last_step"] == 4 and os.path.exists(result["model"]) and result["loss"] > 0
    saved = yaml.safe_load(open(os.path.join(result["out_dir"], "config.yaml")))
    assert saved["optim"]["lr"] == 2e-3 and saved["log"]["every_steps"] == 2

    assert all(os.path.isabs(src["path"]) for src in saved["data"]["sources"]) and os.path.isabs(saved["out_dir"])
    # Portable: the run folder moves, the shards' tokenizer disappears, commands run from elsewhere.
    run = str(text_data / "moved" / "run")
    shutil.move(result["out_dir"], run)
    os.rename(text_data / "tokens" / "tokenizer", text_data / "tokenizer-gone")
    monkeypatch.chdir(text_data / "moved")
    assert pretrain_main(["plot", run, "--json"]) == 0
    assert os.path.exists(json.loads(capsys.readouterr().out)["png"])
    assert (
        pretrain_main(["generate", run, "--prompt", "The", "--max-new-tokens", "3", "--num-samples", "2", "--json"])
        == 0
    )
    samples = json.loads(capsys.readouterr().out)["samples"]
    assert len(samples) == 2 and all(s["text"].startswith("The") and 1 <= len(s["tokens"]) <= 3 for s in samples)
    assert pretrain_main(["generate", run, "--max-new-tokens", "-1"]) == 2
    capsys.readouterr()
    pytest.importorskip("tokenizers")
    hf = str(text_data / "hf")
    assert pretrain_main(["export", run, "--output", hf, "--json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert "model.safetensors" in exported["files"] and exported["step"] == 4
    assert {"README.md", "lineage.json"} <= set(exported["files"])
    assert pretrain_main(["lineage", hf, "--json"]) == 0
    lineage = json.loads(capsys.readouterr().out)
    assert lineage["model"]["step"] == 4 and lineage["current"]["sources"][0]["path"] == str(text_data / "tokens")
    assert "max_length" not in json.load(open(os.path.join(hf, "generation_config.json")))
