"""Stage ``harmful_content``: adult and gambling pages and contact spam, in every shipped language.

Signals, each a column, compared with a threshold (``harm_score`` is the largest signal divided by
its threshold, so a page is dropped when it reaches 1; the reason names the signal):

- ``harm_adult`` / ``harm_gambling``: how dense the category's vocabulary is, with the lists of the
  page's language (``assets/safety/harmful/<category>/<lang>.txt``), matched per script after folding
  width, case and traditional/simplified forms (``dataprep.safety.word_lists``). Each list has two
  tiers: explicit entries weigh 1 per flagged token, ambiguous ones (``ambiguous/<lang>.txt``:
  anatomy, medical, legal and news words) weigh ``ambiguous_weight`` and count only on pages that
  also use two or more distinct explicit entries, so medical and sex-education pages score 0. On
  such pages the density is the larger of the whole page's and that of its densest window of
  ``window_tokens`` tokens: long explicit prose is not diluted by its length. A page using a single
  explicit entry needs ``single_entry_factor`` times the threshold (a news story names the term,
  keyword spam repeats it). CJK characters count one token each; thresholds are per language.
  Languages without a list are not scored (null); pages without a language get every list at once.
- ``harm_adult_terms`` / ``harm_gambling_terms``: distinct explicit entries on the page; a page using
  ``min_distinct_terms`` of them is dropped however long it is (counts, not only shares).
- ``harm_contacts``: contact spam, i.e. QQ, WeChat, Telegram or LINE ids and phone numbers that
  appear more than once. Pages that also use adult or gambling vocabulary need fewer.
- ``harm_title``: a keyword-stuffed title (``title`` column, or the first line): the share of its
  separated segments that repeat the same keyword, as in ``澳门赌场_澳门赌场官网_澳门赌场注册``.

Drop reasons: ``harmful:adult``, ``harmful:gambling``, ``harmful:contact_spam``, ``harmful:stuffed_title``.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pydantic import Field

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.safety.word_lists import ASSETS, WordList, fold, lang_key, load_lists, prepare, tokens_of, word_list

DEFAULT_LISTS = ASSETS / "harmful"
CATEGORIES = ("adult", "gambling")
ALL = "*"  # the union of every language's list
AMBIGUOUS = "ambiguous"  # the sub-folder of a category's ambiguous entries
# Densities above which a page is mostly about the category. CJK languages count characters, so a
# 4-character term weighs 4 tokens there; Korean counts syllables.
DEFAULT_THRESHOLDS = {
    "adult": {"default": 0.02, "zh": 0.03, "ja": 0.03, "ko": 0.03},
    "gambling": {"default": 0.02, "zh": 0.04, "ja": 0.03, "ko": 0.03},
}
DEFAULT_MIN_DISTINCT = {"adult": 6, "gambling": None}


class Tiers(NamedTuple):
    """A category's lists for one language: explicit entries and ambiguous ones (or None)."""

    explicit: WordList
    ambiguous: WordList | None


_ID = r"[a-z0-9][a-z0-9_.-]{4,31}"
_CONTACT_IDS = re.compile(
    r"(?:qq|扣扣|企鹅)\s*(?:号码|号|群)?\s*[:：]?\s*(?P<qq>[1-9]\d{4,10})(?!\d)"
    rf"|(?:微信|威信|薇信|v信|weixin|wechat|vx|wx|加v|加微)\s*(?:号)?\s*[:：]?\s*(?P<wx>{_ID})"
    rf"|(?:t\.me/|telegram\s*[:：]?\s*@?|tg\s*[:：]\s*@?|飞机\s*[:：]?\s*@?)(?P<tg>{_ID})"
    rf"|line\s*(?:id)?\s*[:：]\s*@?(?P<line>{_ID})"
)
_CONTACT_KEYS = (
    "qq",
    "扣扣",
    "企鹅",
    "信",
    "weixin",
    "wechat",
    "vx",
    "wx",
    "加v",
    "加微",
    "t.me/",
    "telegram",
    "tg",
    "飞机",
    "line",
)
_DIGIT_RUN = re.compile(r"\d{3}")
# Phone numbers in the forms spam uses (Chinese mobiles and landlines, international +, Russian 8 (xxx)),
# not any digit run: lists of years or page numbers must not look like phones.
_PHONE = re.compile(
    r"(?<!\d)1[3-9]\d{9}(?!\d)"
    r"|(?<![\d-])0\d{2,3}-\d{7,8}(?![\d-])"
    r"|\+\d{1,3}[ -]?\(?\d{2,4}\)?[ -]?\d{3,4}[ -]?\d{2,4}(?:[ -]?\d{2})?(?!\d)"
    r"|(?<!\d)8 ?\(\d{3}\) ?\d{3}-\d{2}-\d{2}(?!\d)"
)
MAX_SEGMENT_CHARS = 16
_TITLE_SEPARATORS = re.compile(r"\s*[|_,，、/\-–—·:：;；!！]+\s*|\s{2,}")
_CJK_BIGRAM = re.compile(r"(?=([\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]{2}))")
_WORD = re.compile(r"[^\W\d_]{3,}")


