"""The planner's arithmetic: bytes per GPU of a layout, bytes it sends per step, and the step's time.

Memory per GPU = model states + activations (+ FSDP's gathered buffers):
- model states, bytes per parameter (weights, gradients, AdamW states): fp32 4 + 4 + 8 (7B: 28 GB +
  28 GB + 56 GB); bf16 mixed precision 2 + 2 + 12 (fp32 master weights, momentum and variance), the
  ZeRO paper's accounting (Rajbhandari et al. 2020); fp16 counts as bf16 (the same 16 bytes; its loss
  scaler is one number), tf32 as fp32 (fp32 storage; only the matmuls' inputs are rounded). DDP
  replicates all three; ZeRO-1 shards the optimizer over data-parallel ranks, ZeRO-2 also gradients,
  ZeRO-3 (FSDP) also weights. Our ZeRO-1 (``parallel.shard_optimizer``) runs without FSDP: fp32 weights and
  gradients whole on every GPU (autocast casts per matmul, so the residual stream stays fp32) and AdamW's two
  fp32 moments sharded: 4 + 4 + 8/dp bytes; per step it all-reduces the fp32 gradients and broadcasts
  each rank's updated share (4 bytes per parameter). Tensor parallelism (degree t) splits every matrix t ways; only the
  norm weights stay replicated. Our trainer's FSDP2 keeps the fp32 master as the sharded parameter and reduces gradients
  in fp32: the same 16 bytes per parameter, all sharded. Gradient accumulation reduce-scatters every micro-batch by
  default, so only gradient shards accumulate; with ``no_sync`` accumulation (one reduction per step) every rank holds
  the full unsharded gradients, in fp32 (FSDP2 accumulates in its reduce dtype), from the first micro-batch to the last:
  4 bytes per parameter (divided by t only).
- activations saved for backward, per token per layer, on our Llama block. The residual stream is fp32
  under autocast (one GPU; fp32 weights cast per matmul) and bf16 under FSDP2's bf16 mixed-precision policy
  (any data parallelism: DDP is FSDP2 replicated); fp16 runs under autocast everywhere (the trainer's FSDP
  policy is bf16 only): 2-byte activations, an fp32 stream, FSDP gathering fp32 weights. Each RMSNorm
  keeps, under autocast, an fp32 copy of its input and of the normalised value plus its bf16 output (8 d
  bytes + d elements; tests check the whole eager count against the tensors autograd saves), under FSDP's
  bf16 its input and output (2 d elements, measured on an H100); attention keeps q, k, v (full width after
  each kv head once: SDPA's enable_gqa) and its output (2 d + 2 kv elements; flash attention has no seq^2
  term); SwiGLU keeps gate, silu, up and product (4 ffn elements). Compiled blocks (``parallel.compile``)
  keep only the matmul inputs and outputs and the norms' inputs (4 d + 2 kv + 3 ffn elements + 2 d in the
  stream's dtype: the partitioner recomputes the rest). Selective checkpointing keeps only matmul and
  attention outputs and the block input (5 d + 2 kv + 2 ffn elements); block checkpointing keeps each
  block's input (d in the stream's dtype). Sequence-parallel TP splits all of it t ways (Korthikanti et al.
  2022).
- the step's peak is the larger of two moments. At the loss: every saved activation plus the loss's fp32
  buffers (log-probabilities, their gradient and the logits' gradient: 12 bytes per vocabulary entry per
  token, 16 with the z-loss's fp32 logits, split t ways under loss parallelism), while no gradient exists yet when a
  step has one micro-batch (gradients are set to None after each step; later micro-batches find the earlier ones'
  gradients). At the end of backward: all gradients plus one block's activations and their gradients (and its recomputed
  activations under checkpointing). Checked against the peaks an H100 measured (docs/gpu.md; the measurements are in
  tests/pretrain/planning/test_plan.py).
- FSDP gathers one unit (a block, or the root: embeddings + output) ahead of use: two gathered units
  plus one unit of unsharded gradients.
- context parallelism builds no attention mask; each layer keeps the whole sequence's keys and values for
  its backward (``context_parallel_extra``).
- pipeline stages under FSDP: torch's schedules skip the gradient reduction and the resharding after
  backward until the last micro-batch, so a stage holds its weights gathered (bf16) and its gradients
  whole (fp32) all step, like no-sync accumulation.
GB here are 1e9 bytes; GPUs are listed by their marketing size (an "80 GB" H100 has 85.9e9 bytes),
which leaves ~6% for the CUDA context, NCCL buffers and allocator fragmentation.
"""

