"""Model sizing, presets, the GPU table, the memory arithmetic and the planner's choices."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch

from pretrain.cli import main as cli
from pretrain.config.loading import load_model_config, load_train_config
from pretrain.config.model import ModelConfig
from pretrain.models.llama import Llama, num_params
from pretrain.planning.budget import estimate
from pretrain.planning.flops import deepseek_flops_per_token, flops_per_token
from pretrain.planning.hardware import GPUS, get_gpu, peak_flops
from pretrain.planning.hyperparameters import optimal_hyperparameters, warmup_steps
from pretrain.planning.plan import plan
from pretrain.planning.plan_memory import activations, layout_memory, model_states
from pretrain.planning.plan_report import format_report
from pretrain.planning.plan_result import train_config
from pretrain.planning.sizing import PRESET_DIR, PRESET_SIZES, preset, size_model

H100 = GPUS["h100"]
SMALL = ModelConfig(vocab_size=1000, d_model=256, n_layers=4, n_heads=4, n_kv_heads=4, ffn_dim=768, max_seq_len=512)


# --- sizing and presets ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", [30e6, 125e6, 350e6, 1e9, 3e9, 7e9, 13e9, 70e9])
def test_size_model_lands_close_to_the_target(target):
    assert num_params(size_model(target)) == pytest.approx(target, rel=0.06)


@pytest.mark.parametrize("target", [30e6, 125e6, 350e6, 1e9, 3e9, 7e9, 13e9, 70e9])
def test_size_model_is_well_shaped(target):
    cfg = size_model(target)
    assert 32 <= cfg.d_model / cfg.n_layers <= 160 and cfg.n_layers % 2 == 0
    assert cfg.head_dim in (64, 128) and cfg.ffn_dim % 256 == 0
    if cfg.n_heads >= 16:  # GQA with 8 kv heads, so TP 2/4/8 split both head counts
        assert cfg.n_kv_heads == 8 and cfg.n_heads % 8 == 0


def test_count_matches_the_real_module():
    for name in ("tiny", "125m"):
        cfg = preset(name)
        with torch.device("meta"):
            model = Llama(cfg)
        assert sum(p.numel() for p in model.parameters()) == num_params(cfg)


def test_known_shapes():
    assert size_model(3e9).model_dump(include={"d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim"}) == {
        "d_model": 3072,
        "n_layers": 28,
        "n_heads": 24,
        "n_kv_heads": 8,
        "ffn_dim": 8192,
    }  # Llama 3.2 3B's shape
    assert (size_model(350e6).d_model, size_model(350e6).n_layers) == (1024, 24)  # GPT-3 Medium's


@pytest.mark.parametrize("name", ["tiny", *PRESET_SIZES])
def test_preset_files_match_the_sizing_rules(name):
    assert load_model_config(str(PRESET_DIR / f"{name}.yaml")) == preset(name)


def test_sizing_errors():
    with pytest.raises(ValueError, match="positive"):
        size_model(0)
    with pytest.raises(ValueError, match="within 25%"):
        size_model(5e3)
    with pytest.raises(ValueError, match="unknown preset"):
        preset("13b")


def test_size_cli_writes_a_loadable_config(tmp_path, capsys):
    out = tmp_path / "m.yaml"
    assert cli(["size", "350M", "--vocab-size", "50304", "--seq-len", "1024", "--output", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    cfg = load_model_config(str(out))
    assert cfg.vocab_size == 50304 and cfg.max_seq_len == 1024
    assert info["params"]["total"] == num_params(cfg)
    assert info["params"]["total"] - info["params"]["non_embedding"] == 50304 * cfg.d_model


# --- GPU table ------------------------------------------------------------------------------------


def test_peak_flops_from_the_device_name():
    assert peak_flops("NVIDIA H100 80GB HBM3") == 989e12 == peak_flops("NVIDIA H200")
    assert peak_flops("NVIDIA A100-SXM4-40GB") == 312e12 == peak_flops("NVIDIA A100 80GB PCIe")
    assert peak_flops("NVIDIA H100 PCIe") == 756e12 and peak_flops("NVIDIA L4") == 121e12
    assert peak_flops("cpu") is None and peak_flops("NVIDIA A10G") is None


def test_gpu_table_lookup_by_name():
    assert get_gpu("A100-40GB").memory_gb == 40 and get_gpu("NVIDIA A100-SXM4-80GB").memory_gb == 80
    assert get_gpu("h100_sxm") is H100
    with pytest.raises(ValueError, match="unknown GPU"):
        get_gpu("v100")


# --- memory arithmetic ----------------------------------------------------------------------------


def test_textbook_7b_fp32():
    """7B in fp32: 28 GB of parameters, 56 GB of Adam states, 28 GB of gradients."""
    mem = model_states(SMALL, "ddp", dp=1, tp=1, precision="fp32", n_params=7_000_000_000)
    assert mem == {"params": 28e9, "grads": 28e9, "optimizer": 56e9}


def test_zero_paper_figure_1():
    """Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64 GPUs, mixed precision with Adam (K = 12):
    120 GB baseline, 31.4 GB with P_os, 16.6 GB with P_os+g, 1.9 GB with P_os+g+p."""
    totals = {
        level: sum(model_states(SMALL, level, dp=64, tp=1, precision="bf16", n_params=7.5e9).values()) / 1e9
        for level in ("ddp", "zero1", "zero2", "zero3")
    }
    assert {k: round(v, 1) for k, v in totals.items()} == {"ddp": 120.0, "zero1": 31.4, "zero2": 16.6, "zero3": 1.9}


def test_tensor_parallel_splits_all_but_the_norms():
    one, two = (model_states(SMALL, "ddp", dp=1, tp=t, precision="fp32") for t in (1, 2))
    norms = (2 * SMALL.n_layers + 1) * SMALL.d_model
    assert two["params"] == (num_params(SMALL) - norms) / 2 * 4 + norms * 4
    assert one["params"] == num_params(SMALL) * 4


def _saved_bytes(cfg: ModelConfig, seq: int, batch: int, cp: int = 1) -> int:
    """Bytes of the distinct tensors autograd saves for backward (weights excluded), bf16 on CPU; with
    ``cp``, of rank 0's seq/cp tokens under context-parallel attention."""
    model = Llama(cfg).to(torch.bfloat16)
    model.init_weights()
    if cp > 1:
        seq = _install_context_parallel(model, seq, cp)
    skip = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    tokens = torch.randint(0, cfg.vocab_size, (batch, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(tokens)
        torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), tokens.flatten())
    return sum(seen.values())


