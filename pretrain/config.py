"""Model and training configs: one YAML file each, validated with clear errors.

``pretrain size``/``pretrain plan`` write them; ``pretrain train`` reads them. A training config names
its model config by path (relative to the training config's folder) or inlines it under ``model:``.
"""

from __future__ import annotations

import math
import os
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from dataprep.core.validation import ConfigError, StrictModel, apply_overrides, describe
from pretrain.layout_rules import PP_SCHEDULES, check_layout

__all__ = [
    "ConfigError",
    "ModelConfig",
    "TrainConfig",
    "check_sources",
    "load_model_config",
    "load_train_config",
    "save_yaml",
]


class ModelConfig(StrictModel):
    """A Llama-style decoder: RMSNorm, RoPE, SwiGLU, grouped-query attention."""

    vocab_size: int = Field(gt=0)  # in a training config, auto (or left out): the data's tokenizer's
    d_model: int = Field(gt=0)
    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    n_kv_heads: int = Field(gt=0)
    ffn_dim: int = Field(gt=0)
    max_seq_len: int = Field(2048, gt=0)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    init_std: float = 0.02
    # scaled_normal: N(0, init_std), the projections into the residual stream (wo, w2) scaled by
    # 1/sqrt(2 n_layers) (GPT-2, Megatron); normal: N(0, init_std) for every matrix (OLMo 2)
    init: Literal["scaled_normal", "normal"] = "scaled_normal"
    qk_norm: bool = False  # RMSNorm over each head of q and k before RoPE (OLMo 2, Qwen3): bounds attention logits
    z_loss: float = Field(0.0, ge=0.0)  # coefficient of mean(logsumexp(logits)^2) added to the loss (PaLM)

    @model_validator(mode="after")
    def _check_heads(self) -> "ModelConfig":
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension must be even for rotary embeddings")
        return self

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class DataSource(StrictModel):
    path: str  # a token-shard directory with manifest.json: a local folder or an fsspec URL
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)  # share of training tokens drawn from this source
    name: str | None = None  # in the metrics' per-source token counts (default: the path)
    preset: str | None = None  # the pipeline preset that builds it, named when the folder is missing


class DataCacheConfig(StrictModel):
    """Where and how shards at a URL (s3://, gs://, https://, file://) are cached; local shards are memory-mapped."""

    dir: str | None = None  # default: <out_dir>/data_cache; each process uses its own rank-<k> subfolder
    max_bytes: int = Field(8 * 2**30, gt=0)  # per process; least recently used blocks are evicted first
    block_bytes: int = Field(2**20, gt=0)  # one ranged request reads one block
    read_ahead_steps: int = Field(4, ge=0)  # optimizer steps of samples fetched ahead by worker threads
    workers: int = Field(32, gt=0)  # requests in flight at once: at least samples/s x latency
    retries: int = Field(5, ge=0)  # on connection errors and 5xx, with exponential backoff
    backoff_s: float = Field(0.5, ge=0)  # wait before the first retry; doubles each time

    @model_validator(mode="after")
    def _check_block(self) -> "DataCacheConfig":
        if self.block_bytes > self.max_bytes:
            raise ValueError(f"data.cache.block_bytes {self.block_bytes} exceeds data.cache.max_bytes {self.max_bytes}")
        return self


class MixturePhase(StrictModel):
    """Until ``until`` (a fraction of the run's tokens, after the previous phase's), draw the sources by
    ``weights`` (source name -> share of training tokens; a source left out gets none)."""

    until: float = Field(gt=0, le=1)
    weights: dict[str, float]

    @model_validator(mode="after")
    def _check_weights(self) -> "MixturePhase":
        if any(w < 0 for w in self.weights.values()) or not any(w > 0 for w in self.weights.values()):
            raise ValueError(
                f"data.phases: the phase until {self.until:g} needs non-negative weights, one of them positive"
            )
        return self


