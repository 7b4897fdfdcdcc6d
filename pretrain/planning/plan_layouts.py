"""The layouts the planner walks (``pretrain/planning/plan.py``): each one's mesh degrees and name, the
decision tree from simplest to most involved (``candidates``), the reason for each step, the pipeline schedule
that keeps the bubble under a target, and which layouts the trainer runs (``pretrain.layout_rules``).
"""

from dataclasses import dataclass, field
from types import SimpleNamespace

from dataprep.core.errors import UsageError
from pretrain.config.model import ModelConfig
from pretrain.layout_rules import layout_problems
from pretrain.planning.hardware import GPUSpec
from pretrain.planning.plan_memory import GB, model_states

LONG_SEQUENCE = 32768  # tokens from which context parallelism comes before checkpointing
ZERO_LEVEL_NAMES = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "FSDP (ZeRO-3)"}
# the ZeRO levels the trainer runs, so the ones the memory table lists (ZeRO-1: parallel.shard_optimizer,
# replicated weights without tensor, context or pipeline parallelism)
RUNNABLE_ZERO_LEVELS = ("ddp", "zero1", "zero2", "zero3")


@dataclass
class Layout:
    """One point of the walk: the degrees of every mesh dimension and how each runs."""

    zero_level: str  # one of RUNNABLE_ZERO_LEVELS
    tp: int
    dp: int  # data-parallel ranks (replicas x shards)
    checkpointing: str
    micro_batch: int = 4
    pp: int = 1
    cp: int = 1
    stages_per_rank: int = 1  # > 1: interleaved 1F1B
    offload: bool = False
    compiled: bool = False  # torch.compile of each block (where the trainer supports it: no TP, CP or PP)
    smaller_micro: bool = False  # the walk lowered the micro-batch to 1
    memory: dict = field(default_factory=dict)
    fits: bool = False
    grad_accum: int | None = None
    bubble: float = 0.0
    reason: str = ""
    time: dict = field(default_factory=dict)  # step_time's parts, for layouts that fit
    tokens_per_step: int = 0

    @property
    def seconds_per_token(self) -> float:
        return self.time["total"] / self.tokens_per_step

    def memory_settings(self) -> dict:
        """What ``layout_memory`` reads of the layout besides its ZeRO level, TP and checkpointing."""
        return dict(
            micro_batch=self.micro_batch,
            grad_accum=self.grad_accum,
            pp=self.pp,
            cp=self.cp,
            offload=self.offload,
            compiled=self.compiled,
        )

    @property
    def schedule(self) -> str:
        return "interleaved_1f1b" if self.stages_per_rank > 1 else "1f1b"

    @property
    def name(self) -> str:
        parts = [] if self.dp == 1 and self.cp == 1 else [f"{ZERO_LEVEL_NAMES[self.zero_level]} x{self.dp}"]
        parts += [f"{label} {n}" for label, n in (("TP", self.tp), ("CP", self.cp)) if n > 1]
        if self.pp > 1:
            parts.append(
                f"PP {self.pp}" + (f" (interleaved x{self.stages_per_rank})" if self.stages_per_rank > 1 else "")
            )
        parts = parts or ["single GPU"]
        if self.smaller_micro:
            parts.append("micro-batch 1")
        if self.checkpointing != "none":
            parts.append(f"{self.checkpointing} checkpointing")
        if self.offload:
            parts.append("CPU offload")
        return " + ".join(parts)

    def degrees(self) -> dict:
        """Every degree of the mesh, as ``parallel:`` of a training config names them."""
        replicate = self.dp if self.zero_level in ("ddp", "zero1") else 1
        return {
            "dp_replicate": replicate,
            "dp_shard": self.dp // replicate,
            "tp": self.tp,
            "pp": self.pp,
            "cp": self.cp,
            "offload": self.offload,
            "shard_optimizer": self.zero_level == "zero1",
        }


def _tp_degrees(cfg: ModelConfig, gpus: int, gpus_per_node: int) -> list[int]:
    return [
        t
        for t in (2, 4, 8)
        if t <= gpus_per_node and gpus % t == 0 and cfg.n_heads % t == 0 and cfg.n_kv_heads % t == 0
    ]


