"""Exact and MinHash dedup on real documents with planted duplicates: in memory and on Spark, which
must agree with each other and across partitionings."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.config import ConfigError, load_config
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.minhash import MinHashDedup, agreement_bounds, collision_probability, optimal_bands_rows
from dataprep.dedup.normalize import GROUP_CHARS, normalize, shingle_hashes, shingles
from dedup_corpus import doc_table, real_documents


def _sentences(shared_data, lang: str, n: int) -> str:
    out = []
    with open(shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["lang"] == lang:
                out.append(row["text"])
            if len(out) == n:
                break
    return "".join(out)


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


@pytest.fixture(scope="module")
def corpus(shared_data) -> dict[str, str | None]:
    """Real documents plus planted duplicates whose expected fate is encoded in their ids."""
    real = real_documents(shared_data)
    docs = {f"real-{i:02d}": t for i, t in enumerate(real)}
    source = next(k for k, t in docs.items() if len(t.split()) >= 400)
    words = docs.pop(source).split()[:300]  # planted copies replace the document they come from
    changed = list(words)
    changed[150] = "zeppelin"
    docs["nd-a"], docs["nd-b"] = " ".join(words), " ".join(changed)  # one word changed in 300
    text = docs.pop("real-03")
    docs["ex-a"], docs["ex-b"] = text, "  " + text.upper().replace(" ", "\n ") + " "
    zh = _sentences(shared_data, "zh", 12)
    docs["zh-a"], docs["zh-b"] = zh, zh[:200] + ("龍" if zh[200] != "龍" else "鳳") + zh[201:]
    ja = _sentences(shared_data, "ja", 12)
    docs["ja-a"], docs["ja-b"] = ja, ja[:-30]  # a copy missing its last sentence or so
    docs.update(
        {"empty-1": "", "empty-2": "   ", "none-1": None, "word-1": "hello", "word-2": "Hello!", "word-3": "goodbye"}
    )
    return docs


# -- normalization and shingles -------------------------------------------------------------------


def test_fineweb_normalization():
    assert normalize("  Héllo, WÖRLD!!\n\tIt's 2024: $3.50\u00a0each ") == "hello world it s 0000 0 00 each"
    assert normalize("Ça—va?", "lower") == "ça—va?"
    assert normalize("A  b\n", "whitespace") == "A b"
    assert normalize(None) == "" and normalize("!!! ...") == ""


def test_word_shingles_are_overlapping_ngrams():
    assert shingles("a b c d e f", 5) == [b"a b c d e", b"b c d e f"]


def test_a_text_shorter_than_one_ngram_is_at_most_one_shingle():
    assert shingles("a b c", 5) == [b"a b c"]  # shorter than one n-gram: one shingle
    assert shingles("") == []


def test_cjk_shingles_are_character_ngrams():
    cjk = shingles(normalize("这是一个测试句子。我们用字符。"), 5, 3)
    assert cjk[0] == "这是一".encode() and len(cjk) == len("这是一个测试句子我们用字符") - 2


# -- stage configuration --------------------------------------------------------------------------


def test_config_validation():
    stages = load_config({"stages": [{"stage": "exact_dedup"}, {"stage": "minhash_dedup", "threshold": 0.7}]}).stages
    assert isinstance(stages[1], MinHashDedup) and stages[1].threshold == 0.7
    with pytest.raises(ConfigError, match="exceeds num_perm"):
        load_config({"stages": [{"stage": "minhash_dedup", "bands": 20, "rows": 8}]})
    with pytest.raises(ConfigError, match="bandz: unknown key"):
        load_config({"stages": [{"stage": "minhash_dedup", "bandz": 20}]})
    with pytest.raises(ConfigError, match="hash"):
        load_config({"stages": [{"stage": "exact_dedup", "hash": "md5"}]})


def test_band_optimizer_beats_the_default_layout():
    def error(b, r, t=0.8):
        lo, hi = np.linspace(0, t, 201), np.linspace(t, 1, 201)
        return np.trapezoid(collision_probability(lo, b, r), lo) + np.trapezoid(1 - collision_probability(hi, b, r), hi)

    for t in (0.5, 0.8, 0.9):
        b, r = optimal_bands_rows(t, 112)
        assert b * r <= 112
        assert error(b, r, t) <= min(error(14, 8, t), error(7, 16, t), error(28, 4, t)) + 1e-12
    assert MinHashDedup(optimize_bands=True, threshold=0.8).layout() == optimal_bands_rows(0.8, 112)


def test_shingle_hashes_are_the_reference_shingles(shared_data):
    """The vectorised hashes hash exactly the shingles that ``shingles`` spells out, in every script."""
    texts = real_documents(shared_data)[:40] + [
        _sentences(shared_data, lang, 8) for lang in ("zh", "ja", "th", "ko", "ru", "ar", "hi", "vi")
    ]
    texts += [
        "",
        None,
        "!!",
        "one",
        "a b c d",
        "a b c d e",
        "İSTANBUL ΟΔΟΣ",
        "x\u00ady z\u200bw",
        "a" * (GROUP_CHARS + 7) + " b c d e f",
    ]
    hashes, offsets = shingle_hashes(texts)
    sets = [set(hashes[a:b].tolist()) for a, b in zip(offsets[:-1], offsets[1:])]
    reference = [set(shingles(normalize(t))) for t in texts]
    assert [len(s) for s in sets] == [len(r) for r in reference]
    for i in range(0, len(texts) - 1):  # same overlaps: a shingle hashes alike wherever it occurs
        assert len(sets[i] & sets[i + 1]) == len(reference[i] & reference[i + 1])
    alone = [shingle_hashes([t])[0] for t in texts[-12:]]  # the batch around a text changes nothing
    assert all(
        np.array_equal(a, hashes[offsets[i] : offsets[i + 1]])
        for i, a in zip(range(len(texts) - 12, len(texts)), alone)
    )


def test_signature_agreement_estimates_jaccard(shared_data):
    """Equal positions ~ Binomial(num_perm, Jaccard): unbiased, with the binomial spread."""
    rng = random.Random(5)
    words = " ".join(real_documents(shared_data)).split()
    stage = MinHashDedup()
    errors, spread = [], []
    for _ in range(300):
        base = rng.sample(words, 300)
        copy = [rng.choice(words) if rng.random() < rng.uniform(0.0, 0.06) else w for w in base]
        sigs, valid = stage.signatures([" ".join(base), " ".join(copy)])
        true = _jaccard(set(shingles(normalize(" ".join(base)))), set(shingles(normalize(" ".join(copy)))))
        errors.append(np.mean(sigs[0] == sigs[1]) - true)
        spread.append(true * (1 - true) / stage.num_perm)
    assert abs(np.mean(errors)) < 0.01
    assert 0.8 < np.std(errors) / np.sqrt(np.mean(spread)) < 1.2
    sigs, valid = stage.signatures(["one two three", "", None, "One, two; THREE!"])
    assert valid.tolist() == [True, False, False, True] and np.array_equal(sigs[0], sigs[3])


def test_agreement_bounds_are_binomial_tails():
    low, high = agreement_bounds(0.8, 112)
    assert (low, high) == (73, 105)  # a pair at J = 0.8 leaves [73, 105) with probability < 2e-4
    assert MinHashDedup().signature_bounds() == (low, high)
    assert agreement_bounds(0.5, 112)[0] < agreement_bounds(0.5, 112)[1] <= 112


# -- exact dedup ----------------------------------------------------------------------------------


def test_exact_dedup_keeps_smallest_id(corpus):
    result = ExactDedup().run_local(doc_table(corpus))
    dropped = dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("exact_cluster").to_pylist()))
    assert dropped["ex-b"] == "ex-a"  # case and whitespace differ only
    assert "nd-b" not in dropped  # one word changed is not exact
    assert set(result.dropped.column("drop_reason").to_pylist()) == {"exact_duplicate"}
    # the three empty texts are one group: kept once, counted
    assert {"empty-2", "none-1"} <= set(dropped) and "empty-1" not in dropped
    kept = result.kept.to_pydict()
    assert kept["exact_cluster_size"][kept["id"].index("empty-1")] == 3
    assert ExactDedup(normalization="none").run_local(doc_table({"a": "x y", "b": "X  y"})).dropped.num_rows == 0


# -- MinHash dedup --------------------------------------------------------------------------------


def _fates(result) -> tuple[set[str], dict[str, str]]:
    return set(result.kept.column("id").to_pylist()), dict(
        zip(result.dropped.column("id").to_pylist(), result.dropped.column("dup_cluster").to_pylist())
    )


@pytest.fixture(scope="module", params=["exact", "signature", "none"])
def minhash_run(request, corpus):
    """MinHash dedup of the corpus under each verification: its result, the kept ids and each dropped id's root."""
    result = MinHashDedup(verify=request.param).run_local(doc_table(corpus))
    return result, *_fates(result)


