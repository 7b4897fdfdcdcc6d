"""MinHash LSH near-duplicate removal (FineWeb defaults: 5-gram shingles, 112 hashes as 14 bands x 8).

One definition, run by both runners (``dataprep.core.stage.GlobalStage``): ``prepare`` computes the
signatures, ``decide`` the clusters (its Spark form, ``pipelines.decisions.minhash_dedup``, is the same
rule on DataFrames), ``applier`` marks and drops the duplicates. The steps:
1. signature per document: FineWeb normalization and 64-bit shingle hashes for a whole batch at once
   (``normalize.shingle_hashes``, numpy), then ``num_perm`` minimums of random affine maps
   ``a * x + b mod 2**32`` (a odd) over the shingles' 32-bit hashes. Each map is a bijection and the
   inputs are uniform hashes, so every position matches with probability = Jaccard, like datasketch's
   ``mod 2**61 - 1`` family (the spread of the estimate is binomial: tests check it), at a fraction of
   the cost: 32-bit multiplies vectorise, 64-bit modulo does not;
2. band keys: each band of ``rows`` hash values hashed to 64 bits; documents sharing a key in a band are
   candidates; each bucket links its members to its smallest id (a star: n-1 edges, not n^2 pairs);
3. verification (``verify``): ``signature`` keeps an edge if the signatures agree on >= ``threshold``
   of the positions (estimated Jaccard, +-0.04 at 112 hashes); ``exact`` (default) keeps it if the true
   Jaccard of the two shingle sets is >= ``threshold``, but computes it only for pairs whose agreement
   leaves doubt: agreement above ``signature_bounds()[1]`` or below ``[0]`` happens to a pair on the
   other side of the threshold with probability < ``SURE`` (binomial tail), so those are decided
   from the signatures alone; ``none`` keeps every candidate;

   Semantics: the default (``exact``, threshold 0.8) removes only pairs whose true Jaccard is >= 0.8.
   FineWeb (datatrove's MinhashDedup, 14 x 8) counts every band collision as a duplicate, so it also
   removes about half of the pairs near Jaccard 0.7 and some near 0.5-0.6: ``verify: none`` with the
   default 5-grams and 14 x 8 is that rule (bench/pipeline/bench_throughput.py measures how closely its
   removals agree with datatrove's on the same corpus);
4. connected components; the smallest id of each component is kept, the others are dropped with
   reason ``minhash_duplicate``.

Columns added to every row: ``dup_cluster`` (id kept for the component; the document's own id when it
has no duplicate) and ``dup_cluster_size`` (documents in the component, 1 when unique). Stats follow
from them: documents removed = rows with the drop reason; clusters = kept rows with
``dup_cluster_size > 1``; largest cluster = max(``dup_cluster_size``). Documents with no words (empty
after normalization) have no signature and are never near-duplicates; exact dedup handles those.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field, model_validator
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.dedup.index import NORMALIZER, IndexedStage
from dataprep.dedup.marks import MarkDuplicates
from dataprep.dedup.normalize import _windows, mix64, shingle_hashes
from dataprep.dedup.weights import parse_weights

REASON = "minhash_duplicate"
CLUSTER = "dup_cluster"
CLUSTER_SIZE = "dup_cluster_size"
# verify=exact trusts the signatures alone where the chance of deciding differently from the true
# Jaccard is below this, for a pair right at the threshold (far less for pairs further away).
SURE = 1e-4
# A document's MinHash signature and band keys: the rows ``prepare`` gives (Spark's prepare tasks save them)
SIGNATURE_SCHEMA = pa.schema([("id", pa.string()), ("sig", pa.list_(pa.int32())), ("keys", pa.list_(pa.int64()))])
# Signatures are computed over groups of documents with about this many shingles (cache-sized arrays).
SHINGLE_GROUP = 1 << 16


def collision_probability(s: np.ndarray | float, bands: int, rows: int):
    """Probability that two documents with Jaccard ``s`` share at least one band (the LSH S-curve)."""
    return 1.0 - (1.0 - np.power(s, rows)) ** bands


@lru_cache(maxsize=64)
def optimal_bands_rows(
    threshold: float, num_perm: int, fp_weight: float = 0.5, fn_weight: float = 0.5
) -> tuple[int, int]:
    """Bands x rows (bands * rows <= num_perm) minimizing the weighted area of false positives (below
    ``threshold``) and false negatives (above it) under the S-curve."""
    best, best_err = (1, num_perm), math.inf
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            lo = np.linspace(0.0, threshold, 201)
            hi = np.linspace(threshold, 1.0, 201)
            fp = np.trapezoid(collision_probability(lo, bands, rows), lo)
            fn = np.trapezoid(1.0 - collision_probability(hi, bands, rows), hi)
            err = fp_weight * fp + fn_weight * fn
            if err < best_err - 1e-12:
                best, best_err = (bands, rows), err
    return best


@lru_cache(maxsize=64)
def agreement_bounds(threshold: float, num_perm: int, sure: float = SURE) -> tuple[int, int]:
    """(low, high): a pair with Jaccard exactly ``threshold`` has fewer than ``low`` or at least ``high``
    of ``num_perm`` positions equal with probability < ``sure`` each (binomial tails)."""
    pmf = [math.comb(num_perm, m) * threshold**m * (1 - threshold) ** (num_perm - m) for m in range(num_perm + 1)]
    low = 0
    while low < num_perm and sum(pmf[: low + 1]) < sure:
        low += 1
    high = num_perm + 1
    while high > 0 and sum(pmf[high - 1 :]) < sure:
        high -= 1
    return low, high


def _lists(matrix: np.ndarray) -> pa.ListArray:
    """Arrow list array with one list per row of a 2-D array (no copy of the values)."""
    offsets = np.arange(len(matrix) + 1, dtype=np.int32) * matrix.shape[1]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.ascontiguousarray(matrix).ravel()))


@lru_cache(maxsize=8)
def _affine_maps(seed: int, num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, num_perm, dtype=np.uint64).astype(np.uint32) | np.uint32(1)
    return a, rng.integers(0, 2**32, num_perm, dtype=np.uint64).astype(np.uint32)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted arrays of distinct values."""
    if not len(a) and not len(b):
        return 1.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)


