"""An ablation's arms as token shards under one tokenizer: each ``NAME=PATH`` is token shards (a
``manifest.json`` folder), a pipeline's output (its ``shards/``, else its cleaned ``corpus/``), JSONL/Parquet
documents, or a mixture preset (its shard folders and weights). Documents are tokenized with the
ablation's one tokenizer: the shard arms' own (they must share it), the one given, or one trained on a
sample of every arm's documents."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from dataprep.core.errors import MissingPath, UsageError
from dataprep.tokenize.manifest import MANIFEST_NAME, TOKENIZER_DIR, load_manifest
from dataprep.tokenize.tokenizer import Tokenizer, tokenizer_exists

ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


@dataclass
class Arm:
    """One arm: its name, what was given, and the shard folders (with weights) it trains on."""

    name: str
    given: str
    documents: str | None = None  # JSONL/Parquet documents still to tokenize
    shards: list[str] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


def parse_arm(spec: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (name, path)."""
    import re

    name, sep, path = spec.partition("=")
    if not sep or not path or not re.match(ARM_NAME, name):
        raise UsageError(f"--arm {spec!r}: expected NAME=PATH (NAME of letters, digits, '.', '_', '-')")
    return name, path


def resolve_arm(name: str, path: str) -> Arm:
    """What ``path`` holds: token shards, a pipeline output, documents or a mixture preset."""
    from pretrain.mixture_presets import find_mixture, load_mixture

    if os.path.isfile(os.path.join(path, MANIFEST_NAME)):
        return Arm(name, path, shards=[path], weights=[1.0])
    if os.path.isfile(os.path.join(path, "shards", MANIFEST_NAME)):  # a pipeline's output folder
        return Arm(name, path, shards=[os.path.join(path, "shards")], weights=[1.0])
    if os.path.isdir(os.path.join(path, "corpus")):
        return Arm(name, path, documents=os.path.join(path, "corpus"))
    if os.path.exists(path):
        return Arm(name, path, documents=path)
    if find_mixture(path) is not None and not path.endswith((".jsonl", ".parquet", ".gz")):
        sources = load_mixture(path)
        return Arm(
            name, path, shards=[s["path"] for s in sources], weights=[float(s.get("weight", 1.0)) for s in sources]
        )
    raise MissingPath(f"--arm {name}={path}: no such file, folder or mixture preset")


def shards_tokenizer(arms: list[Arm], given: str | None) -> str | None:
    """The tokenizer folder the shard arms were encoded with (refusing two different ones, or one other
    than ``given``); None when no arm is token shards."""
    found: dict[str, str] = {}
    for arm in arms:
        for path in arm.shards:
            sha = (load_manifest(path).get("tokenizer") or {}).get("model_sha256")
            if not sha:
                raise UsageError(
                    f"--arm {arm.name}: {path}'s manifest names no tokenizer: give the arm's documents "
                    "instead, or shards written by a tokenize stage"
                )
            found.setdefault(sha, path)
    if len(found) > 1:
        raise UsageError(
            "the token-shard arms use different tokenizers (" + ", ".join(found.values()) + "): an "
            "ablation compares data under one tokenizer; tokenize them alike, or give their documents"
        )
    if not found:
        return None
    ((sha, path),) = found.items()
    if given is not None and Tokenizer.load(given).sha256 != sha:
        raise UsageError(f"--tokenizer {given} is not the tokenizer of the token-shard arm {path}")
    return os.path.join(path, TOKENIZER_DIR)


def prepare_arms(
    arms: list[Arm],
    out_dir: str,
    tokenizer: str | None,
    vocab_size: int,
    sample_documents: int = 20_000,
    text_field: str = "text",
) -> Tokenizer:
    """Every arm as token shards under ``out_dir/arms/NAME/shards`` (documents tokenized once; a rerun
    reuses them) with the ablation's tokenizer, which is copied to ``out_dir/tokenizer``."""
    from pretrain.inference.evaluate import read_documents

    own = os.path.join(out_dir, "tokenizer")
    source = shards_tokenizer(arms, tokenizer) or tokenizer
    tables = {
        arm.name: read_documents(arm.documents, text_field, f"--arm {arm.name}")[0]
        for arm in arms
        if arm.documents and not _tokenized(out_dir, arm)
    }
    if not tokenizer_exists(own):
        if source is not None:
            shutil.copytree(source, own + ".tmp", dirs_exist_ok=True)
            os.replace(own + ".tmp", own)
        else:
            _train_tokenizer(tables, own, vocab_size, sample_documents)
    for arm in arms:
        if arm.documents:
            shards = os.path.join(out_dir, "arms", arm.name, "shards")
            if arm.name in tables:
                _tokenize(tables[arm.name], own, shards)
            arm.shards, arm.weights = [shards], [1.0]
    return Tokenizer.load(own)


def _tokenized(out_dir: str, arm: Arm) -> bool:
    return os.path.isfile(os.path.join(out_dir, "arms", arm.name, "shards", MANIFEST_NAME))


def _train_tokenizer(tables: dict, folder: str, vocab_size: int, sample_documents: int) -> None:
    """One tokenizer on the same share of every arm's documents (the shared seeded sample)."""
    from dataprep.core.sampling import sample_texts
    from dataprep.tokenize.tokenizer import train_tokenizer

    each = max(1, sample_documents // max(len(tables), 1))
    sample = [t for table in tables.values() for t in sample_texts(table.column("text").to_pylist(), each)[0]]
    train_tokenizer(sample, folder + ".tmp", vocab_size)
    os.replace(folder + ".tmp", folder)


def _tokenize(table, tokenizer: str, shards: str) -> None:
    from dataprep.tokenize.stage import Tokenize

    Tokenize(tokenizer=tokenizer, output_dir=shards, add_eos=True).run_local(table)
