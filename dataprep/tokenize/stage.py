"""The ``tokenize`` stage: documents -> token shards + manifest, the last step of a pipeline.

Each document becomes its token ids plus EOS (BOS optional) in a shard of about ``tokens_per_shard``
tokens. Documents stay in the step's output with a ``num_tokens`` column; the only ones dropped are
those with no text (reason ``empty``: they would add nothing but an EOS) and those the encoder rejects
(``error:<Exception>``). If the tokenizer folder does not exist yet and ``train`` is given, the
tokenizer is first trained on a uniform sample of the incoming documents (``dataprep.core.sampling``:
the same sample in memory and on Spark), so one config goes from corpus to tokenizer to shards. The
stage is a ``GlobalStage``: the tokenizer is its decision, ``WriteShards`` its per-task half, the
manifest its completion.

Rehydration (FineWeb-2's way): with ``repeat_by: sample_weight`` (the column ``minhash_dedup:
sample_weights`` writes) each document is written as many times as its weight says, so the training
loader needs to know nothing about weights. A fractional weight is rounded up or down by a hash of
the document id (weight 2.5: half the documents get 3 copies, half 2; the same ones every run); weight 0
leaves the document out. Copies are written after the partition's other documents (the repeated
documents' tokens wait in memory until then), so a training sequence does not hold a document twice in
a row. The manifest's ``tokens`` count every copy,
``unique_tokens`` each document once: that is the corpus size ``pretrain budget --data`` reads.
"""

from __future__ import annotations

import json
from typing import Iterable, Literal

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from dataprep.core.applier import Applier
from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.registry import register
from dataprep.core.sampling import sample_texts
from dataprep.core.stage import GlobalStage, with_column
from dataprep.core.storage import exists, join_path, read_text
from dataprep.tokenize.manifest import MANIFEST_NAME, TOKENIZER_DIR, begin_dataset, finish_dataset
from dataprep.tokenize.shards import ShardWriter, dtype_for_vocab
from dataprep.tokenize.tokenizer import META_NAME, MODEL_NAME, Tokenizer, tokenizer_exists, train_tokenizer
from dataprep.tokenize.tokenizer_json_reader import CONFIG_NAME, JSON_NAME

NUM_TOKENS = "num_tokens"
SHARD_PREFIX = "shard"
TOKENIZER_FILES = (MODEL_NAME, META_NAME, JSON_NAME, CONFIG_NAME)  # what saving a tokenizer writes


class TokenizerTraining(BaseModel):
    """How to train the tokenizer when the stage's ``tokenizer`` folder does not exist yet."""

    model_config = ConfigDict(extra="forbid")
    vocab_size: int = Field(
        32_000,
        gt=260,
        description="at most this many pieces: a sample too small for it gives the largest "
        "vocabulary it supports, with a warning",
    )
    exact_vocab_size: bool = Field(False, description="a sample too small for vocab_size is an error instead")
    model_type: Literal["bpe", "unigram"] = "bpe"
    sample_documents: int = Field(
        100_000, gt=0, description="uniform sample of the corpus, drawn by text hash (the same in memory and on Spark)"
    )
    input_sentence_size: int = Field(0, ge=0, description="SentencePiece's own sentence cap; 0 = all")
    character_coverage: float = Field(0.9995, gt=0, le=1)
    seed: int = 0

    def train(self, texts: Iterable[str], output_dir: str, extra_meta: dict | None = None) -> Tokenizer:
        return train_tokenizer(
            texts,
            output_dir,
            vocab_size=self.vocab_size,
            model_type=self.model_type,
            input_sentence_size=self.input_sentence_size,
            character_coverage=self.character_coverage,
            seed=self.seed,
            extra_meta=extra_meta,
            exact_vocab_size=self.exact_vocab_size,
        )


