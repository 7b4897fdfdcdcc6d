"""bench/gpu/bench_gpu.py in its CPU smoke mode: the JSON it writes holds every figure the GPU proof reads,
its MFU is the PaLM formula over the hardware table's peak, and its memory prediction is `pretrain plan`'s."""

from __future__ import annotations

import json

import pytest

from bench.gpu import bench_gpu
from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_model_config

CASE_FIELDS = {
    "model",
    "precision",
    "compile",
    "checkpointing",
    "adamw",
    "fsdp",
    "params",
    "non_embedding_params",
    "seq_len",
    "micro_batch",
    "grad_accum",
    "tokens_per_step",
    "steps",
    "warmup",
    "data",
    "flops_per_token",
    "tokens_per_s",
    "mfu",
    "step_s",
    "breakdown_s",
    "peak_memory_gb",
    "predicted_memory_gb",
    "predicted_breakdown_gb",
    "losses",
    "finite",
    "status",
    "attention",
    "attention_kernel",
    "grad_norms",
    "skipped_steps",
}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, one_torch_thread):
    """Two cases of the smoke run: the bare model and FSDP2 over a one-rank mesh."""
    path = tmp_path_factory.mktemp("bench") / "bench_gpu.json"
    assert bench_gpu.main(["--smoke", "--fsdp", "off", "on", "--json", str(path)]) == 0
    return json.loads(path.read_text())


def test_smoke_json_holds_every_figure(smoke):
    assert smoke["device"]["type"] == "cpu" and smoke["device"]["peak_flops"] == 1e11
    assert "pretrain/planning/hardware.py" in smoke["device"]["peak_source"]
    assert "6 * N_non_embedding" in smoke["mfu_formula"] and smoke["software"]["torch"]
    assert [(c["model"], c["fsdp"]) for c in smoke["cases"]] == [("tiny", False), ("tiny", True)]
    for case in smoke["cases"]:
        assert CASE_FIELDS <= set(case), CASE_FIELDS - set(case)
        assert case["status"] == "ok" and case["finite"] and len(case["losses"]) == 2
        assert (case["precision"], case["steps"], case["tokens_per_step"]) == ("fp32", 2, 2 * 64)
        assert case["tokens_per_s"] > 0 and 0 < case["mfu"] < 1
        breakdown = case["breakdown_s"]
        assert set(breakdown) == {"data", "forward_backward", "optimizer", "other"}
        assert breakdown["forward_backward"] > 0 and breakdown["optimizer"] > 0
        assert sum(breakdown.values()) == pytest.approx(case["step_s"], rel=0.05)
        assert case["peak_memory_gb"] is None  # a CPU has no allocator statistics
        assert case["attention"] == "default" and case["attention_kernel"] in ("flash_attention", "math")
        assert len(case["grad_norms"]) == 2 and case["skipped_steps"] == 0
    # FSDP over one rank computes the same model: the same initial weights and loss
    bare, fsdp = smoke["cases"]
    assert fsdp["losses"][0] == pytest.approx(bare["losses"][0], rel=1e-6)


def test_mfu_is_the_palm_formula_over_the_peak(smoke):
    # tiny: d 64, 2 layers, 4 heads of 16, 2 kv heads (width 32), SwiGLU 192, vocab 32000, at seq_len 64
    block = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 192 + 2 * 64  # q, o; k, v; w1, w2, w3; two norms
    non_embedding = 2 * block + 64 + 32000 * 64  # blocks, final norm, output head
    assert non_embedding == 2_146_624
    per_token = 6 * non_embedding + 12 * 2 * 4 * 16 * 64  # + attention scores and values
    assert per_token == 12_978_048
    case = smoke["cases"][0]
    assert case["flops_per_token"] == per_token and case["non_embedding_params"] == non_embedding
    assert case["mfu"] == pytest.approx(case["tokens_per_s"] * per_token / 1e11, rel=1e-12)
    # the 125M preset at 100,000 tokens/s on an H100 (989 TFLOP/s): 95,371,008 non-embedding parameters
    flops_125m = 6 * 95_371_008 + 12 * 10 * 12 * 64 * 2048
    assert bench_gpu.flops_per_token(load_model_config("configs/model/125m.yaml"), 2048) == flops_125m == 760_969_728
    assert bench_gpu.mfu(100_000, flops_125m, 989e12) == pytest.approx(0.076943, abs=1e-6)
    assert bench_gpu.mfu(100_000, flops_125m, None) is None


def test_memory_prediction_is_pretrain_plans(smoke, capsys):
    capsys.readouterr()
    assert (
        pretrain_main(
            [
                "plan",
                "tiny",
                "--gpus",
                "1",
                "--gpu",
                "cpu",
                "--seq-len",
                "64",
                "--micro-batch",
                "2",
                "--global-batch",
                "2",
                "--precision",
                "fp32",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert plan["layout"]["name"] == "single GPU"
    assert smoke["cases"][0]["predicted_memory_gb"] == pytest.approx(plan["layout"]["memory"]["total"] / 1e9)


@pytest.mark.skipif(not bench_gpu.torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_case_measures_memory_and_times_phases_with_events(tmp_path):
    path = tmp_path / "bench_gpu.json"
    assert (
        bench_gpu.main(
            [
                "--models",
                "tiny",
                "--seq-len",
                "64",
                "--micro-batch",
                "2",
                "--steps",
                "4",
                "--warmup",
                "1",
                "--precision",
                "bf16",
                "--compile",
                "off",
                "--fsdp",
                "off",
                "on",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    report = json.loads(path.read_text())
    assert report["device"]["type"] == "cuda" and report["software"]["cuda"]
    for case in report["cases"]:
        assert case["status"] == "ok" and case["finite"]
        assert case["peak_memory_gb"] > 0 and case["predicted_over_measured"] > 0
        assert case["breakdown_s"]["forward_backward"] > 0 and case["breakdown_s"]["optimizer"] > 0
