"""``pretrain eval CHECKPOINT [--data SHARDS_DIR_OR_DOCUMENTS]``: loss and perplexity on held-out text.

Both paths run the training loop's own validation (``pretrain.train_step.validation_loss`` over a ``Loader``), so
the numbers mean the same thing: mean next-token cross-entropy over windows of ``seq_len + 1`` tokens of
the concatenated documents (each ending with EOS), in nats; perplexity is its exponential.

* no ``--data``: the run's validation split with its config's batches, sequence length and precision,
  which is the ``val_loss`` the loop logged at the checkpoint's step;
* ``--data DIR``: every sample of a token-shard directory (remainder of a last partial batch left out);
* ``--data FILE`` (JSONL or Parquet documents): tokenized on the fly with the run's tokenizer, as the
  tokenize stage would (same BOS/EOS), into a temporary shard directory, then as above.

Each also reports ``bits_per_byte`` (``pretrain.inference.bits_per_byte``: over the bytes of the tokens the
windows predicted, or for documents over every byte of their text), when the run's tokenizer is found; with
``tasks``, the scores of lm-evaluation-harness tasks (``pretrain.inference.harness``).
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass

import pyarrow as pa

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import exists, join_path
from dataprep.tokenize.manifest import MANIFEST_NAME
from pretrain.components.dataloader import Loader, build_loaders
from pretrain.components.device import resolve_device, resolve_precision
from pretrain.components.token_sources import Source
from pretrain.inference.bits_per_byte import LN2, document_bits_per_byte, token_byte_lengths, window_bytes
from pretrain.inference.generate import document_prefix
from pretrain.inference.loading import Trained, find_tokenizer, load_trained, model_for_inference
from pretrain.train_step import TrainStepContext, validation_loss


def run_validation(trained: Trained, device, max_batches: int | None = None, tokenizer=None) -> dict:
    """The training loop's validation at the checkpoint: same loader, batches and precision."""
    run = trained.run
    if run is None:
        raise MissingPath(f"{trained.path}: the run's config.yaml was not found; pass --data")
    _, val = build_loaders(
        run.data, run.seq_len, run.global_batch_size, run.micro_batch_size, 0, 1, run.model.vocab_size
    )  # sources given as URLs: cached in a temporary folder
    if val is None:
        raise UsageError(
            "the run has no validation split (data.val_fraction is 0 or the held-out documents "
            "are shorter than seq_len + 1 tokens); pass --data"
        )
    return _evaluate(trained, val, max_batches or run.log.val_batches, device, _precision(trained, device), tokenizer)


def evaluate_shards(
    trained: Trained,
    directory: str,
    device,
    seq_len: int,
    batch_size: int,
    max_batches: int | None = None,
    tokenizer=None,
) -> dict:
    """Every full batch of samples of a token-shard directory."""
    source = Source.open(directory, seq_len, val_fraction=0.0, seed=0, vocab_size=trained.model.vocab_size)
    samples = source.num_samples("train")
    batch_size = min(batch_size, samples)
    loader = Loader([source], [1.0], "train", batch_size, batch_size)
    n_batches = samples // batch_size if max_batches is None else min(max_batches, samples // batch_size)
    return {
        **_evaluate(trained, loader, n_batches, device, _precision(trained, device), tokenizer),
        "samples_available": samples,
    }


def read_documents(path: str, text_field: str = "text", what: str = "--data") -> tuple[pa.Table, int]:
    """The documents of a JSONL/Parquet file (or folder) and how many the reader dropped; a file that
    yields none is an error naming the reader's reason."""
    from dataprep.core.config import InputConfig
    from dataprep.core.stats import StageStats
    from dataprep.readers import READ_STAGE, iter_documents

    if not exists(path):
        raise MissingPath(f"{what} {path}: not found")
    kept, dropped, read = [], 0, StageStats(READ_STAGE)
    for result in iter_documents(path, InputConfig(paths=[path], text_field=text_field), read):
        kept.append(result.kept.select(["id", "url", "date", "source", "text"]))
        dropped += result.dropped.num_rows
    if not read.docs_kept:  # a missing or damaged file is a counted drop there: say why
        why = next(iter(read.errors_seen.messages), "")
        raise UsageError(f"{path}: no documents read" + (f" ({why})" if why else ""))
    return pa.concat_tables(kept), dropped


def tokenize_documents(path: str, trained: Trained, out_dir: str, tokenizer_dir: str | None, text_field: str) -> dict:
    """JSONL/Parquet documents -> token shards in ``out_dir``, encoded as the run's data were."""
    from dataprep.tokenize.stage import Tokenize

    tokenizer, manifest = find_tokenizer(trained, tokenizer_dir)
    documents, dropped = read_documents(path, text_field)
    tokenizer.save(os.path.join(out_dir, "tokenizer-in"))
    stage = Tokenize(
        tokenizer=os.path.join(out_dir, "tokenizer-in"),
        output_dir=os.path.join(out_dir, "shards"),
        add_bos=bool(manifest.get("add_bos", False)),
        add_eos=bool(manifest.get("add_eos", True)),
    )
    result = stage.run_local(documents)
    return {
        "documents": result.kept.num_rows,
        "documents_dropped": dropped + result.dropped.num_rows,
        "texts": result.kept.column("text").to_pylist(),
    }


