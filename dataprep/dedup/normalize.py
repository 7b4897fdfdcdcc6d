"""Text normalization and shingling shared by exact and MinHash dedup.

``fineweb`` normalization follows FineWeb/datatrove (``simplify_text``): lowercase, digits -> ``0``,
punctuation and symbols -> space, accents removed, whitespace collapsed, so copies that differ only in
formatting, dates or prices hash alike. (datatrove turns a whole number into one ``0``; we map each
digit, and we also delete invisible format characters such as soft hyphens and zero-width spaces.)
The mapping is one lookup table over all code points (``_fineweb_table``), applied to whole batches
with numpy, so a batch costs a few array passes instead of a Python call per character.

Shingles are word n-grams, except for scripts written without spaces (Chinese, Japanese, Thai, Lao,
Khmer, Burmese), where a "word" would be a whole sentence: those get character n-grams. With
``chinese_words``, Chinese texts (mostly Han, almost no kana) are cut into words by jieba after
normalization and get word n-grams like spaced languages (``segment_chinese``).
``shingles`` builds them as byte strings (readable; the reference in tests and bench/dedup/dedup_eval.py);
``shingle_hashes`` computes 64-bit hashes of the same shingles for a whole batch without building them.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache
from typing import Literal

import numpy as np

Normalization = Literal["none", "whitespace", "lower", "fineweb"]

SPACE = ord(" ")
DELETE = np.uint32(0xFFFFFFFF)
# Code points written without spaces between words: CJK ideographs, kana, Thai, Lao, Myanmar, Khmer.
_UNSPACED_RANGES = [
    (0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF), (0x31F0, 0x31FF),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x2FFFF),
]  # fmt: skip
# Above this share of non-space characters in unspaced scripts, a text is shingled by characters.
UNSPACED_SHARE = 0.3
# Planes 4-13 are unassigned and 15-16 private use: the table keeps those code points as they are.
_ASSIGNED = (range(0, 0x40000), range(0xE0000, 0xE1000))


@lru_cache(maxsize=1)
def _fineweb_table() -> np.ndarray:
    """uint32 code point -> code point, built once per process (~0.5 s): lowercase first, then
    combining marks and format characters -> DELETE, digits of any script -> "0", punctuation, symbols,
    control characters and whitespace -> space, precomposed letters -> their base letter (NFD without
    the marks). Final sigma folds into sigma (str.lower picks one by context; a table cannot)."""
    table = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    category = unicodedata.category

    def fold(ch: str) -> int:
        cat = category(ch)
        if cat in ("Mn", "Cf"):
            return int(DELETE)
        if cat == "Nd":
            return ord("0")
        if cat[0] in "PS" or cat == "Cc" or ch.isspace():
            return SPACE
        if unicodedata.decomposition(ch)[:1] not in ("", "<"):  # a canonical decomposition
            base = [c for c in unicodedata.normalize("NFD", ch) if category(c) != "Mn"]
            if len(base) == 1:  # else (Hangul syllables, some vowel signs) the character stays whole
                return ord(base[0])
        return ord(ch)

    for block in _ASSIGNED:
        for cp in block:
            lowered = [c for c in map(fold, chr(cp).lower()) if c != DELETE]  # "İ" lowers to "i" + a mark
            table[cp] = lowered[0] if len(lowered) == 1 else (DELETE if not lowered else cp)
    table[ord("ς")] = ord("σ")
    return table


@lru_cache(maxsize=1)
def _unspaced_table() -> np.ndarray:
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for lo, hi in _UNSPACED_RANGES:
        table[lo : hi + 1] = True
    return table


def normalized_codepoints(texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """The fineweb-normalized texts of a batch as one uint32 code point array (whitespace not yet
    collapsed: runs of spaces remain) and int64 offsets [len(texts) + 1] delimiting each text."""
    texts = [t or "" for t in texts]
    cps = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    bounds = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=bounds[1:])
    mapped = _fineweb_table()[cps]
    deleted = np.flatnonzero(mapped == DELETE)
    if not len(deleted):
        return mapped, bounds
    return np.delete(mapped, deleted), bounds - np.searchsorted(deleted, bounds)


def normalize(text: str | None, mode: Normalization = "fineweb") -> str:
    """Return ``text`` normalized by ``mode``: none, whitespace (collapse), lower (+ lowercase), fineweb."""
    text = text or ""
    if mode == "none":
        return text
    if mode == "fineweb":
        return normalize_many([text])[0]
    if mode == "lower":
        text = text.lower()
    return " ".join(text.split())


def normalize_many(texts: list[str | None], mode: Normalization = "fineweb") -> list[str]:
    """``normalize`` of every text; fineweb maps the whole list with one table lookup, which matters
    for many short texts (the lines and paragraphs of a batch)."""
    if mode != "fineweb":
        return [normalize(t, mode) for t in texts]
    cps, bounds = normalized_codepoints(texts)
    joined = cps.tobytes().decode("utf-32-le", "surrogatepass")
    bounds = bounds.tolist()
    return [" ".join(joined[a:b].split()) for a, b in zip(bounds[:-1], bounds[1:])]


def is_unspaced(text: str) -> bool:
    """True when most of ``text`` is in a script written without spaces (then shingle by characters)."""
    if text.isascii():
        return False
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    letters = np.count_nonzero(cps != SPACE)
    return letters > 0 and np.count_nonzero(_unspaced_table()[cps]) >= UNSPACED_SHARE * letters


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")


def is_chinese(text: str) -> bool:
    """Mostly Han characters and (almost) no kana: Chinese rather than Japanese."""
    if text.isascii():
        return False
    han = len(_HAN.findall(text))
    return han >= UNSPACED_SHARE * len(text.replace(" ", "")) and len(_KANA.findall(text)) < 0.05 * han


def segment_chinese(normalized: str) -> str:
    """A normalized Chinese text with jieba's words separated by spaces (then shingled as words)."""
    from dataprep.quality.languages import split_words_jieba

    return " ".join(split_words_jieba(normalized))