from __future__ import annotations

from pretrain.config import ModelConfig
from pretrain.models.llama import block_params, num_params
from pretrain.planning.flops import flops_per_token
from pretrain.planning.hardware import GPUSpec

# bytes per parameter (weights, gradients, optimizer) for each precision the planner times (module doc)
PRECISIONS = {"bf16": (2, 2, 12), "fp16": (2, 2, 12), "tf32": (4, 4, 8), "fp32": (4, 4, 8)}
SHARDED = {
    "ddp": (False, False, False),
    "zero1": (False, False, True),
    "zero2": (False, True, True),
    "zero3": (True, True, True),
}  # (weights, gradients, optimizer) sharded over data parallel
ELEM = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}  # bytes per activation element
LOSS_BYTES = 12  # per vocabulary entry per token at the loss: fp32 log-probabilities, their and the logits' gradients
Z_LOSS_BYTES = 4  # the z-loss's logsumexp keeps its own fp32 copy of the logits for the backward pass
GB = 1e9
RECOMPUTE = {"none": 1.0, "selective": 1.02, "block": 4 / 3}  # compute per step relative to no recomputation:
# selective re-runs only elementwise ops (no matmul FLOPs, a few % of the time: memory-bound kernels), block
# checkpointing re-runs each forward
OVERLAP = 0.8  # FSDP/DP collectives and offload copies run beside compute, hidden by up to 80% of its time
HOST_GBS = 50  # GB/s per GPU to host memory (PCIe Gen5 x16, ~64 nominal)
HOST_ADAM_GBS = 37.5  # host memory bandwidth per GPU for the CPU AdamW step (~300 GB/s per 8-GPU node)


def model_states(
    cfg: ModelConfig,
    zero_level: str,
    dp: int,
    tp: int,
    precision: str = "bf16",
    n_params: int | None = None,
    unsharded_grads: bool = False,
) -> dict[str, float]:
    """Bytes per GPU of weights, gradients and optimizer states (``n_params`` overrides the count);
    ``unsharded_grads``: gradients held whole in fp32 (no-sync accumulation under ZeRO-2/3)."""
    total = num_params(cfg) if n_params is None else n_params
    replicated = (2 * cfg.n_layers + 1) * cfg.d_model if n_params is None else 0  # RMSNorm weights
    per_gpu = (total - replicated) / tp + replicated
    out = {}
    for name, nbytes, sharded in zip(("params", "grads", "optimizer"), PRECISIONS[precision], SHARDED[zero_level]):
        out[name] = per_gpu * nbytes / (dp if sharded else 1)
    if unsharded_grads and SHARDED[zero_level][1] and dp > 1:
        out["grads"] = per_gpu * 4
    return out