def _precision(trained: Trained, device) -> str:
    """The run's precision on this device; without the run, what "auto" means in training."""
    return resolve_precision(trained.run.precision if trained.run else "auto", device)


def _evaluate(trained: Trained, loader: Loader, n_batches: int, device, precision: str, tokenizer=None) -> dict:
    """The loop's validation loss over ``n_batches``; with the tokenizer, bits per byte of the tokens predicted."""
    if n_batches < 1:
        raise UsageError("no full batch of samples to evaluate")
    model = model_for_inference(trained, device)
    loss = validation_loss(model, loader, n_batches, TrainStepContext(device, precision, False, False), None)
    seq_len = loader.sources[0].seq_len
    tokens = n_batches * loader.global_batch * seq_len
    result = {
        "loss": loss,
        "perplexity": math.exp(min(loss, 700.0)),
        "tokens": tokens,
        "batches": n_batches,
        "seq_len": seq_len,
        "precision": precision,
    }
    if tokenizer is not None:
        lengths = token_byte_lengths(tokenizer, trained.model.vocab_size)
        n_bytes = sum(window_bytes(loader.batch_at(i * loader.global_batch), lengths) for i in range(n_batches))
        result.update(bits_per_byte=loss * tokens / LN2 / n_bytes if n_bytes else None, bytes=n_bytes)
    return result


def _tokenizer_or_none(trained: Trained, override: str | None):
    """The run's tokenizer and manifest, or (None, {}) when it cannot be found (bits per byte then left out)."""
    try:
        return find_tokenizer(trained, override)
    except (FileNotFoundError, ValueError):
        return None, {}


def evaluate_checkpoint(
    checkpoint: str,
    data: str | None = None,
    device: str = "auto",
    seq_len: int | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
    tokenizer: str | None = None,
    text_field: str = "text",
    tasks: TaskSpec | None = None,
) -> dict:
    """Loss, perplexity and bits per byte of a checkpoint on ``data`` (a shard folder, local or at a URL,
    or documents tokenized here with the run's tokenizer; None: the run's validation split), at the run's
    sequence length and micro-batch unless given; with ``tasks`` (the run's ``eval:`` tasks when it names
    none), their scores under ``"tasks"``."""
    if max_batches is not None and max_batches < 1:
        raise UsageError(f"--max-batches {max_batches}: must be at least 1")
    trained = load_trained(checkpoint)
    device = resolve_device(device)
    run = trained.run
    seq_len = seq_len if seq_len is not None else (run.seq_len if run else trained.model.max_seq_len)
    batch_size = batch_size if batch_size is not None else (run.micro_batch_size if run else 8)
    if seq_len > trained.model.max_seq_len or seq_len < 1 or batch_size < 1:
        raise UsageError(f"--seq-len must be in [1, {trained.model.max_seq_len}] and --batch-size positive")
    tasks = _tasks_to_run(trained, tasks)
    found, manifest = find_tokenizer(trained, tokenizer) if tasks else _tokenizer_or_none(trained, tokenizer)
    if data is None:
        result = {"data": "validation split of the run", **run_validation(trained, device, max_batches, found)}
    elif exists(join_path(data, MANIFEST_NAME)):  # a shard folder, local or at a URL
        result = {"data": data, **evaluate_shards(trained, data, device, seq_len, batch_size, max_batches, found)}
    else:
        with tempfile.TemporaryDirectory(prefix="ccp-eval-") as tmp:
            docs = tokenize_documents(data, trained, tmp, tokenizer, text_field)
            texts = docs.pop("texts")
            shards = os.path.join(tmp, "shards")
            result = {
                "data": data,
                **docs,
                **evaluate_shards(trained, shards, device, seq_len, batch_size, max_batches),
            }
        model = model_for_inference(trained, device)
        scored = document_bits_per_byte(
            model, found, texts, document_prefix(found, manifest), seq_len, batch_size, result["precision"]
        )
        result.update(bits_per_byte=scored["bits_per_byte"], bytes=scored["bytes"])
    if tasks:
        from pretrain.inference.harness import evaluate_tasks

        model = model_for_inference(trained, device)
        result["tasks"] = evaluate_tasks(
            model,
            found,
            tasks.names,
            tasks.include_path,
            tasks.limit,
            tasks.num_fewshot,
            add_bos=bool(manifest.get("add_bos")),
            batch_size=batch_size,
            precision=_precision(trained, device),
        )
    return {"checkpoint": trained.path, "step": trained.step, **result}


@dataclass
class TaskSpec:
    """Which lm-evaluation-harness tasks to score, and how (``pretrain eval --tasks``, a run's ``eval:``)."""

    names: list[str]
    include_path: str | None = None
    limit: int | float | None = None
    num_fewshot: int | None = None


def _tasks_to_run(trained: Trained, tasks: TaskSpec | None) -> TaskSpec | None:
    """The tasks asked for; a spec naming none (``pretrain eval`` without ``--tasks``) takes the run's ``eval:``
    tasks (its limit and include path too); None: no tasks."""
    if tasks is None or tasks.names:
        return tasks
    section = trained.run.eval if trained.run is not None else None
    if section is None or not section.tasks:
        return None
    return TaskSpec(
        section.tasks,
        tasks.include_path or section.include_path,
        tasks.limit if tasks.limit is not None else section.limit,
        tasks.num_fewshot if tasks.num_fewshot is not None else section.num_fewshot,
    )