class DataConfig(StrictModel):
    sources: list[DataSource]
    mixture: str | None = None  # a mixture preset name or file (pretrain/mixture_presets.py); it fills sources
    val_fraction: float = Field(0.01, ge=0, lt=1)  # documents held out for validation
    seed: int = 1234
    cache: DataCacheConfig = Field(default_factory=DataCacheConfig)  # for sources given as URLs
    # attention within documents (pretrain/models/documents.py), and rotary positions restarting at each
    # document (default: on with the mask)
    document_mask: bool = False
    document_positions: bool | None = None
    # the mixture's weights in phases of the run (pretrain/components/mixture_order.py); None: the sources'
    # weights throughout. Validation keeps the sources' weights, so its loss compares across phases.
    phases: list[MixturePhase] | None = None

    def source_names(self) -> list[str]:
        """Each source's name in the metrics and in ``phases``: its ``name``, else its path."""
        return [s.name or s.path for s in self.sources]

    @model_validator(mode="after")
    def _check_phases(self) -> "DataConfig":
        if not self.phases:
            return self
        untils = [p.until for p in self.phases]
        if any(b <= a for a, b in zip(untils, untils[1:])) or untils[-1] != 1.0:
            raise ValueError(
                f"data.phases: `until` must increase and the last be 1.0 (the end of the run), got {untils}"
            )
        names = self.source_names()
        for phase in self.phases:
            unknown = sorted(set(phase.weights) - set(names))
            if unknown:
                raise ValueError(
                    f"data.phases: the phase until {phase.until:g} weighs {', '.join(unknown)}, not a "
                    f"source of this run (sources: {', '.join(names)})"
                )
        return self

    def phase_weights(self) -> list[tuple[float, list[float]]]:
        """Each phase's end (a fraction of the run) and its weight per source, in the order of ``sources``."""
        phases = self.phases or [
            MixturePhase(until=1.0, weights=dict(zip(self.source_names(), (s.weight for s in self.sources))))
        ]
        return [(p.until, [p.weights.get(name, 0.0) for name in self.source_names()]) for p in phases]

    @model_validator(mode="after")
    def _check_documents(self) -> "DataConfig":
        if self.document_positions and not self.document_mask:
            raise ValueError(
                "data.document_positions restarts positions at documents the model attends across: "
                "set data.document_mask: true too"
            )
        if self.document_positions is None:
            self.document_positions = self.document_mask
        return self

    @field_validator("sources")
    @classmethod
    def _check_sources(cls, sources: list[DataSource]) -> list[DataSource]:
        """Weights that add up to a number, and each folder and name once (a source listed twice would be
        drawn as two, and its per-source counts would merge)."""
        if not sources:
            raise ValueError("empty: name at least one token-shard folder")
        if not math.isfinite(sum(s.weight for s in sources)):
            raise ValueError(
                f"the weights {[s.weight for s in sources]} do not add up to a finite number: give "
                "them as shares (0.7, 0.3) or token counts"
            )
        for key in ("path", "name"):
            seen: dict[str, int] = {}
            for i, source in enumerate(sources):
                value = source.path if key == "path" else source.name or source.path
                if value in seen:
                    raise ValueError(
                        f"source {i} has the {key} {value!r} of source {seen[value]}: list each "
                        "source once (its weight is its share)"
                    )
                seen[value] = i
        return sources


class ParallelConfig(StrictModel):
    """The mesh ``pp x dp_replicate x dp_shard x cp x tp`` (outermost first) and how each dimension runs."""

    dp_replicate: int = Field(1, gt=0, description="replicated data parallel: DDP, or HSDP with dp_shard > 1")
    dp_shard: int = Field(-1, description="FSDP degree; -1 = the world size over the other degrees")
    tp: int = Field(1, gt=0)
    cp: int = Field(1, gt=0, description="context parallel: each sequence split over cp ranks")
    pp: int = Field(1, gt=0, description="pipeline parallel: the blocks split into pp stages")
    pp_schedule: Literal[PP_SCHEDULES] = "1f1b"
    # model chunks per pipeline rank: 1 for gpipe/1f1b, >= 2 for the interleaved schedules. (torch's ZB-V
    # schedule is left out: its forward-only pass, our validation, fails in torch 2.13.)
    pp_stages_per_rank: int = Field(1, gt=0)
    activation_checkpointing: Literal["none", "block", "selective"] = "none"
    compile: bool = False
    loss_parallel: bool = False
    # Gradient accumulation with FSDP: by default gradients are reduce-scattered after every micro-batch
    # (torchtitan's choice: each rank holds only its gradient shard). no_sync_accumulation reduces once
    # per step instead, keeping a full unsharded fp32 gradient on every rank until then (less
    # communication, much more memory; ``pretrain plan --no-sync-accumulation`` counts it).
    no_sync_accumulation: bool = False
    # false: ZeRO-2-like, the gathered weights stay between forward and backward (no second all-gather,
    # one unsharded copy of the weights held per block)
    reshard_after_forward: bool = True
    # FSDP2's CPUOffloadPolicy: sharded weights, gradients and optimizer states live in host memory (CUDA)
    offload: bool = False
    # ZeRO-1: replicated weights and gradients over dp_replicate ranks, AdamW's moments sharded over them
    # (pretrain/distributed/zero1.py)
    shard_optimizer: bool = False

    @model_validator(mode="after")
    def _check_combinations(self) -> "ParallelConfig":
        check_layout(self)  # the rules of the degrees alone; the training config adds the model's
        return self

    @property
    def num_stages(self) -> int:
        return self.pp * self.pp_stages_per_rank if self.pp > 1 else 1


