"""``pretrain eval CHECKPOINT [--data SHARDS_DIR_OR_DOCUMENTS]``: loss and perplexity on held-out text.

Both paths run the training loop's own validation (``pretrain.train_step.validation_loss`` over a ``Loader``), so
the numbers mean the same thing: mean next-token cross-entropy over windows of ``seq_len + 1`` tokens of
the concatenated documents (each ending with EOS), in nats; perplexity is its exponential.

* no ``--data``: the run's validation split with its config's batches, sequence length and precision,
  which is the ``val_loss`` the loop logged at the checkpoint's step;
* ``--data DIR``: every sample of a token-shard directory (remainder of a last partial batch left out);
* ``--data FILE`` (JSONL or Parquet documents): tokenized on the fly with the run's tokenizer, as the
  tokenize stage would (same BOS/EOS), into a temporary shard directory, then as above.
"""

from __future__ import annotations

import math
import os
import tempfile

import pyarrow as pa

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import exists, join_path
from dataprep.tokenize.manifest import MANIFEST_NAME
from pretrain.components.dataloader import Loader, Source, build_loaders
from pretrain.components.device import resolve_device, resolve_precision
from pretrain.inference.loading import Trained, find_tokenizer, load_trained, model_for_inference
from pretrain.train_step import TrainStepContext, validation_loss


def run_validation(trained: Trained, device, max_batches: int | None = None) -> dict:
    """The training loop's validation at the checkpoint: same loader, batches and precision."""
    run = trained.run
    if run is None:
        raise MissingPath(f"{trained.path}: the run's config.yaml was not found; pass --data")
    _, val = build_loaders(run.data, run.seq_len, run.global_batch_size, run.micro_batch_size, 0, 1,
                           run.model.vocab_size)  # sources given as URLs: cached in a temporary folder
    if val is None:
        raise UsageError("the run has no validation split (data.val_fraction is 0 or the held-out documents "
                         "are shorter than seq_len + 1 tokens); pass --data")
    return _evaluate(trained, val, max_batches or run.log.val_batches, device, _precision(trained, device))


def evaluate_shards(trained: Trained, directory: str, device, seq_len: int, batch_size: int,
                    max_batches: int | None = None) -> dict:
    """Every full batch of samples of a token-shard directory."""
    source = Source.open(directory, seq_len, val_fraction=0.0, seed=0, vocab_size=trained.model.vocab_size)
    samples = source.num_samples("train")
    batch_size = min(batch_size, samples)
    loader = Loader([source], [1.0], "train", batch_size, batch_size)
    n_batches = samples // batch_size if max_batches is None else min(max_batches, samples // batch_size)
    return {**_evaluate(trained, loader, n_batches, device, _precision(trained, device)), "samples_available": samples}


def tokenize_documents(path: str, trained: Trained, out_dir: str, tokenizer_dir: str | None,
                       text_field: str) -> dict:
    """JSONL/Parquet documents -> token shards in ``out_dir``, encoded as the run's data were."""
    from dataprep.core.config import InputConfig
    from dataprep.core.stats import StageStats
    from dataprep.readers import READ_STAGE, iter_documents
    from dataprep.tokenize.stage import Tokenize

    if not exists(path):
        raise MissingPath(f"--data {path}: not found")
    tokenizer, manifest = find_tokenizer(trained, tokenizer_dir)
    kept, dropped, read = [], 0, StageStats(READ_STAGE)
    for result in iter_documents(path, InputConfig(paths=[path], text_field=text_field), read):
        kept.append(result.kept.select(["id", "url", "date", "source", "text"]))
        dropped += result.dropped.num_rows
    if not read.docs_kept:  # a missing or damaged file is a counted drop there: say why
        why = next(iter(read.errors_seen.messages), "")
        raise UsageError(f"{path}: no documents read" + (f" ({why})" if why else ""))
    tokenizer.save(os.path.join(out_dir, "tokenizer-in"))
    stage = Tokenize(tokenizer=os.path.join(out_dir, "tokenizer-in"), output_dir=os.path.join(out_dir, "shards"),
                     add_bos=bool(manifest.get("add_bos", False)), add_eos=bool(manifest.get("add_eos", True)))
    result = stage.run_local(pa.concat_tables(kept))
    return {"documents": result.kept.num_rows, "documents_dropped": dropped + result.dropped.num_rows}


def _precision(trained: Trained, device) -> str:
    """The run's precision on this device; without the run, what "auto" means in training."""
    return resolve_precision(trained.run.precision if trained.run else "auto", device)


def _evaluate(trained: Trained, loader: Loader, n_batches: int, device, precision: str) -> dict:
    if n_batches < 1:
        raise UsageError("no full batch of samples to evaluate")
    model = model_for_inference(trained, device)
    loss = validation_loss(model, loader, n_batches, TrainStepContext(device, precision, False, False), None)
    seq_len = loader.sources[0].seq_len
    return {"loss": loss, "perplexity": math.exp(min(loss, 700.0)), "tokens": n_batches * loader.global_batch * seq_len,
            "batches": n_batches, "seq_len": seq_len, "precision": precision}


def evaluate_checkpoint(checkpoint: str, data: str | None = None, device: str = "auto", seq_len: int | None = None,
                        batch_size: int | None = None, max_batches: int | None = None, tokenizer: str | None = None,
                        text_field: str = "text") -> dict:
    """Loss and perplexity of a checkpoint on ``data`` (a shard folder, local or at a URL, or documents
    tokenized here with the run's tokenizer; None: the run's validation split), at the run's sequence
    length and micro-batch unless given."""
    if max_batches is not None and max_batches < 1:
        raise UsageError(f"--max-batches {max_batches}: must be at least 1")
    trained = load_trained(checkpoint)
    device = resolve_device(device)
    run = trained.run
    seq_len = seq_len if seq_len is not None else (run.seq_len if run else trained.model.max_seq_len)
    batch_size = batch_size if batch_size is not None else (run.micro_batch_size if run else 8)
    if seq_len > trained.model.max_seq_len or seq_len < 1 or batch_size < 1:
        raise UsageError(f"--seq-len must be in [1, {trained.model.max_seq_len}] and --batch-size positive")
    if data is None:
        result = {"data": "validation split of the run", **run_validation(trained, device, max_batches)}
    elif exists(join_path(data, MANIFEST_NAME)):  # a shard folder, local or at a URL
        result = {"data": data, **evaluate_shards(trained, data, device, seq_len, batch_size, max_batches)}
    else:
        with tempfile.TemporaryDirectory(prefix="ccp-eval-") as tmp:
            docs = tokenize_documents(data, trained, tmp, tokenizer, text_field)
            shards = os.path.join(tmp, "shards")
            result = {"data": data, **docs,
                      **evaluate_shards(trained, shards, device, seq_len, batch_size, max_batches)}
    return {"checkpoint": trained.path, "step": trained.step, **result}
