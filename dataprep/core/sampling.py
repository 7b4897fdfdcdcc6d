"""The one rule for a seeded uniform sample of texts, shared by the in-memory runner and Spark.

Each non-empty text is ranked by a hash of the seed and itself, and the ``n`` lowest ranks are the
sample (ties, i.e. equal ranks, go by the text). The hash is Spark's ``xxhash64(seed, text)`` computed
here the way Spark computes it, so Spark ranks the documents in the JVM (``pipelines.sample_texts``)
and the in-memory runner in Python and both draw the same sample, in the same order, at any
partitioning: a tokenizer trained in memory and on Spark from one corpus has the same sample hash.
"""

from __future__ import annotations

import math
import struct
from typing import Iterable

import xxhash

SAMPLER = "xxhash64"
RANK_RANGE = 10**9  # ranks are pmod(hash, RANK_RANGE): Spark's own integer arithmetic, no floats
_SPARK_SEED = 42  # the seed of Spark's xxhash64 expression


def sample_rank(text: str, seed: int) -> int:
    """``pmod(xxhash64(seed, text), RANK_RANGE)`` as Spark computes it: XXH64 of the seed's 4 bytes
    with seed 42, then of the text's UTF-8 bytes seeded with that."""
    chained = xxhash.xxh64_intdigest(struct.pack("<i", seed), seed=_SPARK_SEED)
    signed = xxhash.xxh64_intdigest(text.encode("utf-8", "surrogatepass"), seed=chained)
    if signed >= 1 << 63:
        signed -= 1 << 64
    return signed % RANK_RANGE


def oversampled_fraction(n: int, total: int) -> float:
    """The share of ranks that holds ``n`` of ``total`` documents with a wide margin: Spark keeps
    the ranks below it before sorting, so only a little more than ``n`` texts are sorted."""
    return min(1.0, (n + 5 * math.sqrt(n) + 10) / max(total, 1))


def sample_info(total: int, n: int) -> dict:
    """How a sample was drawn, recorded beside what it trained (``tokenizer_meta.json``)."""
    return {"corpus_documents": total, "sample_fraction": round(min(1.0, n / max(total, 1)), 6), "sampler": SAMPLER}


def sample_texts(texts: Iterable[str | None], n: int, seed: int = 0) -> tuple[list[str], dict]:
    """At most ``n`` non-empty ``texts`` drawn uniformly by the shared rule, in rank order, and how."""
    present = [t for t in texts if t]
    cut = math.ceil(oversampled_fraction(n, len(present)) * RANK_RANGE)
    ranked = sorted((rank, t) for t in present if (rank := sample_rank(t, seed)) < cut)
    return [t for _, t in ranked[:n]], sample_info(len(present), n)
