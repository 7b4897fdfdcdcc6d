"""The streaming token loader: sample cutting, global order, DP independence, resume, mixtures, val split."""

from __future__ import annotations

import numpy as np
import pytest

from dataprep.tokenize.shards import open_dataset
from pretrain.components.dataloader import Loader, build_loaders
from pretrain.components.mixture_order import BLOCK, MixtureOrder, block_counts
from pretrain.components.token_sources import Source
from pretrain.components.validation_split import split_documents
from pretrain.config.data import DataConfig
from train_fixtures import make_token_dataset

SEQ = 16


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=150, n_shards=3)


@pytest.fixture(scope="module")
def source(dataset):
    return Source.open(dataset, SEQ, val_fraction=0.1, seed=7)


def _concat(shards, held_out, want_val: bool) -> np.ndarray:
    return np.concatenate([s.doc(i) for s, m in zip(shards, held_out) for i in range(s.num_docs) if m[i] == want_val])


def test_samples_are_cut_from_the_concatenated_training_documents(dataset, source):
    shards = open_dataset(dataset)
    held_out = [split_documents(s, 0.1, 7) for s in shards]
    train = _concat(shards, held_out, False)
    assert source.train.num_tokens == len(train)
    assert source.num_samples("train") == (len(train) - 1) // SEQ
    for i in (0, 1, 5, source.num_samples("train") - 1):
        np.testing.assert_array_equal(source.sample("train", i), train[i * SEQ : i * SEQ + SEQ + 1])
    val = _concat(shards, held_out, True)
    np.testing.assert_array_equal(source.sample("val", 0), val[: SEQ + 1])


def test_validation_split_holds_out_whole_documents(dataset):
    shards = open_dataset(dataset)
    for shard in shards:
        held = split_documents(shard, 0.1, 7)
        assert 0 < held.sum() < shard.num_docs
        np.testing.assert_array_equal(held, split_documents(shard, 0.1, 7))  # stable
    total = sum(s.num_tokens for s in shards)
    src = Source.open(dataset, SEQ, 0.1, 7)
    assert src.train.num_tokens + src.val.num_tokens == total


def test_no_sample_repeats_within_an_epoch(source):
    n = source.num_samples("train")
    loader = Loader([source], [1.0], "train", global_batch=4, micro_batch=2, seed=3)
    order = [loader.order(p)[1] for p in range(n)]
    assert sorted(order) == list(range(n))  # every sample exactly once
    next_epoch = [loader.order(p)[1] for p in range(n, 2 * n)]
    assert sorted(next_epoch) == list(range(n)) and next_epoch != order  # reshuffled


def _global_rows(sources, dp_size: int, steps: int, start_state: dict | None = None) -> np.ndarray:
    """Rows of every global batch in order, gathered from all dp ranks."""
    loaders = [Loader(sources, [1.0], "train", 8, 2, rank, dp_size, seed=5) for rank in range(dp_size)]
    for ld in loaders:
        if start_state:
            ld.load_state_dict(start_state)
    per_step = []
    for _ in range(steps):
        per_step.append(np.concatenate([np.concatenate(ld.next_step()) for ld in loaders]))
    return np.concatenate(per_step), loaders[0].state_dict()


def test_global_order_is_independent_of_dp_size(source):
    single, _ = _global_rows([source], 1, 6)
    four, _ = _global_rows([source], 4, 6)
    np.testing.assert_array_equal(single, four)


def test_global_order_survives_a_resume_on_another_dp_size(source):
    single, _ = _global_rows([source], 1, 6)
    # 3 steps on 4 ranks, then resume the loader state on 2 ranks
    first, state = _global_rows([source], 4, 3)
    assert state == {"samples_consumed": 24}
    rest, _ = _global_rows([source], 2, 3, state)
    np.testing.assert_array_equal(np.concatenate([first, rest]), single)


def test_a_rank_gets_its_slice_of_the_global_batch_in_micro_batches(source):
    loader = Loader([source], [1.0], "train", global_batch=8, micro_batch=2, dp_rank=1, dp_size=2, seed=5)
    assert loader.grad_accum_steps == 2
    micro = loader.next_step()
    assert [tuple(m.shape) for m in micro] == [(2, SEQ + 1), (2, SEQ + 1)]
    expected = np.stack([loader.sample(p) for p in range(4, 8)])
    np.testing.assert_array_equal(np.concatenate([m.numpy() for m in micro]), expected)


def test_a_global_batch_that_the_ranks_micro_batches_do_not_divide_is_refused(source):
    with pytest.raises(ValueError, match="not a multiple"):
        Loader([source], [1.0], "train", global_batch=6, micro_batch=2, dp_size=2)


