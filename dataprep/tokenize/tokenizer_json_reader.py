"""Bring your own tokenizer: a Hugging Face ``tokenizer.json`` (e.g. a Llama-3-style byte-level BPE) in
place of our SentencePiece model, for the tokenize stage, eval and generate.

A folder holding ``tokenizer.json`` (and, as Hugging Face writes it, optionally ``tokenizer_config.json``
naming ``bos_token``/``eos_token``/``pad_token``) loads through ``Tokenizer.load`` as an ``HFTokenizer``
with the same interface. Without a config, the special tokens are recognised by their usual names
(``<|end_of_text|>``, ``</s>``, ``<|endoftext|>``, ...). Needs ``ccpretrain[hf]`` (the tokenizers package).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_bytes, exists, join_path, open_stream, read_text

JSON_NAME = "tokenizer.json"
CONFIG_NAME = "tokenizer_config.json"
USUAL_NAMES = {
    "bos": ("<|begin_of_text|>", "<s>", "<bos>", "[CLS]"),
    "eos": ("<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>", "[SEP]"),
    "pad": ("<pad>", "<|pad|>", "[PAD]"),
    "unk": ("<unk>", "[UNK]"),
}


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` from ``tokenizer.json``; pickles as the JSON text (Spark closures)."""

    def __init__(self, json_text: str, config: dict | None = None) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        self.json_text, self.config = json_text, config or {}
        self.sha256 = hashlib.sha256(json_text.encode()).hexdigest()
        self.tk = RustTokenizer.from_str(json_text)
        self.vocab_size = self.tk.get_vocab_size(with_added_tokens=True)
        ids = {kind: self._special(kind) for kind in USUAL_NAMES}
        if ids["eos"] is None:
            raise UsageError(f"{JSON_NAME}: no end-of-text token found; add a {CONFIG_NAME} with eos_token")
        self.unk_id, self.bos_id, self.eos_id, self.pad_id = ids["unk"], ids["bos"], ids["eos"], ids["pad"]
        self.meta = {"model_type": "hf-tokenizer-json", "model_file": JSON_NAME}

    def _special(self, kind: str) -> int | None:
        named = self.config.get(f"{kind}_token")
        named = named.get("content") if isinstance(named, dict) else named
        for name in [named] if named else USUAL_NAMES[kind]:
            token_id = self.tk.token_to_id(name)
            if token_id is not None:
                return token_id
        return None

    def __reduce__(self):
        return (HFTokenizer, (self.json_text, self.config))

    @classmethod
    def load(cls, directory: str) -> "HFTokenizer":
        with open_stream(join_path(directory, JSON_NAME), decompress=False) as fh:
            text = fh.read().decode("utf-8")
        config_path = join_path(directory, CONFIG_NAME)
        return cls(text, json.loads(read_text(config_path)) if exists(config_path) else None)

    def save(self, directory: str) -> None:
        if self.config:
            atomic_write_bytes(join_path(directory, CONFIG_NAME), json.dumps(self.config, indent=2).encode())
        atomic_write_bytes(join_path(directory, JSON_NAME), self.json_text.encode())

    @property
    def special_ids(self) -> dict:
        return {
            k: v
            for k, v in {"unk": self.unk_id, "bos": self.bos_id, "eos": self.eos_id, "pad": self.pad_id}.items()
            if v is not None
        }

    def describe(self) -> dict:
        return {
            "model_sha256": self.sha256,
            "model_type": self.meta["model_type"],
            "vocab_size": self.vocab_size,
            "special_ids": self.special_ids,
            "sample_sha256": None,
        }

    def encode_batch(
        self, texts: list[str], add_bos: bool = False, add_eos: bool = True, num_threads: int = 1
    ) -> list[np.ndarray]:
        """Token ids per text (the Rust batch encoder), with our own bos/eos around each document."""
        if add_bos and self.bos_id is None:
            raise UsageError("add_bos is set but this tokenizer has no beginning-of-text token")
        head, tail = [self.bos_id] if add_bos else [], [self.eos_id] if add_eos else []
        return [
            np.asarray(head + enc.ids + tail, dtype=np.int32)
            for enc in self.tk.encode_batch(texts, add_special_tokens=False)
        ]

    def encode(self, text: str) -> list[int]:
        return self.tk.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        return self.tk.decode([int(i) for i in ids], skip_special_tokens=True)
