"""Tokenizer training and Megatron-compatible token shards.

``tokenizer``: SentencePiece that round-trips text exactly. ``shards``: ``.bin``/``.idx`` writer and
memory-mapped reader. ``manifest``: the dataset's ``manifest.json``. ``stage``: the ``tokenize``
pipeline stage. ``verify``: ``dataprep verify-shards``. Adapters: ``hf_dataset``, ``nanogpt``, and Hugging
Face's ``tokenizer.json``, read by ``tokenizer_json_reader`` and written by ``tokenizer_json_writer``.
"""

from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.shards import IndexedShard, ShardError, dtype_for_vocab, open_dataset, write_shard

__all__ = ["IndexedShard", "ShardError", "dtype_for_vocab", "load_manifest", "open_dataset", "write_shard"]