def _install_context_parallel(model: Llama, seq: int, cp: int) -> int:
    """Rank 0's context-parallel attention in one process: the all-gather stands in with copies of the
    rank's own keys and values (the size of its output). Returns the tokens rank 0 holds."""
    from pretrain.distributed.context_parallel import ContextParallelAttention, cp_positions

    class StandInGather(ContextParallelAttention):
        def gather(self, t):
            return torch.cat([t] * cp, dim=2)

    model.positions = cp_positions(seq, cp, 0)
    attend = StandInGather(None, cp, 0, seq)
    for block in model.layers.values():
        block.attention.attend = attend
    return seq // cp


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("cp", [2, 4])
def test_context_parallel_count_matches_what_autograd_saves(kv_heads, cp):
    """Under context parallelism a layer keeps the activations of its seq/cp tokens and what the planner's
    ``context_parallel_extra`` adds per layer: the keys and values of the whole sequence and a second copy
    of the attention output. No mask."""
    from pretrain.planning.plan_memory import context_parallel_extra

    cfg = SMALL.model_copy(update={"n_kv_heads": kv_heads})
    deeper = cfg.model_copy(update={"n_layers": cfg.n_layers + 2})
    seq, batch = 256, 2
    measured = (_saved_bytes(deeper, seq, batch, cp) - _saved_bytes(cfg, seq, batch, cp)) / 2
    extra = [context_parallel_extra(c, seq, batch, cp, "none") for c in (deeper, cfg)]
    predicted = activations(cfg, seq // cp, batch, "none")["per_token_layer"] * batch * seq // cp
    assert measured == pytest.approx(predicted + (extra[0] - extra[1]) / 2, rel=0.03)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_activation_count_matches_what_autograd_saves(kv_heads):
    """The per-layer activation bytes of the planner equal what our model really keeps (2 extra layers)."""
    cfg = SMALL.model_copy(update={"n_kv_heads": kv_heads})
    deeper = cfg.model_copy(update={"n_layers": cfg.n_layers + 2})
    seq, batch = 64, 2
    measured = (_saved_bytes(deeper, seq, batch) - _saved_bytes(cfg, seq, batch)) / 2 / (seq * batch)
    predicted = activations(cfg, seq, batch, "none")["per_token_layer"]
    assert measured == pytest.approx(predicted, rel=0.03)


def test_activation_checkpointing_shrinks_activations():
    cfg = preset("1b")
    none, sel, block = (activations(cfg, 2048, 4, ac)["layers"] for ac in ("none", "selective", "block"))
    assert block < sel < none


def test_tensor_parallel_shrinks_activations():
    cfg = preset("1b")
    none = activations(cfg, 2048, 4, "none")["layers"]
    assert activations(cfg, 2048, 4, "none", tp=4)["layers"] == pytest.approx(none / 4)
    assert activations(cfg, 2048, 4, "none", tp=4, loss_parallel=True)["logits"] == pytest.approx(
        activations(cfg, 2048, 4, "none")["logits"] / 4
    )


# --- planner choices at the boundaries ------------------------------------------------------------


def _gpu_with(total_bytes: float, slack: float = 0.0):
    return replace(H100, memory_gb=total_bytes / 1e9 + slack)


def _need(cfg, level, tp, ac, gpus, micro=4, global_batch=256):
    """A layout's memory as the planner sizes it for ``global_batch`` (accumulation keeps gradients at the loss;
    on a GPU, blocks are compiled where the trainer can: no TP)."""
    accum = global_batch // (micro * gpus // tp)
    return layout_memory(
        cfg, level, tp, ac, gpus=gpus, seq_len=2048, micro_batch=micro, grad_accum=accum, compiled=tp == 1
    )["total"]


def test_walks_ddp_zero_micro_batch_checkpointing_in_order():
    """Shrinking the GPU to a layout's need picks it, a byte less the next: memory order, while the earlier
    layouts are also the faster ones."""
    cfg, gpus = preset("1b"), 8
    steps = [
        ("ddp", 1, "none", 4, "DDP x8"),
        ("zero1", 1, "none", 4, "ZeRO-1 x8"),
        ("zero2", 1, "none", 4, "ZeRO-2 x8"),
        ("zero3", 1, "none", 4, "FSDP (ZeRO-3) x8"),
        ("zero3", 1, "none", 1, "FSDP (ZeRO-3) x8 + micro-batch 1"),
        ("zero3", 1, "selective", 1, "FSDP (ZeRO-3) x8 + micro-batch 1 + selective checkpointing"),
    ]
    for level, tp, ac, micro, name in steps:
        need = _need(cfg, level, tp, ac, gpus, micro)
        fits = plan(cfg, gpus=gpus, gpu=_gpu_with(need, 1e-9), global_batch=256)
        assert fits["layout"]["name"] == name  # at capacity (to a byte, GB round-trip): this layout
        shy = plan(cfg, gpus=gpus, gpu=_gpu_with(need, -1e-6), global_batch=256)
        assert shy["layout"]["name"] != name  # a byte short: the next one


def test_tensor_parallel_on_nvlink_beats_recomputing_every_block():
    """Where block checkpointing fits, TP 2 with selective checkpointing fits too and is faster: its
    activation traffic over NVLink costs less than a third more compute; the walk says so."""
    cfg = preset("1b")
    r = plan(cfg, gpus=8, gpu=_gpu_with(_need(cfg, "zero3", 1, "block", 8, 1), 1e-9), global_batch=256)
    assert r["layout"]["name"] == "FSDP (ZeRO-3) x4 + TP 2 + micro-batch 1 + selective checkpointing"
    block = next(line for line in r["decisions"] if line.startswith("FSDP (ZeRO-3) x8 + micro-batch 1 + block"))
    assert (
        " <= " in block
        and "% time per token" in block
        and "<- fastest" in r["decisions"][[line.split(":")[0] for line in r["decisions"]].index(r["layout"]["name"])]
    )
    parts = r["time"]["step_breakdown"]
    assert 0 < parts["exposed_comm"] == pytest.approx(parts["tp_comm"])  # TP traffic is on the critical path
    assert parts["compute"] < r["time"]["step_seconds"] < parts["compute"] * 4 / 3


def _model(params: float, seq_len: int = 4096) -> ModelConfig:
    return size_model(params).model_copy(update={"max_seq_len": seq_len})


def _walk(cfg, gpus, **kw) -> list[tuple[str, float]]:
    """Every layout the planner picks as the GPU shrinks, one byte below the previous pick's need each
    time, down to the last resort; checks each pick fits, is the fastest that fits, and needs less memory
    than the one before."""
    picks, capacity = [], float("inf")
    while True:
        try:
            r = plan(cfg, gpus=gpus, gpu=_gpu_with(capacity * 1e9 if capacity < float("inf") else 1e15), **kw)
        except ValueError:
            return picks
        need, name = r["layout"]["memory"]["total"], r["layout"]["name"]
        fastest = [line for line in r["decisions"] if line.endswith("<- fastest")]
        assert len(fastest) == 1 and fastest[0].startswith(f"{name}: ") and " <= " in fastest[0]
        assert all((" <= " in line) == ("s/step" in line) for line in r["decisions"])  # timed iff it fits
        assert not picks or need < picks[-1][1]
        picks.append((name, need))
        capacity = need / 1e9 - 1e-6


def test_the_whole_tree_in_order_down_to_offload():
    """70B on 64 H100s (8 nodes): as the GPU shrinks, data parallel while the model fits, then TP 8 within
    a node with PP across nodes (faster than FSDP over 64 GPUs once it fits), deeper pipelines and more
    checkpointing as memory tightens, then FSDP x8 with TP 8 (a pipeline without data parallelism keeps
    autocast's fp32 residual stream, so its checkpointed block inputs are twice FSDP's bf16 ones), CPU
    offload last."""
    names = [name for name, _ in _walk(_model(70e9), 64, seq_len=4096, global_batch=512)]
    assert names[:4] == ["DDP x64", "ZeRO-1 x64", "ZeRO-2 x64", "FSDP (ZeRO-3) x64"] and names[-1].endswith(
        "CPU offload"
    )
    middle = names[4:-1]
    piped = [name for name in middle if "TP 8 + PP " in name]
    assert (
        piped
        and middle[: len(piped)] == piped
        and middle[len(piped) :] == ["FSDP (ZeRO-3) x8 + TP 8 + micro-batch 1 + block checkpointing"]
    ), names
    pps = [int(re.search(r"PP (\d+)", name).group(1)) for name in piped]
    assert pps == sorted(pps) and pps[-1] == 8, names  # pipeline over the 8 nodes at the end
    assert [n.split(" + ")[-1] for n in piped[-3:]] == [
        "micro-batch 1",
        "selective checkpointing",
        "block checkpointing",
    ]


def test_long_sequences_split_the_sequence_before_checkpointing():
    r = plan(_model(8e9, 131072), gpus=64, gpu=H100, seq_len=131072, global_batch=64)
    lay = r["layout"]
    assert lay["cp"] > 1 and lay["checkpointing"] == "none" and lay["cp"] * lay["dp_shard"] * lay["tp"] == 64
    assert r["layout"]["communication"]["cp"] > 0


@pytest.mark.parametrize(
    "params, gpus, expect",
    [
        (7e9, 8, {"dp_shard": 8, "tp": 1, "pp": 1, "cp": 1, "offload": False}),
        (70e9, 8, {"dp_shard": 8, "offload": True}),  # 1.1 TB of model states in 640 GB of HBM: host memory
        (70e9, 64, {"tp": 8, "cp": 1, "offload": False}),
        (405e9, 512, {"tp": 8, "cp": 1, "offload": False}),
    ],
)
def test_sensible_layouts_on_h100s(params, gpus, expect):
    r = plan(_model(params), gpus=gpus, gpu=H100, seq_len=4096)
    lay = r["layout"]
    assert {k: lay[k] for k in expect} == expect
    assert lay["dp_replicate"] * lay["dp_shard"] * lay["tp"] * lay["pp"] * lay["cp"] == gpus
    if gpus > 8:  # TP on NVLink, PP across the nodes: far less than FSDP's all-gathers over InfiniBand
        assert lay["pp"] > 1 and lay["dp_shard"] < gpus
        fsdp = next(
            line
            for line in r["decisions"]
            if line.startswith(f"FSDP (ZeRO-3) x{gpus} + micro-batch 1 + block checkpointing: ")
        )
        slower = float(re.search(r"([+-]\d+)% time per token", fsdp).group(1))
        assert slower > 50, fsdp
    else:
        assert lay["zero_level"] in ("zero2", "zero3")


def test_links_a_dimension_crosses():
    """TP stays on NVLink; a data-parallel or pipeline group wider than a node runs at the NICs' speed, and
    slower NICs make the same layout slower."""
    from pretrain.planning.plan_layouts import Layout
    from pretrain.planning.plan_memory import link_bandwidths

    bw = link_bandwidths(Layout("zero3", 8, 4, "none", 1, pp=2), H100, 64, 8)
    assert (bw["tp"], bw["dp"], bw["pp"]) == (450, 50, 50)
    assert link_bandwidths(Layout("zero3", 1, 8, "none"), H100, 8, 8)["dp"] == 450
    cfg = _model(70e9)
    fast, slow = (plan(cfg, gpus=64, gpu=replace(H100, inter_node_gbs=gbs), seq_len=4096) for gbs in (50, 5))
    assert slow["time"]["tokens_per_day"] < fast["time"]["tokens_per_day"]


def test_pipeline_interleaves_to_keep_the_bubble_under_target():
    """A layout with PP: 1F1B's bubble (p-1)/(m+p-1) above the target interleaves stages until it is under."""
    from pretrain.components.metrics import bubble_fraction

    assert bubble_fraction("1f1b", 4, 12) == pytest.approx(3 / 15)
    assert bubble_fraction("interleaved_1f1b", 4, 12, 2) == pytest.approx(3 / 15 / 2)
    cfg = _model(70e9)
    kw = dict(seq_len=4096, global_batch=512, max_bubble=0.01)  # 512 micro-batches over 8 stages: 1.35% in 1F1B
    picks = [(n, need) for n, need in _walk(cfg, 64, **kw) if "PP 8" in n]
    r = plan(cfg, gpus=64, gpu=_gpu_with(picks[0][1], 1e-9), **kw)
    lay = r["layout"]
    assert lay["pp"] == 8 and lay["pp_stages_per_rank"] == 2 and lay["pp_schedule"] == "interleaved_1f1b", lay
    assert lay["bubble"] == pytest.approx(7 / 519 / 2)
    tc = train_config(r, cfg, ["/d"], "runs/x")
    assert (tc.parallel.pp, tc.parallel.tp, tc.parallel.pp_stages_per_rank) == (lay["pp"], 8, lay["pp_stages_per_rank"])
    assert not tc.parallel.compile  # the trainer compiles no blocks under TP or PP


def test_single_gpu_small_model():
    r = plan(SMALL, gpus=1, gpu=H100, seq_len=512, micro_batch=8, global_batch=64)
    assert r["layout"]["name"] == "single GPU" and r["layout"]["grad_accum"] == 8
    assert "simplest" in r["decisions"][0] and r["decisions"][0].endswith("<- fastest")


def test_tp_needs_gpus_in_a_node():
    cfg = preset("7b")
    need_block = _need(cfg, "zero3", 1, "block", 8, micro=1)
    gpu = _gpu_with(need_block, -1e-3)  # too small for any tp=1 layout without offload
    assert plan(cfg, gpus=8, gpu=gpu, micro_batch=8)["layout"]["tp"] > 1
    alone = plan(cfg, gpus=8, gpu=gpu, micro_batch=8, gpus_per_node=1)["layout"]  # one GPU per node: no TP
    assert alone["tp"] == 1 and (alone["pp"] > 1 or alone["offload"])


def test_cannot_fit_even_fully_sharded():
    with pytest.raises(ValueError, match="does not fit on 1 x NVIDIA L4 24GB"):
        plan(preset("7b"), gpus=1, gpu=GPUS["l4"])


def test_lowers_the_micro_batch_before_checkpointing():
    cfg = preset("1b")
    gpu = _gpu_with(_need(cfg, "ddp", 1, "none", 1, micro=1), 0.1)
    lay = plan(cfg, gpus=1, gpu=gpu, micro_batch=64)["layout"]
    assert lay["checkpointing"] == "none" and lay["name"] == "single GPU + micro-batch 1"


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(global_batch=100), "not a multiple of micro-batch 4 x 8 .*try 96 or 128"),
        (dict(micro_batch=0), "micro-batch must be at least 1"),
        (dict(gpus=0), "GPU count must be at least 1"),
        (dict(mfu=0), "MFU"),
        (dict(seq_len=4096), "exceeds the model's max_seq_len"),
        (dict(tokens=-1.0), "token count must be positive"),
        (dict(lr=0.0), "learning rate must be positive"),
    ],
)
def test_impossible_inputs(kwargs, message):
    args = dict(gpus=8, gpu=H100) | kwargs
    with pytest.raises(ValueError, match=message):
        plan(preset("125m"), **args)