@lru_cache(maxsize=8)
def load_category_lists(
    use_default: bool, extra: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...]
) -> dict[str, dict[str, Tiers]]:
    """Category -> language -> Tiers (shipped lists plus extra files, which count as explicit)."""
    extra_by_cat = {cat: {lang: list(paths) for lang, paths in langs} for cat, langs in extra}
    out = {}
    for cat in sorted(set(CATEGORIES) | set(extra_by_cat)):
        explicit = load_lists(DEFAULT_LISTS / cat, extra_by_cat.get(cat), use_default)
        ambiguous = load_lists(DEFAULT_LISTS / cat / AMBIGUOUS, None, use_default)
        ambiguous[ALL] = [w for e in ambiguous.values() for w in e]
        explicit[ALL] = [w for e in explicit.values() for w in e]
        out[cat] = {
            lang: Tiers(word_list(e), word_list(ambiguous[lang]) if ambiguous.get(lang) else None)
            for lang, e in explicit.items()
        }
    return out


def densest_window(matches: list[tuple[int, float]], chars: int, tokens: int, window: int) -> float:
    """The largest weighted count of matches in any ``window`` consecutive tokens, divided by
    ``window``; positions are characters, mapped to tokens by the page's characters per token."""
    if tokens <= window or not matches:
        return 0.0
    starts = np.array([m[0] for m in matches], dtype=np.float64) * (tokens / max(chars, 1))
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    # cumulative[i]: weight of the matches before the i-th; a window starts at each match
    cumulative = np.concatenate(([0.0], np.cumsum(np.array([m[1] for m in matches], dtype=np.float64)[order])))
    ends = np.searchsorted(starts, starts + window, side="left")
    return float(np.max(cumulative[ends] - cumulative[:-1])) / window


def vocabulary_signals(
    tiers: Tiers, prepared: str, tokens: Counter, window: int, ambiguous_weight: float
) -> tuple[float, int]:
    """(density, distinct explicit entries) of one category on a page: see the module docstring."""
    total = tokens.total()
    if not total or not tiers.explicit.flagged(prepared, tokens):
        return 0.0, 0
    explicit = tiers.explicit.matches(prepared)
    distinct = len({entry for _, _, entry in explicit})
    weighted = [(start, float(n)) for start, n, _ in explicit]
    if distinct < 2:  # one explicit entry, as in a news story or keyword spam: its own share only
        return sum(w for _, w in weighted) / total, distinct
    if tiers.ambiguous is not None and ambiguous_weight:
        weighted += [(start, n * ambiguous_weight) for start, n, _ in tiers.ambiguous.matches(prepared)]
    density = sum(w for _, w in weighted) / total
    return max(density, densest_window(weighted, len(prepared), total, window)), distinct


def contact_count(folded: str) -> int:
    """Contact-id mentions plus the occurrences of phone numbers written more than once."""
    ids = len(_CONTACT_IDS.findall(folded)) if any(k in folded for k in _CONTACT_KEYS) else 0
    if not _DIGIT_RUN.search(folded):
        return ids
    phones = Counter(re.sub(r"\D", "", m.group()) for m in _PHONE.finditer(folded))
    return ids + sum(n for number, n in phones.items() if n > 1 and 7 <= len(number) <= 15)


def title_stuffing(title: str) -> float:
    """The largest share of a title's segments that contain one same keyword (a CJK character pair
    or a word of 3+ letters); 0.0 for titles of fewer than 4 segments or of long segments (a
    sentence with commas is not a keyword list)."""
    segments = [s for s in _TITLE_SEPARATORS.split(fold(title)) if s]
    if len(segments) < 4 or sum(map(len, segments)) / len(segments) > MAX_SEGMENT_CHARS:
        return 0.0
    keys = Counter()
    for segment in segments:
        keys.update(set(_CJK_BIGRAM.findall(segment)) | set(_WORD.findall(segment)))
    return max(keys.values(), default=0) / len(segments)


