"""Token shards read from a URL: a real HTTP server with Range support on 127.0.0.1, read through fsspec's
HTTP filesystem, must give the local loader's samples, resume exactly, keep its cache within its byte
limit, refuse a changed or missing shard by URL and ride out transient 503s."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataprep.tokenize.shards import ShardError
from dataprep.tokenize.verify import verify_dataset
from pretrain.components.dataloader import build_loaders
from pretrain.components.remote_shards import RemoteReadError
from range_server import serve_folder
from remote_loaders import GLOBAL, MICRO, SEQ, global_batch, rank_loaders, remote_data_config
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

pytest.importorskip("aiohttp")  # fsspec's HTTP filesystem


@pytest.fixture()
def dataset(tmp_path):
    return make_token_dataset(tmp_path / "shards", n_docs=120, n_shards=2)


def _bytes_in(folder) -> int:
    """Bytes of the files in ``folder`` now (worker threads may evict one while we look)."""
    total = 0
    for entry in os.scandir(folder):
        try:
            total += entry.stat().st_size
        except FileNotFoundError:
            pass
    return total


@pytest.mark.parametrize("dp_size", [1, 2])
def test_remote_source_gives_the_local_samples(dataset, tmp_path, dp_size):
    local, _ = rank_loaders(dataset, tmp_path / "unused", dp_size)
    with serve_folder(os.path.dirname(dataset)) as server:
        remote, remote_val = rank_loaders(f"{server.url}/shards", tmp_path / "cache", dp_size)
        for _ in range(200):
            np.testing.assert_array_equal(global_batch(remote), global_batch(local))
            for rank in range(dp_size):
                assert _bytes_in(tmp_path / "cache" / f"r{rank}") <= 8192
        _, local_val = build_loaders(remote_data_config(dataset), SEQ, GLOBAL, MICRO, 0, 1)
        for step in range(3):
            np.testing.assert_array_equal(
                remote_val.batch_at(step * GLOBAL)[0].numpy(), local_val.batch_at(step * GLOBAL)[0].numpy()
            )
    assert remote[0].state_dict() == local[0].state_dict()


def test_remote_loader_resumes_exactly(dataset, tmp_path):
    (local,), _ = rank_loaders(dataset, tmp_path / "unused")
    expected = [global_batch([local]) for _ in range(40)]
    with serve_folder(os.path.dirname(dataset)) as server:
        (first,), _ = rank_loaders(f"{server.url}/shards", tmp_path / "before")
        for _ in range(20):
            global_batch([first])
        (resumed,), _ = rank_loaders(f"{server.url}/shards", tmp_path / "after")
        resumed.load_state_dict(first.state_dict())
        for step in range(20, 40):
            np.testing.assert_array_equal(global_batch([resumed]), expected[step])


def test_cache_evicts_to_stay_within_its_byte_limit(dataset, tmp_path):
    with serve_folder(os.path.dirname(dataset)) as server:
        with pytest.warns(UserWarning, match="max_bytes 1024 may not hold the 2 steps read ahead"):
            (loader,), _ = rank_loaders(f"{server.url}/shards", tmp_path / "cache", block_bytes=256, max_bytes=1024)
        cache = loader.sources[0].cache
        for _ in range(50):
            global_batch([loader])
            assert _bytes_in(tmp_path / "cache" / "r0") <= 1024 and cache.bytes_on_disk <= 1024
    assert cache.bytes_fetched > 4 * 1024  # blocks were evicted and fetched again


def test_a_shard_changed_on_the_server_is_refused_with_its_url(dataset, tmp_path):
    with open(os.path.join(dataset, "part-00001.bin"), "ab") as fh:
        fh.write(b"\0\0")
    with serve_folder(os.path.dirname(dataset)) as server:
        url = f"{server.url}/shards/part-00001.bin"
        with pytest.raises(ShardError, match=f"{url} is .* bytes but manifest.json says"):
            rank_loaders(f"{server.url}/shards", tmp_path / "cache")


def test_an_index_whose_checksum_differs_is_refused_with_its_url(dataset, tmp_path):
    with open(os.path.join(dataset, "part-00000.idx"), "r+b") as fh:
        fh.seek(40)
        fh.write(b"\x07")  # same size, other bytes
    with serve_folder(os.path.dirname(dataset)) as server:
        with pytest.raises(ShardError, match=f"{server.url}/shards/part-00000.idx: SHA-256 does not match"):
            rank_loaders(f"{server.url}/shards", tmp_path / "cache")


@pytest.mark.filterwarnings("ignore:data.cache.max_bytes")  # a small cache on purpose: blocks are fetched again
def test_a_shard_truncated_during_the_run_stops_it_with_its_url(dataset, tmp_path):
    with serve_folder(os.path.dirname(dataset)) as server:
        (loader,), _ = rank_loaders(f"{server.url}/shards", tmp_path / "cache", block_bytes=256, max_bytes=1024)
        global_batch([loader])
        os.truncate(os.path.join(dataset, "part-00000.bin"), 1000)
        with pytest.raises(ShardError, match=f"{server.url}/shards/part-00000.bin: bytes"):
            for _ in range(200):
                global_batch([loader])


def test_a_file_url_gives_the_local_samples(dataset, tmp_path):
    (local,), _ = rank_loaders(dataset, tmp_path / "unused")
    (remote,), _ = rank_loaders(f"file://{dataset}", tmp_path / "cache")
    for _ in range(20):
        np.testing.assert_array_equal(global_batch([remote]), global_batch([local]))


def test_a_missing_shard_is_refused_with_its_url(dataset, tmp_path):
    os.unlink(os.path.join(dataset, "part-00000.idx"))
    with serve_folder(os.path.dirname(dataset)) as server:
        with pytest.raises(ShardError, match=f"{server.url}/shards/part-00000.idx is missing"):
            rank_loaders(f"{server.url}/shards", tmp_path / "cache")


def test_transient_failures_are_retried_without_changing_a_sample(dataset, tmp_path):
    (local,), _ = rank_loaders(dataset, tmp_path / "unused")
    with serve_folder(os.path.dirname(dataset), fail_every=5) as server:
        (remote,), _ = rank_loaders(f"{server.url}/shards", tmp_path / "cache")
        for _ in range(40):
            np.testing.assert_array_equal(global_batch([remote]), global_batch([local]))
    assert server.requests > 50  # some of them failed, every fifth


def test_a_server_that_keeps_failing_stops_the_run_naming_the_url(dataset, tmp_path):
    with serve_folder(os.path.dirname(dataset), fail_every=1) as server:
        with pytest.raises(RemoteReadError, match=f"{server.url}/shards/manifest.json: 3 attempts failed"):
            rank_loaders(f"{server.url}/shards", tmp_path / "cache", retries=2)


def test_verify_shards_reads_a_url(dataset):
    with serve_folder(os.path.dirname(dataset)) as server:
        assert verify_dataset(f"{server.url}/shards") == []
        with open(os.path.join(dataset, "part-00000.bin"), "r+b") as fh:
            fh.write(b"\xff\xff")  # same size, other bytes
        assert verify_dataset(f"{server.url}/shards", checksums=False) == []
        assert verify_dataset(f"{server.url}/shards") == [
            "shard part-00000: .bin SHA-256 does not match the manifest (file changed or corrupt)",
            "shard part-00000: token id 65535 at token offset 0 of part-00000.bin is not below the manifest's "
            "vocab_size 128 (corrupt, or made with another tokenizer)",
        ]


def test_training_from_a_url_gives_the_losses_of_local_shards(dataset, tmp_path):
    pytest.importorskip("torch")
    from pretrain.config.loading import load_train_config
    from pretrain.train import run
    from train_fixtures import tiny_config

    base = dict(
        max_steps=4, log={"every_steps": 1, "val_every_steps": 2, "val_batches": 1}, checkpoint={"every_steps": 100}
    )
    local = run(load_train_config(tiny_config(dataset, tmp_path / "local", **base)))
    with serve_folder(os.path.dirname(dataset)) as server:
        remote = run(load_train_config(tiny_config(f"{server.url}/shards", tmp_path / "remote", **base)))
    assert [r["loss"] for r in remote] == [r["loss"] for r in local]
    assert os.path.isdir(tmp_path / "remote" / "data_cache" / "rank-0")