class OptimConfig(StrictModel):
    lr: float = Field(3e-4, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float = Field(1.0, ge=0)
    schedule: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_steps: int = Field(100, ge=0)
    decay_fraction: float = Field(0.2, gt=0, le=1)  # WSD: final share of steps spent decaying
    # when the global batch differs from the plan's or the resumed run's: sqrt scales the peak lr by
    # sqrt(new / old) (AdamW's rule); warn keeps it and says so (pretrain/components/batch_change.py)
    batch_change: Literal["sqrt", "warn"] = "sqrt"


class PlannedConfig(StrictModel):
    """What ``pretrain plan --out`` chose: the global batch the config's learning rate is for, and the
    law's learning rate at it."""

    global_batch_size: int = Field(gt=0)
    law_lr: float = Field(gt=0)
    step_seconds: float | None = Field(None, ge=0)  # the plan's time per step: the training log compares


class CheckpointConfig(StrictModel):
    dir: str = "checkpoints"
    every_steps: int = Field(500, gt=0)
    keep_last: int = Field(3, gt=0)  # besides these, the last checkpoint before each loss spike is kept
    # copy the state to host memory, then write it in a background thread while training goes on
    async_save: bool = False
    # a checkpoint at each validation that improves on the best so far; the best one is never pruned
    keep_best: bool = False


class EarlyStopConfig(StrictModel):
    """End the run once the validation loss has not improved by more than ``min_delta`` for ``patience``
    validations in a row."""

    patience: int = Field(gt=0)
    min_delta: float = Field(0.0, ge=0)


class SpikeConfig(StrictModel):
    """Loss spikes: a step whose loss (the mean over ranks) exceeds the median of the previous ``window``
    steps' losses by more than ``threshold`` robust standard deviations (1.4826 x their median absolute
    deviation). ``policy``: off, log (a record), skip (also hold back that step's update) or rollback (reload
    the last checkpoint before the spike and skip ``skip_batches`` global batches of the data order from
    there, at least through the spike's batch)."""

    policy: Literal["off", "log", "skip", "rollback"] = "log"
    window: int = Field(100, ge=3)
    threshold: float = Field(6.0, gt=0)
    skip_batches: int = Field(200, ge=0)
    max_rollbacks: int = Field(3, ge=0)  # per process; one more spike to roll back stops the run


class HealthConfig(StrictModel):
    """Hangs and stragglers (pretrain/components/watchdog.py, pretrain/components/stragglers.py)."""

    hang_timeout: float = Field(1800, gt=0)  # seconds with no finished step: dump stacks, exit 4
    first_step_timeout: float = Field(3600, gt=0)  # the first step of a process: compile, warm caches
    straggler_every_steps: int = Field(100, ge=0)  # gather per-rank timings every N steps; 0: never
    straggler_margin: float = Field(0.2, ge=0)  # warn when a rank lags the median by this share of a step


class WandbConfig(StrictModel):
    """A Weights & Biases run (``pip install 'ccpretrain[wandb]'``); offline mode writes under out_dir/wandb."""

    project: str
    name: str | None = None  # default: the out_dir's folder name
    entity: str | None = None
    mode: Literal["online", "offline", "disabled"] = "online"
    tags: list[str] = Field(default_factory=list)


class LogConfig(StrictModel):
    every_steps: int = Field(10, gt=0)
    jsonl: str | None = "metrics.jsonl"
    tensorboard: str | None = None  # folder inside out_dir for TensorBoard event files (ccpretrain[tensorboard])
    wandb: WandbConfig | None = None  # Weights & Biases run (ccpretrain[wandb])
    val_every_steps: int = Field(200, gt=0)
    val_batches: int = Field(10, gt=0)
    # per-layer gradient, weight, update, activation and attention-logit norms every N steps
    # (pretrain/components/diagnostics.py); 0: off (a diagnostic step reads back and copies the weights)
    diagnostics_every_steps: int = Field(0, ge=0)
    # [START, END]: record those steps (END included) with torch.profiler (pretrain/components/profiling.py)
    profile_steps: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _profile_window(self):
        if self.profile_steps is not None and not 1 <= self.profile_steps[0] <= self.profile_steps[1]:
            raise ValueError(f"profile_steps {list(self.profile_steps)}: must be [START, END] with 1 <= START <= END")
        return self


class EvalConfig(StrictModel):
    """Evaluation during training (pretrain/components/in_loop_eval.py) and ``pretrain eval RUN``'s default
    tasks: lm-evaluation-harness tasks (needs ccpretrain[eval]) and held-out document sets in bits per byte."""

    tasks: list[str] = Field(default_factory=list)  # harness task names (its own, or YAML files under include_path)
    include_path: str | None = None  # a folder of local task YAML files
    limit: int | None = Field(None, gt=0)  # items per task (default: all)
    num_fewshot: int | None = Field(None, ge=0)
    # held-out documents by name: JSONL/Parquet files scored in bits per byte (metrics: eval/NAME/bpb)
    documents: dict[str, str] = Field(default_factory=dict)
    text_field: str = "text"
    every_steps: int = Field(0, ge=0)  # 0: only at the end of the run
    batch_size: int = Field(16, gt=0)  # sequences per forward

    @model_validator(mode="after")
    def _check_something_to_score(self) -> "EvalConfig":
        if not self.tasks and not self.documents:
            raise ValueError(
                "eval: names no tasks and no documents: set eval.tasks or eval.documents (or remove eval:)"
            )
        return self


class TrainConfig(StrictModel):
    model: ModelConfig  # inline; a path to a model config YAML is read by load_train_config
    data: DataConfig
    seq_len: int = Field(1024, gt=0)
    micro_batch_size: int = Field(8, gt=0)  # sequences per rank per forward
    global_batch_size: int = Field(64, gt=0)  # sequences per optimizer step, all ranks
    max_steps: int | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)  # alternative horizon: the budget's D
    precision: Literal["auto", "fp32", "tf32", "bf16", "fp16"] = "auto"  # auto: bf16 on CUDA, fp32 on CPU;
    # tf32: fp32 weights and activations, matmuls on TF32 tensor cores (CUDA; fp32 elsewhere)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 0
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    out_dir: str = "runs/default"
    # the non-finite guard: skip (on every rank) a step whose loss or gradient norm is inf/nan; off: every
    # step updates (prices the guard's all-reduce on a GPU)
    guard: bool = True
    # steps skipped in a row for a non-finite loss or gradient norm before the run checkpoints and stops
    max_consecutive_skips: int = Field(5, ge=0)
    spikes: SpikeConfig = Field(default_factory=SpikeConfig)
    planned: PlannedConfig | None = None  # written by pretrain plan --out
    health: HealthConfig = Field(default_factory=HealthConfig)  # hang watchdog, straggler records
    # warm start: trained weights (our checkpoint, run folder or model.safetensors, or a Hugging Face Llama
    # folder) with a fresh optimizer and schedule at step 0; a resumed checkpoint wins over it
    init_from: str | None = None
    early_stop: EarlyStopConfig | None = None  # stop when the validation loss no longer improves
    eval: EvalConfig | None = None  # downstream tasks and held-out documents scored during training

    @model_validator(mode="after")
    def _check_horizon(self) -> "TrainConfig":
        if self.max_steps is None and self.max_tokens is None:
            raise ValueError("set max_steps or max_tokens")
        return self

    @model_validator(mode="after")
    def _check_validation_needs(self) -> "TrainConfig":
        wanted = [
            name
            for name, on in (
                ("checkpoint.keep_best", self.checkpoint.keep_best),
                ("early_stop", self.early_stop is not None),
            )
            if on
        ]
        if wanted and self.data.val_fraction == 0:
            raise ValueError(f"{' and '.join(wanted)} need a validation split: set data.val_fraction above 0")
        return self

    @model_validator(mode="after")
    def _check_mesh(self) -> "TrainConfig":
        """Every rule of the layout known before the world size is (``pretrain.layout_rules``): at run time a
        mismatch crashes one rank while the others wait in a collective."""
        check_layout(
            self.parallel,
            self.model,
            seq_len=self.seq_len,
            precision=self.precision,
            micro_batch=self.micro_batch_size,
            global_batch=self.global_batch_size,
            document_mask=self.data.document_mask,
        )
        return self


