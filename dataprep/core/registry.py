"""Stage names in configs -> stage classes.

``STAGE_CLASSES`` lists every stage a config can name, as ``"module:Class"``: the registry imports a
stage's module only when a config names it, and a stage whose optional dependency is missing says which
package to install instead of silently disappearing from the list. A stage class declares its name with
``@register("name")``; a new stage is that decorator and one line in the table
(tests/dataprep/core/test_registry.py checks the two agree and that no stage is left out).
"""

from __future__ import annotations

import importlib

from dataprep.core.errors import UsageError
from dataprep.core.extras import install_command

# name -> "module:Class", by package
STAGE_CLASSES: dict[str, str] = {
    "extract": "dataprep.html.extract:Extract",
    "langid": "dataprep.classify.langid:LanguageID",
    "gopher_quality": "dataprep.quality.gopher:GopherQuality",
    "gopher_repetition": "dataprep.quality.gopher_repetition:GopherRepetition",
    "c4_quality": "dataprep.quality.c4:C4Quality",
    "fineweb_quality": "dataprep.quality.fineweb:FineWebQuality",
    "wikipedia_quality": "dataprep.quality.wikipedia:WikipediaQuality",
    "books_quality": "dataprep.quality.books:BooksQuality",
    "quality_classifier": "dataprep.quality.classifier:QualityClassifier",
    "perplexity": "dataprep.quality.perplexity:Perplexity",
    "top_fraction": "dataprep.quality.top_fraction:TopFraction",
    "url_filter": "dataprep.safety.url_filter:UrlFilter",
    "harmful_content": "dataprep.safety.harmful:HarmfulContent",
    "toxicity": "dataprep.safety.toxicity:ToxicityFilter",
    "pii": "dataprep.safety.pii:PiiScrubber",
    "exact_dedup": "dataprep.dedup.exact:ExactDedup",
    "url_dedup": "dataprep.dedup.urls:UrlDedup",
    "minhash_dedup": "dataprep.dedup.minhash:MinHashDedup",
    "paragraph_dedup": "dataprep.dedup.paragraphs:ParagraphDedup",
    "decontaminate": "dataprep.dedup.decontaminate:Decontaminate",
    "tokenize": "dataprep.tokenize.stage:Tokenize",
    "code_license": "dataprep.code.licenses:CodeLicense",
    "code_language": "dataprep.code.languages:CodeLanguage",
    "code_quality": "dataprep.code.rules:CodeQuality",
    "code_secrets": "dataprep.code.secrets:CodeSecrets",
}

STAGES: dict[str, type] = {}  # classes registered so far: imported stage modules, and stages of other packages


class UnknownStage(UsageError, KeyError):
    """A config or command names a stage that does not exist (a KeyError for callers that look names up)."""

    __str__ = BaseException.__str__  # the message as written, not quoted as a KeyError's key


class MissingDependency(ImportError):
    """A stage exists but a package it needs is not installed."""


def register(name: str):
    """Class decorator: the stage's name in configs (listed in ``STAGE_CLASSES`` for dataprep's own stages)."""

    def wrap(cls):
        cls.name = name
        STAGES[name] = cls
        return cls

    return wrap


def stage_names() -> list[str]:
    return sorted(set(STAGE_CLASSES) | set(STAGES))


def stage_class(name: str) -> type:
    """The class registered as ``name``, importing its module on first use. Raises UnknownStage (a KeyError) for an
    unknown name and MissingDependency (naming the package to install) for an unusable one."""
    if name in STAGES:
        return STAGES[name]
    if name not in STAGE_CLASSES:
        from dataprep.core.validation import did_you_mean

        raise UnknownStage(
            f"unknown stage {name!r}{did_you_mean(str(name), stage_names())} (known stages: {', '.join(stage_names())})"
        )
    module_name, _, class_name = STAGE_CLASSES[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if not missing or missing in ("dataprep", "pipelines"):
            raise
        raise MissingDependency(
            f"stage {name!r} needs the Python package {missing!r}, which is not installed: {install_command(missing)}"
        ) from exc
    cls = getattr(module, class_name)
    if getattr(cls, "name", None) != name:
        raise RuntimeError(
            f"STAGE_CLASSES[{name!r}] is {STAGE_CLASSES[name]}, whose @register name is {getattr(cls, 'name', None)!r}"
        )
    return cls
