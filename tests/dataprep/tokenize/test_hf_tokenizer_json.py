"""Bring your own tokenizer: a Llama-3-style byte-level BPE ``tokenizer.json`` (built with the Hugging
Face tokenizers library) tokenizes documents in the tokenize stage, and the model trained on those
shards is evaluated, sampled and exported with it: ``AutoTokenizer`` on the exported folder gives the ids
the shards hold (BOS included) and ``AutoModelForCausalLM`` our logits."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
import yaml

from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import Tokenizer
from pretrain.cli import main as pretrain_main
from pretrain.inference.loading import load_trained, model_for_inference
from tokenizer_texts import load_texts, texts_table
from train_fixtures import tiny_config

tokenizers = pytest.importorskip("tokenizers")


def _llama3_style(texts, folder):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=450,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(texts, trainer)
    folder.mkdir()
    tk.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})
    )
    return str(folder)


def test_tokenizer_json_through_tokenize_train_eval_generate(shared_data, tmp_path, capsys, one_torch_thread):
    lingua, docs = load_texts(shared_data)
    texts = [r["text"] for r in lingua][:300] + docs[:20]
    folder = _llama3_style(texts, tmp_path / "llama3-tok")
    tok = Tokenizer.load(folder)
    assert (tok.bos_id, tok.eos_id) == (0, 1) and tok.vocab_size == 450
    for text in texts[::25] + ["  spaces\tand\nnewlines  ", "ünïcödé 漢字 🙂"]:
        assert tok.decode(tok.encode(text)) == text  # byte-level: exact round trip
    assert pickle.loads(pickle.dumps(tok)).encode("hello world") == tok.encode("hello world")  # Spark closures

    shards = tmp_path / "tokens"
    Tokenize(tokenizer=folder, output_dir=str(shards), add_bos=True).run_local(texts_table(texts))
    manifest = load_manifest(str(shards))
    assert manifest["tokenizer"]["model_sha256"] == tok.sha256 and manifest["special_ids"]["eos"] == 1
    assert Tokenizer.load(str(shards / "tokenizer")).sha256 == tok.sha256  # the copy beside the shards

    cfg = tiny_config(
        str(shards),
        tmp_path / "run",
        model={"vocab_size": 512},
        max_steps=3,
        checkpoint={"every_steps": 3},
        log={"val_every_steps": 3, "val_batches": 1},
    )
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(tmp_path / "train.yaml")]) == 0
    capsys.readouterr()
    held_out = tmp_path / "held.jsonl"
    held_out.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in lingua[300:340]))
    assert pretrain_main(["eval", str(tmp_path / "run"), "--data", str(held_out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["loss"] > 0
    assert (
        pretrain_main(["generate", str(tmp_path / "run"), "--prompt", "The city", "--max-new-tokens", "4", "--json"])
        == 0
    )
    sample = json.loads(capsys.readouterr().out)["samples"][0]
    assert sample["text"].startswith("The city") and max(sample["tokens"]) < 450

    transformers = pytest.importorskip("transformers")
    hf_dir = tmp_path / "hf"
    assert pretrain_main(["export", str(tmp_path / "run"), "--to", "hf", "--output", str(hf_dir)]) == 0
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(hf_dir))
    probe = [r["text"] for r in lingua[300:340]] + ["  spaces\tand\nnewlines  ", "ünïcödé 漢字 🙂", ""]
    expected = [ids.tolist() for ids in tok.encode_batch(probe, add_bos=True, add_eos=False)]
    assert hf_tok(probe)["input_ids"] == expected  # what the shards hold: BOS, then the text's ids
    assert (hf_tok.bos_token_id, hf_tok.eos_token_id) == (0, 1)
    assert [hf_tok.decode(ids, skip_special_tokens=True) for ids in expected] == probe
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    ids = torch.tensor([expected[0][:48]])
    with torch.no_grad():
        ours, theirs = model_for_inference(load_trained(str(tmp_path / "run")))(ids), hf(ids).logits
    assert torch.allclose(theirs, ours, atol=1e-4, rtol=0), (theirs - ours).abs().max()