def _load_yaml(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path!r} is a folder: name a YAML file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file: name a YAML file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    return data


def load_model_config(path_or_dict: str | dict) -> ModelConfig:
    data = _load_yaml(path_or_dict) if isinstance(path_or_dict, str) else path_or_dict
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as exc:
        where = f"model config {path_or_dict}" if isinstance(path_or_dict, str) else "model config"
        raise ConfigError(f"{where}: {describe(exc, ModelConfig)}") from None


def _read_model_file(data: dict, base_dir: str | None) -> dict:
    """``model: PATH`` replaced by that file's mapping: PATH as given (from the working directory), else
    relative to the training config's folder."""
    if not isinstance(data.get("model"), str):
        return data
    model_path = data["model"]
    if not os.path.isabs(model_path) and base_dir and not os.path.exists(model_path):
        model_path = os.path.join(base_dir, model_path)
    return {**data, "model": _load_yaml(model_path)}


def load_train_config(
    path_or_dict: str | dict, base_dir: str | None = None, sets: list[str] | None = None
) -> TrainConfig:
    """Load and validate a training config; a ``model:`` path is resolved relative to the file.
    ``sets`` are dotted command-line assignments (``optim.lr=3e-4``, ``model.n_layers=4``, or a model
    file ``model=configs/model/tiny.yaml``), applied in order after the model file is read and validated
    with everything else."""
    if isinstance(path_or_dict, str):
        base_dir = os.path.dirname(os.path.abspath(path_or_dict))
        data = _load_yaml(path_or_dict)
    else:
        data = dict(path_or_dict)
    data = _read_model_file(data, base_dir)
    for item in sets or []:  # one at a time: a model file set here is read before model.* assignments after it
        data = _read_model_file(apply_overrides(data, [item]), base_dir)
    _sources_from_mixture(data)
    _vocab_from_data(data)
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"train config: {describe(exc, TrainConfig)}") from None