def test_mixture_follows_token_weights(tmp_path, source):
    other = Source.open(make_token_dataset(tmp_path, n_docs=40, seed=1, n_shards=1), SEQ, 0.0, 7)
    order = MixtureOrder([source.num_samples("train"), other.num_samples("train")], [3.0, 1.0], seed=1)
    picks = np.array([order(p)[0] for p in range(4 * BLOCK)])
    assert (picks == 1).mean() == pytest.approx(0.25, abs=1 / BLOCK)
    # the small source is upsampled: its epochs repeat, each a full permutation
    n_small = other.num_samples("train")
    small = [order(p)[1] for p in range(4 * BLOCK) if order(p)[0] == 1][:n_small]
    assert sorted(small) == list(range(n_small))
    # deterministic
    again = MixtureOrder([source.num_samples("train"), n_small], [3.0, 1.0], seed=1)
    assert [again(p) for p in range(300)] == [order(p) for p in range(300)]


def test_block_counts():
    assert block_counts([1, 1, 2]).tolist() == [256, 256, 512]
    assert block_counts([1, 2]).sum() == BLOCK
    with pytest.raises(ValueError, match="less than 1/1024"):
        block_counts([1.0, 1e-6])


def test_bad_sources_give_clear_errors(tmp_path, dataset):
    with pytest.raises(FileNotFoundError, match="not found"):
        build_loaders(DataConfig(sources=[{"path": str(tmp_path / "nope")}]), SEQ, 8, 2, 0, 1)
    tiny = make_token_dataset(tmp_path / "tiny", n_docs=2, min_len=3, max_len=4, n_shards=1)
    with pytest.raises(ValueError, match="fewer than seq_len"):
        build_loaders(DataConfig(sources=[{"path": tiny}], val_fraction=0), SEQ, 8, 2, 0, 1)
    with pytest.raises(ValueError, match="exceeds the model's vocab_size"):
        build_loaders(DataConfig(sources=[{"path": dataset}]), SEQ, 8, 2, 0, 1, vocab_size=64)


def test_build_loaders_holds_out_a_fixed_validation_set(dataset):
    cfg = DataConfig(sources=[{"path": dataset}], val_fraction=0.1, seed=2)
    train, val = build_loaders(cfg, SEQ, 8, 2, 0, 1)
    assert val is not None and val.split == "val"
    np.testing.assert_array_equal(np.concatenate(val.batch_at(0)), np.concatenate(val.batch_at(0)))  # fixed set


def test_build_loaders_without_a_validation_fraction_has_no_validation_set(dataset):
    _, no_val = build_loaders(DataConfig(sources=[{"path": dataset}], val_fraction=0.0), SEQ, 8, 2, 0, 1)
    assert no_val is None


def test_a_small_source_holds_out_one_validation_batch(tmp_path, capsys):
    """1% of 20 documents is too few to validate on: the held-out part grows to one global batch of samples,
    in the split's own seeded order (the same every time), and says so in one line."""
    small = make_token_dataset(tmp_path, n_docs=20, n_shards=2)
    cfg = DataConfig(sources=[{"path": small}], val_fraction=0.01, seed=2)
    train, val = build_loaders(cfg, SEQ, 8, 2, 0, 1)
    assert val is not None and val.sources[0].num_samples("val") >= 8  # a global batch, no sample twice
    err = capsys.readouterr().err
    assert (
        f"{small}: val_fraction 0.01 holds out" in err and "fewer than one validation batch (129); holding out" in err
    )
    source = val.sources[0]
    assert source.train.num_tokens + source.val.num_tokens == sum(s.num_tokens for s in open_dataset(small))
    _, again = build_loaders(cfg, SEQ, 8, 2, 0, 1)
    np.testing.assert_array_equal(np.concatenate(again.batch_at(0)), np.concatenate(val.batch_at(0)))


def test_a_source_too_small_to_validate_on_is_a_config_error(tmp_path):
    tiny = make_token_dataset(tmp_path, n_docs=3, min_len=12, max_len=13, n_shards=1)  # 36 tokens
    with pytest.raises(
        ValueError, match=r"data.val_fraction 0.01: no source is large enough .* set data.val_fraction: 0"
    ):
        build_loaders(DataConfig(sources=[{"path": tiny}], val_fraction=0.01), SEQ, 8, 2, 0, 1)
    train, val = build_loaders(DataConfig(sources=[{"path": tiny}], val_fraction=0), SEQ, 8, 2, 0, 1)
    assert val is None and train.sources[0].num_samples("train") == 2
