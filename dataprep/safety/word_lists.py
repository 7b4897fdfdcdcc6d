"""Word lists and how text is matched against them, shared by the safety stages: shipped asset paths,
list files, text folding and the word-list matcher.

Matching works the way each script needs. Text is first folded (``fold``): NFKC turns full-width
letters and digits into their ASCII forms, case is folded, and traditional Chinese characters become
simplified ones (OpenCC's character table, from opencc-python-reimplemented). Entries written in
scripts without word boundaries (Han, kana, Hangul, Thai) match anywhere once spaces and symbols
between characters are removed, so 成 人*小 说 still matches 成人小说; other entries match whole words,
an entry ending in ``*`` any word it starts (for inflected languages: ``проститут*``), and letters
spelled out with separators (``f.u.c.k``, ``p o r n``) are joined first.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Iterable, NamedTuple

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "safety"

_NO_SPACE = "\u0e00-\u0e7f\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_HAS_NO_SPACE = re.compile(f"[{_NO_SPACE}]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(rf"[{_NO_SPACE}]|[^\W{_NO_SPACE}]+")
# separators hidden between characters of a word: anything but letters, digits and line breaks
_BETWEEN_CHARS = re.compile(rf"(?<=[{_NO_SPACE}])[^\w\n]+(?=[{_NO_SPACE}])")
_SPELLED_OUT = re.compile(r"(?<!\w)(?:[^\W\d_][^\w\n]{1,3}){2,}[^\W\d_](?!\w)")
_NON_WORD = re.compile(r"[^\w]+")


def read_list(path: str | Path) -> list[str]:
    """Entries of a list file: one per line, stripped; blank lines and ``#`` comments skipped.
    Undecodable bytes are replaced, so one bad line in a third-party list never stops a job."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]


def literal_union(words: Iterable[str]) -> str:
    """A regex source matching any of ``words`` (longest first), shaped as a trie so that matching
    costs one walk down the trie per text position (like Aho-Corasick) instead of one try per word."""
    trie: dict = {}
    for word in words:
        if not word:
            continue
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        alternatives = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


@lru_cache(maxsize=1)
def _traditional_to_simplified() -> dict[int, str]:
    """OpenCC's one-character traditional -> simplified table, as a ``str.translate`` map."""
    import opencc

    path = os.path.join(os.path.dirname(opencc.__file__), "dictionary", "TSCharacters.txt")
    table = {}
    for line in read_list(path):
        trad, _, simp = line.partition("\t")
        simp = simp.split(" ")[0]
        if len(trad) == 1 and len(simp) == 1:
            table[ord(trad)] = simp
    return table


def fold(text: str) -> str:
    """Full-width -> half-width (NFKC), case folded, traditional Chinese -> simplified."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKC", text).casefold()
    return text.translate(_traditional_to_simplified()) if _HAN.search(text) else text


def unhide(folded: str) -> str:
    """Remove separators that hide a word: between CJK/Hangul/Thai characters, and inside words
    spelled out letter by letter (``f.u.c.k`` -> ``fuck``)."""
    folded = _BETWEEN_CHARS.sub("", folded)
    return _SPELLED_OUT.sub(lambda m: _NON_WORD.sub("", m.group()), folded)


class WordList(NamedTuple):
    """Entries of one language (or the union of all), matched per script as the module says."""

    words: frozenset[str]  # one-word entries, whole words
    prefixes: tuple[str, ...]  # ``prefix*`` entries
    multiword: re.Pattern | None  # entries of several words, between word boundaries
    phrases: re.Pattern | None  # entries in scripts without spaces: substrings
    located: tuple[re.Pattern, ...] = ()  # every kind of entry with its position (see ``matches``)

    def count(self, text: str) -> tuple[int, int]:
        """(flagged tokens, tokens) in ``text``; each CJK/Hangul/Thai character is a token and a
        phrase match flags as many tokens as it has characters."""
        prepared = prepare(text)
        tokens = tokens_of(prepared)
        return self.flagged(prepared, tokens), tokens.total()

    def flagged(self, prepared: str, tokens: Counter) -> int:
        """Flagged tokens of a ``prepare``d text, given its ``tokens_of`` (shared between lists)."""
        words, prefixes = self.words, self.prefixes
        flagged = sum(n for t, n in tokens.items() if t in words or (prefixes and t.startswith(prefixes)))
        if self.multiword is not None:
            flagged += len(self.multiword.findall(prepared))
        if self.phrases is not None:
            flagged += sum(map(len, self.phrases.findall(prepared)))
        return flagged

    def matches(self, prepared: str) -> list[tuple[int, int, str]]:
        """``(start, flagged tokens, entry)`` of each match in a ``prepare``d text, with the entry it
        matched (a prefix entry, not the inflected word), so that callers can count distinct entries
        and find where matches cluster. Slower than ``flagged``: call it on pages that have matches."""
        found = []
        for pattern in self.located:
            for m in pattern.finditer(prepared):
                entry = m.group(1)
                found.append((m.start(), len(entry) if _HAS_NO_SPACE.search(entry) else 1, entry))
        return found


def prepare(text: str) -> str:
    """What the lists are matched against: ``unhide(fold(text))``."""
    return unhide(fold(text))


def tokens_of(prepared: str) -> Counter:
    """Words of spaced scripts and single CJK/Hangul/Thai characters (what densities count), counted."""
    return Counter(_TOKEN.findall(prepared))


def word_list(entries: Iterable[str]) -> WordList:
    entries = {prepare(e) for e in entries if e.strip()}
    phrases = sorted(e for e in entries if _HAS_NO_SPACE.search(e))
    spaced = entries.difference(phrases)
    prefixes = tuple(sorted(e[:-1] for e in spaced if e.endswith("*") and len(e) > 1))
    single = {e for e in spaced if not e.endswith("*") and len(_TOKEN.findall(e)) == 1 and _TOKEN.fullmatch(e)}
    multiword = [e for e in spaced if not e.endswith("*") and e not in single]
    located = []
    if single or multiword:
        located.append(re.compile(rf"(?<!\w)({literal_union(sorted(single) + multiword)})(?!\w)"))
    if prefixes:
        located.append(re.compile(rf"(?<!\w)({literal_union(prefixes)})\w*"))
    if phrases:
        located.append(re.compile(f"({literal_union(phrases)})"))
    return WordList(
        frozenset(single),
        prefixes,
        re.compile(rf"(?<!\w)(?:{literal_union(multiword)})(?!\w)") if multiword else None,
        re.compile(literal_union(phrases)) if phrases else None,
        tuple(located),
    )


def lang_key(lang: str | None) -> str:
    """``zh-Hant``, ``zh_TW``, ``ZH`` -> ``zh``."""
    return (lang or "").replace("_", "-").split("-")[0].lower()


def load_lists(
    folder: Path, extra: dict[str, list[str]] | None = None, use_default: bool = True
) -> dict[str, list[str]]:
    """Language -> entries from ``folder/<lang>.txt`` (when ``use_default``) plus extra list files."""
    entries: dict[str, list[str]] = {}
    if use_default:
        for path in sorted(folder.glob("*.txt")):
            entries.setdefault(path.stem, []).extend(read_list(path))
    for lang, paths in (extra or {}).items():
        for path in paths:
            entries.setdefault(lang, []).extend(read_list(path))
    return entries
