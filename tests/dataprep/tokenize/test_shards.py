"""Megatron indexed-dataset shards: layout byte by byte, Megatron-LM interop, and damage detection."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from dataprep.tokenize.manifest import build_manifest, load_manifest, write_manifest
from dataprep.tokenize.shards import (
    IndexedShard,
    ShardError,
    ShardWriter,
    dtype_for_vocab,
    open_dataset,
    write_shard,
)
from dataprep.tokenize.verify import verify_dataset
from megatron_reference import megatron_indexed_dataset

DOCS = [
    np.array([5, 6, 7], np.int32),
    np.array([], np.int32),
    np.array([65_535, 0, 2], np.int32),
    np.arange(100, 140, dtype=np.int32),
]


# DOCS with every id inside the vocabulary of make_dataset (65,535 is the largest uint16, not a token of it)
VALID_DOCS = [DOCS[0], DOCS[1], np.array([65_495, 0, 2], np.int32), DOCS[3]]


def make_dataset(tmp_path, docs=VALID_DOCS, vocab_size=65_536 - 40, name="shard-00000-00000"):
    """A one-shard directory with a manifest, as the tokenize stage writes it."""
    meta = write_shard(str(tmp_path / name), docs, dtype_for_vocab(vocab_size))
    tokenizer = {"model_sha256": "0" * 64, "vocab_size": vocab_size, "special_ids": {"bos": 1, "eos": 2, "pad": 3}}
    write_manifest(str(tmp_path), build_manifest([meta], tokenizer, dtype_for_vocab(vocab_size).name))
    return tmp_path / name


def test_idx_header_field_by_field(tmp_path):
    meta = write_shard(str(tmp_path / "s"), DOCS, np.uint16)
    raw = (tmp_path / "s.idx").read_bytes()
    assert raw[:9] == b"MMIDIDX\x00\x00"
    assert struct.unpack_from("<Q", raw, 9) == (1,)  # version
    assert raw[17] == 8  # dtype code: uint16
    n_seq, n_doc = struct.unpack_from("<QQ", raw, 18)
    assert (n_seq, n_doc) == (4, 5)  # one sequence per document; document indices hold documents + 1
    offset = 34
    lengths = np.frombuffer(raw, "<i4", n_seq, offset)
    pointers = np.frombuffer(raw, "<i8", n_seq, offset + 4 * n_seq)
    doc_idx = np.frombuffer(raw, "<i8", n_doc, offset + 12 * n_seq)
    assert lengths.tolist() == [3, 0, 3, 40]
    assert pointers.tolist() == [0, 6, 6, 12]  # byte offsets: uint16 = 2 bytes per token
    assert doc_idx.tolist() == [0, 1, 2, 3, 4]
    assert len(raw) == offset + 12 * n_seq + 8 * n_doc == meta["idx_bytes"]
    tokens = np.frombuffer((tmp_path / "s.bin").read_bytes(), "<u2")
    assert tokens.tolist() == np.concatenate(DOCS).tolist()
    assert meta["documents"] == 4 and meta["tokens"] == 46 and meta["bin_bytes"] == 92


def test_same_bytes_as_megatron_builder(tmp_path):
    import torch

    idx_mod = megatron_indexed_dataset()
    for dtype in (np.uint16, np.int32):
        ours = str(tmp_path / f"ours-{dtype.__name__}")
        theirs = str(tmp_path / f"theirs-{dtype.__name__}")
        write_shard(ours, DOCS, dtype)
        builder = idx_mod.IndexedDatasetBuilder(theirs + ".bin", dtype=dtype)
        for doc in DOCS:
            builder.add_document(torch.from_numpy(doc.astype(np.int64)), [len(doc)])
        builder.finalize(theirs + ".idx")
        for ext in (".bin", ".idx"):
            assert open(ours + ext, "rb").read() == open(theirs + ext, "rb").read(), ext


def test_readable_by_megatron(tmp_path):
    idx_mod = megatron_indexed_dataset()
    for dtype in (np.uint16, np.int32):
        ours = str(tmp_path / f"ours-{dtype.__name__}")
        write_shard(ours, DOCS, dtype)
        dataset = idx_mod.IndexedDataset(ours, multimodal=False, mmap=True)
        assert len(dataset) == len(DOCS)
        assert dataset.index.dtype == dtype
        for i, doc in enumerate(DOCS):
            assert dataset[i].tolist() == doc.tolist()
        assert dataset.get(3, offset=5, length=4).tolist() == DOCS[3][5:9].tolist()


def test_indexed_shard_reader_api(tmp_path):
    write_shard(str(tmp_path / "s"), DOCS, np.int32)
    shard = IndexedShard(str(tmp_path / "s"))
    assert shard.dtype == np.int32 and shard.num_docs == 4 and shard.num_tokens == 46
    assert shard.doc_lengths.tolist() == [3, 0, 3, 40]
    assert shard.doc_offsets.tolist() == [0, 3, 3, 6, 46] and shard.doc_offsets.dtype == np.int64
    assert shard.doc(1).size == 0
    assert shard.doc(-1).tolist() == DOCS[3].tolist()
    assert shard.tokens[3:6].tolist() == [65_535, 0, 2]
    with pytest.raises(IndexError, match="document 4 out of range"):
        shard.doc(4)


def test_a_shard_of_no_documents_reads_empty(tmp_path):
    write_shard(str(tmp_path / "none"), [], np.uint16)  # a shard with no documents at all
    empty = IndexedShard(str(tmp_path / "none"))
    assert (empty.num_docs, empty.num_tokens, list(empty)) == (0, 0, [])


def test_dtype_switch_at_vocab_boundary(tmp_path):
    assert dtype_for_vocab(65_499) == np.uint16
    assert dtype_for_vocab(65_500) == np.int32  # Megatron's DType.optimal_dtype boundary
    assert dtype_for_vocab(128_256) == np.int32
    big = [np.array([0, 65_499, 128_000], np.int64)]
    write_shard(str(tmp_path / "big"), big, dtype_for_vocab(128_256))
    assert (tmp_path / "big.idx").read_bytes()[17] == 4  # int32 code
    assert IndexedShard(str(tmp_path / "big")).doc(0).tolist() == [0, 65_499, 128_000]
    with pytest.raises(ValueError, match="does not fit in uint16"):
        write_shard(str(tmp_path / "overflow"), big, np.uint16)
    assert not (tmp_path / "overflow.bin").exists() and not list(tmp_path.glob(".tmp-*"))


def test_shard_writer_rolls_at_document_boundaries(tmp_path):
    with ShardWriter(str(tmp_path / "shard-00007"), np.uint16, tokens_per_shard=100) as writer:
        for i in range(10):
            writer.add(np.full(30, i, np.uint16))
        metas = writer.close()
    assert [m["name"] for m in metas] == ["shard-00007-00000", "shard-00007-00001", "shard-00007-00002"]
    assert [m["documents"] for m in metas] == [4, 4, 2]  # closes at the first boundary >= 100 tokens
    docs = [d.tolist() for m in metas for d in IndexedShard(str(tmp_path / m["name"]))]
    assert docs == [[i] * 30 for i in range(10)]


def test_truncated_bin_names_the_shard(tmp_path):
    prefix = make_dataset(tmp_path)
    with open(f"{prefix}.bin", "r+b") as fh:
        fh.truncate(os.path.getsize(f"{prefix}.bin") - 2)
    with pytest.raises(ShardError, match=r"shard shard-00000-00000: \.bin is 90 bytes but \.idx describes 92"):
        open_dataset(str(tmp_path))
    assert any("shard-00000-00000: .bin is 90 bytes, manifest says 92" in p for p in verify_dataset(str(tmp_path)))


def test_truncated_idx_names_the_shard(tmp_path):
    prefix = make_dataset(tmp_path)
    data = open(f"{prefix}.idx", "rb").read()
    open(f"{prefix}.idx", "wb").write(data[:-8])
    with pytest.raises(ShardError, match="shard-00000-00000: .idx is .* truncated or corrupt"):
        IndexedShard(str(prefix))
    open(f"{prefix}.idx", "wb").write(data[:20])
    with pytest.raises(ShardError, match="shorter than the 34-byte header"):
        IndexedShard(str(prefix))


def test_wrong_magic(tmp_path):
    prefix = make_dataset(tmp_path)
    with open(f"{prefix}.idx", "r+b") as fh:
        fh.write(b"NOTANIDX\x00")
    with pytest.raises(ShardError, match="shard-00000-00000: bad magic .*not a Megatron indexed dataset"):
        IndexedShard(str(prefix))


def test_flipped_byte_in_bin_is_caught_by_checksum(tmp_path):
    prefix = make_dataset(tmp_path)
    assert verify_dataset(str(tmp_path)) == []
    with open(f"{prefix}.bin", "r+b") as fh:
        fh.seek(7)
        byte = fh.read(1)
        fh.seek(7)
        fh.write(bytes([byte[0] ^ 0x10]))
    assert verify_dataset(str(tmp_path), checksums=False) == []  # structure alone cannot see it
    assert verify_dataset(str(tmp_path)) == [
        "shard shard-00000-00000: .bin SHA-256 does not match the manifest (file changed or corrupt)"
    ]


def test_flipped_byte_in_idx_is_caught_by_structure(tmp_path):
    prefix = make_dataset(tmp_path)
    with open(f"{prefix}.idx", "r+b") as fh:
        fh.seek(34 + 4)  # second sequence length: 0 -> 16
        fh.write(b"\x10")
    with pytest.raises(ShardError, match="shard-00000-00000: sequence pointers in .idx do not match"):
        IndexedShard(str(prefix))
    problems = verify_dataset(str(tmp_path))
    assert problems and "shard-00000-00000: .idx SHA-256" in problems[0]


def test_the_manifest_describes_the_shards(tmp_path):
    make_dataset(tmp_path)
    manifest = load_manifest(str(tmp_path))
    assert manifest["dtype"] == "uint16" and manifest["documents"] == 4 and manifest["tokens"] == 46
    assert manifest["special_ids"] == {"bos": 1, "eos": 2, "pad": 3}
    assert manifest["shards"][0]["bin_sha256"] and manifest["shards"][0]["name"] == "shard-00000-00000"


def test_a_shard_that_disagrees_with_the_manifest_is_refused(tmp_path):
    make_dataset(tmp_path)
    manifest = load_manifest(str(tmp_path))
    manifest["shards"][0]["tokens"] = 45
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        ShardError, match=r"shard shard-00000-00000 disagrees with manifest.json: 46 tokens \(manifest: 45\)"
    ):
        open_dataset(str(tmp_path))


def test_a_missing_index_or_manifest_is_refused(tmp_path):
    prefix = make_dataset(tmp_path)
    os.unlink(f"{prefix}.idx")
    with pytest.raises(ShardError, match="shard shard-00000-00000: .idx is missing"):
        open_dataset(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="manifest.json not found"):
        load_manifest(str(tmp_path / "elsewhere"))


def test_verify_shards_command(tmp_path, capsys):
    from pipelines.cli import main

    prefix = make_dataset(tmp_path)
    assert main(["verify-shards", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("OK: 1 shards, 4 documents, 46 tokens (uint16")
    with open(f"{prefix}.bin", "ab") as fh:
        fh.write(b"\x00\x00")
    assert main(["verify-shards", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL shard shard-00000-00000: .bin is 94 bytes, manifest says 92" in out and "FAILED" in out


def test_verify_shards_names_ids_beyond_the_manifest_vocabulary(tmp_path, capsys):
    """A manifest whose vocab_size is smaller than ids in its shards (every checksum intact) fails,
    naming the shard and the token offset; --quick reads no tokens and cannot see it."""
    from pipelines.cli import main

    make_dataset(tmp_path)
    manifest = load_manifest(str(tmp_path))
    manifest["vocab_size"] = 120  # ids 100..139 of the last document and 65,495 before them
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify-shards", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert (
        "FAIL shard shard-00000-00000: token id 65495 at token offset 3 of shard-00000-00000.bin is not below "
        "the manifest's vocab_size 120"
    ) in out
    assert main(["verify-shards", str(tmp_path), "--quick"]) == 0
    # bytes set to 0xFF in a .bin: besides the checksum, the first id beyond the vocabulary says where
    make_dataset(tmp_path / "ff")
    with open(tmp_path / "ff" / "shard-00000-00000.bin", "r+b") as fh:
        fh.seek(5 * 2)
        fh.write(b"\xff" * 4)  # tokens 5 and 6
    assert verify_dataset(str(tmp_path / "ff")) == [
        "shard shard-00000-00000: .bin SHA-256 does not match the manifest (file changed or corrupt)",
        "shard shard-00000-00000: token id 65535 at token offset 5 of shard-00000-00000.bin is not below the "
        "manifest's vocab_size 65496 (corrupt, or made with another tokenizer)",
    ]


def test_nanogpt_export(tmp_path):
    from dataprep.tokenize.nanogpt import export_nanogpt

    make_dataset(tmp_path / "ds")
    counts = export_nanogpt(str(tmp_path / "ds"), str(tmp_path / "nano"), val_fraction=0.25)
    train = np.memmap(tmp_path / "nano" / "train.bin", dtype=np.uint16, mode="r")
    val = np.memmap(tmp_path / "nano" / "val.bin", dtype=np.uint16, mode="r")
    assert counts == {"train_tokens": 6, "val_tokens": 40, "val_documents": 1}
    assert np.concatenate([train, val]).tolist() == np.concatenate(VALID_DOCS).tolist()
    make_dataset(tmp_path / "wide", vocab_size=128_256)
    with pytest.raises(ValueError, match="uint16"):
        export_nanogpt(str(tmp_path / "wide"), str(tmp_path / "nano2"))


def test_hf_iterable_dataset(tmp_path):
    pytest.importorskip("datasets")
    from dataprep.tokenize.hf_dataset import iterable_dataset

    make_dataset(tmp_path)
    ds = iterable_dataset(str(tmp_path))
    rows = [row["input_ids"] for row in ds]
    assert rows == [d.tolist() for d in VALID_DOCS]
    assert ds.num_shards == 1