@register("tokenize")
class Tokenize(GlobalStage):
    """Encode documents and write Megatron ``.bin``/``.idx`` shards and ``manifest.json``."""

    tokenizer: str | None = Field(
        None,
        description="tokenizer folder (tokenizer.model + tokenizer_meta.json, or a Hugging Face "
        "tokenizer.json); default: <output>/tokenizer, where `train:` trains one",
    )
    train: TokenizerTraining | None = Field(None, description="train the tokenizer first when its folder is empty")
    output_dir: str | None = Field(None, description="where shards go; default: <output>/shards")
    tokens_per_shard: int = Field(100_000_000, gt=0)
    add_bos: bool = False
    add_eos: bool = True
    num_threads: int = Field(1, gt=0, description="encoder threads per task (Spark already runs one task per core)")
    repeat_by: str | None = Field(
        None, description="numeric column (e.g. sample_weight): write each document that many times"
    )
    _default_tokenizer: str | None = PrivateAttr(None)
    _default_shards: str | None = PrivateAttr(None)
    _run: dict | None = PrivateAttr(None)  # the pipeline run's identity, for the manifest (lineage)

    def record_run(self, run: dict) -> None:
        self._run = run

    def place_outputs(self, output_dir: str) -> None:
        self._default_tokenizer = join_path(output_dir, "tokenizer")
        self._default_shards = join_path(output_dir, "shards")

    @property
    def tokenizer_dir(self) -> str:
        """The tokenizer folder: the configured one, else the run's ``<output>/tokenizer``."""
        path = self.tokenizer or self._default_tokenizer
        if not path:
            raise UsageError("tokenize: set `tokenizer:` to a tokenizer folder to run the stage outside a pipeline")
        return path

    def check_assets(self) -> None:
        if self.tokenizer is None and self.train is None:
            raise UsageError(
                "tokenize: set `tokenizer:` to a tokenizer folder, or `train:` to train one into <output>/tokenizer"
            )
        if self.tokenizer is None:
            return  # trained into the run's folder, or already there from an earlier try of the same run
        if tokenizer_exists(self.tokenizer):
            Tokenizer.load(self.tokenizer)
        elif self.train is None:
            raise MissingPath(
                f"no tokenizer in {self.tokenizer!r}; train one with `dataprep train-tokenizer` or set `train:`"
            )

    def load_tokenizer(self, sample: Iterable[str] | None = None) -> Tokenizer:
        """The configured tokenizer, trained on ``sample`` first if its folder is empty and ``train`` is set."""
        if tokenizer_exists(self.tokenizer_dir):
            return Tokenizer.load(self.tokenizer_dir)
        if self.train is None:
            raise MissingPath(
                f"tokenize: no tokenizer in {self.tokenizer_dir!r}; train one with `dataprep "
                "train-tokenizer` or set `train:`"
            )
        if sample is None:
            raise UsageError("tokenize: tokenizer must be trained but no sample was given")
        return self.train.train(sample, self.tokenizer_dir)

    def encode(self, table: pa.Table, tokenizer: Tokenizer) -> tuple[pa.Table, list[str | None], list[np.ndarray]]:
        """Encode a batch: returns it with ``num_tokens`` added, drop reasons, and the kept documents'
        token arrays (in row order)."""
        texts = table.column("text").to_pylist() if table.num_rows else []
        reasons: list[str | None] = [None if t else "empty" for t in texts]
        present = [t for t in texts if t]
        try:
            encoded = tokenizer.encode_batch(present, self.add_bos, self.add_eos, self.num_threads) if present else []
        except Exception:  # noqa: BLE001 - find the offending document(s) one by one
            encoded = [self._encode_one(t, tokenizer) for t in present]
        docs: list[np.ndarray] = []
        counts = [0] * len(texts)
        it = iter(encoded)
        for i, text in enumerate(texts):
            if not text:
                continue
            ids = next(it)
            if isinstance(ids, Exception):
                reasons[i] = f"error:{type(ids).__name__}"
                continue
            counts[i] = len(ids)
            docs.append(ids)
        if NUM_TOKENS in table.column_names:
            table = table.drop_columns([NUM_TOKENS])
        return with_column(table, NUM_TOKENS, counts, pa.int64()), reasons, docs

    def copies_of(self, table: pa.Table, reasons: list[str | None]) -> list[int]:
        """How many times to write each kept document (aligned with ``encode``'s token arrays)."""
        kept = [i for i, r in enumerate(reasons) if r is None]
        if self.repeat_by is None:
            return [1] * len(kept)
        if self.repeat_by not in table.column_names:
            raise UsageError(
                f"tokenize: repeat_by column {self.repeat_by!r} is missing (minhash_dedup writes "
                "sample_weight when sample_weights is set)"
            )
        weights = table.column(self.repeat_by).to_pylist()
        ids = table.column("id").to_pylist()
        return [copies(weights[i], ids[i]) for i in kept]

    def _encode_one(self, text: str, tokenizer: Tokenizer):
        try:
            return tokenizer.encode_batch([text], self.add_bos, self.add_eos)[0]
        except Exception as exc:  # noqa: BLE001 - counted as a drop reason
            return exc

    def decide(self, prepared: None, documents: pa.Table) -> tuple[None, dict]:
        """The tokenizer is the decision: trained on the shared sample of the documents
        (``dataprep.core.sampling``, the one Spark draws) when asked and missing. Shards start over."""
        shards_dir = self.shards_folder()
        if self.train and not tokenizer_exists(self.tokenizer_dir):
            texts, info = sample_texts(
                documents.column("text").to_pylist(), self.train.sample_documents, self.train.seed
            )
            self.train.train(texts, self.tokenizer_dir, extra_meta=info)
        return None, self.begin_shards(shards_dir)

    def shards_folder(self, step_dir: str | None = None) -> str:
        """Where the shards go: the configured folder, else the run's ``<output>/shards``, else (a Spark
        step without a run) the step's own ``shards``."""
        folder = self.output_dir or self._default_shards or (join_path(step_dir, "shards") if step_dir else None)
        if not folder:
            raise UsageError("tokenize: set output_dir to run the stage outside a pipeline")
        return folder

    def begin_shards(self, shards_dir: str) -> dict:
        """Clear the manifest (none while shards change); the state both runners' tasks read."""
        begin_dataset(shards_dir)
        return {"shards_dir": shards_dir}

    def applier(self, state: dict) -> "WriteShards":
        return WriteShards(self, self.load_tokenizer(), state["shards_dir"])

    def complete(self, state: dict, finished: Iterable[dict]) -> None:
        """Write the manifest from every task's shards, last: its presence means the dataset is whole."""
        shards = [shard for task in finished for shard in task.get("shards", [])]
        finish_dataset(state["shards_dir"], shards, self.load_tokenizer(), f"{SHARD_PREFIX}-", self.manifest_extra())

    def files_written(self) -> list[str]:
        """The tokenizer it trained (in the run's folder) and the shards, their manifest and tokenizer copy."""
        folders = [self.tokenizer_dir] if self.tokenizer is None else []
        shards = self.shards_folder()
        written = [
            join_path(folder, name) for folder in folders for name in TOKENIZER_FILES if exists(join_path(folder, name))
        ]
        if exists(join_path(shards, MANIFEST_NAME)):
            manifest = json.loads(read_text(join_path(shards, MANIFEST_NAME)))
            written += [join_path(shards, MANIFEST_NAME)]
            written += [join_path(shards, s["name"] + ext) for s in manifest["shards"] for ext in (".bin", ".idx")]
            copy = join_path(shards, TOKENIZER_DIR)
            written += [join_path(copy, name) for name in TOKENIZER_FILES if exists(join_path(copy, name))]
        return written

    def manifest_extra(self) -> dict:
        return {
            "add_bos": self.add_bos,
            "add_eos": self.add_eos,
            "tokens_per_shard": self.tokens_per_shard,
            "repeat_by": self.repeat_by,
            **({"pipeline_run": self._run} if self._run else {}),
        }


