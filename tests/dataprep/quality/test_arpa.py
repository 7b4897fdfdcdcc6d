"""Perplexity models and the ARPA format (KenLM's lmplz, CCNet): a trained model exported and imported
back scores every token the same; a hand-written ARPA file scores with ARPA's back-off semantics
(computed by hand below); ``dataprep arpa import`` makes a model directory the perplexity stage loads.
Orders above 4 (keys of two 64-bit words) round-trip too, and where the ``kenlm`` package is installed
it scores an exported model exactly as we do under KenLM's sentence-start rule; a model imported with
``--kenlm`` is scored through it (and by our scorer, with the same numbers, without it)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from dataprep.quality.arpa import kenlm_token_logprobs, load_kenlm, read_arpa, write_arpa
from dataprep.quality.ngram_lm import pack, unpack
from dataprep.quality.perplexity import PerplexityModel, train_model
from pipelines.cli import main as dataprep_main
from tokenizer_texts import load_texts


def _train(shared_data, folder, order: int):
    _, docs = load_texts(shared_data)
    train_model(docs[:24], "en", str(folder), vocab_size=300, order=order)
    return PerplexityModel.load(str(folder)), docs[24:]


@pytest.fixture(scope="module")
def model(shared_data, tmp_path_factory):
    return _train(shared_data, tmp_path_factory.mktemp("ppl") / "model", order=3)


@pytest.fixture(scope="module")
def model5(shared_data, tmp_path_factory):
    return _train(shared_data, tmp_path_factory.mktemp("ppl5") / "model", order=5)


def _lines(ppl, held):
    return [ppl.sp.Encode(line) for doc in held for line in doc.splitlines() if line.strip()]


@pytest.mark.parametrize("fixture", ["model", "model5"])
def test_export_then_import_scores_every_token_the_same(fixture, request, tmp_path):
    ppl, held = request.getfixturevalue(fixture)
    order = ppl.lm.order
    path = str(tmp_path / "lm.arpa")
    counts = write_arpa(ppl.lm, ppl.sp, path)
    text = open(path, encoding="utf-8").read()
    assert text.startswith("\\data\\\nngram 1=") and f"\\{order}-grams:" in text and text.rstrip().endswith("\\end\\")
    assert counts[order] == len(ppl.lm.keys[order])
    back = read_arpa(path, ppl.sp)
    lines = _lines(ppl, held)
    ours, n = ppl.lm.token_logprobs(lines)
    theirs, m = back.token_logprobs(lines)
    assert (n == m).all() and np.allclose(ours, theirs, atol=2e-6)
    assert abs(ours.sum()) > 100  # a real amount of text was scored


def test_order_5_keys_are_exact(model5):
    ppl5, _ = model5
    assert ppl5.lm.keys[5].dtype == np.complex128 and ppl5.lm.keys[4].dtype == np.uint64
    tokens = unpack(ppl5.lm.keys[5], 5)
    assert (pack([tokens[:, j] for j in range(5)]) == ppl5.lm.keys[5]).all() and tokens.max() < 300
    assert (np.diff(np.lexsort(tokens.T[::-1])) == 1).all()  # stored in token order, first token first
    six = np.random.default_rng(0).integers(0, 65536, (500, 6))
    six[::2, :3] = 7  # shared heads: the order must come from the tail
    keys = pack([six[:, j] for j in range(6)])
    assert (unpack(keys, 6) == six).all() and (np.argsort(keys, kind="stable") == np.lexsort(six.T[::-1])).all()
    with pytest.raises(ValueError, match="longer than 6"):
        pack([six[:, 0]] * 7)


def test_order_5_uses_the_long_context(model5, model, shared_data):
    ppl5, _ = model5
    seen = _lines(ppl5, load_texts(shared_data)[1][:24])  # training text: its long n-grams were counted
    assert ppl5.lm.token_logprobs(seen)[0].mean() > model[0].lm.token_logprobs(seen)[0].mean()


def test_kenlm_scores_an_exported_order_5_model_as_we_do(model5, tmp_path):
    kenlm = pytest.importorskip("kenlm")
    ppl, held = model5
    path = str(tmp_path / "lm.arpa")
    write_arpa(ppl.lm, ppl.sp, path)
    assert kenlm.Model(path).order == 5
    lines = _lines(ppl, held)
    theirs = kenlm_token_logprobs(load_kenlm(path), ppl.sp, lines)
    ours, _ = read_arpa(path, ppl.sp).token_logprobs(lines, kenlm_start=True)
    assert len(theirs) == len(ours) > 1000 and np.allclose(ours, theirs, atol=1e-5), np.abs(ours - theirs).max()
    # without KenLM's rule our padding contexts (<s> <s> <s> <s> w) change the first three tokens of lines
    plain, n = ppl.lm.token_logprobs(lines)
    late = np.arange(len(plain)) - np.repeat(np.cumsum(n) - n, n) >= 3
    assert np.allclose(plain[late], theirs[late], atol=1e-5) and not np.allclose(plain, theirs, atol=1e-5)


def test_hand_written_arpa_follows_back_off_semantics(model, tmp_path):
    ppl, _ = model
    sp = ppl.sp
    a, b, x = (sp.IdToPiece(i) for i in (10, 11, 12))
    (tmp_path / "tiny.arpa").write_text(
        "\\data\\\nngram 1=5\nngram 2=2\n\n\\1-grams:\n"
        f"-99\t<s>\t-0.5\n-1.0\t</s>\n-0.7\t{a}\t-0.3\n-0.9\t{b}\n-2.0\t<unk>\n\n"
        f"\\2-grams:\n-0.2\t<s> {a}\n-0.1\t{a} {b}\n\n\\end\\\n",
        encoding="utf-8",
    )
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
    assert dataprep_main(["arpa", "export", ppl.directory, "--output", arpa]) == 0
    assert json.loads(capsys.readouterr().out)["order"] == 3
    reference = tmp_path / "ref.jsonl"
    reference.write_text("".join(json.dumps({"text": t}) + "\n" for t in held))
    out = str(tmp_path / "imported")
    assert (
        dataprep_main(
            [
                "arpa",
                "import",
                arpa,
                "--sp-model",
                f"{ppl.directory}/sp.model",
                "--lang",
                "en",
                "--reference",
                str(reference),
                "--output",
                out,
            ]
        )
        == 0
    )
    imported = PerplexityModel.load(out)
    assert np.allclose(imported.perplexities(held), ppl.perplexities(held), rtol=1e-4)


def test_import_with_kenlm_scores_through_the_package_or_the_same_numbers_without(model5, tmp_path, capsys):
    ppl, held = model5
    arpa = str(tmp_path / "lm.arpa")
    write_arpa(ppl.lm, ppl.sp, arpa)
    reference = tmp_path / "ref.jsonl"
    reference.write_text("".join(json.dumps({"text": t}) + "\n" for t in held))
    out = str(tmp_path / "imported")
    assert (
        dataprep_main(
            [
                "arpa",
                "import",
                arpa,
                "--sp-model",
                f"{ppl.directory}/sp.model",
                "--lang",
                "en",
                "--reference",
                str(reference),
                "--output",
                out,
                "--kenlm",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["kenlm"] == "lm.arpa"
    loaded = PerplexityModel.load(out)
    without = PerplexityModel(out, loaded.meta, loaded.sp, loaded.lm, use_kenlm=False)
    assert without.scorer == "numpy" and loaded.scorer == ("kenlm" if importlib.util.find_spec("kenlm") else "numpy")
    assert np.allclose(loaded.perplexities(held), without.perplexities(held), rtol=1e-5)
    # KenLM's sentence start: not the perplexities of the model it came from, but close
    assert not np.allclose(without.perplexities(held), ppl.perplexities(held), rtol=1e-5)
    assert np.allclose(without.perplexities(held), ppl.perplexities(held), rtol=0.03)