def shingles(normalized: str, word_n: int = 5, char_n: int = 5, chinese_words: bool = False) -> list[bytes]:
    """The n-gram shingles of an already normalized text, UTF-8 encoded.

    Word n-grams, or character n-grams (spaces removed) for unspaced scripts; with ``chinese_words``,
    jieba word n-grams for Chinese. A text shorter than one n-gram is a single shingle (so identical
    short texts still match); an empty text has none.
    """
    if not normalized:
        return []
    if chinese_words and is_chinese(normalized):
        normalized = segment_chinese(normalized)
    elif is_unspaced(normalized):
        chars = normalized.replace(" ", "")
        if len(chars) <= char_n:
            return [chars.encode("utf-8", "surrogatepass")]
        return [chars[i : i + char_n].encode("utf-8", "surrogatepass") for i in range(len(chars) - char_n + 1)]
    words = normalized.encode("utf-8", "surrogatepass").split(b" ")
    if len(words) <= word_n:
        return [b" ".join(words)]
    return list(map(b" ".join, zip(*(words[i:] for i in range(word_n)))))


# -- hashed shingles for a whole batch -------------------------------------------------------------

_U64 = np.uint64
# Texts are hashed in groups of about this many code points, so the arrays stay in the CPU cache.
GROUP_CHARS = 1 << 17
_BASE = 0x9E3779B97F4A7C15  # odd, so invertible mod 2**64
_POSITION = np.array([0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5, 0x85EBCA77C2B2AE63,
                      0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB, 0xBF58476D1CE4E5B9],
                     dtype=_U64)  # fmt: skip


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer, in place: every input bit affects every output bit."""
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
    return x


@lru_cache(maxsize=4)
def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(B**i, B**-i) mod 2**64 for i <= n, B = _BASE (n: a power of two, so few sizes get cached)."""
    inverse = _BASE
    for _ in range(6):  # Newton's iteration doubles the correct low bits: 3 -> 6 -> ... -> 192
        inverse = inverse * (2 - _BASE * inverse) % 2**64
    return np.cumprod(np.full(n + 1, _BASE, _U64)), np.cumprod(np.full(n + 1, inverse, _U64))


@lru_cache(maxsize=8)
def _position_multipliers(n: int) -> np.ndarray:
    """One odd 64-bit multiplier per position in a shingle (so "a b" and "b a" differ)."""
    extra = np.random.default_rng(n).integers(0, 2**62, max(0, n - len(_POSITION)), dtype=_U64) * _U64(2) + _U64(1)
    return np.concatenate([_POSITION, extra])[:n]