class WriteShards(Applier):
    """Encodes one task's documents into its own shards, ``shard-<task>-<n>`` in ``output_dir``: the
    names depend on the task alone, so a retried or rerun task overwrites its files (each written
    atomically) instead of adding to them. ``finish`` returns the shards' manifest entries."""

    def __init__(self, stage: Tokenize, tokenizer: Tokenizer, output_dir: str):
        super().__init__(stage.name)
        self.rules, self.tokenizer, self.output_dir = stage, tokenizer, output_dir
        self.writer: ShardWriter | None = None

    def output_fields(self, input_schema: pa.Schema) -> list[pa.Field]:
        return [pa.field(NUM_TOKENS, pa.int64())]

    def begin(self, key: str, decisions: pa.Table | None) -> None:
        dtype = dtype_for_vocab(self.tokenizer.vocab_size)
        self.writer = ShardWriter(f"{self.output_dir}/{SHARD_PREFIX}-{key}", dtype, self.rules.tokens_per_shard)

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        table, reasons, docs = self.rules.encode(batch, self.tokenizer)
        for doc, n in zip(docs, self.rules.copies_of(table, reasons)):
            self.writer.add(doc, n)
        return table, reasons

    def finish(self) -> dict:
        shards, self.writer = self.writer.close(), None
        return {"shards": shards}


def copies(weight: float | None, doc_id: str | None) -> int:
    """Copies of a document of sampling ``weight``: its whole part, plus one more for the share of
    documents its fractional part says, chosen by a hash of the id (missing weight: one copy)."""
    if weight is None:
        return 1
    if weight < 0 or weight != weight:
        raise UsageError(f"tokenize: document {doc_id!r} has sampling weight {weight}; weights must be 0 or more")
    whole = int(weight)
    draw = xxhash.xxh64_intdigest(str(doc_id).encode("utf-8", "surrogatepass")) / 2**64
    return whole + (draw < weight - whole)