def activations(
    cfg: ModelConfig,
    seq_len: int,
    micro_batch: int,
    checkpointing: str,
    tp: int = 1,
    precision: str = "bf16",
    loss_parallel: bool = False,
    bf16_stream: bool = False,
    compiled: bool = False,
) -> dict[str, float]:
    """Bytes per GPU of activations of one micro-batch (see module doc): ``total`` is what the loss
    holds (saved activations and the loss's buffers), ``in_flight`` what the backward pass adds at its end.
    ``bf16_stream``: FSDP's bf16 weights make the residual stream bf16 (autocast keeps it fp32)."""
    elem = ELEM[precision]
    stream = 2 if bf16_stream and precision == "bf16" else 4
    d, f, kv = cfg.d_model, cfg.ffn_dim, cfg.n_kv_heads * cfg.head_dim
    tokens = micro_batch * seq_len
    norm = 2 * elem * d if stream == 2 else 2 * stream * d + elem * d
    full = 2 * norm + elem * (2 * d + 2 * kv + 4 * f)
    if checkpointing == "none" and compiled:
        per_layer = 2 * stream * d + elem * (4 * d + 2 * kv + 3 * f)
    else:
        per_layer = {"none": full, "selective": elem * (5 * d + 2 * kv + 2 * f), "block": stream * d}[checkpointing]
    # the end of the backward pass: the gradients of one block's activations, plus that block's recomputed
    # activations under checkpointing
    in_flight = full if checkpointing == "none" else 2 * full
    layers = tokens * (cfg.n_layers * per_layer + norm) / tp  # + the final norm
    loss_bytes = LOSS_BYTES + (Z_LOSS_BYTES if cfg.z_loss else 0)
    logits = tokens * cfg.vocab_size * loss_bytes / (tp if loss_parallel else 1)
    return {
        "per_token_layer": per_layer,
        "layers": layers,
        "logits": logits,
        "total": layers + logits,
        "in_flight": tokens * in_flight / tp,
    }


def gathered_bytes(precision: str) -> int:
    """Bytes per weight FSDP gathers: bf16 under its mixed-precision policy, else the fp32 weights
    (fp16 casts them per matmul under autocast)."""
    return 2 if precision == "bf16" else 4


def fsdp_buffers(cfg: ModelConfig, tp: int, precision: str = "bf16") -> float:
    """Bytes of gathered parameters and unsharded gradients FSDP holds besides the shards."""
    root = cfg.vocab_size * cfg.d_model * (1 if cfg.tie_embeddings else 2)
    return 3 * max(block_params(cfg), root) / tp * gathered_bytes(precision)


def context_parallel_extra(
    cfg: ModelConfig, seq_len: int, micro_batch: int, cp: int, checkpointing: str, tp: int = 1, precision: str = "bf16"
) -> float:
    """Bytes per GPU context parallelism holds beyond the activations of its seq_len/cp tokens. No mask
    (each chunk attends to its prefix with a lower-right causal kernel: pretrain/distributed/context_parallel.py).
    Without recomputation each layer saves for its backward the keys and values of the whole sequence (the
    all-gather's output, where the per-token count has the rank's share) and a second copy of its
    attention output (the two chunks' outputs, concatenated for the output projection); with it, the
    recomputed layer gathers them again. In flight: one layer's gathered keys and values and their gradients."""
    elem = ELEM[precision]
    whole_kv = 2 * micro_batch * seq_len * cfg.n_kv_heads * cfg.head_dim / tp * elem
    per_layer = whole_kv * (1 - 1 / cp) + micro_batch * seq_len // cp * cfg.d_model / tp * elem
    saved = cfg.n_layers * per_layer if checkpointing == "none" else 0.0
    return saved + 2 * whole_kv