def test_minhash_removes_near_duplicates(corpus, minhash_run):
    _, kept, dropped = minhash_run
    assert dropped["nd-b"] == "nd-a"  # one word changed in 300 words
    assert dropped["ex-b"] == "ex-a"
    assert dropped["zh-b"] == "zh-a" and dropped["ja-b"] == "ja-a"  # CJK, by character shingles
    assert dropped.get("word-2") == "word-1"  # one-word texts: identical
    # every removed document really is a near copy of the one kept for it
    sets = {k: set(shingles(normalize(t))) for k, t in corpus.items()}
    for doc, root in dropped.items():
        assert _jaccard(sets[doc], sets[root]) >= 0.6, doc


def test_minhash_keeps_distinct_documents(corpus, minhash_run):
    result, kept, _ = minhash_run
    assert "word-3" in kept  # one-word texts: not identical
    assert {"empty-1", "empty-2", "none-1"} <= kept  # no words: no signature, never a near-duplicate
    # real documents with no near copy among them are all kept
    sets = {k: set(shingles(normalize(t))) for k, t in corpus.items()}
    real = [k for k in corpus if k.startswith("real-")]
    alone = [a for a in real if all(_jaccard(sets[a], sets[b]) < 0.5 for b in real if b != a)]
    assert len(alone) >= 40 and set(alone) <= kept
    sizes = dict(zip(result.kept.column("id").to_pylist(), result.kept.column("dup_cluster_size").to_pylist()))
    assert sizes["nd-a"] == 2 and sizes["word-3"] == 1


