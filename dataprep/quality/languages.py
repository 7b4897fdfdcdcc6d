"""Language-aware text helpers for the quality rules: per-language settings (word splitter, stop
words, rule thresholds), sentence ends and symbols.

``LANGUAGES`` holds every language's settings in one place (FineWeb-2 style). FineWeb's filters
(datatrove) count words with spaCy's rule-based tokenizer; the ``spaced`` splitter reproduces it
(``spacy_words``), and English uses exactly that. Chinese is counted in words by jieba's dictionary
segmenter; Japanese by SudachiPy's (the ``ja`` extra; without it each Han/kana character counts as a
word, and a warning says so); Thai uses pythainlp when installed, otherwise character clusters. A language without
settings uses English's splitter and stop words and the stages' own thresholds.

To add a language: ``add_language(LanguageSettings("xx", splitter="spaced", stop_words=...,
thresholds={...}))`` before the pipeline runs (or an entry in ``LANGUAGES``). ``thresholds`` maps a
quality stage's parameter name to the value used for that language when the config does not set the
parameter itself (``QualityFilter.param``); ``None`` switches the rule off for the language.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Literal

import regex

from dataprep.quality.spacy_words import split_words_spaced

# ---------------------------------------------------------------------------------------------
# Languages without spaces

_CJK_CHAR = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}ー]")
_THAI_RUN = regex.compile(r"\p{Thai}+")
_WORDLIKE = regex.compile(r"[\p{L}\p{N}]")


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


@lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" banner on every worker
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer


def _segmenter_words(tokens: Iterable[str]) -> list[str]:
    """The words among a dictionary segmenter's tokens: tokens with Han/kana stay whole, runs of other
    scripts split as spaced text (so English words and numbers inside Chinese or Japanese count alike).
    Punctuation and symbols are not words here: a quarter of the tokens in Chinese or Japanese news are
    marks (，。、“”), which would make the alpha-word rule reject prose, and citation markers ([1])
    or infobox pipes would tip encyclopedia articles under its 0.8."""
    out: list[str] = []
    for token in tokens:
        if _CJK_CHAR.search(token):
            out.append(token)
        elif _WORDLIKE.search(token):
            out.extend(w for w in split_words_spaced(token) if _WORDLIKE.search(w))
    return out


def split_words_jieba(text: str) -> list[str]:
    """Chinese words from jieba's dictionary segmenter (with its HMM for unknown words)."""
    return _segmenter_words(_jieba().cut(text))


_SUDACHI_MAX_CHARS = 12_000  # SudachiPy refuses inputs over 49,149 bytes; 12,000 characters fit in UTF-8


@lru_cache(maxsize=1)
def _sudachi():
    """SudachiPy's tokenizer with its core dictionary (mode B, middle units: 選挙 / 管理 / 委員会,
    neither 選挙管理委員会 as one word nor 委員 / 会), or None when the ``ja`` extra is not installed."""
    try:
        from sudachipy import Dictionary, SplitMode
    except ImportError:
        logging.getLogger(__name__).warning(
            "sudachipy is not installed (pip install 'ccpretrain[ja]'): Japanese words are counted per character"
        )
        return None
    return Dictionary(dict="core").tokenizer(mode=SplitMode.B)


def _chunks(text: str, size: int) -> Iterator[str]:
    """``text`` in pieces of at most ``size`` characters, cut after a newline where one is in reach."""
    while len(text) > size:
        cut = text.rfind("\n", 0, size) + 1 or size
        yield text[:cut]
        text = text[cut:]
    yield text


def split_words_japanese(text: str) -> list[str]:
    """Japanese words from SudachiPy's dictionary segmenter (SudachiPy and sudachidict_core,
    both Apache-2.0); one word per Han/kana character when it is not installed."""
    tokenizer = _sudachi()
    if tokenizer is None:
        return split_words_cjk(text)
    return _segmenter_words(
        m.surface() for chunk in _chunks(text, _SUDACHI_MAX_CHARS) for m in tokenizer.tokenize(chunk)
    )


Splitter = Literal["spaced", "jieba", "japanese", "cjk_chars", "thai"]
SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "spaced": split_words_spaced,
    "jieba": split_words_jieba,
    "japanese": split_words_japanese,
    "cjk_chars": split_words_cjk,
    "thai": split_words_thai,
}


@dataclass(frozen=True)
class LanguageSettings:
    """How the quality rules read one language."""

    code: str  # as the langid model labels it (lid.176: ISO 639-1 where one exists)
    splitter: Splitter = "spaced"
    stop_words: frozenset[str] = frozenset()  # Gopher's "at least N stop words" rule
    thresholds: dict[str, float | None] = field(default_factory=dict)  # stage parameter -> value here


