"""An interpolated modified Kneser-Ney n-gram language model over token ids, estimated and queried with
numpy (Chen & Goodman 1998; the smoothing KenLM's lmplz uses, as CCNet's models do).

N-grams are packed into one uint64 key (16 bits per token, first token in the high bits), so vocabularies
up to 65,535 ids are exact; up to 4 tokens fit one word. Longer n-grams (orders 5 and 6) are a complex128
whose real part packs the tokens before the last 3 and whose imaginary part the last 3 (at most 48 bits
each, exact in a float64): numpy sorts and ``searchsorted``s complex numbers natively by (real, imaginary),
i.e. in token order (lower orders keep the one-word keys and their speed).
Each order stores sorted keys with log10 probabilities and its contexts with log10 back-off weights
(the ARPA layout), so scoring a batch is a few ``searchsorted`` calls per order. Saved as one uncompressed ``.npz``
whose ``header`` carries the format version; loading is a single read, no parsing.
"""

from __future__ import annotations

import json
from itertools import chain

import numpy as np

from dataprep.core.errors import MissingPath, UsageError

FORMAT = "ccpretrain-kn-lm"
VERSION = 1
BITS = 16
MAX_VOCAB = (1 << BITS) - 1
PER_WORD = 64 // BITS  # tokens in one uint64 key
PER_HALF = 53 // BITS  # tokens in each part of a complex key (a float64 holds 53-bit integers exactly)
MAX_ORDER = 2 * PER_HALF
WIDE = np.dtype(np.complex128)


def _mask(k: int) -> np.uint64:
    return np.uint64((1 << (BITS * k)) - 1) if k < PER_WORD else np.uint64(0xFFFFFFFFFFFFFFFF)


def pack(columns: list[np.ndarray]) -> np.ndarray:
    """Keys of n-grams given as token columns, first token first: uint64 up to ``PER_WORD`` tokens, else
    ``WIDE`` (the last ``PER_HALF`` tokens in the imaginary part)."""
    if len(columns) > MAX_ORDER:
        raise ValueError(f"n-grams longer than {MAX_ORDER} tokens are not supported")
    if len(columns) <= PER_WORD:
        return _pack_word(iter(columns))
    key = np.empty(len(columns[0]), WIDE)
    key.real = _pack_word(iter(columns[:-PER_HALF]))
    key.imag = _pack_word(iter(columns[-PER_HALF:]))
    return key


def _pack_word(columns) -> np.ndarray:
    """One uint64 key from up to ``PER_WORD`` token columns (an iterator: one column alive at a time)."""
    key = next(columns).astype(np.uint64)  # a copy: shifted in place below
    for column in columns:
        key <<= np.uint64(BITS)
        key |= column.astype(np.uint64, copy=False)
    return key


def unpack(keys: np.ndarray, k: int) -> np.ndarray:
    """(n, k) token ids of k-gram keys, first token first."""
    if k <= PER_WORD:
        shifts = np.array([BITS * (k - 1 - j) for j in range(k)], np.uint64)
        return ((keys[:, None] >> shifts) & np.uint64(MAX_VOCAB)).astype(np.int64)
    head, tail = keys.real.astype(np.uint64), keys.imag.astype(np.uint64)
    return np.concatenate([unpack(head, k - PER_HALF), unpack(tail, PER_HALF)], axis=1)


def suffix(keys: np.ndarray, k: int) -> np.ndarray:
    """Keys of the last k-1 tokens of k-gram keys."""
    if k <= PER_WORD:
        return keys & _mask(k - 1)
    tokens = unpack(keys, k)
    return pack([tokens[:, j] for j in range(1, k)])


def prefix(keys: np.ndarray, k: int) -> np.ndarray:
    """Keys of the first k-1 tokens (the context) of k-gram keys."""
    if k <= PER_WORD:
        return keys >> np.uint64(BITS)
    tokens = unpack(keys, k)
    return pack([tokens[:, j] for j in range(k - 1)])


def window_keys(ids: np.ndarray, k: int, ends: np.ndarray) -> np.ndarray:
    """Keys of the k-grams ending at positions ``ends`` of ``ids`` (which must have k-1 tokens before)."""
    if k <= PER_WORD:
        return _pack_word(ids[ends - j] for j in range(k - 1, -1, -1))
    return pack([ids[ends - j] for j in range(k - 1, -1, -1)])


