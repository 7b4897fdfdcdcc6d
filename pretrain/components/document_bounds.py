"""Where documents begin inside a training sample, for attention within documents (``data.document_mask``).

A source's token stream is its kept documents end to end (``token_sources.TokenStream``); the shards' ``.idx``
holds every document's offsets, so a sample's boundaries are read from there, never guessed from an end-of-
text token. A sample gets each token's document number: 0 for the document it starts in (perhaps mid-way),
then 1, 2, ... at each boundary.
"""

from __future__ import annotations

import numpy as np


def document_ids(stream, start: int, length: int) -> np.ndarray:
    """Document number of each token in ``[start, start + length)`` of ``stream`` (a ``TokenStream``), int64.
    The stream's segments are runs of whole documents, so a new segment starts a new document too."""
    begins = np.zeros(length, dtype=np.int64)
    filled = 0
    for shard, first, take in stream._pieces(start, length):
        if filled:
            begins[filled] = 1  # a segment boundary is a document boundary
        offsets = np.asarray(stream.shards[shard].doc_offsets)
        lo, hi = np.searchsorted(offsets, [first + 1, first + take])  # document starts strictly inside the piece
        begins[offsets[lo:hi] - first + filled] = 1
        filled += take
    return np.cumsum(begins)


def mean_document_tokens(shards) -> float | None:
    """The token-weighted mean document length of shards' documents (the span a masked query attends over,
    on average: a token lies in a long document more often than in a short one); None when empty."""
    lengths = []
    for shard in shards:
        lengths.append(np.diff(np.asarray(shard.doc_offsets, dtype=np.int64)))
    n = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    total = n.sum()
    return float((n.astype(np.float64) ** 2).sum() / total) if total else None


def masked_attention_span(sources, seq_len: int) -> float:
    """The keys per query the block mask leaves over these sources' documents (for MFU on CUDA, where the
    masked blocks are skipped)."""
    from pretrain.models.documents import attention_span

    return attention_span(seq_len, mean_document_tokens([shard for s in sources for shard in s.train.shards]))
