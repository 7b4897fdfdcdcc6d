"""The planner with attention within documents (``pretrain plan --document-mask``): attention FLOPs over each
document's blocks, the block mask in memory, no context parallel layouts, and the training
config it writes turns the mask on."""

from __future__ import annotations

import pytest

from pretrain.cli import main as cli
from pretrain.components.document_bounds import mean_document_tokens
from pretrain.config.loading import load_train_config
from pretrain.models.documents import FLEX_BLOCK, attention_span, block_mask_bytes
from pretrain.planning.flops import flops_per_token
from pretrain.planning.hardware import get_gpu
from pretrain.planning.plan import plan
from pretrain.planning.plan_inputs import plan_model
from train_fixtures import make_token_dataset


def test_document_mask_attention_flops_follow_the_documents_not_the_window():
    cfg = plan_model("1.2B", 8192)
    dense, masked = flops_per_token(cfg, 8192), flops_per_token(cfg, 8192, attention_span(8192, 900))
    attention = 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim
    assert dense - masked == pytest.approx(attention * (8192 - 900 - FLEX_BLOCK))
    assert attention_span(8192, 20000) == 8192 and attention_span(8192, None) == 8192


@pytest.fixture(scope="module")
def dense_and_masked_plans() -> tuple[dict, dict]:
    """One 1.2B plan on 64 H100s without and with the document mask (documents of 900 tokens)."""
    cfg = plan_model("1.2B", 8192)
    kw = {"gpus": 64, "gpu": get_gpu("h100"), "seq_len": 8192, "tokens": 1e11}
    return plan(cfg, **kw), plan(cfg, **kw, document_tokens=900)


def test_document_mask_plan_is_faster(dense_and_masked_plans):
    dense, masked = dense_and_masked_plans
    assert masked["time"]["step_seconds"] < 0.8 * dense["time"]["step_seconds"]
    assert masked["document_mask"] == {"mean_document_tokens": 900, "attention_span": 900 + FLEX_BLOCK}


def test_document_mask_plan_holds_the_block_mask_in_memory(dense_and_masked_plans):
    _, masked = dense_and_masked_plans
    memory = masked["layout"]["memory"]
    assert memory["document_mask"] == block_mask_bytes(masked["micro_batch"], 8192) > 0


def test_document_mask_plan_keeps_to_runnable_layouts(dense_and_masked_plans):
    _, masked = dense_and_masked_plans
    assert masked["layout"]["cp"] == 1
    assert not any(" CP " in d for d in masked["decisions"])
    assert any(" PP " in d for d in masked["decisions"])  # pipeline layouts take the mask


def test_document_mask_plan_takes_the_document_length_from_the_shards(tmp_path, capsys):
    data = make_token_dataset(tmp_path / "tokens", n_docs=40)
    from dataprep.tokenize.shards import open_dataset

    mean = mean_document_tokens(open_dataset(data))
    out = tmp_path / "train.yaml"
    assert cli(["plan", "tiny", "--data", data, "--document-mask", "--output", str(out)]) == 0
    assert f"documents of {mean:,.0f} tokens" in capsys.readouterr().out
    assert load_train_config(str(out)).data.document_mask is True


def test_document_mask_plan_without_shards_is_refused(capsys):
    assert cli(["plan", "tiny", "--document-mask"]) != 0  # no shards to read the documents of
    assert "--document-mask without a length" in capsys.readouterr().err
