"""The training config: the run's horizon, batch and precision, its sections, and the checks across them;
here too the sections only a run has (checkpoints, logging, evaluation, spikes, health, early stop)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dataprep.core.validation import StrictModel
from pretrain.config.data import DataConfig
from pretrain.config.model import ModelConfig
from pretrain.config.optim import OptimConfig, PlannedConfig
from pretrain.config.parallel import ParallelConfig
from pretrain.layout_rules import check_layout


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