# Word lengths: jieba's Chinese words and Sudachi's Japanese words average under 2 characters (single
# characters without Sudachi), so the mean-word-length rule does not apply; Korean words (eojeol) are 2-4 syllables.
_NO_WORD_LENGTH = {"min_avg_word_length": None, "max_avg_word_length": None}
LANGUAGES: dict[str, LanguageSettings] = {
    s.code: s
    for s in [
        LanguageSettings("en", stop_words=frozenset("the be to of and that have with".split())),
        LanguageSettings("de", stop_words=frozenset("der die das und ist nicht zu mit den von sie es ein".split()),
                         thresholds={"max_avg_word_length": 12}),
        LanguageSettings("fr", stop_words=frozenset("le la les de et des est un une que en du pas".split())),
        LanguageSettings("es", stop_words=frozenset("el la de que y en los se del las un por con".split())),
        LanguageSettings("it", stop_words=frozenset("il di che la e è per un non in del le".split())),
        LanguageSettings("pt", stop_words=frozenset("de que o a e do da em um para é com não".split())),
        LanguageSettings("nl", stop_words=frozenset("de het een en van is dat op te in niet".split())),
        LanguageSettings("ru", stop_words=frozenset("и в не на что с он как по это к из о а".split())),
        LanguageSettings("pl", stop_words=frozenset("i w nie na się z to że do jest".split())),
        LanguageSettings("zh", "jieba",
                         frozenset("的 是 在 了 和 有 不 我 这 人 中 一 也 就 都 与 为 他 她 们".split()),
                         _NO_WORD_LENGTH),
        LanguageSettings("yue", "jieba", frozenset("嘅 係 喺 咗 同 有 唔 我 呢 人 一 都".split()), _NO_WORD_LENGTH),
        LanguageSettings("wuu", "cjk_chars", frozenset("个 是 勒 了 搭 有 勿 我 迭 人 一".split()), _NO_WORD_LENGTH),
        LanguageSettings("ja", "japanese", frozenset("の に は を た が で て と し れ さ".split()), _NO_WORD_LENGTH),
        LanguageSettings("ko", stop_words=frozenset("이 그 저 것 수 등 및 더 또 그리고 있다 하는 있는 한다".split()),
                         thresholds={"min_avg_word_length": 1.5}),
        LanguageSettings("th", "thai", frozenset("ที่ และ การ ใน ของ เป็น มี ได้ ไม่ ให้".split()),
                         {"min_avg_word_length": 1.5}),
    ]
}  # fmt: skip


def add_language(settings: LanguageSettings) -> None:
    """Register (or replace) a language's settings."""
    LANGUAGES[settings.code] = settings
    split_words.cache_clear()


def language_settings(language: str) -> LanguageSettings:
    """The language's settings; unknown languages read as English without its thresholds."""
    return LANGUAGES.get(language) or LanguageSettings(language, stop_words=LANGUAGES["en"].stop_words)


# Languages whose words the rules count per character (C4 and sentence counting read this).
CHAR_SPLIT_LANGUAGES = {code for code, s in LANGUAGES.items() if s.splitter in ("jieba", "japanese", "cjk_chars")}


@lru_cache(maxsize=1024)
def split_words(text: str, language: str = "en") -> tuple[str, ...]:
    """Words of ``text`` for the word-based rules of Gopher and FineWeb, with the language's splitter.
    Cached: consecutive stages (repetition, quality, FineWeb) split the same text once."""
    return tuple(SPLITTERS[language_settings(language).splitter](text))


# ---------------------------------------------------------------------------------------------
# Punctuation classes used by the rules

# Characters that end a sentence (Unicode Sentence_Terminal plus three Khmer signs, as FineWeb uses).
TERMINAL_CLASS = r"[\p{Sentence_Terminal}៖៙៚]"
_TERMINAL = regex.compile(TERMINAL_CLASS)


@lru_cache(maxsize=4096)
def is_terminal_punct(char: str) -> bool:
    return bool(char) and _TERMINAL.match(char) is not None


# Characters that make a word a "symbol" (not counted as a word by Gopher): ASCII punctuation, common
# CJK/full-width marks and control characters, plus sentence terminals.
_SYMBOLS = frozenset(
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(map(chr, [*range(0, 9), *range(11, 32), *range(127, 160)]))
)


def is_symbol_word(word: str) -> bool:
    """Whether every character is a symbol. No letter is one, so most words are answered without the
    cache (which then holds numbers and punctuation, and keeps them)."""
    return not word.isalpha() and _all_symbols(word)


@lru_cache(maxsize=8192)
def _all_symbols(word: str) -> bool:
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


def stop_words(language: str) -> frozenset[str]:
    return language_settings(language).stop_words