def test_time_to_train():
    cfg = preset("1b")
    r = plan(cfg, gpus=8, gpu=H100, global_batch=512, mfu=0.5, tokens=20e9)
    t, lay = r["time"], r["layout"]
    assert lay["tokens_per_step"] == 512 * 2048
    expected = flops_per_token(cfg, 2048) * 512 * 2048 * t["recompute_factor"] / (8 * 989e12 * 0.5)
    assert t["step_seconds"] == pytest.approx(expected)
    assert t["days"] == pytest.approx(20e9 / (512 * 2048 / expected * 86400))
    assert lay["grad_accum"] * lay["dp"] * 4 == 512


def test_emitted_training_config_round_trips(tmp_path):
    cfg = preset("1b")
    r = plan(cfg, gpus=8, gpu=GPUS["a100-40gb"], micro_batch=8, global_batch=512)
    path = tmp_path / "train.yaml"
    from pretrain.config.loading import save_yaml

    save_yaml(train_config(r, cfg, ["/data/tokens"], "runs/x"), str(path))
    tc = load_train_config(str(path))
    assert tc.model == cfg and tc.global_batch_size == 512 and tc.micro_batch_size == 8
    assert tc.parallel.tp == r["layout"]["tp"] and tc.parallel.activation_checkpointing == r["layout"]["checkpointing"]
    assert tc.max_tokens == int(r["time"]["target_tokens"]) and tc.data.sources[0].path == "/data/tokens"
    # GPU layouts without TP/CP/PP compile their blocks (faster, fewer saved activations); a CPU plan does not
    assert r["layout"]["tp"] == 1 and r["layout"]["compiled"] and tc.parallel.compile
    assert "compiled blocks" in format_report(r)
    on_cpu = plan(preset("125m"), gpus=1, gpu=GPUS["cpu"], micro_batch=2, global_batch=8, seq_len=512)
    assert not on_cpu["layout"]["compiled"] and not train_config(on_cpu, preset("125m"), ["/d"], "r").parallel.compile