@register("harmful_content")
class HarmfulContent(DocumentStage):
    """Score adult and gambling vocabulary, contact spam and stuffed titles; drop above thresholds."""

    thresholds: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {cat: dict(v) for cat, v in DEFAULT_THRESHOLDS.items()},
        description="category -> language (or 'default') -> density above which to drop",
    )
    min_distinct_terms: dict[str, int | None] = Field(
        default_factory=lambda: dict(DEFAULT_MIN_DISTINCT),
        description="category -> distinct explicit entries at which to drop; null: never",
    )
    window_tokens: int = Field(200, ge=10, description="tokens of the densest window whose density counts")
    single_entry_factor: float = Field(
        3.0, ge=1, description="multiple of the threshold for pages using one explicit entry only"
    )
    ambiguous_weight: float = Field(
        0.5, ge=0, le=1, description="weight of an ambiguous entry's tokens (on pages with explicit ones)"
    )
    max_contacts: int | None = Field(4, ge=1, description="contact mentions at which to drop; null: never")
    max_contacts_with_vocabulary: int = Field(2, ge=1, description="the same, for pages at half a category threshold")
    max_title_stuffing: float | None = Field(
        0.6, gt=0, le=1, description="share of title segments repeating a keyword; null: never"
    )
    use_default_lists: bool = True
    word_lists: dict[str, dict[str, list[str]]] = Field(
        default_factory=dict, description="category -> language -> extra list files"
    )
    action: str = Field("drop", pattern="^(drop|annotate)$")
    lang_column: str = "lang"

    def asset_paths(self) -> list[str]:
        return [p for langs in self.word_lists.values() for paths in langs.values() for p in paths]

    def output_fields(self) -> list[pa.Field]:
        floats = [pa.field(f"harm_{c}", pa.float64()) for c in CATEGORIES] + [pa.field("harm_title", pa.float64())]
        counts = [pa.field(f"harm_{c}_terms", pa.int32()) for c in CATEGORIES] + [pa.field("harm_contacts", pa.int32())]
        return floats + counts + [pa.field("harm_score", pa.float64())]

    def threshold(self, category: str, lang: str) -> float | None:
        """The language's threshold, else ``default``; pages without a language get the most
        lenient one, since every language's list applies to them."""
        per_lang = self.thresholds.get(category, {})
        if not lang:
            return max((v for v in per_lang.values() if v is not None), default=None)
        return per_lang.get(lang, per_lang.get("default"))

    def page_threshold(self, category: str, lang: str, distinct: int) -> float | None:
        """The language's threshold, raised for pages using one explicit entry only: a news story
        names the term once or twice, keyword spam repeats it densely."""
        threshold = self.threshold(category, lang)
        return threshold * self.single_entry_factor if threshold and distinct == 1 else threshold

    def score(
        self, text: str, title: str, lang: str, lists: dict[str, dict[str, Tiers]]
    ) -> tuple[dict[str, float | int | None], str | None]:
        """The page's signals and the signal that drops it (or None)."""
        signals: dict[str, float | int | None] = {}
        ratios: dict[str, float] = {}
        prepared = prepare(text)
        tokens = tokens_of(prepared)
        for cat in CATEGORIES:
            # a language without a list is not scored (its words may mean anything in the other
            # lists' languages); unlabelled pages get every list at once
            tiers = lists.get(cat, {}).get(lang or ALL)
            if tiers is None:
                signals[f"harm_{cat}"] = signals[f"harm_{cat}_terms"] = None
                continue
            density, distinct = vocabulary_signals(tiers, prepared, tokens, self.window_tokens, self.ambiguous_weight)
            signals[f"harm_{cat}"], signals[f"harm_{cat}_terms"] = density, distinct
            threshold = self.page_threshold(cat, lang, distinct)
            min_terms = self.min_distinct_terms.get(cat)
            candidates = [density / threshold if threshold else 0.0, distinct / min_terms if min_terms else 0.0]
            if threshold or min_terms:
                ratios[cat] = max(candidates)
        signals["harm_title"] = title_stuffing(title)
        signals["harm_contacts"] = contacts = contact_count(prepared)
        if self.max_contacts:
            limit = self.max_contacts_with_vocabulary if max(ratios.values(), default=0) >= 0.5 else self.max_contacts
            ratios["contact_spam"] = contacts / limit
        if self.max_title_stuffing:
            ratios["stuffed_title"] = signals["harm_title"] / self.max_title_stuffing
        worst = max(ratios, key=ratios.get, default=None)
        signals["harm_score"] = ratios[worst] if worst else 0.0
        return signals, (worst if worst and ratios[worst] >= 1 else None)

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        extra = tuple(
            (cat, tuple((lang, tuple(p)) for lang, p in sorted(langs.items())))
            for cat, langs in sorted(self.word_lists.items())
        )
        lists = load_category_lists(self.use_default_lists, extra)
        texts = [t or "" for t in batch.column("text").to_pylist()]
        titles = batch.column("title").to_pylist() if "title" in batch.column_names else [None] * len(texts)
        langs = (
            batch.column(self.lang_column).to_pylist()
            if self.lang_column in batch.column_names
            else [None] * len(texts)
        )
        columns: dict[str, list] = {f.name: [] for f in self.output_fields()}
        reasons: list[str | None] = []
        for text, title, lang in zip(texts, titles, langs):
            if not title:  # the first line stands for the title when it is short enough to be one
                first = text.lstrip().split("\n", 1)[0]
                title = first if len(first) <= 150 else ""
            signals, worst = self.score(text, title, lang_key(lang), lists)
            for name in columns:
                columns[name].append(signals[name])
            reasons.append(f"harmful:{worst}" if worst and self.action == "drop" else None)
        for field in self.output_fields():
            batch = with_column(batch, field.name, columns[field.name], field.type)
        return batch, reasons