def layout_memory(
    cfg: ModelConfig,
    zero_level: str,
    tp: int,
    checkpointing: str,
    *,
    gpus: int,
    seq_len: int,
    micro_batch: int,
    precision: str = "bf16",
    grad_accum: int = 1,
    no_sync: bool = False,
    pp: int = 1,
    cp: int = 1,
    offload: bool = False,
    compiled: bool = False,
    fsdp: bool | None = None,
) -> dict[str, float]:
    """Per-GPU memory breakdown (bytes) of one layout at the step's peak; ``activations`` is what the peak
    holds beyond the model states (see module doc: at the loss, less the gradients not yet allocated).
    ``no_sync`` accumulation over ``grad_accum`` > 1 micro-batches keeps the gradients unsharded.
    ``fsdp`` (default: any data parallelism) means FSDP2's bf16 weights; ``compiled``: compiled blocks.
    Pipeline stages hold 1/pp of the model states and, under 1F1B, up to pp micro-batches of their 1/pp of
    the layers: one micro-batch's worth. Context parallelism splits activations cp ways (FSDP shards over
    dp x cp) and adds what ``context_parallel_extra`` counts. Offload moves the model states to host memory."""
    dp = gpus // (tp * pp * cp)
    held = pp > 1 and zero_level in ("zero2", "zero3") and dp * cp > 1  # the schedule defers resharding
    # our ZeRO-1 keeps fp32 weights under autocast: fp32's bytes per parameter (module doc)
    states_precision = "fp32" if zero_level == "zero1" else precision
    mem = model_states(
        cfg, zero_level, dp * cp, tp, states_precision, unsharded_grads=(no_sync and grad_accum > 1) or held
    )
    mem = {k: v / pp for k, v in mem.items()}
    if offload:
        mem = {k: 0.0 for k in mem}
    fsdp = dp * cp > 1 and zero_level != "zero1" if fsdp is None else fsdp
    act = activations(
        cfg,
        seq_len // cp,
        micro_batch,
        checkpointing,
        tp,
        precision,
        loss_parallel=tp > 1,
        bf16_stream=fsdp,
        compiled=compiled,
    )
    # gradients are fp32 for every precision (FSDP reduces in fp32); none exists at a single micro-batch's loss
    fp32_grads = model_states(cfg, zero_level, dp * cp, tp, "fp32")["grads"] / pp
    absent = 0.0 if grad_accum > 1 or pp > 1 or offload else fp32_grads
    mem["activations"] = max(act["total"] - absent, act["in_flight"])
    if cp > 1:
        mem["activations"] += context_parallel_extra(cfg, seq_len, micro_batch, cp, checkpointing, tp, precision)
    sharding = zero_level in ("zero2", "zero3") and dp * cp > 1
    mem["fsdp_buffers"] = fsdp_buffers(cfg, tp, precision) if sharding or offload else 0.0
    if held:  # the stage's weights stay gathered between micro-batches
        mem["fsdp_buffers"] += num_params(cfg) / tp / pp * gathered_bytes(precision)
    mem["total"] = sum(mem.values())
    return mem


def communication(cfg: ModelConfig, lay, seq_len: int, precision: str = "bf16") -> dict[str, float]:
    """Bytes each GPU sends per optimizer step of layout ``lay`` (a ``pretrain.planning.plan_layouts.Layout``), by mesh
    dimension (ring collectives: (n-1)/n of the buffer per all-gather or reduce-scatter, twice that per
    all-reduce). FSDP gathers bf16 (fp16, fp32: fp32) weights in forward
    and backward (once under ZeRO-2) and reduce-scatters fp32 gradients, per micro-batch; DDP all-reduces
    gradients once; sequence-parallel TP all-gathers and reduce-scatters the activations 4 times per
    layer in forward, as many in backward (and again when a checkpointed block is recomputed); PP sends
    activations forward and their gradients back (and FSDP under PP gathers and reduces once per step: see
    module doc); CP gathers each layer's keys and values; offload copies the weight shards in (forward and
    backward) and the gradient shards out, in fp32, per micro-batch ("host")."""
    elem = ELEM[precision]
    params = num_params(cfg) / lay.tp / lay.pp
    tokens = lay.micro_batch * seq_len // lay.cp  # per micro-batch per GPU
    m = lay.grad_accum or 1
    ring = lambda n: (n - 1) / n  # noqa: E731
    out = {"dp": 0.0, "tp": 0.0, "pp": 0.0, "cp": 0.0, "host": 0.0}
    shards = lay.dp * lay.cp
    if lay.zero_level == "ddp":
        out["dp"] = 2 * params * 4 * ring(shards)
    elif lay.zero_level == "zero1":  # all-reduce of the fp32 gradients, then each share's weights broadcast
        out["dp"] = (2 * 4 + 4) * params * ring(shards)
    else:
        gathers = 1 if lay.zero_level == "zero2" or lay.pp > 1 else 2
        out["dp"] = (1 if lay.pp > 1 else m) * params * (gathers * gathered_bytes(precision) + 4) * ring(shards)
    if lay.offload:
        out["host"] = m * params / shards * (2 * 4 + 4)
    if lay.tp > 1:
        passes = 8 + (4 if lay.checkpointing == "block" else 0)
        out["tp"] = m * cfg.n_layers / lay.pp * passes * tokens * cfg.d_model * elem * ring(lay.tp)
    if lay.pp > 1:
        out["pp"] = m * 2 * lay.stages_per_rank * tokens * cfg.d_model / lay.tp * elem
    if lay.cp > 1:
        kv = cfg.n_kv_heads * cfg.head_dim / lay.tp
        out["cp"] = m * cfg.n_layers * 2 * 2 * lay.micro_batch * seq_len * kv * elem * ring(lay.cp)
    out["total"] = sum(out.values())
    return out


