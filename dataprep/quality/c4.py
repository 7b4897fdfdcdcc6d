"""C4's clean-up rules (Raffel et al. 2020), as datatrove's C4QualityFilter applies them.

Works line by line and rewrites the text: lines without terminal punctuation (optional; FineWeb turns
it off), with fewer than 3 words, with a very long word, mentioning javascript or cookie/terms
boilerplate are removed; citation markers like "[12]" are stripped. The whole document goes on
"lorem ipsum", on a curly bracket, or when fewer than ``min_num_sentences`` sentences remain.
"""

from __future__ import annotations

import re

from dataprep.core.registry import register
from dataprep.quality.base import QualityFilter
from dataprep.quality.languages import CHAR_SPLIT_LANGUAGES, count_sentences, is_terminal_punct, split_words_cjk

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


@register("c4_quality")
class C4Quality(QualityFilter):
    """Removes C4's boilerplate lines and citation markers; drops lorem ipsum, code and too few sentences."""

    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_num_sentences: int = 5  # -1 disables
    min_words_per_line: int = 3  # -1 disables
    max_word_length: int = 1000  # -1 disables
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True

    def _ends_sentence(self, line: str, language: str) -> bool:
        """English keeps C4's exact marks; other languages also accept their own (。！？ ...)."""
        if line.endswith("..."):
            return False
        return line.endswith(END_PUNCTUATION) or (language != "en" and is_terminal_punct(line[-1:]))

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        sentences = 0
        kept: list[str] = []
        char_words = language in CHAR_SPLIT_LANGUAGES  # no spaces: count characters as words
        for line in text.splitlines():
            line = line.strip()
            words = split_words_cjk(line) if char_words else line.split()
            if (
                self.max_word_length != -1
                and len(line) > self.max_word_length
                and any(len(w) > self.max_word_length for w in words)
            ):
                continue
            if self.remove_citations and "[" in line:
                line = CITATION.sub("", line)
            if self.filter_no_terminal_punct and not self._ends_sentence(line, language):
                continue
            if len(words) < self.min_words_per_line:
                continue
            lower = line.lower()
            if self.filter_lorem_ipsum and "lorem ipsum" in lower:
                return "lorem_ipsum", text
            if self.filter_javascript and "javascript" in lower:
                continue
            if self.filter_curly_bracket and "{" in line:
                return "curly_bracket", text
            if self.filter_policy and any(p in lower for p in POLICY_SUBSTRINGS):
                continue
            if sentences < self.min_num_sentences:  # enough is enough: only that comparison reads the count
                sentences += count_sentences(line, language)
            kept.append(line)
        if sentences < self.min_num_sentences:
            return "too_few_sentences", text
        return None, "\n".join(kept).strip()