def test_fineweb_equivalent_setting_also_removes_pairs_below_the_threshold(shared_data):
    """verify=none is FineWeb's rule (any shared band of 14 x 8 is a duplicate): it also removes pairs
    around Jaccard 0.6-0.75, which the default (true Jaccard >= 0.8) keeps."""
    rng = random.Random(3)
    sources = [t for t in real_documents(shared_data) if len(t.split()) >= 300][:30]
    docs, truth = {}, {}
    for i, text in enumerate(sources):
        words = text.split()[:300]
        changed = list(words)
        for k in rng.sample(range(len(words)), 12):  # every 5-gram touching a change differs
            changed[k] = f"zz{k}"
        docs[f"a{i:02d}"], docs[f"b{i:02d}"] = " ".join(words), " ".join(changed)
        a, b = (set(shingles(normalize(docs[f"{x}{i:02d}"]))) for x in "ab")
        truth[f"b{i:02d}"] = _jaccard(a, b)
    assert all(0.5 < j < 0.8 for j in truth.values())
    dropped = {mode: _fates(MinHashDedup(verify=mode).run_local(doc_table(docs)))[1] for mode in ("exact", "none")}
    assert not dropped["exact"]
    assert len(dropped["none"]) >= 5 and all(dropped["none"][d] == "a" + d[1:] for d in dropped["none"])