def _sources_from_mixture(data: dict) -> None:
    """``data.mixture`` becomes ``data.sources``; a source not built yet is refused here, before any step."""
    from pretrain.mixture_presets import check_built, load_mixture, load_mixture_phases

    section = data.get("data")
    if not isinstance(section, dict) or not section.get("mixture"):
        return
    if section.get("sources"):
        raise ConfigError("set data.mixture or data.sources, not both")
    sources, phases = load_mixture(section["mixture"]), load_mixture_phases(section["mixture"])
    # the config's own phases win over the mixture file's (a run's saved config holds them)
    data["data"] = {
        **section,
        "sources": sources,
        **({"phases": phases} if phases and not section.get("phases") else {}),
    }
    check_sources(data["data"]["sources"], f"mixture {section['mixture']}")
    check_built(data["data"]["sources"])


def check_sources(sources: list, where: str) -> None:
    """The checks ``data.sources`` gets (weights, each source once) for sources read on their own (a
    mixture), so that ``pretrain budget`` refuses what ``pretrain train`` refuses; ``where`` names them."""
    try:
        DataConfig.model_validate({"sources": sources})
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe(exc, DataConfig)}") from None


def _vocab_from_data(data: dict) -> None:
    """``model.vocab_size: auto`` (or left out) becomes the shards' tokenizer's vocabulary, from their
    manifests, as nanoGPT and Megatron size the embedding: a larger one only adds rows no id reaches."""
    model, sources = data.get("model"), data.get("data")
    sources = sources.get("sources") if isinstance(sources, dict) else None
    if not isinstance(model, dict) or model.get("vocab_size", "auto") != "auto" or not isinstance(sources, list):
        return
    from pretrain.components.shard_totals import shard_totals

    paths = [s["path"] for s in sources if isinstance(s, dict) and isinstance(s.get("path"), str)]
    if paths:  # else validation names what is missing
        data["model"] = {**model, "vocab_size": shard_totals(paths)["vocab_size"]}


def save_yaml(model: BaseModel, path: str) -> None:
    from dataprep.core.storage import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False))
