"""Attention within documents (``data.document_mask``): a window that packs three documents gives each
token the loss its document gives alone; the loader reads the boundaries from the shards' index; the default
(no mask) is unchanged. (Under FSDP x TP: tests/pretrain/distributed/test_document_mask_parallel.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataprep.core.validation import ConfigError
from document_windows import alone_and_packed, packed_window, per_token_losses
from pretrain.components.dataloader import Loader
from pretrain.components.token_sources import Source
from pretrain.config.loading import load_train_config
from pretrain.config.model import ModelConfig
from pretrain.models.documents import DocumentMask, document_positions
from pretrain.models.llama import Llama
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MODEL = ModelConfig(vocab_size=128, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, max_seq_len=128)


def test_document_mask_gives_each_packed_document_the_losses_it_gives_alone(tmp_path):
    source, docs = packed_window(tmp_path)
    model = Llama(MODEL)
    model.init_weights(0)
    with torch.no_grad():
        alone, packed = alone_and_packed(model, source, docs)
    assert alone.shape == packed.shape and len(alone) == sum(len(d) - 1 for d in docs)
    torch.testing.assert_close(packed, alone, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # without the mask, the later documents see the earlier ones
        row = Loader([source], [1.0], "train", 1, 1, documents=True).batch_at(0)[0][0]
        crossing, masked = per_token_losses(model, row[0]), per_token_losses(model, row[0], row[1])
    first = len(docs[0])
    torch.testing.assert_close(crossing[: first - 1], masked[: first - 1])  # the first document sees nothing before it
    assert not torch.allclose(crossing[first:], masked[first:], atol=1e-3)


def test_document_mask_gradients_equal_each_document_alone(tmp_path):
    """The backward pass sees the same separation: the summed losses' gradients agree."""
    source, docs = packed_window(tmp_path)
    grads = []
    for packed in (False, True):
        model = Llama(MODEL)
        model.init_weights(0)
        alone, kept = alone_and_packed(model, source, docs)
        (kept if packed else alone).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_document_mask_boundaries_come_from_the_index(tmp_path):
    source, docs = packed_window(tmp_path)
    lengths = [len(d) for d in docs]
    expected = np.repeat(np.arange(3), lengths)
    assert np.array_equal(source.document_ids("train", 0), expected)
    # a window that starts inside the first document: number 0 is the rest of it
    from pretrain.components.document_bounds import document_ids

    assert np.array_equal(document_ids(source.train, 5, 30), expected[5:35])
    assert np.array_equal(
        document_positions(torch.from_numpy(expected[None])).numpy()[0], np.concatenate([np.arange(n) for n in lengths])
    )


def test_document_mask_flex_block_mask_equals_the_dense_mask():
    """The block mask CUDA runs (forward checked here on the CPU) equals the dense one the CPU trains with."""
    documents = torch.tensor([[0] * 50 + [1] * 90 + [2] * 116, [0] * 200 + [1] * 56])
    q, k, v = (
        torch.randn(2, 4 if i == 0 else 2, 256, 16, generator=torch.Generator().manual_seed(i)) for i in range(3)
    )
    with torch.no_grad():
        dense = DocumentMask(documents, flex=False).attend(q, k, v)
        flex = DocumentMask(documents, flex=True).attend(q, k, v)
    torch.testing.assert_close(flex, dense, rtol=1e-4, atol=1e-5)


def test_document_mask_of_one_document_is_plain_causal_attention(tmp_path):
    model = Llama(MODEL)
    model.init_weights(0)
    tokens = torch.randint(0, 128, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(tokens, torch.zeros_like(tokens)), model(tokens), rtol=1e-5, atol=1e-6)


def test_document_mask_is_off_by_default(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=20)
    cfg = load_train_config(tiny_config(data, tmp_path / "run"))
    assert cfg.data.document_mask is False and cfg.data.document_positions is False
    masked = load_train_config(
        tiny_config(data, tmp_path / "run", data={"sources": [{"path": data}], "document_mask": True})
    )
    assert masked.data.document_positions is True
    loader = Loader([Source.open(data, 16, 0.0, 0)], [1.0], "train", 4, 2)
    assert loader.batch_at(0)[0].shape == (2, 17)  # ids only, as before


def test_document_mask_is_refused_where_it_cannot_run(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=20)
    with pytest.raises(ConfigError, match="document_mask does not combine with context parallelism"):
        load_train_config(
            tiny_config(
                data, tmp_path / "run", parallel={"cp": 2}, data={"sources": [{"path": data}], "document_mask": True}
            )
        )
    piped = load_train_config(
        tiny_config(
            data, tmp_path / "run", parallel={"pp": 2}, data={"sources": [{"path": data}], "document_mask": True}
        )
    )
    assert piped.parallel.pp == 2 and piped.data.document_mask
    with pytest.raises(ConfigError, match="document_positions .* set data.document_mask: true"):
        load_train_config(
            tiny_config(data, tmp_path / "run", data={"sources": [{"path": data}], "document_positions": True})
        )


def test_document_mask_trains_end_to_end(tmp_path):
    from pretrain.train import run

    data = make_token_dataset(tmp_path / "tokens", n_docs=80, max_len=20)  # several documents per window
    records = run(
        load_train_config(
            tiny_config(
                data, tmp_path / "run", data={"sources": [{"path": data}], "val_fraction": 0.1, "document_mask": True}
            )
        )
    )
    assert len(records) == 6 and records[-1]["loss"] < records[0]["loss"]
