"""CCNet-style perplexity scoring: a SentencePiece + Kneser-Ney n-gram model per language, trained on
a reference corpus the user picks (e.g. Wikipedia), scores every document; documents are bucketed
head/middle/tail by the 30th/60th percentile of the held-out reference perplexities.

A model directory holds ``model.json`` (format version, language, cut-offs, training figures),
``sp.model`` and ``lm.npz`` (see ``ngram_lm``). ``dataprep train-ppl-model`` writes one; ``dataprep arpa``
converts the n-gram model to and from KenLM's ARPA text format (``dataprep.quality.arpa``); a model
imported with ``--kenlm`` (model.json's ``kenlm`` names its ARPA file) is scored as KenLM scores it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import unicodedata
from functools import lru_cache

import numpy as np
import pyarrow as pa
import regex
from pydantic import Field, PrivateAttr, model_validator

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.core.storage import atomic_directory, resolve_asset
from dataprep.quality.ngram_lm import MAX_VOCAB, NGramLM

MODEL_FORMAT = "ccpretrain-ppl-model"
MODEL_VERSION = 1
_DIGITS = re.compile(r"\d")
_MARKS = regex.compile(r"\p{Mn}+")
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")


def ccnet_normalize(text: str) -> str:
    """CCNet's normalisation before tokenising: lower case, accents removed, digits -> 0, spaces
    collapsed (so perplexity reflects wording, not casing or numbers)."""
    text = text.lower()
    if not text.isascii():
        text = _MARKS.sub("", unicodedata.normalize("NFD", text))
    return _SPACES.sub(" ", _DIGITS.sub("0", text))


def _lines(text: str) -> list[str]:
    return [line.strip() for line in ccnet_normalize(text).split("\n") if line.strip()]


class PerplexityModel:
    """A loaded model directory: tokenizer, n-gram model and the language's bucket cut-offs."""

    def __init__(self, directory: str, meta: dict, sp, lm: NGramLM, use_kenlm: bool = True) -> None:
        self.directory, self.meta, self.sp, self.lm = directory, meta, sp, lm
        self.cutoffs = (float(meta["cutoffs"]["p30"]), float(meta["cutoffs"]["p60"]))
        self.kenlm_start = bool(meta.get("kenlm"))
        self._kenlm = None
        if self.kenlm_start and use_kenlm and importlib.util.find_spec("kenlm"):
            from dataprep.quality.arpa import load_kenlm

            self._kenlm = load_kenlm(os.path.join(directory, meta["kenlm"]))

    @property
    def scorer(self) -> str:
        return "kenlm" if self._kenlm is not None else "numpy"

    def _token_logprobs(self, ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        if self._kenlm is None:
            return self.lm.token_logprobs(ids, kenlm_start=self.kenlm_start)
        from dataprep.quality.arpa import kenlm_token_logprobs

        return kenlm_token_logprobs(self._kenlm, self.sp, ids), np.array([len(i) + 1 for i in ids], np.int64)

    @classmethod
    def load(cls, directory: str) -> "PerplexityModel":
        import sentencepiece as spm

        meta_path = os.path.join(directory, "model.json")
        if not os.path.isfile(meta_path):
            raise MissingPath(f"{directory!r} is not a perplexity model directory (no model.json)")
        try:
            with open(meta_path, encoding="utf-8") as fh:
                meta = json.load(fh)
        except ValueError as exc:
            raise UsageError(f"{meta_path!r} is not valid JSON: {exc}") from None
        if meta.get("format") != MODEL_FORMAT:
            raise UsageError(f"{meta_path!r} is not a {MODEL_FORMAT} file")
        if meta.get("version") != MODEL_VERSION:
            raise UsageError(
                f"{directory!r} has model version {meta.get('version')}; this code reads version {MODEL_VERSION}"
            )
        sp = spm.SentencePieceProcessor()
        try:
            sp.Load(os.path.join(directory, "sp.model"))
        except (OSError, RuntimeError) as exc:
            raise UsageError(f"cannot load SentencePiece model in {directory!r}: {exc}") from None
        lm = NGramLM.load(os.path.join(directory, "lm.npz"))
        if lm.vocab_size != sp.GetPieceSize():
            raise UsageError(f"{directory!r}: n-gram model and tokenizer vocabularies differ")
        return cls(directory, meta, sp, lm)

    def perplexities(self, texts: list[str]) -> np.ndarray:
        """10 ** (-sum log10 p / tokens) per text, end-of-line tokens included; NaN for empty text."""
        doc_lines = [_lines(t or "") for t in texts]
        flat = [line for lines in doc_lines for line in lines]
        ids = self.sp.Encode(flat) if flat else []
        logp, per_line = self._token_logprobs(ids)
        line_sums = np.add.reduceat(logp, np.concatenate([[0], np.cumsum(per_line)[:-1]])) if len(per_line) else logp
        out = np.full(len(texts), np.nan)
        pos = 0
        for i, lines in enumerate(doc_lines):
            n = len(lines)
            if n:
                tokens = per_line[pos : pos + n].sum()
                out[i] = 10 ** (-line_sums[pos : pos + n].sum() / tokens)
            pos += n
        return out

    def bucket(self, perplexity: float) -> str | None:
        if np.isnan(perplexity):
            return None
        return "head" if perplexity <= self.cutoffs[0] else "middle" if perplexity <= self.cutoffs[1] else "tail"


@lru_cache(maxsize=16)
def load_model(directory: str) -> PerplexityModel:
    """One load per process (Spark executors reuse it across partitions)."""
    return PerplexityModel.load(directory)


@register("perplexity")
class Perplexity(DocumentStage):
    """Adds ``perplexity`` and ``ppl_bucket`` (head/middle/tail); optionally drops the tail or
    documents above ``max_perplexity``. Documents in a language without a model are kept unscored."""

    model_dir: str | None = Field(None, description="one model for every document (language: fixed)")
    models: dict[str, str] = Field(default_factory=dict, description="language -> model dir, used with the lang column")
    drop_tail: bool = False
    max_perplexity: float | None = None
    _checked: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _need_a_model(self) -> "Perplexity":
        if not self.model_dir and not self.models:
            raise ValueError("set model_dir (one model) or models ({lang: dir})")
        return self

    def check_assets(self) -> None:
        for directory in self.asset_paths():
            load_model(directory)

    def asset_paths(self) -> list[str]:
        return [self.model_dir] if self.model_dir else list(self.models.values())

    def _model_for(self, lang: str | None) -> PerplexityModel | None:
        if self.model_dir:
            return load_model(resolve_asset(self.model_dir))
        directory = self.models.get(lang or "")
        return load_model(resolve_asset(directory)) if directory else None

    def output_fields(self) -> list[pa.Field]:
        return [pa.field("perplexity", pa.float64()), pa.field("ppl_bucket", pa.string())]

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        texts = batch.column("text").to_pylist()
        langs = batch.column("lang").to_pylist() if "lang" in batch.column_names else [None] * len(texts)
        ppl = np.full(len(texts), np.nan)
        buckets: list[str | None] = [None] * len(texts)
        for lang in dict.fromkeys(langs):
            model = self._model_for(lang)
            if model is None:
                continue
            rows = (
                [i for i, found in enumerate(langs) if found == lang] if not self.model_dir else list(range(len(texts)))
            )
            scores = model.perplexities([texts[i] for i in rows])
            for i, score in zip(rows, scores):
                ppl[i] = score
                buckets[i] = model.bucket(score)
            if self.model_dir:
                break
        reasons = [
            "ppl_tail"
            if self.drop_tail and b == "tail"
            else "ppl_above_max"
            if self.max_perplexity and p > self.max_perplexity
            else None
            for p, b in zip(ppl, buckets)
        ]
        batch = with_column(batch, "perplexity", pa.array(ppl, pa.float64(), from_pandas=True))
        return with_column(batch, "ppl_bucket", buckets, pa.string()), reasons


# ---------------------------------------------------------------------------------------------
# Training


def train_model(
    texts: list[str],
    lang: str,
    output_dir: str,
    vocab_size: int = 8000,
    order: int = 3,
    heldout_fraction: float = 0.1,
    seed: int = 0,
) -> dict:
    """Train tokenizer + n-gram model on ``texts`` minus a held-out share, set the bucket cut-offs from
    the held-out perplexities, and write the model directory atomically. Returns model.json's content."""
    import sentencepiece as spm

    texts = [t for t in texts if t and t.strip()]
    if len(texts) < 10:
        raise UsageError(f"need at least 10 non-empty reference documents, got {len(texts)}")
    if not 0 < heldout_fraction < 1:
        raise UsageError("heldout_fraction must be between 0 and 1")
    if vocab_size > MAX_VOCAB:
        raise UsageError(f"vocab_size must be at most {MAX_VOCAB}")
    order_idx = np.random.default_rng(seed).permutation(len(texts))
    n_held = max(1, int(len(texts) * heldout_fraction))
    held = [texts[i] for i in order_idx[:n_held]]
    train = [texts[i] for i in order_idx[n_held:]]
    train_lines = [line for t in train for line in _lines(t)]
    with atomic_directory(output_dir) as tmp:
        spm.SentencePieceTrainer.Train(
            sentence_iterator=iter(train_lines), model_prefix=os.path.join(tmp, "sp"), vocab_size=vocab_size,
            hard_vocab_limit=False, model_type="unigram", character_coverage=0.9995, input_sentence_size=2_000_000,
            shuffle_input_sentence=True, num_threads=os.cpu_count() or 1, minloglevel=2,
        )  # fmt: skip
        sp = spm.SentencePieceProcessor(model_file=os.path.join(tmp, "sp.model"))
        lm = NGramLM.train(sp.Encode(train_lines), order, sp.GetPieceSize(), sp.bos_id(), sp.eos_id())
        meta = write_model_files(
            tmp, sp, lm, lang, held, {"train_documents": len(train), "train_lines": len(train_lines)}
        )
    load_model.cache_clear()
    return meta


def write_model_files(
    folder: str, sp, lm: NGramLM, lang: str, held: list[str], reference: dict, kenlm: str | None = None
) -> dict:
    """``lm.npz`` and ``model.json`` (cut-offs from the perplexities of the held-out texts ``held``) in a
    folder that already holds ``sp.model`` (and ``kenlm``, an ARPA file to score as KenLM does); returns
    model.json's content."""
    lm.save(os.path.join(folder, "lm.npz"))
    scoring = {"kenlm": kenlm} if kenlm else {}
    held_ppl = PerplexityModel(folder, {"cutoffs": {"p30": 0, "p60": 0}, **scoring}, sp, lm).perplexities(held)
    held_ppl = held_ppl[~np.isnan(held_ppl)]
    if not len(held_ppl):
        raise UsageError("no held-out text to set the bucket cut-offs from")
    meta = {
        "format": MODEL_FORMAT, "version": MODEL_VERSION, "lang": lang, "order": lm.order,
        "vocab_size": sp.GetPieceSize(),
        "cutoffs": {"p30": float(np.percentile(held_ppl, 30)), "p60": float(np.percentile(held_ppl, 60))}, **scoring,
        "reference": {**reference, "heldout_documents": len(held),
                      "ngrams": {str(k): int(len(lm.keys[k])) for k in lm.keys},
                      "heldout_perplexity_median": float(np.median(held_ppl))},
    }  # fmt: skip
    with open(os.path.join(folder, "model.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2)
    return meta
