"""Decontamination on real text: passages of real documents serve as the evaluation set (JSONL, and
Chinese sentences as Parquet); a planted passage is caught and named, a paraphrase with no 13-word run
in common is not, and the other real documents are left alone."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.runner import run_stages
from dataprep.dedup.decontaminate import MATCHED_BY, MATCHES, REASON, Decontaminate, eval_items
from dedup_corpus import doc_table, real_documents


def _zh_sentences(shared_data, n: int) -> list[str]:
    out = []
    with open(shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["lang"] == "zh" and len(row["text"]) >= 30:
                out.append(row["text"])
    return out[:n]


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    """(eval files, documents, the passage planted): 20 multiple-choice items cut from the last ten
    real documents (a 40-word question and two choices each) as JSONL, 10 Chinese sentences as Parquet;
    the corpus is the other real documents plus planted copies."""
    texts = real_documents(shared_data)
    held_out, corpus = texts[-10:], texts[:-10]
    folder = tmp_path_factory.mktemp("evals")
    items = []
    for k, text in enumerate(held_out):
        words = text.split()
        for j in range(2):
            question = " ".join(words[80 * j : 80 * j + 40])
            items.append(
                {
                    "id": f"q{2 * k + j}",
                    "question": question,
                    "choices": [" ".join(words[80 * j + 40 : 80 * j + 55]), "None of the above"],
                }
            )
    (folder / "mmlu_like.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    zh = _zh_sentences(shared_data, 12)
    pq.write_table(pa.table({"text": zh[:10]}), folder / "cloze_zh.parquet")  # no id column: row numbers
    docs = {f"real-{i:02d}": t for i, t in enumerate(corpus)}
    passage = items[7]["question"].split()
    words = docs["real-05"].split()
    docs["planted"] = " ".join(words[:50] + passage[5:25] + words[50:])  # 20 words of a question
    paraphrase = [w + "s" if i % 12 == 6 else w for i, w in enumerate(passage)]  # a word changed every 12
    docs["paraphrase"] = " ".join(words[:50] + paraphrase + words[50:])
    docs["zh-planted"] = zh[10] + zh[3][2:17] + zh[11]  # 15 characters of an evaluation sentence
    docs["zh-short"] = zh[10] + zh[4][2:14] + zh[11]  # 12 characters: below one n-gram
    return [str(folder / "*.jsonl"), str(folder / "cloze_zh.parquet")], docs


def test_eval_items_read_every_text_field(setup):
    evals, _ = setup
    items = eval_items(evals, ["question", "choices", "text"], "id")
    assert ("mmlu_like:q3", "None of the above") in items
    assert (
        sum(1 for i, _ in items if i.startswith("mmlu_like:")) == 60
        and sum(1 for i, _ in items if i.startswith("cloze_zh:")) == 10
    )


def test_decontaminate_drops_only_the_planted_passages(setup):
    evals, docs = setup
    stage = Decontaminate(eval_sets=evals, text_fields=["question", "choices", "text"])
    (result, (stats,)) = run_stages([stage], doc_table(docs))
    dropped = dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column(MATCHED_BY).to_pylist()))
    assert dropped == {"planted": "mmlu_like:q7", "zh-planted": "cloze_zh:3"}
    assert set(result.dropped.column("drop_reason").to_pylist()) == {REASON}
    assert {"paraphrase", "zh-short"} <= set(result.kept.column("id").to_pylist())
    assert set(result.kept.column(MATCHES).to_pylist()) == {0}
    assert stats.counters["contaminated_documents"] == 2


def test_flag_mode_marks_matches_instead_of_dropping_them(setup):
    evals, docs = setup
    stage = Decontaminate(eval_sets=evals, text_fields=["question", "text"], action="flag", ngram=10)
    (result, _) = run_stages([stage], doc_table(docs))
    assert result.dropped.num_rows == 0
    rows = {r["id"]: r for r in result.kept.to_pylist()}
    assert rows["planted"][MATCHED_BY] == "mmlu_like:q7" and rows["planted"][MATCHES] >= 20 - 10 + 1
    assert rows["paraphrase"][MATCHED_BY] == "mmlu_like:q7"  # its 11 unchanged words in a row hold 10-grams
    assert sum(r[MATCHED_BY] is not None for r in rows.values()) == 3


def test_an_eval_set_without_usable_text_is_an_error(tmp_path):
    (tmp_path / "e.jsonl").write_text('{"text": "too short"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="no evaluation text"):
        Decontaminate(eval_sets=[str(tmp_path / "e.jsonl")]).process(doc_table({"a": "x"}))
    with pytest.raises(FileNotFoundError):
        Decontaminate(eval_sets=[str(tmp_path / "missing.jsonl")]).process(doc_table({"a": "x"}))
