"""Hugging Face export: a trained checkpoint loads in ``transformers`` with the same logits (1e-4) and
greedy continuation as our model, ``AutoTokenizer`` gives our ids on real multilingual text, and the
import back reproduces the weights. ``make_text_run`` (tests/support/text_runs.py) trains the model."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest
import torch

from dataprep.core.errors import UsageError
from dataprep.tokenize.tokenizer import Tokenizer, train_tokenizer
from dataprep.tokenize.tokenizer_json_writer import write_hf_tokenizer
from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_train_config
from pretrain.inference.loading import find_tokenizer, load_trained, model_for_inference
from text_runs import make_text_run, require
from tokenizer_texts import EDGE_CASES
from train_fixtures import tiny_config

EXTRA_CASES = [
    "中文文本，日本語のテキスト、한국어 텍스트",
    "emoji 🧪🤖👩‍👩‍👧 and flags 🇫🇷",
    "   leading spaces",
    "a  b   c    d",
    "\n\nnewlines\n",
    "<s> </s> <pad> <unk> <0x41> are text here",
    "x\u2581y",
    "",
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def trained(shared_data, tmp_path_factory):
    torch.manual_seed(0)
    return make_text_run(shared_data, tmp_path_factory.mktemp("export"))


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("hf") / "model")
    assert pretrain_main(["export", trained["run"], "--to", "hf", "--output", out]) == 0
    return out


def test_export_writes_a_transformers_folder(trained, exported):
    assert sorted(os.listdir(exported)) == [
        "README.md",
        "config.json",
        "generation_config.json",
        "lineage.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    cfg = json.load(open(os.path.join(exported, "config.json")))
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["vocab_size"]) == (4, 2, 1024)
    assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["tie_word_embeddings"]) == (1, 2, False)
    from safetensors import safe_open

    with safe_open(os.path.join(exported, "model.safetensors"), "pt") as fh:
        names = set(fh.keys())
    assert {
        "model.embed_tokens.weight",
        "model.layers.1.self_attn.k_proj.weight",
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.post_attention_layernorm.weight",
        "model.norm.weight",
        "lm_head.weight",
    } <= names
    assert len(names) == 2 * 9 + 3
    # the checkpoint is the one the run ended with, and a second export refuses to overwrite it
    assert load_trained(trained["run"]).step == 4
    assert pretrain_main(["export", trained["run"], "--output", exported]) == 2


def test_the_export_computes_in_transformers_what_ours_does(trained, exported):
    transformers = require("transformers")
    from pretrain.inference.generate import generate

    hf = transformers.LlamaForCausalLM.from_pretrained(exported, torch_dtype=torch.float32).eval()
    ours = model_for_inference(load_trained(trained["run"]))
    tokenizer = trained["tokenizer"]
    tokens = torch.tensor([ids[:64] for ids in map(tokenizer.encode, trained["held_out"][-20:]) if len(ids) >= 64][:3])
    assert tokens.shape == (3, 64)
    with torch.no_grad():
        expected, actual = ours(tokens), hf(tokens).logits
    assert actual.shape == expected.shape
    assert torch.allclose(actual, expected, atol=1e-4, rtol=0), (actual - expected).abs().max()
    prompt = tokens[0, :10].tolist()
    hf_new = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=12, min_new_tokens=12)[0, 10:].tolist()
    assert generate(ours, prompt, 12, greedy=True) == hf_new


def test_auto_tokenizer_ids_equal_ours_on_multilingual_text(trained, exported):
    transformers = require("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(exported)
    ours: Tokenizer = trained["tokenizer"]
    texts = trained["held_out"] + EDGE_CASES + EXTRA_CASES
    assert len(texts) > 5000 and any("\u4e2d" in t for t in texts)
    expected = [ids.tolist() for ids in ours.encode_batch(texts, add_eos=False)]
    actual = hf(texts)["input_ids"]
    assert [t for t, a, b in zip(texts, actual, expected) if a != b] == []
    byte_ids = {ours.sp.piece_to_id(f"<0x{b:02X}>") for b in "🧪".encode()}
    assert byte_ids <= set(hf("🧪")["input_ids"])  # emoji via byte fallback, never <unk>
    assert [hf.decode(ids) for ids in actual[:200]] == texts[:200]
    assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (1, 2, 3)


def test_an_export_keeps_the_datas_bos_and_the_models_tying(shared_data, tmp_path):
    transformers = require("transformers")
    from safetensors.torch import save_file

    from pretrain.inference.export import export_hf

    trained = make_text_run(shared_data, tmp_path, steps=1, add_bos=True)
    loaded = load_trained(trained["run"])
    loaded.weights["output.weight"] = loaded.weights["tok_embeddings.weight"]
    loaded.model = loaded.model.model_copy(update={"tie_embeddings": True})
    tokenizer, manifest = find_tokenizer(loaded)
    export_hf(loaded, tokenizer, str(tmp_path / "hf"), manifest)
    hf = transformers.LlamaForCausalLM.from_pretrained(str(tmp_path / "hf"), torch_dtype=torch.float32).eval()
    assert hf.lm_head.weight.data_ptr() == hf.model.embed_tokens.weight.data_ptr()
    text = "Ein kurzer Satz auf Deutsch, und ein zweiter."
    ids = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))(text)["input_ids"]
    assert ids == [1, *trained["tokenizer"].encode(text)]  # the data had BOS: so does the HF tokenizer
    with torch.no_grad():
        expected = model_for_inference(loaded)(torch.tensor([ids]))
        assert torch.allclose(hf(torch.tensor([ids])).logits, expected, atol=1e-4, rtol=0)
    # "tied" weights that differ are exported as what they are: untied
    untied = {**loaded.weights, "output.weight": loaded.weights["output.weight"] + 1}
    save_file(untied, str(tmp_path / "m.safetensors"), metadata={"model_config": loaded.model.model_dump_json()})
    with pytest.warns(UserWarning, match="treating the model as untied"):
        assert not load_trained(str(tmp_path / "m.safetensors")).model.tie_embeddings


def test_import_hf_round_trip(trained, exported, tmp_path):
    back = str(tmp_path / "back")
    assert pretrain_main(["export", exported, "--to", "ccpretrain", "--output", back]) == 0
    original, imported = load_trained(trained["run"]), load_trained(os.path.join(back, "model.safetensors"))
    assert imported.model == original.model
    assert imported.weights.keys() == original.weights.keys()
    assert all(torch.equal(imported.weights[k], original.weights[k]) for k in original.weights)
    assert os.path.isfile(os.path.join(back, "model.yaml"))


def test_a_damaged_hf_config_is_the_users_file_in_one_line(tmp_path):
    """A config.json without a Llama's keys, or with values our model refuses, names the file; no traceback."""
    from pretrain.models.hf_adapter import read_hf_folder

    folder = tmp_path / "hf"
    folder.mkdir()
    with pytest.raises(UsageError, match="no config.json"):
        read_hf_folder(str(folder))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(UsageError, match="config.json: not a usable Llama config .lacks 'num_attention_heads'."):
        read_hf_folder(str(folder))
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_attention_heads": 4,
                "vocab_size": -3,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "intermediate_size": 64,
            }
        )
    )
    with pytest.raises(UsageError, match="vocab_size: Input should be greater than 0"):
        read_hf_folder(str(folder))


