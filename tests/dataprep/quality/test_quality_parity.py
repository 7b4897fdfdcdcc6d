"""Parity with datatrove 0.10.1: every rule's keep/drop decision (and reason) on real pages.

The expected decisions were produced by bench/quality/quality_golden.py running datatrove's own filters; the
texts are rebuilt here from ../shared/data (tests/support/quality_parity.py) (their sha1 is in the golden file),
so datatrove is not
needed to run this test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import quality_parity as golden_mod
from dataprep.quality.c4 import C4Quality
from dataprep.quality.fineweb import FineWebQuality
from dataprep.quality.gopher import GopherQuality
from dataprep.quality.gopher_repetition import GopherRepetition
from dataprep.quality.languages import split_words

ROOT = Path(__file__).resolve().parents[3]

# datatrove parameter names that differ from ours
RENAMED = {"max_non_alpha_words_ratio": "min_alpha_words_ratio"}


def _ours(params: dict) -> dict:
    return {RENAMED.get(k, k): (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}


@pytest.fixture(scope="module")
def corpus(shared_data):
    golden = json.loads((ROOT / "tests" / "data" / "quality_golden.json").read_text())["documents"]
    texts = golden_mod.build_texts(shared_data)
    assert [t["id"] for t in texts] == [g["id"] for g in golden]
    for t, g in zip(texts, golden):
        assert golden_mod.sha1(t["text"]) == g["text_sha1"], f"text of {t['id']} changed; regenerate the golden file"
    return texts, golden


def _reasons(stage, texts: list[str]) -> list[str | None]:
    return [stage.decide(t, "en")[0] for t in texts]


def _compare(name: str, stage, texts, expected: list[str | None]) -> None:
    got = _reasons(stage, texts)
    checked = [(i, e, g) for i, (e, g) in enumerate(zip(expected, got)) if not (e or "").startswith("error:")]
    wrong = [(i, e, g) for i, e, g in checked if e != g]
    assert not wrong, f"{name}: {len(wrong)} of {len(checked)} differ, e.g. {wrong[:5]}"


def test_word_split_matches_spacy_counts(corpus):
    texts, golden = corpus
    for t, g in zip(texts, golden):
        if t["text"].strip():
            assert len(split_words(t["text"])) == g["n_words"], t["id"]


@pytest.mark.parametrize("rule", ["all", *golden_mod.GOPHER_Q_RULES])
def test_gopher_quality_parity(corpus, rule):
    texts, golden = corpus
    params = {} if rule == "all" else {**golden_mod.GOPHER_Q_OFF, **golden_mod.GOPHER_Q_RULES[rule]}
    stage = GopherQuality(**_ours(params))
    _compare(f"gopher_quality/{rule}", stage, [t["text"] for t in texts], [g["gopher_quality"][rule] for g in golden])


@pytest.mark.parametrize("rule", ["all", *golden_mod.GOPHER_R_RULES])
def test_gopher_repetition_parity(corpus, rule):
    texts, golden = corpus
    params = {} if rule == "all" else {**golden_mod.GOPHER_R_OFF, **golden_mod.GOPHER_R_RULES[rule]}
    stage = GopherRepetition(**_ours(params))
    _compare(
        f"gopher_repetition/{rule}", stage, [t["text"] for t in texts], [g["gopher_repetition"][rule] for g in golden]
    )


@pytest.mark.parametrize("rule", ["all", *golden_mod.FINEWEB_RULES])
def test_fineweb_quality_parity(corpus, rule):
    texts, golden = corpus
    params = {} if rule == "all" else {**golden_mod.FINEWEB_OFF, **golden_mod.FINEWEB_RULES[rule]}
    stage = FineWebQuality(**_ours(params))
    _compare(f"fineweb_quality/{rule}", stage, [t["text"] for t in texts], [g["fineweb_quality"][rule] for g in golden])


@pytest.mark.parametrize("variant", list(golden_mod.C4_VARIANTS))
def test_c4_quality_matches_the_golden_decisions(corpus, variant):
    texts, golden = corpus
    stage = C4Quality(**golden_mod.C4_VARIANTS[variant])
    wrong = []
    for t, g in zip(texts, golden):
        expected = g["c4_quality"][variant]
        reason, new_text = stage.decide(t["text"], "en")
        if reason != expected["reason"] or (reason is None and golden_mod.sha1(new_text) != expected["text_sha1"]):
            wrong.append((t["id"], expected["reason"], reason))
    assert not wrong, f"c4/{variant}: {len(wrong)} of {len(texts)} differ, e.g. {wrong[:5]}"


def test_batch_apply_matches_per_document(corpus):
    """The Arrow batch path (what Spark runs) gives the same decisions as decide()."""
    texts, golden = corpus[0][:100], corpus[1][:100]
    batch = pa.table({"id": [t["id"] for t in texts], "text": [t["text"] for t in texts]})
    result = GopherQuality().apply(batch)
    expected_kept = [g["id"] for g in golden if g["gopher_quality"]["all"] is None]
    assert 0 < len(expected_kept) < len(texts)
    assert result.kept.column("id").to_pylist() == expected_kept
    assert result.dropped.num_rows == len(texts) - len(expected_kept)
