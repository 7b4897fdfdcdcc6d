"""Perplexity models and the ARPA format (KenLM's lmplz, CCNet): a trained model exported and imported
back scores every token the same; a hand-written ARPA file scores with ARPA's back-off semantics
(computed by hand below); ``dataprep arpa import`` makes a model directory the perplexity stage loads."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_tokenize import load_texts

from dataprep.cli import main as dataprep_main
from dataprep.quality.arpa import read_arpa, write_arpa
from dataprep.quality.perplexity import PerplexityModel, train_model


@pytest.fixture(scope="module")
def model(shared_data, tmp_path_factory):
    _, docs = load_texts(shared_data)
    folder = tmp_path_factory.mktemp("ppl") / "model"
    train_model(docs[:24], "en", str(folder), vocab_size=300, order=3)
    return PerplexityModel.load(str(folder)), docs[24:]


def test_export_then_import_scores_every_token_the_same(model, tmp_path):
    ppl, held = model
    path = str(tmp_path / "lm.arpa")
    counts = write_arpa(ppl.lm, ppl.sp, path)
    text = open(path, encoding="utf-8").read()
    assert text.startswith("\\data\\\nngram 1=") and "\\3-grams:" in text and text.rstrip().endswith("\\end\\")
    assert counts[3] == len(ppl.lm.keys[3])
    back = read_arpa(path, ppl.sp)
    lines = [ppl.sp.Encode(line) for doc in held for line in doc.splitlines() if line.strip()]
    ours, n = ppl.lm.token_logprobs(lines)
    theirs, m = back.token_logprobs(lines)
    assert (n == m).all() and np.allclose(ours, theirs, atol=2e-6)
    assert abs(ours.sum()) > 100  # a real amount of text was scored


def test_hand_written_arpa_follows_back_off_semantics(model, tmp_path):
    ppl, _ = model
    sp = ppl.sp
    a, b, x = (sp.IdToPiece(i) for i in (10, 11, 12))
    (tmp_path / "tiny.arpa").write_text(
        "\\data\\\nngram 1=5\nngram 2=2\n\n\\1-grams:\n"
        f"-99\t<s>\t-0.5\n-1.0\t</s>\n-0.7\t{a}\t-0.3\n-0.9\t{b}\n-2.0\t<unk>\n\n"
        f"\\2-grams:\n-0.2\t<s> {a}\n-0.1\t{a} {b}\n\n\\end\\\n", encoding="utf-8")
    lm = read_arpa(str(tmp_path / "tiny.arpa"), sp)
    assert lm.order == 2 and x not in (a, b)
    logp, _ = lm.token_logprobs([[10, 11, 12], [11, 10]])
    # A|<s> -0.2; B|A -0.1; X|B: no bigram, no back-off weight, X unknown -> <unk> -2.0; </s>|X -> -1.0
    # B|<s>: bow(<s>) -0.5 + p(B) -0.9; A|B: p(A) -0.7; </s>|A: bow(A) -0.3 + p(</s>) -1.0
    assert np.allclose(logp, [-0.2, -0.1, -2.0, -1.0, -1.4, -0.7, -1.3], atol=1e-6)
    (tmp_path / "bad.arpa").write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\tnot-a-piece-anywhere\n\n\\end\\\n")
    with pytest.raises(ValueError, match="not pieces of the SentencePiece model"):
        read_arpa(str(tmp_path / "bad.arpa"), sp)


def test_cli_round_trip_gives_a_model_directory_with_the_same_perplexities(model, tmp_path, capsys):
    ppl, held = model
    arpa = str(tmp_path / "lm.arpa")
    assert dataprep_main(["arpa", "export", ppl.directory, arpa]) == 0
    assert json.loads(capsys.readouterr().out)["order"] == 3
    reference = tmp_path / "ref.jsonl"
    reference.write_text("".join(json.dumps({"text": t}) + "\n" for t in held))
    out = str(tmp_path / "imported")
    assert dataprep_main(["arpa", "import", arpa, "--sp-model", f"{ppl.directory}/sp.model", "--lang", "en",
                          "--reference", str(reference), "--output", out]) == 0
    imported = PerplexityModel.load(out)
    assert np.allclose(imported.perplexities(held), ppl.perplexities(held), rtol=1e-4)
