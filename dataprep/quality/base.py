"""What the heuristic quality stages share: a language setting, per-language thresholds, the source kinds
they judge and a per-document decision."""

from __future__ import annotations

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

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        """Return (drop reason or None, text to keep)."""
        raise NotImplementedError

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