def bucket_edges(keys: pa.Array, ids: pa.Array) -> pa.Table:
    """(src, dst): for every band key that 2+ documents share, an edge from the smallest id among them
    to each other one (keys carry their band, so one key is one bucket). Entries are sorted by (key,
    id), so each run of equal keys starts with its smallest id."""
    entries = pa.table({"key": keys, "id": ids})
    entries = entries.take(pc.sort_indices(entries, [("key", "ascending"), ("id", "ascending")]))
    key = entries["key"].to_numpy()
    opens = np.ones(len(key), dtype=bool)
    opens[1:] = key[1:] != key[:-1]
    root = np.flatnonzero(opens)[np.cumsum(opens) - 1]  # for every entry, the first entry of its run
    member = np.flatnonzero(~opens)
    edges = pa.table({"src": entries["id"].take(root[member]), "dst": entries["id"].take(member)})
    return edges.filter(pc.not_equal(edges["src"], edges["dst"]))


def component_roots(src: pa.Array, dst: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(ids, roots): every id that appears in the pairs and the smallest id of its connected component
    (scipy's connected components over ids numbered in sorted order, so the root is the minimum)."""
    ends = pa.chunked_array([src, dst], pa.string()).combine_chunks() if len(src) else pa.array([], pa.string())
    nodes = pc.unique(ends)
    if not len(nodes):
        return nodes, nodes
    nodes = nodes.take(pc.array_sort_indices(nodes))
    number = pc.index_in(ends, nodes).to_numpy()
    pairs = len(number) // 2
    graph = coo_matrix((np.ones(pairs, np.int8), (number[:pairs], number[pairs:])), shape=(len(nodes), len(nodes)))
    _, label = connected_components(graph, directed=False)
    first = np.full(len(nodes), len(nodes))
    np.minimum.at(first, label, np.arange(len(nodes)))
    return nodes, nodes.take(pa.array(first[label]))


_CODE_TOKEN = re.compile(r"[A-Za-z0-9_]+")


def code_shingle_hashes(texts: list[str | None], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``shingle_hashes`` for source code, as BigCode's near-dedup tokenizes it: ``n`` consecutive runs of
    ASCII letters, digits and underscores, case kept (a file that differs only in layout, comments'
    punctuation or operators' spacing has the same shingles)."""
    tokens = [_CODE_TOKEN.findall(t or "") for t in texts]
    counts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(texts))
    flat = [token for doc in tokens for token in doc]
    hashes = np.fromiter((xxhash.xxh3_64_intdigest(token.encode()) for token in flat), dtype=np.uint64, count=len(flat))
    token_doc = np.repeat(np.arange(len(texts)), counts)
    return _windows(hashes, token_doc, np.full(len(texts), n), len(texts))


@register("minhash_dedup")
class MinHashDedup(IndexedStage):
    """Remove near-duplicate documents with MinHash LSH; keep the smallest id of each cluster."""

    ngram: int = Field(5, ge=1, description="words per shingle")
    char_ngram: int = Field(
        5, ge=1, description="characters per shingle for Japanese, Thai, ... (and Chinese without chinese_words)"
    )
    chinese_words: bool = Field(True, description="shingle Chinese by jieba words (ngram of them), not characters")
    shingle: Literal["text", "code"] = Field(
        "text",
        description="text: FineWeb-normalized words (lowercased, punctuation out); code: BigCode's tokens, "
        "runs of letters, digits and _ as written (identifiers kept whole, case kept; operators and layout out)",
    )
    num_perm: int = Field(112, ge=1, description="hash functions in a signature")
    bands: int = Field(14, ge=1)
    rows: int = Field(8, ge=1, description="hashes per band")
    optimize_bands: bool = Field(False, description="choose bands x rows for `threshold` instead")
    threshold: float = Field(0.8, gt=0.0, le=1.0, description="Jaccard similarity that counts as a duplicate")
    verify: Literal["exact", "signature", "none"] = Field(
        "exact",
        description="check candidate pairs: true Jaccard of the shingle sets (computed only where the signatures leave "
        "doubt), "
        "Jaccard estimated from the signatures, or not at all (none: FineWeb's rule, every band collision is "
        "a duplicate)",
    )
    seed: int = 1
    write_clusters: bool = Field(False, description="Spark: write id -> cluster for clusters of 2+ under the step dir")
    sample_weights: dict[str, float] | str = Field(
        {},
        description='cluster size -> sampling weight of the kept copy, e.g. {"2": 2, "3-10": 3, "11+": 1}, or a '
        "published "
        "table by name: fineweb2 (FineWeb-2's rehydration); empty: no sample_weight column",
    )

    @model_validator(mode="after")
    def _check_layout(self) -> "MinHashDedup":
        if not self.optimize_bands and self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands * rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")
        self.weight_ranges()
        return self

    def weight_ranges(self) -> list[tuple[int, int | None, float]]:
        return parse_weights(self.sample_weights)

    def layout(self) -> tuple[int, int]:
        """(bands, rows) in use."""
        return optimal_bands_rows(self.threshold, self.num_perm) if self.optimize_bands else (self.bands, self.rows)

    def index_config(self) -> dict:
        bands, rows = self.layout()
        shingling = {
            "ngram": self.ngram,
            "char_ngram": self.char_ngram,
            "chinese_words": self.chinese_words,
            "num_perm": self.num_perm,
            "seed": self.seed,
        }
        if self.shingle != "text":  # an index saved before the option keeps its config
            shingling["shingle"] = self.shingle
        return {"stage": self.name, **shingling, "bands": bands, "rows": rows, "normalizer": NORMALIZER}

    @property
    def min_matches(self) -> int:
        """Equal signature positions needed to pass verification (an integer, so every engine agrees)."""
        return math.ceil(self.threshold * self.num_perm - 1e-9)

    def signature_bounds(self) -> tuple[int, int]:
        """verify=exact: pairs with fewer equal positions than the first are rejected, pairs with at
        least the second accepted, from their signatures alone; the true Jaccard decides the rest."""
        return agreement_bounds(self.threshold, self.num_perm)

    @property
    def _permutations(self) -> tuple[np.ndarray, np.ndarray]:
        """(a, b) of the num_perm maps x -> a * x + b mod 2**32; a odd makes each one a bijection."""
        return _affine_maps(self.seed, self.num_perm)

    def signatures(self, texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """(uint32 array [documents, num_perm], bool array: the document has a signature)."""
        hashes, offsets = self.shingle_hashes(texts)
        valid = np.diff(offsets) > 0
        x = (hashes >> np.uint64(32)).astype(np.uint32)
        starts = offsets[:-1][valid]
        by_perm = np.empty((self.num_perm, len(starts)), dtype=np.uint32)
        group = starts // SHINGLE_GROUP
        cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(starts)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            if b == a:
                continue
            part = x[starts[a] : starts[b] if b < len(starts) else len(x)]
            values = np.empty_like(part)
            for k, (mult, add) in enumerate(zip(*self._permutations)):
                np.multiply(part, mult, out=values)
                values += add
                by_perm[k, a:b] = np.minimum.reduceat(values, starts[a:b] - starts[a])
        sigs = np.full((len(texts), self.num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
        sigs[valid] = by_perm.T
        return sigs, valid

    def shingle_hashes(self, texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
        """64-bit shingle hashes of each text (one array) and offsets [len(texts) + 1]."""
        if self.shingle == "code":
            return code_shingle_hashes(texts, self.ngram)
        return shingle_hashes(texts, self.ngram, self.char_ngram, self.chinese_words)

    def band_keys(self, sigs: np.ndarray) -> np.ndarray:
        """int64 array [documents, bands]: a 64-bit hash of each band's hash values (and its index)."""
        bands, rows = self.layout()
        values = sigs[:, : bands * rows].reshape(len(sigs), bands, rows).astype(np.uint64)
        multipliers = mix64(np.arange(1, rows + 1, dtype=np.uint64)) | np.uint64(1)
        keys = (values * multipliers).sum(axis=2, dtype=np.uint64) + np.arange(bands, dtype=np.uint64)
        return mix64(keys).view(np.int64)

    def shingle_sets(self, texts: list[str | None]) -> list[np.ndarray]:
        """Sorted distinct shingle hashes of each text, what ``exact`` verification compares: their top
        32 bits (int32), half the data to join, and two sets of 1,000 shingles share a false match
        with probability ~1e-4 (a Jaccard error of ~1e-3 when they do)."""
        hashes, offsets = self.shingle_hashes(texts)
        top = (hashes >> np.uint64(32)).astype(np.uint32).view(np.int32)
        return [np.unique(top[a:b]) for a, b in zip(offsets[:-1], offsets[1:])]

    def signature_batch(self, ids: list[str], texts: list[str | None]) -> pa.RecordBatch:
        """Documents with a signature as (id, sig list<int32>, keys list<int64>): what Spark shuffles."""
        sigs, valid = self.signatures(texts)
        sigs = sigs[valid]
        return pa.RecordBatch.from_arrays(
            [
                pa.array(np.asarray(ids, dtype=object)[valid], pa.string()),
                _lists(sigs.view(np.int32)),
                _lists(self.band_keys(sigs)),
            ],
            names=["id", "sig", "keys"],
        )

    def shingle_set_batch(self, ids: list[str], texts: list[str | None]) -> pa.RecordBatch:
        """(id, shingles list<int32>): the distinct shingle hashes of each text, for ``exact``."""
        sets = self.shingle_sets(texts)
        offsets = np.zeros(len(sets) + 1, dtype=np.int32)
        np.cumsum([len(s) for s in sets], out=offsets[1:])
        values = np.concatenate(sets) if sets else np.zeros(0, np.int32)
        return pa.RecordBatch.from_arrays(
            [pa.array(ids, pa.string()), pa.ListArray.from_arrays(offsets, values)], names=["id", "shingles"]
        )

    prepared_schema: ClassVar[pa.Schema] = SIGNATURE_SCHEMA

    def prepare(self, documents: pa.Table) -> pa.Table:
        """The signature rows of the documents that have shingles."""
        return pa.Table.from_batches(
            [self.signature_batch(documents.column("id").to_pylist(), documents.column("text").to_pylist())]
        )

    def decide(self, prepared: pa.Table, documents: pa.Table) -> tuple[pa.Table, dict]:
        """Cluster rows (``dataprep.dedup.marks``) of the documents with near-duplicates: band buckets,
        verification, connected components; each component keeps its smallest id."""
        self.check_local()
        if documents.column("id").null_count:
            raise UsageError("minhash_dedup: every document needs a non-null id")
        keys = prepared.column("keys").combine_chunks()
        owners = prepared.column("id").take(pc.list_parent_indices(keys))
        edges = bucket_edges(keys.flatten(), owners)
        if self.verify != "none":
            edges = self._verified(edges, prepared, documents)
        nodes, roots = component_roots(edges["src"], edges["dst"])
        sizes = Counter(roots.to_pylist())
        clusters = pa.table(
            {"id": nodes, CLUSTER: roots, CLUSTER_SIZE: pa.array([sizes[r] for r in roots.to_pylist()], pa.int64())}
        )
        return self.by_priority(clusters, documents, CLUSTER), {}

    def applier(self, state: dict) -> MarkDuplicates:
        return MarkDuplicates(
            self.name, REASON, CLUSTER, CLUSTER_SIZE, self.weight_ranges() if self.sample_weights else None
        )

    def _verified(self, edges: pa.Table, prepared: pa.Table, documents: pa.Table) -> pa.Table:
        """The edges that pass verification, decided by the same rule as on Spark."""
        row = {i: n for n, i in enumerate(prepared.column("id").to_pylist())}
        sigs = np.asarray(prepared.column("sig").combine_chunks().flatten().to_numpy()).reshape(-1, self.num_perm)
        a = np.array([row[i] for i in edges["src"].to_pylist()], dtype=np.int64)
        b = np.array([row[i] for i in edges["dst"].to_pylist()], dtype=np.int64)
        matches = np.count_nonzero(sigs[a] == sigs[b], axis=1)
        if self.verify == "signature":
            return edges.filter(pa.array(matches >= self.min_matches))
        low, high = self.signature_bounds()
        keep = matches >= high
        doubt = np.flatnonzero((matches >= low) & ~keep)
        ids = prepared.column("id").to_pylist()
        nodes = np.unique(np.concatenate([a[doubt], b[doubt]]))
        text_of = dict(zip(documents.column("id").to_pylist(), documents.column("text").to_pylist()))
        sets = dict(zip(nodes.tolist(), self.shingle_sets([text_of[ids[i]] for i in nodes])))
        for k in doubt:
            keep[k] = jaccard(sets[a[k]], sets[b[k]]) >= self.threshold
        return edges.filter(pa.array(keep))