def link_bandwidths(lay, gpu: GPUSpec, gpus: int, gpus_per_node: int) -> dict[str, float]:
    """GB/s per GPU of the links each mesh dimension's group crosses. The mesh is pp x dp x cp x tp, tp
    innermost, so a group spans its degree times the inner degrees in consecutive ranks; within a node it
    runs over NVLink, else over the node's NICs (the slower link bounds a ring)."""
    spans = {"tp": lay.tp, "cp": lay.tp * lay.cp, "dp": lay.tp * lay.cp * lay.dp, "pp": gpus}
    out = {dim: gpu.intra_node_gbs if span <= gpus_per_node else gpu.inter_node_gbs for dim, span in spans.items()}
    return out | {"host": HOST_GBS}


def step_time(
    cfg: ModelConfig,
    lay,
    comm: dict[str, float],
    *,
    gpu: GPUSpec,
    gpus: int,
    gpus_per_node: int,
    seq_len: int,
    tokens_per_step: int,
    mfu: float,
    precision: str = "bf16",
    attention_span: float | None = None,
) -> dict[str, float]:
    """Seconds per optimizer step of layout ``lay`` and their parts. Compute is the step's FLOPs (with
    recomputation) at ``mfu`` of ``precision``'s peak (``GPUSpec.peak``: fp32 on an H100 1/15 of bf16);
    the pipeline bubble idles every rank for bubble/(1-bubble) of it.
    Each dimension's bytes (``comm``) take bytes / bandwidth of the links it crosses. FSDP/DP collectives,
    offload copies and CP's key/value exchange overlap compute (prefetch, bucketed reduction, ring attention
    passing the next chunk while it attends to this one): only what exceeds OVERLAP of the compute time
    shows; TP's and PP's transfers sit between dependent kernels and all show. Offload adds
    the host's AdamW step (reads and writes weights, gradients and both moments: 32 bytes per parameter).
    ``attention_span``: the keys per query a document mask leaves (None: the window)."""
    compute = (
        flops_per_token(cfg, seq_len, attention_span)
        * tokens_per_step
        * RECOMPUTE[lay.checkpointing]
        / (gpus * gpu.peak(precision) * mfu)
    )
    bw = link_bandwidths(lay, gpu, gpus, gpus_per_node)
    secs = {dim: comm[dim] / (bw[dim] * GB) for dim in bw}
    hidden = secs["dp"] + secs["host"] + secs["cp"]
    exposed = max(0.0, hidden - OVERLAP * compute) + secs["tp"] + secs["pp"]
    bubble = compute * lay.bubble / (1 - lay.bubble)
    host_adam = num_params(cfg) / gpus * 32 / (HOST_ADAM_GBS * GB) if lay.offload else 0.0
    return {
        "compute": compute,
        "bubble": bubble,
        "exposed_comm": exposed,
        "host_optimizer": host_adam,
        **{f"{dim}_comm": t for dim, t in secs.items()},
        "total": compute + bubble + exposed + host_adam,
    }