def _warm_trainer(trained, out, init_from: str, **model):
    from pretrain.train import Trainer

    cfg = tiny_config(trained["shards"], out, model={"vocab_size": 1024, **model}, init_from=init_from)
    trainer = Trainer(load_train_config(cfg))
    trainer.resume(None)
    return trainer


def test_warm_start_from_the_hf_export_begins_with_its_logits(trained, exported, tmp_path):
    from pretrain.models.hf_adapter import read_hf_folder

    trainer = _warm_trainer(trained, tmp_path / "warm", exported)
    assert trainer.state.step == 0 and trainer.scheduler.last_epoch == 0 and not trainer.optimizer.state
    cfg, weights = read_hf_folder(exported)
    export = model_for_inference(load_trained(trained["run"]))
    export.load_state_dict(weights)  # the exported folder's weights in our model
    tokens = torch.tensor([list(trained["tokenizer"].encode(" ".join(trained["held_out"][:40])))[:64]] * 2)
    with torch.no_grad():
        warm, expected = trainer.model(tokens), export(tokens)
    assert torch.allclose(warm, expected, atol=1e-5, rtol=0), (warm - expected).abs().max()
    if importlib.util.find_spec("transformers"):  # and as transformers reads the folder
        import transformers

        hf = transformers.LlamaForCausalLM.from_pretrained(exported, torch_dtype=torch.float32).eval()
        with torch.no_grad():
            assert torch.allclose(hf(tokens).logits, warm, atol=1e-4, rtol=0)


def test_warm_start_from_a_run_folder(trained, tmp_path):
    trainer = _warm_trainer(trained, tmp_path / "warm", trained["run"])
    ours = load_trained(trained["run"]).weights
    assert all(torch.equal(v, ours[k]) for k, v in trainer.model.state_dict().items())


def test_warm_start_from_another_model_names_the_difference(trained, tmp_path):
    with pytest.raises(ValueError, match=r"differs from this run's model in n_layers \(2 there, 3 here\)"):
        _warm_trainer(trained, tmp_path / "other", trained["run"], n_layers=3)


def test_a_tokenizer_other_than_bpe_is_refused(trained, tmp_path):
    ascii_texts = [t for t in trained["held_out"] if t.isascii()][:300]
    unigram = train_tokenizer(ascii_texts, str(tmp_path / "uni"), vocab_size=400, model_type="unigram")
    with pytest.raises(ValueError, match="only BPE"):
        write_hf_tokenizer(unigram, str(tmp_path))


def test_exporting_a_missing_run_is_a_one_line_usage_error(tmp_path, capsys):
    assert pretrain_main(["export", str(tmp_path / "missing"), "--output", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_weights_alone_need_a_tokenizer_named(trained):
    loaded = load_trained(trained["run"])
    loaded.run, loaded.run_dir = None, None  # weights alone: neither the run's config nor its folder
    with pytest.raises(FileNotFoundError, match="--tokenizer"):
        find_tokenizer(loaded)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
