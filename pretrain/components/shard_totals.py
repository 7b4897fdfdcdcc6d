"""What token-shard folders hold (tokens, documents, vocabulary), from their manifests, local or at a URL:
the corpus size ``pretrain budget`` and ``plan`` repeat and the vocabulary ``model.vocab_size: auto`` takes."""

from __future__ import annotations

import os

from dataprep.core.errors import MissingPath, UsageError


def shard_totals(directories: list[str], required: bool = True) -> dict | None:
    """Unique tokens, documents and vocabulary of token-shard directories (local or URLs), from their manifests.

    ``required=False`` skips folders without a manifest (shards not written yet) and answers None when
    none has one; a folder that does not exist is an error either way."""
    manifests = [m for m in (_manifest(d, required) for d in directories) if m is not None]
    if not manifests:
        return None
    vocab = {m["vocab_size"] for m in manifests}
    if len(vocab) > 1:
        raise UsageError(f"{', '.join(directories)}: the shards use different vocabularies {sorted(vocab)}")
    # copies written by rehydration (tokenize repeat_by) are not unique: count each document once
    tokens = sum(m.get("unique_tokens", m.get("tokens", sum(s["tokens"] for s in m["shards"]))) for m in manifests)
    if tokens <= 0:
        raise UsageError(f"{', '.join(directories)}: the manifest counts no tokens")
    return {
        "tokens": tokens,
        "documents": sum(m.get("unique_documents", m.get("documents", 0)) for m in manifests),
        "vocab_size": vocab.pop(),
        "directories": list(directories),
    }


def _manifest(directory: str, required: bool) -> dict | None:
    """A local folder's or a URL's ``manifest.json``; None when it has none and it is not ``required``."""
    from dataprep.tokenize.manifest import MANIFEST_NAME, load_manifest
    from pretrain.components.remote_shards import is_remote, load_remote_manifest

    if not is_remote(directory):
        if os.path.isfile(directory):
            raise UsageError(f"--data {directory}: is a file; give the token-shard folder (with {MANIFEST_NAME})")
        if not os.path.exists(directory):
            raise MissingPath(
                f"--data {directory}: no such folder; give the token-shard folder a pipeline's tokenize stage writes"
            )
        return load_manifest(directory) if required or os.path.exists(os.path.join(directory, MANIFEST_NAME)) else None
    try:
        return load_remote_manifest(directory)
    except FileNotFoundError:
        if required:
            raise
        return None