def _cp_layouts(gpus: int, tp: int, seq_len: int, checkpointing: tuple[str, ...]) -> list[Layout]:
    out, cp = [], 2
    while gpus % (tp * cp) == 0 and seq_len % (2 * cp * tp) == 0:
        out += [Layout("zero3", tp, gpus // (tp * cp), ac, 1, cp=cp) for ac in checkpointing]
        cp *= 2
    return out


def candidates(cfg: ModelConfig, gpus: int, gpus_per_node: int, micro_batch: int, seq_len: int) -> list[Layout]:
    """The decision tree as a list, from simplest to most involved: DDP, ZeRO-2, ZeRO-3, a micro-batch of 1,
    (CP first for a long sequence), selective then block checkpointing, TP within a node, PP across nodes
    (with the widest TP, so stages cross nodes; DDP, ZeRO-2 or FSDP over the rest), CP, CPU offload last."""
    sharded = "zero3" if gpus > 1 else "ddp"
    out = [Layout("ddp", 1, gpus, "none", micro_batch)]
    if gpus > 1:
        out += [Layout(level, 1, gpus, "none", micro_batch) for level in ("zero1", "zero2", "zero3")]
    if micro_batch > 1:
        out.append(Layout(sharded, 1, gpus, "none", 1))
    if seq_len >= LONG_SEQUENCE:  # the sequence, not the model, is what does not fit: split it first
        out += _cp_layouts(gpus, 1, seq_len, ("none", "selective"))
    out += [Layout(sharded, 1, gpus, ac, 1) for ac in ("selective", "block")]
    tps = _tp_degrees(cfg, gpus, gpus_per_node)
    for tp in tps:
        level = "zero3" if gpus > tp else "ddp"
        out += [Layout(level, tp, gpus // tp, ac, 1) for ac in ("none", "selective", "block")]
    tp = tps[-1] if tps else 1
    pp = 2
    while pp <= cfg.n_layers and gpus % (tp * pp) == 0 and tp * pp <= gpus:
        dp = gpus // (tp * pp)
        out += [
            Layout(level, tp, dp, ac, 1, pp=pp)
            for level in (("ddp", "zero2", "zero3") if dp > 1 else ("ddp",))
            for ac in ("none", "selective", "block")
        ]
        pp *= 2
    out += _cp_layouts(gpus, tp, seq_len, ("selective", "block"))
    if gpus > 1:  # FSDP streams the shards from host memory (our trainer offloads through FSDP2 only)
        out.append(Layout("zero3", 1, gpus, "block", 1, offload=True))
    for layout in out:
        layout.smaller_micro = layout.micro_batch < micro_batch
    return out


def pipeline_schedule(lay: Layout, cfg: ModelConfig, max_bubble: float) -> str:
    """Interleave (several stages per rank) until the bubble is under ``max_bubble``, if layers allow."""
    from pretrain.components.metrics import bubble_fraction

    v = 1
    lay.bubble = bubble_fraction("1f1b", lay.pp, lay.grad_accum, 1)
    while lay.bubble > max_bubble and cfg.n_layers >= lay.pp * v * 2 and lay.grad_accum % lay.pp == 0:
        v *= 2
        lay.bubble = bubble_fraction("interleaved_1f1b", lay.pp, lay.grad_accum, v)
    lay.stages_per_rank = v
    verdict = "under" if lay.bubble <= max_bubble else "above"
    return (
        f"{lay.grad_accum} micro-batches over {lay.pp} stages"
        + (f", {v} per rank" if v > 1 else "")
        + f": bubble {lay.bubble:.1%}, {verdict} the {max_bubble:.0%} target"
    )


_ZERO1 = "ZeRO-1 shards the Adam states {dp} ways; weights and gradients stay whole on every GPU"
_ZERO2 = "ZeRO-2 shards gradients and Adam states {dp} ways, keeps the gathered weights forward to backward"
_ZERO3 = "FSDP shards weights, gradients and Adam states {dp} ways (all-gathers every step)"


def reason_for(layout: Layout, previous: Layout | None, capacity: float, layout_cfg: ModelConfig) -> str:
    total, cap = layout.memory["total"] / GB, capacity / GB
    verdict = f"{total:.1f} GB {'<=' if layout.fits else '>'} {cap:.0f} GB per GPU"
    if previous is None:
        why = "simplest: every GPU holds all weights, gradients and Adam states"
    elif layout.offload:
        host = model_states(layout_cfg, "zero3", layout.dp, 1)
        why = (
            f"last resort: weights, gradients and Adam states in host memory "
            f"({sum(host.values()) * min(layout.dp, 8) / GB:.0f} GB per 8-GPU node), streamed to the GPUs every step"
        )
    elif layout.cp != previous.cp and layout.cp > 1:
        why = f"context parallel splits each sequence {layout.cp} ways (activations), gathering keys and values"
    elif layout.pp != previous.pp:
        why = f"pipeline parallel over {layout.pp} stages across nodes splits the layers {layout.pp} ways"
    elif layout.tp != previous.tp:
        why = f"tensor parallel over {layout.tp} GPUs of a node splits weights and activations {layout.tp} ways"
    elif layout.micro_batch != previous.micro_batch:
        why = "a micro-batch of 1 (more accumulation steps) before recomputing anything"
    elif layout.zero_level != previous.zero_level and layout.checkpointing == "none":
        why = {"ddp": "DDP replicates what is left after TP and PP", "zero1": _ZERO1, "zero2": _ZERO2, "zero3": _ZERO3}[
            layout.zero_level
        ]
        why = why.format(dp=layout.dp)
    elif layout.checkpointing != previous.checkpointing:
        why = {
            "selective": "selective checkpointing keeps matmul outputs, recomputes cheap elementwise ops",
            "block": "block checkpointing keeps only block inputs, recomputing each forward (~33% more compute)",
            "none": "",
        }[layout.checkpointing]
    else:
        why = (_ZERO2 if layout.zero_level == "zero2" else _ZERO3).format(dp=layout.dp)
    return f"{layout.name}: {verdict}; {why}"


def runnable(
    layouts: list[Layout],
    cfg: ModelConfig,
    *,
    gpus: int,
    gpu: GPUSpec,
    seq_len: int,
    precision: str,
    document_mask: bool = False,
) -> list[Layout]:
    """The layouts the trainer runs (``pretrain.layout_rules``, the rules the config and the trainer check);
    when it runs none of them, the first rule that refused them."""
    runnable, refusals = [], []
    for lay in layouts:
        parallel = SimpleNamespace(
            **lay.degrees(),
            pp_schedule=lay.schedule,
            pp_stages_per_rank=lay.stages_per_rank,
            compile=False,
            loss_parallel=lay.tp > 1,
            no_sync_accumulation=False,
        )
        problems = layout_problems(
            parallel,
            cfg,
            seq_len=seq_len,
            precision=precision,
            world_size=gpus,
            device_type="cuda" if gpu.accelerator else "cpu",
            document_mask=document_mask,
        )
        if problems:
            refusals.append(problems[0])
        else:
            runnable.append(lay)
    if not runnable:
        raise UsageError(f"no layout of {cfg.n_layers} layers on {gpus} GPU(s) can run: {refusals[0]}")
    return runnable
