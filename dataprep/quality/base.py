"""What the heuristic quality stages share: a language setting, per-language thresholds, the source kinds
they judge and a per-document decision; and the simpler filter of the rules made for one source kind."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field

from dataprep.core.stage import WEB, DocumentStage, with_column
from dataprep.quality.languages import language_settings

AUTO = "auto"


def of_kinds(batch: pa.Table, kinds: list[str]) -> list[bool]:
    """Per row, whether its ``source_kind`` is one of ``kinds`` (a row without one is web)."""
    if "source_kind" not in batch.column_names:
        return [WEB in kinds] * batch.num_rows
    return [(kind or WEB) in kinds for kind in batch.column("source_kind").to_pylist()]


class KindFilter(DocumentStage):
    """A filter made for one source kind (books, articles): ``decide`` judges each document of
    ``source_kinds`` by its text alone; documents of other kinds pass untouched."""

    source_kinds: list[str]

    def decide(self, text: str) -> str | None:
        """The drop reason for ``text`` (None: kept)."""
        raise NotImplementedError

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        texts = batch.column("text").to_pylist()
        return batch, [
            self.decide(text or "") if judged else None
            for text, judged in zip(texts, of_kinds(batch, self.source_kinds))
        ]


class QualityFilter(DocumentStage):
    """A filter whose rules depend on the document's language. ``language: auto`` reads each row's
    ``lang`` column (written by the langid stage) and falls back to ``default_language``. Only documents
    of ``source_kinds`` are judged: the web's rules cut and drop good books and articles."""

    language: str = Field("en", description="ISO 639-1 code, or 'auto' to use the lang column")
    default_language: str = "en"
    source_kinds: list[str] = Field(
        default_factory=lambda: [WEB], description="source kinds judged; others pass untouched"
    )

    def check_assets(self) -> None:
        if self.language != AUTO:  # a language no model labels would silently fall back to English rules
            from dataprep.classify.langid import check_languages, model_labels

            check_languages([self.language], model_labels(), "language")

    def param(self, name: str, language: str):
        """A rule threshold for ``language``: the config's value when it sets ``name``, else the
        language's own (``languages.LANGUAGES``), else the stage default (English's). A rule the language
        switches off (None, e.g. word length for unspaced Chinese) stays off: configs hold English values."""
        thresholds = language_settings(language).thresholds
        if name in thresholds and (thresholds[name] is None or name not in self.model_fields_set):
            return thresholds[name]
        return getattr(self, name)

    # The rule values ``measure`` returns, stored by a signals run (the first is set for every document
    # measured); ``verdict`` decides from them as ``decide`` does, so a filter can apply other thresholds.
    # A stage whose values depend on its settings overrides ``signal_fields`` instead.
    rule_fields: ClassVar[tuple[pa.Field, ...]] = ()

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        """Return (drop reason or None, text to keep)."""
        raise NotImplementedError

    def measure(self, text: str, language: str) -> dict:
        """Every rule's value for ``text`` (``decide`` stops at the first rule that fails)."""
        raise NotImplementedError

    def verdict(self, values: dict, language: str) -> str | None:
        """The drop reason ``decide`` gives a text with these ``measure`` values (None: kept)."""
        raise NotImplementedError

    def signal_fields(self) -> list[pa.Field]:
        return list(self.rule_fields)

    def signal_values(self, batch: pa.Table) -> pa.Table:
        rows = []
        texts = batch.column("text").to_pylist()
        for text, lang, judged in zip(texts, self.languages(batch), of_kinds(batch, self.source_kinds)):
            try:
                rows.append(self.measure(text or "", lang) if judged else {})
            except Exception:  # noqa: BLE001 - its reason is decide's error:<Exception>; its values stay null
                rows.append({})
        return pa.table({f.name: pa.array([row.get(f.name) for row in rows], f.type) for f in self.signal_fields()})

    def reasons_from_signals(self, batch: pa.Table) -> list[str | None]:
        names = [f.name for f in self.signal_fields()]
        rows = zip(*(batch.column(name).to_pylist() for name in names))
        return [
            self.verdict(dict(zip(names, values)), lang) if judged and values[0] is not None else None
            for values, lang, judged in zip(rows, self.languages(batch), of_kinds(batch, self.source_kinds))
        ]

    def languages(self, batch: pa.Table) -> list[str]:
        if self.language != AUTO:
            return [self.language] * batch.num_rows
        if "lang" not in batch.column_names:
            return [self.default_language] * batch.num_rows
        return [lang or self.default_language for lang in batch.column("lang").to_pylist()]

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        reasons: list[str | None] = []
        texts: list[str] = []
        changed = False
        for text, lang, judged in zip(
            batch.column("text").to_pylist(), self.languages(batch), of_kinds(batch, self.source_kinds)
        ):
            if not judged:
                reasons.append(None)
                texts.append(text)
                continue
            reason, new_text = self.decide(text or "", lang)
            reasons.append(reason)
            texts.append(new_text)
            changed = changed or new_text is not text
        if changed:
            batch = with_column(batch, "text", texts, pa.string())
        return batch, reasons
