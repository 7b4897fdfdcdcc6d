"""Language-aware text helpers for the quality rules: words per language, sentence ends, symbols and
stop words.

FineWeb's filters (datatrove) count words with spaCy's rule-based tokenizer; ``split_words(text, "en")``
reproduces it for space-delimited scripts (``spacy_words``). Chinese and Japanese have no spaces: each
Han/kana character counts as a word there, so word-count rules see real text; Thai uses pythainlp when
installed, otherwise character clusters.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

from dataprep.quality.spacy_words import split_words_spaced

# ---------------------------------------------------------------------------------------------
# Languages without spaces

_CJK_CHAR = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー]")
_THAI_RUN = regex.compile(r"\p{Thai}+")


def split_words_cjk(text: str) -> list[str]:
    """One word per Han/kana character; other runs (Latin words, numbers) split as spaced text."""
    out: list[str] = []
    pos = 0
    for m in _CJK_CHAR.finditer(text):
        if m.start() > pos:
            out.extend(split_words_spaced(text[pos : m.start()]))
        out.append(m.group())
        pos = m.end()
    if pos < len(text):
        out.extend(split_words_spaced(text[pos:]))
    return out


@lru_cache(maxsize=1)
def _thai_tokenizer():
    try:
        from pythainlp.tokenize import word_tokenize
    except ImportError:
        return None
    return word_tokenize


def split_words_thai(text: str) -> list[str]:
    """pythainlp's dictionary segmenter if installed; otherwise Thai runs cut into grapheme clusters of
    about one word's length (4 characters), which keeps word-count rules usable."""
    tokenize = _thai_tokenizer()
    if tokenize is not None:
        return [t.strip() for t in tokenize(text, keep_whitespace=False) if t.strip()]
    out: list[str] = []
    pos = 0
    for m in _THAI_RUN.finditer(text):
        out.extend(split_words_spaced(text[pos : m.start()]))
        run = m.group()
        out.extend(run[i : i + 4] for i in range(0, len(run), 4))
        pos = m.end()
    out.extend(split_words_spaced(text[pos:]))
    return out


CHAR_SPLIT_LANGUAGES = {"zh", "ja", "yue", "wuu"}


@lru_cache(maxsize=1024)
def split_words(text: str, language: str = "en") -> tuple[str, ...]:
    """Words of ``text`` for the word-based rules of Gopher and FineWeb. Cached: consecutive stages
    (repetition, quality, FineWeb) split the same text once."""
    if language in CHAR_SPLIT_LANGUAGES:
        return tuple(split_words_cjk(text))
    if language == "th":
        return tuple(split_words_thai(text))
    return tuple(split_words_spaced(text))


# ---------------------------------------------------------------------------------------------
# Punctuation classes used by the rules

# Characters that end a sentence (Unicode Sentence_Terminal plus three Khmer signs, as FineWeb uses).
_TERMINAL = regex.compile(r"[\p{Sentence_Terminal}៖៙៚]")


@lru_cache(maxsize=4096)
def is_terminal_punct(char: str) -> bool:
    return bool(char) and _TERMINAL.match(char) is not None


# Characters that make a word a "symbol" (not counted as a word by Gopher): ASCII punctuation, common
# CJK/full-width marks and control characters, plus sentence terminals.
_SYMBOLS = frozenset(
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)]))
)


@lru_cache(maxsize=8192)
def is_symbol_word(word: str) -> bool:
    return all(c in _SYMBOLS or is_terminal_punct(c) for c in word)


# ---------------------------------------------------------------------------------------------
# Sentences (C4 counts them per kept line, as spaCy's rule-based sentencizer does)

SENTENCE_END_CHARS = frozenset(
    "!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？｡。"
    "𐩖𐩗𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑩂𑩃𑪛𑪜𑱁𑱂𖩮𖩯𖫵𖬷𖬸𖭄𛲟𝪈"
)


def _is_punct(token: str) -> bool:
    return all(unicodedata.category(c).startswith("P") for c in token)


def count_sentences(text: str, language: str = "en") -> int:
    """Sentences in ``text``: a new one starts at the first non-punctuation token after a token that is
    a sentence-ending mark (so "Mr." or "3.5" do not end one, and "?!" is one end)."""
    # uncached split: lines would evict whole documents from split_words' cache
    words = split_words_cjk(text) if language in CHAR_SPLIT_LANGUAGES else split_words_spaced(text)
    if not words:
        return 1  # an empty span still counts once in datatrove's sentence split
    count, seen_end = 1, False
    for token in words:
        is_end = token in SENTENCE_END_CHARS
        if seen_end and not is_end and not _is_punct(token):
            count += 1
            seen_end = False
        elif is_end:
            seen_end = True
    return count


# ---------------------------------------------------------------------------------------------
# Stop words for Gopher's "has at least N stop words" rule (the paper's English list, and short
# lists of the most frequent function words for other languages)

STOP_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the be to of and that have with",
        "de": "der die das und ist nicht zu mit den von sie es ein",
        "fr": "le la les de et des est un une que en du pas",
        "es": "el la de que y en los se del las un por con",
        "it": "il di che la e è per un non in del le",
        "pt": "de que o a e do da em um para é com não",
        "nl": "de het een en van is dat op te in niet",
        "ru": "и в не на что с он как по это",
        "pl": "i w nie na się z to że do jest",
        "zh": "的 是 在 了 和 有 不 我 这 人 中 一",
        "ja": "の に は を た が で て と し れ さ",
        "th": "ที่ และ การ ใน ของ เป็น มี ได้ ไม่ ให้",
    }.items()
}


def stop_words(language: str) -> frozenset[str]:
    return STOP_WORDS.get(language, STOP_WORDS["en"])
