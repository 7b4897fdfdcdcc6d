"""Our MinHash against datasketch, the reference implementation: on real documents and variants of known true
Jaccard, both estimate it equally well, and LSH with the same bands x rows finds the same near-duplicates."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dataprep.dedup.minhash import MinHashDedup, collision_probability
from dataprep.dedup.normalize import normalize, shingles
from dedup_corpus import real_documents
from near_duplicates import mutate

datasketch = pytest.importorskip("datasketch")

NUM_PERM, BANDS, ROWS = 112, 14, 8  # the stage's defaults


@pytest.fixture(scope="module")
def pairs(shared_data):
    """(base, variant, true Jaccard of their shingle sets) for real documents mutated at several rates."""
    rng = random.Random(0)
    bases = [t for t in real_documents(shared_data) if len(t.split()) > 200][:30]
    vocab = sorted({w for t in bases for w in t.split()})
    out = []
    for base in bases:
        for rate in (0.005, 0.02, 0.05, 0.1, 0.3):
            variant = mutate(base, rate, rng, vocab)
            a, b = (set(shingles(normalize(t), chinese_words=True)) for t in (base, variant))
            out.append((base, variant, len(a & b) / len(a | b)))
    return out


def _ours(texts):
    stage = MinHashDedup(num_perm=NUM_PERM, bands=BANDS, rows=ROWS)
    sigs, valid = stage.signatures(texts)
    assert valid.all()
    return sigs, stage.band_keys(sigs)


def _reference(texts):
    hashes = []
    for text in texts:
        m = datasketch.MinHash(num_perm=NUM_PERM, seed=1)
        m.update_batch(shingles(normalize(text), chinese_words=True))
        hashes.append(m)
    return hashes


def test_both_estimate_the_true_jaccard_equally_well(pairs):
    sigs, _ = _ours([t for base, variant, _ in pairs for t in (base, variant)])
    ref = _reference([t for base, variant, _ in pairs for t in (base, variant)])
    true = np.array([j for _, _, j in pairs])
    ours = np.array([(sigs[2 * i] == sigs[2 * i + 1]).mean() for i in range(len(pairs))])
    theirs = np.array([ref[2 * i].jaccard(ref[2 * i + 1]) for i in range(len(pairs))])
    assert true.min() < 0.5 < 0.9 < true.max()  # the pairs span the range that matters
    for estimate in (ours, theirs):
        assert abs((estimate - true).mean()) < 0.02  # unbiased
        assert np.abs(estimate - true).mean() < 0.05  # sampling error of 112 hashes: sqrt(J(1-J)/112) <= 0.047
    assert abs(np.abs(ours - true).mean() - np.abs(theirs - true).mean()) < 0.015


def test_lsh_with_the_same_bands_finds_the_same_near_duplicates(pairs):
    texts = [t for base, variant, _ in pairs for t in (base, variant)]
    _, keys = _ours(texts)
    ours = np.array([bool(set(keys[2 * i]) & set(keys[2 * i + 1])) for i in range(len(pairs))])
    lsh = datasketch.MinHashLSH(num_perm=NUM_PERM, params=(BANDS, ROWS))
    ref = _reference(texts)
    for i, m in enumerate(ref):
        lsh.insert(str(i), m)
    theirs = np.array([str(2 * i + 1) in lsh.query(ref[2 * i]) for i in range(len(pairs))])
    true = np.array([j for _, _, j in pairs])
    for found in (ours, theirs):
        assert found[true >= 0.85].mean() >= 0.95  # 14 x 8 catches J = 0.85 with probability 0.97
        assert found[true < 0.5].mean() <= 0.05  # and J = 0.5 with probability 0.05
    expected = collision_probability(true, BANDS, ROWS).mean()  # the S-curve over these pairs
    assert abs(ours.mean() - expected) < 0.08 and abs(theirs.mean() - expected) < 0.08
