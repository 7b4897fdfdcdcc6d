"""Token shards in an S3 bucket: moto's S3 server (the S3 REST protocol over HTTP on 127.0.0.1) read
through s3fs, with the endpoint and credentials given as a user gives them (AWS_* environment variables),
must give the local loader's samples, train the same model and refuse a changed object by its URL."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from dataprep.tokenize.shards import ShardError
from dataprep.tokenize.verify import verify_dataset
from pretrain.components.dataloader import build_loaders
from remote_loaders import GLOBAL, MICRO, SEQ, global_batch, rank_loaders, remote_data_config
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    """(the local shard folder, the S3 file system); the shards are uploaded to s3://shards-bucket/shards."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    server = moto_server.ThreadedMotoServer("127.0.0.1", 0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as env:
        for name, value in (
            ("AWS_ENDPOINT_URL", f"http://{host}:{port}"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_DEFAULT_REGION", "us-east-1"),
        ):
            env.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # a file system made before would keep another endpoint
        fs = s3fs.S3FileSystem()
        fs.mkdir("shards-bucket")
        local = make_token_dataset(tmp_path_factory.mktemp("s3") / "shards", n_docs=120, n_shards=2)
        fs.put(local, "shards-bucket/shards", recursive=True)
        yield local, fs
        s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


@pytest.mark.parametrize("dp_size", [1, 2])
def test_an_s3_source_gives_the_local_samples(bucket, tmp_path, dp_size):
    local_dir, _ = bucket
    local, _ = rank_loaders(local_dir, tmp_path / "unused", dp_size)
    remote, remote_val = rank_loaders("s3://shards-bucket/shards", tmp_path / "cache", dp_size)
    for _ in range(100):
        np.testing.assert_array_equal(global_batch(remote), global_batch(local))
    _, local_val = build_loaders(remote_data_config(local_dir), SEQ, GLOBAL, MICRO, 0, 1)
    np.testing.assert_array_equal(remote_val.batch_at(0)[0].numpy(), local_val.batch_at(0)[0].numpy())
    assert verify_dataset("s3://shards-bucket/shards") == []


def test_an_object_changed_in_the_bucket_is_refused_with_its_url(bucket, tmp_path):
    local_dir, fs = bucket
    fs.put(local_dir, "shards-bucket/changed", recursive=True)
    with open(os.path.join(local_dir, "part-00001.bin"), "rb") as fh:
        fs.pipe_file("shards-bucket/changed/part-00001.bin", fh.read() + b"\0\0")
    with pytest.raises(
        ShardError, match="s3://shards-bucket/changed/part-00001.bin is .* bytes but manifest.json says"
    ):
        rank_loaders("s3://shards-bucket/changed", tmp_path / "cache")


def test_training_from_s3_gives_the_losses_of_local_shards(bucket, tmp_path):
    from pretrain.config.loading import load_train_config
    from pretrain.train import run
    from train_fixtures import tiny_config

    local_dir, _ = bucket
    base = dict(
        max_steps=3, log={"every_steps": 1, "val_every_steps": 3, "val_batches": 1}, checkpoint={"every_steps": 100}
    )
    local = run(load_train_config(tiny_config(local_dir, tmp_path / "local", **base)))
    remote = run(load_train_config(tiny_config("s3://shards-bucket/shards", tmp_path / "remote", **base)))
    assert [r["loss"] for r in remote] == [r["loss"] for r in local]