def _discounts(counts: np.ndarray) -> np.ndarray:
    """Modified KN discounts D[0..3] (D[0] = 0) from the counts-of-counts; defaults when data is tiny."""
    n = [int(np.count_nonzero(counts == i)) for i in range(1, 5)]
    if min(n) == 0:
        return np.array([0.0, 0.5, 1.0, 1.5])
    y = n[0] / (n[0] + 2 * n[1])
    d = [1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2]]
    return np.array([0.0, *np.clip(d, 0.05, [0.95, 1.95, 2.95])])


class NGramLM:
    """Per order k (1..order): ``keys[k]`` sorted n-gram keys, ``logp[k]`` their log10 probabilities,
    ``ctx[k]`` sorted context keys and ``bow[k]`` their log10 back-off weights; ``unk`` is the log10
    probability of a token never seen."""

    def __init__(self, order: int, vocab_size: int, bos: int, eos: int, keys, logp, ctx, bow, unk: float) -> None:
        self.order, self.vocab_size, self.bos, self.eos = order, vocab_size, bos, eos
        self.keys, self.logp, self.ctx, self.bow, self.unk = keys, logp, ctx, bow, unk

    # -- estimation -----------------------------------------------------------------------------

    @classmethod
    def train(cls, sentences, order: int, vocab_size: int, bos: int, eos: int) -> "NGramLM":
        """Estimate from an iterable of token-id sequences (one per sentence/line)."""
        if not 2 <= order <= MAX_ORDER:
            raise UsageError(f"order must be 2..{MAX_ORDER}, got {order}")
        if vocab_size > MAX_VOCAB:
            raise UsageError(f"vocabulary of {vocab_size} ids exceeds {MAX_VOCAB}")
        stream, ends, _ = _padded_stream(sentences, order, bos, eos)
        if not len(ends):
            raise UsageError("no tokens to train on")
        top_keys, top_counts = np.unique(window_keys(stream, order, ends), return_counts=True)
        # Counts per order: raw for the highest, continuation counts (distinct left extensions) below.
        grams = {order: (top_keys, top_counts)}
        for k in range(order - 1, 0, -1):
            grams[k] = np.unique(suffix(grams[k + 1][0], k + 1), return_counts=True)
        keys, logp, ctx, bow = {}, {}, {}, {}
        prob_lower = None
        for k in range(1, order + 1):
            gk, counts = grams[k]
            disc = _discounts(counts)
            if k == 1:
                inverse = np.zeros(len(gk), np.int64)
                contexts = np.zeros(1, np.uint64)
            else:
                contexts, inverse = np.unique(prefix(gk, k), return_inverse=True)
            total = np.bincount(inverse, weights=counts)
            mass = sum(disc[min(i, 3)] * np.bincount(inverse, weights=(np.minimum(counts, 3) == i)) for i in (1, 2, 3))
            gamma = mass / total
            if k == 1:
                lower = np.full(len(gk), 1.0 / vocab_size)
                unk = float(np.log10(gamma[0] / vocab_size))
            else:
                lower = prob_lower[np.searchsorted(keys[k - 1], suffix(gk, k))]
            prob = (counts - disc[np.minimum(counts, 3)]) / total[inverse] + gamma[inverse] * lower
            keys[k], logp[k] = gk, np.log10(prob).astype(np.float32)
            ctx[k], bow[k] = contexts, np.log10(np.maximum(gamma, 1e-30)).astype(np.float32)
            prob_lower = prob
        return cls(order, vocab_size, bos, eos, keys, logp, ctx, bow, unk)

    # -- scoring --------------------------------------------------------------------------------

    def token_logprobs(self, sentences, kenlm_start: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """log10 p of every predicted token (each sentence's tokens and its end) and, per sentence, how
        many there are. ``kenlm_start``: histories reach back to one ``<s>``, as KenLM's are (ours hold
        order-1 of them), so an n-gram with more than one is taken as absent."""
        stream, ends, lengths = _padded_stream(sentences, self.order, self.bos, self.eos)
        out = np.zeros(len(ends), np.float64)
        pending = np.arange(len(ends))
        if kenlm_start:  # position of each predicted token in its sentence: k-grams up to position + 2 tokens
            position = np.arange(len(ends)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        for k in range(self.order, 0, -1):
            if not len(pending):
                break
            gram = window_keys(stream, k, ends[pending])
            found, idx = _lookup(self.keys[k], gram)
            if kenlm_start:
                found &= position[pending] >= k - 2
            out[pending[found]] += self.logp[k][idx[found]]
            pending = pending[~found]
            if k > 1 and len(pending):
                ctx = window_keys(stream, k - 1, ends[pending] - 1)
                has, cidx = _lookup(self.ctx[k], ctx)
                if kenlm_start:
                    has &= position[pending] >= k - 2
                out[pending[has]] += self.bow[k][cidx[has]]
        out[pending] += self.unk
        return out, lengths

    # -- persistence ----------------------------------------------------------------------------

    def save(self, path: str) -> None:
        from dataprep.core.storage import atomic_output

        header = {
            "format": FORMAT,
            "version": VERSION,
            "order": self.order,
            "vocab_size": self.vocab_size,
            "bos": self.bos,
            "eos": self.eos,
            "unk": self.unk,
        }
        arrays = {"header": np.frombuffer(json.dumps(header).encode(), np.uint8)}
        for k in range(1, self.order + 1):
            arrays.update(
                {f"keys{k}": self.keys[k], f"logp{k}": self.logp[k], f"ctx{k}": self.ctx[k], f"bow{k}": self.bow[k]}
            )
        with atomic_output(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **arrays)

    @classmethod
    def load(cls, path: str) -> "NGramLM":
        try:
            data = np.load(path, allow_pickle=False)
            header = json.loads(data["header"].tobytes())
        except FileNotFoundError:
            raise MissingPath(f"language model {path!r} does not exist") from None
        except Exception as exc:  # noqa: BLE001 - truncated zip, not an npz, bad JSON...
            raise UsageError(f"{path!r} is not a readable n-gram model ({type(exc).__name__}: {exc})") from None
        if header.get("format") != FORMAT:
            raise UsageError(f"{path!r} is not a {FORMAT} file")
        if header.get("version") != VERSION:
            raise UsageError(f"{path!r} has format version {header.get('version')}; this code reads version {VERSION}")
        order = header["order"]
        try:
            arrays = {
                name: {k: data[f"{name}{k}"] for k in range(1, order + 1)} for name in ("keys", "logp", "ctx", "bow")
            }
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"{path!r} is damaged: {exc}") from None
        return cls(order, header["vocab_size"], header["bos"], header["eos"], unk=header["unk"], **arrays)


def _padded_stream(sentences, order: int, bos: int, eos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All sentences as one id array, each preceded by order-1 BOS and followed by EOS; the positions
    of the tokens to predict (every real token and each EOS); and how many each sentence has."""
    sentences = list(sentences)
    if not sentences:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    per_sentence = np.fromiter(map(len, sentences), np.int64, len(sentences)) + 1  # tokens + EOS
    flat = np.fromiter(chain.from_iterable(sentences), np.uint64, int(per_sentence.sum()) - len(sentences))
    # Layout per sentence: order-1 BOS, its tokens, EOS. Everything after the padding is predicted.
    padded = per_sentence + order - 1
    starts = np.concatenate([[0], np.cumsum(padded)[:-1]])
    stream = np.full(int(padded.sum()), bos, np.uint64)
    predicted = np.ones(len(stream), bool)
    predicted[(starts[:, None] + np.arange(order - 1)).ravel()] = False
    ends = np.flatnonzero(predicted)
    eos_at = starts + padded - 1
    stream[eos_at] = eos
    predicted[eos_at] = False
    stream[predicted] = flat
    return stream, ends, per_sentence


def _lookup(sorted_keys: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.searchsorted(sorted_keys, queries)
    idx = np.minimum(idx, max(len(sorted_keys) - 1, 0))
    found = sorted_keys[idx] == queries if len(sorted_keys) else np.zeros(len(queries), bool)
    return found, idx
