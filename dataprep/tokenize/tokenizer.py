"""SentencePiece tokenizer that gives back exactly the text it was given.

Training settings chosen for an exact round trip, ``decode(encode(text)) == text``: identity
normalization (no NFKC), whitespace kept as is (no collapsing, no dummy prefix space), and byte
fallback so characters outside the vocabulary become their UTF-8 bytes instead of ``<unk>``. The one
exception is inherent to SentencePiece: a literal U+2581 (``▁``, its space marker) decodes as a space.

Special tokens have fixed ids (unk 0, bos 1, eos 2, pad 3). A tokenizer folder holds
``tokenizer.model`` and ``tokenizer_meta.json`` (vocabulary size, special ids, SHA-256 of the model and
of the training sample); the meta file is written last, so its presence means the folder is complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
from typing import Iterable, Iterator, Literal

import numpy as np
import sentencepiece as spm

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import atomic_write_bytes, atomic_write_text, exists, join_path, open_stream, read_text

log = logging.getLogger("ccpretrain")

MODEL_NAME = "tokenizer.model"
META_NAME = "tokenizer_meta.json"
SPECIAL_IDS = {"unk": 0, "bos": 1, "eos": 2, "pad": 3}
# SentencePiece skips training sentences longer than max_sentence_length bytes, so documents are cut
# into chunks of at most this many characters (4 bytes per character at most in UTF-8).
MAX_SENTENCE_BYTES = 16_384


class Tokenizer:
    """A loaded SentencePiece model plus its description; pickles as the model bytes (Spark closures)."""

    def __init__(self, model_proto: bytes, meta: dict | None = None) -> None:
        self.model_proto = model_proto
        self.sha256 = hashlib.sha256(model_proto).hexdigest()
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.meta = meta or {}
        self.vocab_size = self.sp.get_piece_size()
        self.unk_id, self.bos_id, self.eos_id, self.pad_id = (
            self.sp.unk_id(),
            self.sp.bos_id(),
            self.sp.eos_id(),
            self.sp.pad_id(),
        )

    def __reduce__(self):
        return (Tokenizer, (self.model_proto, self.meta))

    @classmethod
    def load(cls, directory: str) -> "Tokenizer":
        """Load a folder written by ``train_tokenizer`` (the model must match the SHA-256 in its meta), or
        a folder holding a Hugging Face ``tokenizer.json`` (``dataprep.tokenize.tokenizer_json_reader``)."""
        meta_path, model_path = join_path(directory, META_NAME), join_path(directory, MODEL_NAME)
        if not exists(meta_path) and exists(join_path(directory, "tokenizer.json")):  # a Hugging Face tokenizer
            from dataprep.tokenize.tokenizer_json_reader import HFTokenizer

            return HFTokenizer.load(directory)
        if not exists(meta_path):
            raise MissingPath(
                f"no tokenizer in {directory}: {META_NAME} missing (train one with `dataprep train-tokenizer`)"
            )
        meta = json.loads(read_text(meta_path))
        with open_stream(model_path, decompress=False) as fh:
            proto = fh.read()
        tok = cls(proto, meta)
        if meta.get("model_sha256") not in (None, tok.sha256):
            raise UsageError(f"{model_path}: SHA-256 {tok.sha256} does not match {META_NAME} ({meta['model_sha256']})")
        return tok

    def save(self, directory: str) -> None:
        """Write ``tokenizer.model`` then ``tokenizer_meta.json`` (last: its presence means complete)."""
        meta = {**self.meta, "model_file": MODEL_NAME, "model_sha256": self.sha256, "vocab_size": self.vocab_size}
        atomic_write_bytes(join_path(directory, MODEL_NAME), self.model_proto)
        atomic_write_text(join_path(directory, META_NAME), json.dumps(meta, indent=2) + "\n")

    @property
    def special_ids(self) -> dict:
        return {"unk": self.unk_id, "bos": self.bos_id, "eos": self.eos_id, "pad": self.pad_id}

    def describe(self) -> dict:
        """The tokenizer identity a token manifest records."""
        return {
            "model_sha256": self.sha256,
            "model_type": self.meta.get("model_type"),
            "vocab_size": self.vocab_size,
            "special_ids": self.special_ids,
            "sample_sha256": self.meta.get("training", {}).get("sample_sha256"),
        }

    def encode_batch(
        self, texts: list[str], add_bos: bool = False, add_eos: bool = True, num_threads: int = 1
    ) -> list[np.ndarray]:
        """Token ids per text as int32 arrays (SentencePiece's C++ batch encoder, no Python loop)."""
        kwargs = dict(add_bos=add_bos, add_eos=add_eos, num_threads=num_threads)
        try:
            return self.sp.encode(texts, return_type="numpy", **kwargs)
        except ValueError:  # sentencepiece without numpy output
            return [np.asarray(ids, dtype=np.int32) for ids in self.sp.encode(texts, **kwargs)]

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def decode(self, ids) -> str:
        """Text of ``ids``; bos/eos/pad are dropped (they have no text)."""
        return self.sp.decode([int(i) for i in ids])


def training_chunks(texts: Iterable[str], max_chars: int = MAX_SENTENCE_BYTES // 4) -> Iterator[str]:
    """Cut documents into SentencePiece training sentences short enough not to be skipped."""
    for text in texts:
        for start in range(0, len(text), max_chars):
            yield text[start : start + max_chars]


class _HashingIterator:
    """Passes texts through while hashing them and counting, so the sample is identified exactly."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts, self.hash, self.documents, self.bytes = texts, hashlib.sha256(), 0, 0

    def __iter__(self) -> Iterator[str]:
        for text in self.texts:
            if not text:
                continue
            data = text.encode("utf-8", "surrogatepass")
            self.hash.update(len(data).to_bytes(8, "little"))
            self.hash.update(data)
            self.documents += 1
            self.bytes += len(data)
            yield text


def train_tokenizer(
    texts: Iterable[str],
    output_dir: str,
    vocab_size: int,
    model_type: Literal["bpe", "unigram"] = "bpe",
    input_sentence_size: int = 0,
    character_coverage: float = 0.9995,
    seed: int = 0,
    num_threads: int | None = None,
    extra_meta: dict | None = None,
    exact_vocab_size: bool = False,
) -> Tokenizer:
    """Train on ``texts`` (streamed; documents are cut into sentences) and save to ``output_dir``.

    ``input_sentence_size`` > 0 lets SentencePiece keep a uniform random subset of that many sentences.
    ``vocab_size`` is a ceiling: a sample too small for it gives the largest vocabulary it supports,
    with a warning (HF tokenizers' BPE does the same silently); ``exact_vocab_size`` makes that an error.
    """
    if vocab_size <= len(SPECIAL_IDS) + 256:
        raise UsageError(f"vocab_size {vocab_size} too small: byte fallback alone needs {len(SPECIAL_IDS) + 256} ids")
    sample = _HashingIterator(texts)
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=training_chunks(sample),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            add_dummy_prefix=False,
            byte_fallback=True,
            split_digits=True,
            allow_whitespace_only_pieces=True,
            character_coverage=character_coverage,
            max_sentence_length=MAX_SENTENCE_BYTES,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            unk_id=SPECIAL_IDS["unk"],
            bos_id=SPECIAL_IDS["bos"],
            eos_id=SPECIAL_IDS["eos"],
            pad_id=SPECIAL_IDS["pad"],
            num_threads=num_threads or os.cpu_count() or 1,
            hard_vocab_limit=exact_vocab_size,
            minloglevel=2,
        )
    except RuntimeError as exc:  # e.g. "Vocabulary size too high" on a small sample
        if sample.documents == 0:
            raise UsageError("no non-empty documents to train the tokenizer on") from None
        message = str(exc).split("] ", 1)[-1]  # SentencePiece's text without its source location
        raise UsageError(
            f"tokenizer training failed on a sample of {sample.documents} documents: {message} "
            "(the vocab_size setting of the tokenizer training)"
        ) from None
    meta = {
        "model_type": model_type,
        "special_ids": dict(SPECIAL_IDS),
        "normalization": "identity",
        "byte_fallback": True,
        "add_dummy_prefix": False,
        "remove_extra_whitespaces": False,
        "training": {
            "sample_documents": sample.documents,
            "sample_bytes": sample.bytes,
            "sample_sha256": sample.hash.hexdigest(),
            "input_sentence_size": input_sentence_size,
            "character_coverage": character_coverage,
            "seed": seed,
            "sentencepiece_version": spm.__version__,
            **(extra_meta or {}),
        },
    }
    tokenizer = Tokenizer(model.getvalue(), meta)
    if tokenizer.vocab_size < vocab_size:
        meta["training"]["vocab_size_requested"] = vocab_size
        log.warning(
            "tokenizer: the sample of %d documents supports %d pieces, fewer than vocab_size %d: trained %d. "
            "For the vocabulary asked, train on more text (or set exact_vocab_size to make this an error)",
            sample.documents,
            tokenizer.vocab_size,
            vocab_size,
            tokenizer.vocab_size,
        )
    tokenizer.save(output_dir)
    return tokenizer


def tokenizer_exists(directory: str) -> bool:
    return exists(join_path(directory, META_NAME)) or exists(join_path(directory, "tokenizer.json"))