def shingle_hashes(
    texts: list[str | None], word_n: int = 5, char_n: int = 5, chinese_words: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the shingles of each text (the same shingles as ``shingles(normalize(t),
    chinese_words=...)``, repeats included) as one uint64 array, and int64 offsets [len(texts) + 1]."""
    words = np.zeros(len(texts), dtype=bool)  # Chinese texts already cut into words: shingle as spaced
    if chinese_words:
        texts = list(texts)
        for i, text in enumerate(texts):
            if text and not text.isascii():
                normalized = normalize(text)
                if is_chinese(normalized):
                    texts[i], words[i] = segment_chinese(normalized), True
    lengths = np.fromiter((len(t) if t else 0 for t in texts), dtype=np.int64, count=len(texts))
    group = np.cumsum(lengths) // GROUP_CHARS
    cuts = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(texts)]
    offsets, parts, done = np.zeros(len(texts) + 1, np.int64), [np.zeros(0, _U64)], 0
    for a, b in zip(cuts[:-1], cuts[1:]):
        hashes, part_offsets = _group_hashes(texts[a:b], word_n, char_n, words[a:b])
        offsets[a + 1 : b + 1] = part_offsets[1:] + done
        parts.append(hashes)
        done += len(hashes)
    return np.concatenate(parts), offsets


def _group_hashes(
    texts: list[str | None], word_n: int, char_n: int, words: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``shingle_hashes`` of a few texts at once. Tokens (words, or characters of unspaced texts) hash
    as a polynomial of their code points, read off prefix sums over the whole group; a shingle sums
    its token hashes times per-position multipliers; both are finished by splitmix64."""
    cps, bounds = normalized_codepoints(texts)
    solid = cps != SPACE
    solid_at = np.flatnonzero(solid)
    letters = np.diff(np.searchsorted(solid_at, bounds))
    unspaced = np.zeros(len(texts), dtype=bool)
    if len(cps) and cps.max() >= _UNSPACED_RANGES[0][0]:
        unspaced_at = np.flatnonzero(_unspaced_table()[cps])
        unspaced = (letters > 0) & (np.diff(np.searchsorted(unspaced_at, bounds)) >= UNSPACED_SHARE * letters) & ~words
    # a token is a run of non-space code points within one text; in unspaced texts, each one alone
    edge = np.ones(len(cps) + 1, dtype=bool)  # a token may start or end here
    edge[1:-1] = solid[1:] != solid[:-1]
    edge[bounds] = True
    if unspaced.any():
        edge[:-1] |= np.repeat(unspaced, np.diff(bounds))
        edge[1:] |= np.repeat(unspaced, np.diff(bounds))
    cut = np.flatnonzero(edge)
    token = solid[cut[:-1]]  # cuts split the text into runs that are all spaces or all not
    starts, ends = cut[:-1][token], cut[1:][token]
    up, down = _powers(1 << int(len(cps)).bit_length())
    prefix = np.zeros(len(cps) + 1, _U64)
    np.cumsum((cps.astype(_U64) + _U64(1)) * up[: len(cps)], out=prefix[1:])
    tokens = mix64((prefix[ends] - prefix[starts]) * down[starts])
    token_doc = np.searchsorted(bounds, starts, side="right") - 1
    return _windows(tokens, token_doc, np.where(unspaced, char_n, word_n), len(texts))


def _windows(
    tokens: np.ndarray, token_doc: np.ndarray, n_of_doc: np.ndarray, docs: int
) -> tuple[np.ndarray, np.ndarray]:
    """Hash every window of n consecutive tokens of one text (n per text); a text with fewer than n
    tokens gives one window of all its tokens."""
    count = len(tokens)
    n = n_of_doc[token_doc]
    widest = int(n.max(initial=1))
    padded_doc = np.concatenate([token_doc, np.full(widest, -1)])
    padded = np.concatenate([tokens, np.zeros(widest, _U64)])
    acc = np.zeros(count, _U64)
    for k, mult in enumerate(_position_multipliers(widest)):
        same = padded_doc[k : k + count] == token_doc
        if k:
            same &= k < n
        acc += padded[k : k + count] * mult * same
    full = padded_doc[np.arange(count) + n - 1] == token_doc
    full[1:] |= token_doc[1:] != token_doc[:-1]  # the first token of a text always opens a window
    if count:
        full[0] = True
    doc = token_doc[full]
    return mix64(acc[full]), np.searchsorted(doc, np.arange(docs + 1)).astype(np.int64)