def test_exact_verification_matches_checking_every_pair(corpus, monkeypatch):
    """Signatures decide only the clear pairs: the result equals computing every true Jaccard."""
    table = doc_table(corpus)
    fast = _fates(MinHashDedup().run_local(table))
    monkeypatch.setattr(MinHashDedup, "signature_bounds", lambda self: (0, self.num_perm + 1))
    assert _fates(MinHashDedup().run_local(table)) == fast


def test_minhash_local_is_order_independent(corpus):
    table = doc_table(corpus)
    order = list(range(table.num_rows))
    random.Random(7).shuffle(order)
    first, second = MinHashDedup().run_local(table), MinHashDedup().run_local(table.take(order))
    assert _fates(first) == _fates(second)


# -- Spark ----------------------------------------------------------------------------------------


def _spark_fates(df) -> tuple[set[str], dict[str, str], dict[str, int]]:
    rows = df.select("id", "dup_cluster", "dup_cluster_size", "drop_stage", "drop_reason").collect()
    kept = {r.id for r in rows if r.drop_reason is None}
    dropped = {r.id: r.dup_cluster for r in rows if r.drop_reason is not None}
    assert all(r.drop_reason == "minhash_duplicate" and r.drop_stage == "minhash_dedup" for r in rows if r.drop_reason)
    return kept, dropped, {r.id: r.dup_cluster_size for r in rows}


@pytest.fixture(scope="module")
def spark_minhash(spark, corpus, tmp_path_factory):
    """The corpus deduplicated by MinHash locally and on Spark (writing its clusters under the step)."""
    from pipelines.global_runners import run_global

    table = doc_table(corpus)
    local = _fates(MinHashDedup().run_local(table))
    step = tmp_path_factory.mktemp("spark-minhash") / "step"
    df = spark.createDataFrame(table.to_pandas())
    ctx = SimpleNamespace(spark=spark, step_dir=str(step), config=None)
    return table, local, _spark_fates(run_global(df.repartition(4), MinHashDedup(write_clusters=True), ctx)), step


def test_spark_minhash_keeps_the_local_documents(spark_minhash):
    """The planted copies' fates on Spark (tests/pipelines/test_global_stages.py compares the runners in
    general)."""
    table, (local_kept, local_dropped), (kept, dropped, sizes), _ = spark_minhash
    assert (kept, dropped) == (local_kept, local_dropped)
    assert len(kept) + len(dropped) == table.num_rows
    assert sizes["nd-a"] == sizes["nd-b"] == 2


def test_spark_minhash_writes_its_clusters(spark_minhash):
    """The audit of clusters ``write_clusters`` leaves under the step."""
    _, _, (_, dropped, _), step = spark_minhash
    audit = pq.read_table(step / "clusters").to_pydict()
    assert set(audit["id"]) == set(dropped) | set(dropped.values())


def test_spark_verification_modes(spark):
    """verify=signature counts equal positions; verify=exact trusts clear agreement (>= 105 of 112
    equal: accept, < 73: reject) and computes the true Jaccard of the texts in between."""
    from pipelines.decisions.minhash_dedup import verified_edges

    base = list(range(112))
    sigs = [
        ("a", base),
        ("b", base[:100] + [-1] * 12),
        ("c", base[:100] + [-2] * 12),
        ("d", base[:110] + [-3] * 2),
        ("e", base[:60] + [-4] * 52),
    ]
    sigs = spark.createDataFrame([(i, s, []) for i, s in sigs], "id string, sig array<int>, keys array<bigint>")
    words = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(200)]  # digits would all read "0"
    near = words[:100] + ["x"] + words[101:]  # one word in 200 changed: J ~ 0.95
    texts = {
        "a": words,
        "b": near,
        "c": words[:100] + ["y" + w for w in words[100:]],
        "d": ["other"] * 9 + words[:50],
        "e": words,
    }
    docs = spark.createDataFrame([(k, " ".join(v)) for k, v in texts.items()], "id string, text string")
    edges = spark.createDataFrame([("a", x) for x in "bcde"], "src string, dst string")
    found = {
        mode: sorted(verified_edges(edges, sigs, docs, MinHashDedup(verify=mode)).collect())
        for mode in ("signature", "exact")
    }
    assert found["signature"] == [("a", "b"), ("a", "c"), ("a", "d")]  # 100 and 110 >= 90 equal
    assert found["exact"] == [("a", "b"), ("a", "d")]  # c: J < 0.8 in the doubtful band; e: rejected outright