def test_plan_cli(tmp_path, capsys):
    out = tmp_path / "t.yaml"
    assert (
        cli(
            [
                "plan",
                "125m",
                "--gpus",
                "2",
                "--gpu",
                "a100-80gb",
                "--output",
                str(out),
                "--data",
                str(tmp_path),
                "--tokens",
                "2.5B",
                "--json",
            ]
        )
        == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert r["written"] == str(out) and load_train_config(str(out)).max_tokens == 2_500_000_000
    assert load_train_config(str(out)).planned.step_seconds == r["time"]["step_seconds"]  # the log compares
    assert cli(["plan", "125m", "--gpus", "2"]) == 0
    assert "per-GPU memory" in capsys.readouterr().out
    assert cli(["plan", "125m", "--gpus", "16", "--inter-node-gbs", "12.5", "--intra-node-gbs", "300", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["cluster"]["inter_node_gbs"], r["cluster"]["intra_node_gbs"]) == (12.5, 300)
    assert r["time"]["step_seconds"] == pytest.approx(r["time"]["step_breakdown"]["total"])
    assert cli(["plan", "125m", "--output", str(out)]) == 2
    assert "--output needs --data" in capsys.readouterr().err


def test_plan_writes_the_laws_hyperparameters(tmp_path, capsys):
    """Without --lr or --global-batch the config gets DeepSeek LLM's for C = M D (M of the model, D the
    method's tokens), the batch the multiple of micro-batch x data-parallel ranks nearest the law's."""
    out = tmp_path / "t.yaml"
    assert cli(["plan", "1b", "--gpus", "8", "--output", str(out), "--data", str(tmp_path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    h, lay, tc = r["hyperparameters"], r["layout"], load_train_config(str(out))
    cfg = preset("1b")
    tokens = estimate("approach1", params=num_params(cfg)).tokens
    law = optimal_hyperparameters(deepseek_flops_per_token(cfg, 2048) * tokens, 2048)
    assert h["law"]["compute"] == pytest.approx(law.compute) and (h["learning_rate_from"], h["global_batch_from"]) == (
        "law",
        "law",
    )
    assert tc.optim.lr == pytest.approx(law.learning_rate) and tc.global_batch_size == h["global_batch"]
    per_step = tc.micro_batch_size * lay["dp"]
    assert tc.global_batch_size % per_step == 0 and abs(tc.global_batch_size - law.batch_sequences) <= per_step / 2
    assert tc.optim.warmup_steps == h["warmup_steps"] == warmup_steps(r["time"]["steps"]) and not h["differs_from_law"]
    assert cli(["plan", "1b", "--gpus", "8"]) == 0
    text = capsys.readouterr().out
    assert "peak learning rate" in text and "(law" in text and "DeepSeek LLM" in text and "differs" not in text


@pytest.fixture
def users_hyperparameters_plan(tmp_path, capsys) -> tuple[dict, object]:
    """A plan given a learning rate and a global batch: its hyperparameters and the config it wrote."""
    out = tmp_path / "t.yaml"
    argv = ["plan", "1b", "--gpus", "8", "--global-batch", "512", "--lr", "1e-3"]
    assert cli([*argv, "--output", str(out), "--data", str(tmp_path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["hyperparameters"], load_train_config(str(out))


def test_hyperparameters_the_user_sets_win_over_the_law(users_hyperparameters_plan):
    h, tc = users_hyperparameters_plan
    assert (tc.optim.lr, tc.global_batch_size) == (1e-3, 512) and (h["learning_rate_from"], h["global_batch_from"]) == (
        "given",
        "given",
    )


def test_the_plan_says_where_the_users_hyperparameters_differ_from_the_law(users_hyperparameters_plan, capsys):
    h, _ = users_hyperparameters_plan
    given = [line.split(" given")[0] for line in h["differs_from_law"]]
    assert given == ["learning rate 0.001", "global batch 512 sequences"]
    assert cli(["plan", "1b", "--gpus", "8", "--lr", "1e-3"]) == 0
    assert "differs from the law: learning rate 0.001 given" in capsys.readouterr().out


# Peak memory measured on an H100 80GB HBM3 (torch 2.11, bench/gpu/bench_gpu.py, docs/gpu.md): model, checkpointing,
# FSDP2 over one rank, compiled blocks, GB (1e9 bytes) from torch.cuda.max_memory_allocated; bf16, sequences
# of 2048, micro-batch 8, one micro-batch per step.
H100_PEAKS = [
    ("125m", "none", False, True, 12.37),
    ("350m", "none", False, True, 24.41),
    ("1b", "none", False, True, 39.81),
    ("350m", "none", False, False, 29.93),
    ("350m", "none", True, False, 25.37),
    ("350m", "selective", False, False, 20.89),
    ("350m", "selective", True, False, 20.13),
    ("350m", "block", False, False, 12.41),
    ("350m", "block", True, False, 11.66),
    ("1b", "none", False, False, 47.96),
    ("1b", "none", True, False, 40.38),
    ("1b", "selective", False, False, 33.58),
    ("1b", "selective", True, False, 32.53),
    ("1b", "block", False, False, 20.87),
    ("1b", "block", True, False, 19.82),
    ("350m", "selective", False, True, 20.01),
    ("350m", "block", False, True, 12.33),
    ("1b", "selective", False, True, 32.37),
    ("1b", "block", False, True, 20.87),
]


@pytest.mark.parametrize("model,checkpointing,fsdp,compiled,measured", H100_PEAKS)
def test_planner_memory_is_within_ten_percent_of_the_h100_peak(model, checkpointing, fsdp, compiled, measured):
    """The planner's per-GPU bytes for the bench's single-GPU cases against what the allocator saw."""
    predicted = (
        layout_memory(
            preset(model),
            "zero3" if fsdp else "ddp",
            1,
            checkpointing,
            gpus=1,
            seq_len=2048,
            micro_batch=8,
            fsdp=fsdp,
            compiled=compiled,
        )["total"]
        / 1e9
    )
    assert predicted == pytest.approx(measured, rel=0.10)


def test_peak_is_at_the_loss_before_any_gradient_or_at_the_end_of_backward():
    """With one micro-batch per step no gradient exists at the loss (set to None after each step); with
    accumulation the earlier micro-batches' gradients are there: the peak holds them."""
    cfg, kw = preset("1b"), dict(gpus=1, seq_len=2048, micro_batch=8)
    one, accumulated = (layout_memory(cfg, "ddp", 1, "block", **kw, grad_accum=n) for n in (1, 4))
    fp32_grads = num_params(cfg) * 4
    assert accumulated["total"] - one["total"] == pytest.approx(fp32_grads)
    act = activations(cfg, 2048, 8, "block")
    assert one["activations"] == pytest.approx(act["total"] - fp32_grads)
    # a short sequence on a big vocabulary-less model: the end of backward (all gradients) is the peak
    short = layout_memory(cfg, "ddp", 1, "block", gpus=1, seq_len=16, micro_batch=1)
    assert short["activations"] == pytest.approx(activations(cfg, 16, 1, "block")["in_flight"])


def test_fsdp_keeps_a_bf16_residual_stream():
    cfg = preset("1b")
    autocast, fsdp_bf16 = (activations(cfg, 2048, 8, "block", bf16_stream=s)["per_token_layer"] for s in (False, True))
    assert autocast == 2 * fsdp_bf16 == 4 * cfg.d_model  # block inputs: fp32 under autocast, bf16 under FSDP


def test_compiled_blocks_save_less_unless_checkpointing_decides():
    cfg = preset("1b")
    eager, compiled = (activations(cfg, 2048, 8, "none", compiled=c)["per_token_layer"] for c in (False, True))
    assert compiled < eager
    autocast = activations(cfg, 2048, 8, "block", bf16_stream=False)["per_token_layer"]
    assert activations(cfg, 2048, 8, "block", compiled=True)["per_token_layer"] == autocast  # checkpointing decides


# --- precision ------------------------------------------------------------------------------------


def test_every_gpu_has_a_dense_peak_per_precision():
    """Datasheet figures without sparsity: fp16 at bf16's rate, TF32 at about half of it, fp32 (CUDA
    cores) below TF32; the CPU entry has one figure for every precision."""
    for key, spec in GPUS.items():
        peaks = {p: spec.peak(p) for p in ("bf16", "fp16", "tf32", "fp32")}
        if not spec.accelerator:
            assert set(peaks.values()) == {spec.peak_flops_bf16}, key
            continue
        assert peaks["fp16"] == peaks["bf16"], key
        assert peaks["tf32"] == pytest.approx(peaks["bf16"] / 2, rel=0.03), key
        assert peaks["fp32"] < peaks["tf32"], key
    assert (H100.peak("fp32"), H100.peak("tf32"), H100.peak()) == (67e12, 494.5e12, 989e12)
    assert peak_flops("NVIDIA H100 80GB HBM3", "fp32") == 67e12
    assert peak_flops("NVIDIA A100 80GB PCIe", "tf32") == 156e12
    assert H100.with_peak("fp32", 50e12).peak("fp32") == 50e12 and H100.with_peak("fp32", 50e12).peak() == 989e12
    with pytest.raises(ValueError, match="precision must be one of"):
        H100.peak("fp8")


def _per_token(r: dict, part: str = "total") -> float:
    return r["time"]["step_breakdown"][part] / r["layout"]["tokens_per_step"]


def test_each_precision_is_timed_at_its_own_peak():
    """1B on 8 H100s: fp32 takes the same layout as bf16 and is slower per token by the peaks' ratio
    (989/67, ~15x); tf32 has fp32's memory and half bf16's speed; fp16 bf16's speed."""
    cfg = preset("1b")
    runs = {p: plan(cfg, gpus=8, gpu=H100, precision=p) for p in ("bf16", "fp16", "tf32", "fp32")}
    bf16, fp16, tf32, fp32 = runs.values()
    assert fp32["layout"]["name"] == bf16["layout"]["name"] == tf32["layout"]["name"]
    for r, peak in ((fp32, 67e12), (tf32, 494.5e12), (fp16, 989e12)):
        assert _per_token(r, "compute") / _per_token(bf16, "compute") == pytest.approx(989e12 / peak)
        assert r["time"]["peak_flops"] == peak
    assert _per_token(fp32) / _per_token(bf16) == pytest.approx(989 / 67, rel=0.05)
    assert _per_token(bf16) < _per_token(tf32) < _per_token(fp32)
    assert tf32["layout"]["memory"] == fp32["layout"]["memory"]
    assert "of the fp32 peak (67 TFLOP/s)" in format_report(fp32)


def test_fp16_plans_bf16_memory_where_the_trainer_runs_them_alike():
    """fp16 counts bf16's 16 bytes per parameter and 2-byte activations. On one GPU both run under
    autocast: the same bytes. Under data parallelism the trainer's FSDP policy is bf16 only, so fp16
    keeps autocast's fp32 residual stream and gathers fp32 weights."""
    cfg = preset("1b")
    one = {p: plan(cfg, gpus=1, gpu=H100, precision=p)["layout"] for p in ("bf16", "fp16")}
    assert one["fp16"]["memory"] == one["bf16"]["memory"] and one["fp16"]["name"] == one["bf16"]["name"]
    kw = dict(gpus=8, seq_len=2048, micro_batch=1)
    bf16, fp16 = (layout_memory(cfg, "zero3", 1, "selective", precision=p, **kw) for p in ("bf16", "fp16"))
    assert [fp16[k] for k in ("params", "grads", "optimizer")] == [bf16[k] for k in ("params", "grads", "optimizer")]
    assert fp16["fsdp_buffers"] == 2 * bf16["fsdp_buffers"] and fp16["activations"] > bf16["activations"]


def test_fp16_plans_no_pipeline():
    """The trainer refuses fp16 with pipeline stages (no loss scaling across them): the walk leaves them out."""
    fp16 = plan(_model(70e9), gpus=64, gpu=H100, seq_len=4096, precision="fp16")
    names = [line.split(":")[0] for line in fp16["decisions"]]
    assert fp16["layout"]["pp"] == 1 and not any(re.search(r"(^| \+ )PP \d", name) for name in names)


def test_the_planned_config_names_each_precision():
    cfg = preset("125m")
    for precision in ("bf16", "fp16", "tf32", "fp32"):
        r = plan(cfg, gpus=2, gpu=H100, precision=precision)
        assert train_config(r, cfg, ["/d"], "r").precision == precision


def test_tf32_turns_on_tf32_matmuls_on_cuda_only():
    from pretrain.components.device import configure_matmul

    before = torch.backends.cuda.matmul.allow_tf32
    try:
        configure_matmul("tf32", torch.device("cpu"))
        assert torch.backends.cuda.matmul.allow_tf32 == before
        for precision in ("tf32", "fp32", "bf16"):
            configure_matmul(precision, torch.device("cuda"))  # flags only: no GPU needed
            assert torch.backends.cuda.matmul.allow_tf32 == (precision == "tf32")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_plan_cli_peak_flops_overrides_the_precisions_peak(capsys):
    assert cli(["plan", "125m", "--gpus", "2", "--precision", "tf32", "--peak-flops", "400e12", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["precision"] == "tf32" and r["time"]["peak_flops"] == 400e12 and r["cluster"]["peak_flops_bf16"] == 989e12
