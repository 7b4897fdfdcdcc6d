"""The CPU parity tests' single-GPU analogues (skipped without CUDA; `bash bench/gpu/gpu_run.sh tests` runs them
on the accelerator): a run stopped and resumed on the GPU repeats the uninterrupted run bit for bit in fp32,
bf16 and fp16 (loss scaler included) and exports what its last checkpoint holds; a GPU-trained model
exported to Hugging Face gives transformers our logits, on the GPU and against the CPU."""

from __future__ import annotations

import os

import pytest
import torch

from pretrain.cli import main as pretrain_main
from pretrain.components import checkpoint_folder
from pretrain.components.metrics import read_metrics
from pretrain.components.safetensors_export import export_checkpoint
from pretrain.config.loading import load_train_config
from pretrain.inference.loading import load_trained, model_for_inference
from pretrain.train import run
from text_runs import make_text_run, require
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# cuBLAS reads its workspace setting when its first handle is made: set before any test touches the GPU
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@pytest.fixture(scope="module")
def deterministic():
    """Deterministic kernels wherever torch has them (attention's backward among them)."""
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _exact(out_dir) -> list[tuple]:
    """Every logged figure that must repeat, as exact reprs (a skipped fp16 step's nan norm included)."""
    keys = ("loss", "grad_norm", "lr", "val_loss")
    return [
        (r["kind"], r["step"], *(repr(r.get(k)) for k in keys))
        for r in read_metrics(os.path.join(out_dir, "metrics.jsonl"))
    ]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_stopped_and_resumed_gpu_run_repeats_the_uninterrupted_one_bitwise(data, tmp_path, precision, deterministic):
    overrides = dict(
        device="cuda",
        precision=precision,
        max_steps=8,
        checkpoint={"every_steps": 4, "keep_last": 2},
        log={"every_steps": 1, "val_every_steps": 4, "val_batches": 1},
    )
    reference = run(load_train_config(tiny_config(data, tmp_path / "ref", **overrides)))
    assert reference[-1]["mem_gib"] > 0  # trained on the GPU: the metrics report CUDA memory
    cut = load_train_config(tiny_config(data, tmp_path / "cut", **overrides))
    assert [r["step"] for r in run(cut, stop_at=4)] == [1, 2, 3, 4]
    assert [r["step"] for r in run(cut, resume="auto")] == [5, 6, 7, 8]
    assert _exact(tmp_path / "cut") == _exact(tmp_path / "ref")
    from safetensors.torch import load_file

    ref, resumed = load_file(tmp_path / "ref" / "model.safetensors"), load_file(tmp_path / "cut" / "model.safetensors")
    last = checkpoint_folder.list_checkpoints(str(tmp_path / "cut" / "checkpoints"))[-1]
    offline = export_checkpoint(last, str(tmp_path / "offline.safetensors"))
    assert set(ref) == set(resumed) == set(offline) and "layers.1.feed_forward.w2.weight" in ref
    for name in ref:
        assert torch.equal(resumed[name], ref[name]) and torch.equal(offline[name], resumed[name]), name


def test_gpu_trained_model_exports_to_transformers_with_our_logits(shared_data, tmp_path, deterministic):
    transformers = require("transformers")
    trained = make_text_run(shared_data, tmp_path, train={"device": "cuda", "precision": "bf16"})
    out = str(tmp_path / "hf")
    assert pretrain_main(["export", trained["run"], "--to", "hf", "--output", out]) == 0
    loaded = load_trained(trained["run"])
    encoded = map(trained["tokenizer"].encode, trained["held_out"][-20:])
    tokens = torch.tensor([ids[:64] for ids in encoded if len(ids) >= 64][:3])
    assert tokens.shape == (3, 64)
    hf = transformers.LlamaForCausalLM.from_pretrained(out, torch_dtype=torch.float32).to("cuda").eval()
    with torch.no_grad():
        ours_gpu = model_for_inference(loaded, "cuda")(tokens.cuda())
        hf_gpu = hf(tokens.cuda()).logits
        ours_cpu = model_for_inference(loaded)(tokens)
    assert torch.allclose(hf_gpu, ours_gpu, atol=1e-4, rtol=0), (hf_gpu - ours_gpu).abs().max()
    assert torch.allclose(ours_gpu.cpu(), ours_cpu, atol=1e-4, rtol=0), (ours_gpu.cpu() - ours_cpu).abs().max()