def test_spark_exact_matches_local(spark, corpus):
    """One definition, two runners: Spark keeps the same documents (ids and text) as the in-memory run."""
    from pipelines.global_runners import run_global

    table = doc_table(corpus)
    local = ExactDedup().run_local(table)
    assert local.dropped.num_rows > 0  # the corpus has planted exact duplicates
    rows = run_global(spark.createDataFrame(table.to_pandas()).repartition(3), ExactDedup()).collect()
    kept = zip(local.kept.column("id").to_pylist(), local.kept.column("text").to_pylist())
    assert {(r.id, r.text) for r in rows if r.drop_reason is None} == set(kept)
    assert {r.id: r.exact_cluster_size for r in rows} == dict(
        zip(
            *(
                pa.concat_tables(
                    [
                        local.kept.select(["id", "exact_cluster_size"]),
                        local.dropped.select(["id", "exact_cluster_size"]),
                    ]
                )
                .column(c)
                .to_pylist()
                for c in ("id", "exact_cluster_size")
            )
        )
    )
    assert {r.id: r.exact_cluster for r in rows if r.drop_reason} == dict(
        zip(local.dropped.column("id").to_pylist(), local.dropped.column("exact_cluster").to_pylist())
    )


def test_spark_connected_components_on_long_chains(spark):
    from pipelines.decisions.minhash_dedup import connected_components

    rng = random.Random(3)
    nodes = [f"n{i:02d}" for i in range(30)]
    rng.shuffle(nodes)  # paths whose ids are in random order need several rounds
    edges = [(nodes[i], nodes[i + 1]) for i in range(19)] + [(nodes[i], nodes[i + 1]) for i in range(20, 29)]
    df = spark.createDataFrame(edges, "src string, dst string")
    roots = dict(connected_components(df, single_task_max_edges=0).collect())
    assert dict(connected_components(df).collect()) == roots  # the one-task union-find agrees
    assert len(roots) == 30
    assert {roots[n] for n in nodes[:20]} == {min(nodes[:20])}
    assert {roots[n] for n in nodes[20:]} == {min(nodes[20:])}


def test_duplicate_aware_sample_weights(spark, corpus):
    """FineWeb-2-style weights: the kept copy of a cluster of 2 weighs 2, a unique document 1; Spark agrees."""
    from pipelines.global_runners import run_global

    stage = MinHashDedup(sample_weights={"2": 2.0, "3-10": 3.0, "11+": 0.5})
    local = stage.run_local(doc_table(corpus))
    weights = dict(zip(local.kept.column("id").to_pylist(), local.kept.column("sample_weight").to_pylist()))
    assert weights["nd-a"] == 2.0 and weights["word-3"] == 1.0
    rows = (
        run_global(spark.createDataFrame(doc_table(corpus).to_pandas()), stage).where("drop_reason is null").collect()
    )
    assert {r.id: r.sample_weight for r in rows} == weights
    with pytest.raises(ValueError, match="overlap"):
        MinHashDedup(sample_weights={"2-5": 2.0, "4+": 1.0})
    with pytest.raises(ValueError, match="not a size"):
        MinHashDedup(sample_weights={"two": 2.0})
