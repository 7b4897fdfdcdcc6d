"""Check a token-shard directory (or a URL) byte by byte against its manifest.

Every ``.bin``/``.idx`` is re-hashed (SHA-256) and compared with ``manifest.json``, then opened to check
its header, sizes, document and token counts, and every token id is checked to be below the manifest's
``vocab_size`` (an id beyond it fails training late); the tokenizer copy is checked against the manifest's
tokenizer hash. Each problem is one line naming the shard (the command: ``dataprep verify-shards``).
"""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import fsspec
import numpy as np

from dataprep.core.storage import join_path
from dataprep.tokenize.manifest import MANIFEST_NAME, TOKENIZER_DIR, load_manifest
from dataprep.tokenize.shards import IndexedShard, ShardError, parse_index
from dataprep.tokenize.tokenizer import MODEL_NAME


def file_sha256(path: str) -> str:
    """SHA-256 of a local file or a URL fsspec reads (streamed)."""
    with fsspec.open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def verify_dataset(directory: str, checksums: bool = True) -> list[str]:
    """Problems found in ``directory`` (a local folder or a URL; empty when it is intact). ``checksums=False``
    checks only structure and counts (fast: no full read, so no token ids either)."""
    manifest = load_manifest(directory)
    fs, _ = fsspec.core.url_to_fs(directory)
    problems = []
    documents = tokens = 0
    for entry in manifest["shards"]:
        name = entry["name"]
        file_problems = [p for ext in ("bin", "idx") for p in _file_problems(fs, directory, entry, ext)]
        problems += file_problems
        if file_problems:
            continue
        try:
            shard, broken = _open_shard(fs, directory, name), None
        except ShardError as exc:
            shard, broken = None, str(exc)
        found = None
        if checksums:  # a changed file is still opened: its structure and ids say where the damage is
            bin_sha256, found = scan_bin(
                join_path(directory, f"{name}.bin"), shard.dtype if shard else manifest["dtype"], manifest["vocab_size"]
            )
            digests = {"bin": bin_sha256, "idx": file_sha256(join_path(directory, f"{name}.idx"))}
            problems += [
                f"shard {name}: .{ext} SHA-256 does not match the manifest (file changed or corrupt)"
                for ext, digest in digests.items()
                if digest != entry[f"{ext}_sha256"]
            ]
        if shard is None:
            problems.append(broken)
            continue
        if str(shard.dtype) != manifest["dtype"]:
            problems.append(f"shard {name}: dtype {shard.dtype}, manifest says {manifest['dtype']}")
        if (shard.num_docs, shard.num_tokens) != (entry["documents"], entry["tokens"]):
            problems.append(
                f"shard {name}: {shard.num_docs} documents / {shard.num_tokens} tokens, manifest says "
                f"{entry['documents']} / {entry['tokens']}"
            )
        if found:
            problems.append(
                f"shard {name}: token id {found[1]} at token offset {found[0]} of {name}.bin is not below "
                f"the manifest's vocab_size {manifest['vocab_size']} (corrupt, or made with another tokenizer)"
            )
        documents += shard.num_docs
        tokens += shard.num_tokens
    if not problems and (documents, tokens) != (manifest.get("documents", documents), manifest.get("tokens", tokens)):
        problems.append(
            f"{MANIFEST_NAME}: totals {manifest['documents']} documents / {manifest['tokens']} tokens "
            "disagree with its shards"
        )
    model = join_path(directory, TOKENIZER_DIR, MODEL_NAME)
    if _exists(fs, model) and file_sha256(model) != manifest["tokenizer"].get("model_sha256"):
        problems.append(f"{TOKENIZER_DIR}/{MODEL_NAME}: SHA-256 differs from the manifest's tokenizer")
    return problems


def scan_bin(path: str, dtype, vocab_size: int, chunk_tokens: int = 1 << 24) -> tuple[str, tuple[int, int] | None]:
    """A ``.bin`` (local or a URL) read once in chunks: its SHA-256, and (token offset, id) of the first id
    outside ``[0, vocab_size)``, None when every id is in the vocabulary."""
    dtype = np.dtype(dtype).newbyteorder("<")
    digest, offset, found = hashlib.sha256(), 0, None
    with fsspec.open(path, "rb") as fh:
        while data := fh.read(chunk_tokens * dtype.itemsize):
            digest.update(data)
            ids = np.frombuffer(data, dtype=dtype, count=len(data) // dtype.itemsize)
            if found is None and ids.size and (ids.max() >= vocab_size or ids.min() < 0):
                i = int(np.flatnonzero((ids < 0) | (ids >= vocab_size))[0])
                found = offset + i, int(ids[i])
            offset += ids.size
    return digest.hexdigest(), found


def _exists(fs, path: str) -> bool:
    return fs.exists(fsspec.core.url_to_fs(path)[1])


def _file_problems(fs, directory: str, entry: dict, ext: str) -> list[str]:
    """What is wrong with a shard's ``.bin`` or ``.idx`` as a file: missing, or not the manifest's size."""
    name, path = entry["name"], join_path(directory, f"{entry['name']}.{ext}")
    if not _exists(fs, path):
        return [f"shard {name}: .{ext} is missing"]
    size, want = fs.size(fsspec.core.url_to_fs(path)[1]), entry.get(f"{ext}_bytes")
    if want is not None and size != want:
        return [f"shard {name}: .{ext} is {size} bytes, manifest says {want}"]
    return []


def _open_shard(fs, directory: str, name: str):
    """The shard's structure: memory-mapped when local; from its fetched ``.idx`` and ``.bin`` size at a URL."""
    if "://" not in directory:
        return IndexedShard(os.path.join(directory, name))
    index = fs.cat_file(fsspec.core.url_to_fs(join_path(directory, f"{name}.idx"))[1])
    dtype, lengths, offsets, _ = parse_index(name, index)
    bin_size, want = (
        fs.size(fsspec.core.url_to_fs(join_path(directory, f"{name}.bin"))[1]),
        int(offsets[-1]) * dtype.itemsize,
    )
    if bin_size != want:
        raise ShardError(f"shard {name}: .bin is {bin_size} bytes but .idx describes {want}: truncated or mismatched")
    return SimpleNamespace(dtype=dtype, num_docs=len(lengths), num_tokens=int(offsets[-1]))
