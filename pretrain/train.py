"""The training loop: ``pretrain train CONFIG`` (one process) or
``torchrun --nproc_per_node=K -m pretrain.train CONFIG`` (K processes, any number of nodes).

``run`` reads top to bottom: set up (``Trainer()``: process group and mesh, data, model, optimizer), resume,
the loop (``Trainer.train``), the final weights (``Trainer.finish``). The step itself is
``pretrain.train_step``.
"""

from __future__ import annotations

import math
import os
import sys
import time

import torch
import torch.distributed as dist

from dataprep.core.errors import UsageError
from pretrain.components import checkpoint
from pretrain.components.batch_change import BatchRecord, batch_change, describe, set_peak_lr
from pretrain.components.best import BestValidation
from pretrain.components.dataloader import build_loaders, fingerprint
from pretrain.components.device import resolve_device, resolve_precision
from pretrain.components.diagnostics import LayerDiagnostics, diagnostics_summary
from pretrain.components.document_bounds import masked_attention_span
from pretrain.components.faults import Fault, FaultInjector, parse_fault
from pretrain.components.guard import NonFinite, SkipCounter
from pretrain.components.in_loop_eval import InLoopEval
from pretrain.components.metrics import MetricsLogger, bubble_fraction
from pretrain.components.optimizer import build_lr_scheduler, build_optimizer
from pretrain.components.preemption import Stopped, StopSignal, stop_at_once
from pretrain.components.profiling import StepProfiler, profiled_step
from pretrain.components.safetensors_export import export_checkpoint, export_model
from pretrain.components.spikes import Spike, SpikeDetector, SpikeError
from pretrain.components.stragglers import StragglerMonitor
from pretrain.components.verdicts import StepVerdicts
from pretrain.components.warm_start import warm_start
from pretrain.components.watchdog import Watchdog, process_group_timeout
from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.distributed.parallelize import parallelize
from pretrain.distributed.pipeline_parallel import PipelineParallelModel, build_pipeline
from pretrain.distributed.process_group import barrier, init_distributed
from pretrain.inference.loading import save_run_dir
from pretrain.layout_rules import check_layout
from pretrain.lineage import LineageState, training_lineage, write_run_lineage
from pretrain.models.llama import Llama, num_params
from pretrain.planning.flops import flops_per_token
from pretrain.train_step import StepOutcome, TrainStepContext, train_step, validation_loss

# --- setup ------------------------------------------------------------------------------------------


def total_steps(cfg: TrainConfig) -> int:
    """max_steps if set, else the token budget max_tokens divided by the tokens per step (rounded up)."""
    return cfg.max_steps or math.ceil(cfg.max_tokens / (cfg.global_batch_size * cfg.seq_len))


def _param_dtype(precision: str, dims: ParallelDims) -> torch.dtype | None:
    """bf16 weights gathered by FSDP's mixed-precision policy (elsewhere bf16 comes from autocast)."""
    return torch.bfloat16 if precision == "bf16" and dims.fsdp_enabled else None


def _check_devices(cfg: TrainConfig, dims: ParallelDims, device: torch.device) -> None:
    """The layout's rules again, now that the world size and the device are known."""
    check_layout(cfg.parallel, cfg.model, world_size=dims.world_size, device_type=device.type)


def _warn_unused_vocab(model: ModelConfig, data_vocab: int) -> None:
    """A model vocabulary far beyond the tokenizer's trains embedding rows no id reaches: say so."""
    unused = (model.vocab_size - data_vocab) * model.d_model * (1 if model.tie_embeddings else 2)
    if unused > 0.1 * num_params(model):
        print(
            f"[train] warning: model.vocab_size {model.vocab_size} exceeds the data's tokenizer vocabulary "
            f"{data_vocab}: {unused:,} of the model's {num_params(model):,} parameters are embedding rows no "
            f"token id reaches; set model.vocab_size: auto (or {data_vocab})",
            file=sys.stderr,
        )


def build_parallel_model(cfg: TrainConfig, dims: ParallelDims, device: torch.device, precision: str) -> Llama:
    """Build on the meta device, parallelize, allocate this rank's shards and initialise them in place.
    The initial weights are the same for every parallel layout (``Llama.init_weights`` draws each
    element from its position in the full tensor), so runs are comparable, and no process ever holds
    the full model. (With pipeline parallelism: ``build_pipeline``, which builds each stage the same way.)"""
    _check_devices(cfg, dims, device)
    with torch.device("meta"):
        model = Llama(cfg.model)
    parallelize(model, dims, cfg.parallel, _param_dtype(precision, dims), cfg.seq_len)
    model.to_empty(device=device)
    model.tie_weights()
    model.init_weights(cfg.seed)
    return model


# --- the run ------------------------------------------------------------------------------------------


def _due(step: int, every: int, last: int) -> bool:
    """Whether an every-N event falls on ``step``: on multiples of N and on the last step."""
    return step % every == 0 or step == last


class Trainer:
    """One run: ``__init__`` sets up (process group, mesh, data, model, optimizer), ``resume`` restores a
    checkpoint (or warm-starts), ``train`` is the loop, ``finish`` exports the final weights. ``faults``:
    injected on purpose (``--inject``)."""

    def __init__(self, cfg: TrainConfig, faults: tuple[Fault, ...] = ()):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.rank, _, self.world = init_distributed(self.device.type, process_group_timeout(cfg.health))
        self.dims = ParallelDims.from_config(cfg.parallel, self.world)
        self.dims.build_mesh(self.device.type)
        dp = self.dims.data_parallel()
        self.precision = resolve_precision(cfg.precision, self.device)
        torch.manual_seed(cfg.seed)
        if cfg.seq_len > cfg.model.max_seq_len:
            raise UsageError(f"seq_len {cfg.seq_len} exceeds the model's max_seq_len {cfg.model.max_seq_len}")
        cache_dir = os.path.join(cfg.data.cache.dir or os.path.join(cfg.out_dir, "data_cache"), f"rank-{self.rank}")
        self.train_loader, self.val_loader = build_loaders(
            cfg.data,
            cfg.seq_len,
            cfg.global_batch_size,
            cfg.micro_batch_size,
            dp.rank,
            dp.size,
            cfg.model.vocab_size,
            cache_dir,
            total_steps(cfg),
        )
        if self.rank == 0:
            _warn_unused_vocab(cfg.model, max(s.vocab_size for s in self.train_loader.sources))
        self.pipe, self.model = self._build_model()
        self.stepper = self.pipe or self.model  # what runs a step: the pipeline's schedule, or the model
        self.diagnostics = None  # per-layer diagnostics (log.diagnostics_every_steps)
        if cfg.log.diagnostics_every_steps:
            self.diagnostics = LayerDiagnostics(
                self.model,
                self.pipe.stages if self.pipe else [self.model],
                cfg.model.n_layers,
                self.device,
                self.world // self.dims.pp,
                logits=not self.dims.cp_enabled,
            )
        self.optimizer = build_optimizer(self.model, cfg.optim, self.precision, self.dims.zero1_group())
        self.model_state = checkpoint.ModelOptimizerState(self.model, self.optimizer)  # the checkpoint's shards
        self.steps = total_steps(cfg)
        self.scheduler = build_lr_scheduler(self.optimizer, self.steps, cfg.optim)
        self.ctx = TrainStepContext(
            self.device,
            self.precision,
            cfg.parallel.loss_parallel,
            fsdp=self.dims.fsdp_enabled,
            no_sync_accumulation=cfg.parallel.no_sync_accumulation,
            pp_group=self.dims.group("pp"),
            positions=getattr(self.model, "positions", None),
            z_loss=cfg.model.z_loss,
            document_positions=cfg.data.document_positions,
            grad_group=self.dims.zero1_group(),
        )
        self.spikes = SpikeDetector(cfg.spikes.window, cfg.spikes.threshold, self.device)
        self.verdicts = StepVerdicts(cfg.guard, cfg.spikes.policy, self.spikes, self.world // self.dims.pp)
        self.rollbacks = 0
        self.batch = BatchRecord(cfg.global_batch_size, cfg.optim.lr)  # what the lr is for, in checkpoints
        self.batch_record: dict | None = None  # a batch change found on resume (``_apply_batch_rule``)
        self.lineage = LineageState(training_lineage(cfg))  # the data and code this run trains with
        components = {
            "scheduler": self.scheduler,
            "loader": self.train_loader,
            "scaler": self.ctx.scaler,
            "spikes": self.spikes,
            "batch": self.batch,
            "lineage": self.lineage,
        }
        stop = cfg.early_stop
        self.best = BestValidation(stop.patience, stop.min_delta) if stop else BestValidation()
        if cfg.checkpoint.keep_best or stop:
            components["best"] = self.best  # a resumed run remembers its best validation
        self.state = checkpoint.TrainState(
            0, cfg.model.model_dump(mode="json"), fingerprint(self.train_loader), self.dims.degrees(), components
        )
        self.ckpt_root = os.path.join(cfg.out_dir, cfg.checkpoint.dir)
        self.tokens_per_step = cfg.global_batch_size * cfg.seq_len
        self.last_checkpoint: str | None = None
        self.saved_step: int | None = None  # the step of the last checkpoint this process wrote
        self.saver = checkpoint.AsyncSaver() if cfg.checkpoint.async_save else None  # None: saves block
        self.skips = SkipCounter(cfg.max_consecutive_skips)
        if faults and self.dims.pp_enabled:
            raise UsageError("--inject nan reaches the loss of runs without pipeline parallelism only (pp 1)")
        self.faults = FaultInjector(list(faults), cfg.out_dir, self.rank, self.world)
        health = cfg.health
        self.watchdog = Watchdog(
            cfg.out_dir,
            self.rank,
            health.hang_timeout,
            health.first_step_timeout,
            os.path.join(cfg.out_dir, cfg.log.jsonl) if cfg.log.jsonl else None,
        )
        self.stragglers = StragglerMonitor(
            health.straggler_every_steps, health.straggler_margin, self.device, self.rank, self.world
        )
        window = cfg.log.profile_steps
        self.profiler = StepProfiler(cfg.out_dir, *window, self.rank, self.world, self.device) if window else None
        # SIGINT/SIGTERM: every rank saves the same step and exits
        self.stop = StopSignal(self.world, self.rank, process_group_timeout(health))
        # the eval: section's tasks and held-out documents (pretrain/components/in_loop_eval.py)
        self.evaluator = InLoopEval(cfg, self.device, self.precision, self.dims) if cfg.eval else None

    def _build_model(self) -> tuple[PipelineParallelModel | None, torch.nn.Module]:
        """The model, or with pipeline parallelism this rank's stages (the optimizer and checkpoints see
        their module, the step runs the pipeline)."""
        cfg, dims, device = self.cfg, self.dims, self.device
        if not dims.pp_enabled:
            return None, build_parallel_model(cfg, dims, device, self.precision)
        _check_devices(cfg, dims, device)
        pipe = build_pipeline(cfg, dims, device, _param_dtype(self.precision, dims), self.train_loader.grad_accum_steps)
        return pipe, pipe.module

    def resume(self, resume: str | None) -> None:
        """Restore from a checkpoint when asked (``--resume``), else start from ``init_from``'s weights if
        set; a fresh start refuses an out_dir that already holds checkpoints."""
        if resume in (None, "", "none") and checkpoint.list_checkpoints(self.ckpt_root):
            raise UsageError(
                f"{self.ckpt_root} already holds checkpoints: pass --resume auto to continue "
                "that run, or choose another out_dir"
            )
        path = checkpoint.resolve(resume, self.ckpt_root)
        if path is not None and resume in checkpoint.RESUME_NEWEST:  # the newest that loads (latest-intact)
            checkpoint.load_newest(self.ckpt_root, self.model_state, self.state, resume == "latest-intact")
        elif path is not None:  # None: a fresh start (or --resume auto with nothing saved yet)
            checkpoint.load(path, self.model_state, self.state)
        elif self.cfg.init_from:
            warm_start(self.model, self.cfg.init_from, self.cfg.model)
        self._apply_batch_rule()

    def _apply_batch_rule(self) -> None:
        """When the global batch is not the one the peak lr was chosen for (the resumed run's, else the
        plan's), apply ``optim.batch_change`` and keep its record for the log."""
        resumed, self.batch.resumed = self.batch.resumed, None
        if resumed is not None:  # the run goes on at the rate it had (rescaled below if the batch changed)
            self.batch.peak_lr = resumed["peak_lr"]
        self.batch_record = batch_change(self.cfg, resumed, self.state.step)
        if self.batch_record is not None:
            self.batch.peak_lr = self.batch_record["lr"]
            set_peak_lr(self.scheduler, self.batch.peak_lr)

    def start_logging(self) -> None:
        """Write the run folder, open the metrics and say what is about to run."""
        cfg, dims = self.cfg, self.dims
        if self.rank == 0:
            save_run_dir(cfg)  # config.yaml with absolute paths and the tokenizer: the folder can move
            write_run_lineage(cfg.out_dir, self.lineage)
        span = (
            masked_attention_span(self.train_loader.sources, cfg.seq_len)  # CUDA skips the masked blocks
            if cfg.data.document_mask and self.device.type == "cuda"
            else None
        )
        self.log = MetricsLogger(
            cfg.out_dir,
            cfg.log.jsonl,
            cfg.log.tensorboard,
            flops_per_token(cfg.model, cfg.seq_len, span),
            self.world,
            self.device,
            self.rank,
            wandb=cfg.log.wandb,
            run_config=cfg.model_dump(mode="json"),
            horizon=self.steps,
            planned_step_s=cfg.planned and cfg.planned.step_seconds,
        )
        if self.batch_record is not None:
            self.log.write(self.batch_record)
            if self.rank == 0:
                print(f"[train] {describe(self.batch_record)}", file=sys.stderr)
        accum = self.train_loader.grad_accum_steps
        self.pp_fields = (
            {"pp_bubble": bubble_fraction(cfg.parallel.pp_schedule, dims.pp, accum, cfg.parallel.pp_stages_per_rank)}
            if dims.pp_enabled
            else {}
        )
        if self.rank == 0:
            layout = " ".join(f"{k}={v}" for k, v in dims.degrees().items() if v > 1 or k in ("dp_shard", "tp"))
            print(
                f"[train] {num_params(cfg.model):,} parameters, {self.steps} steps of {self.tokens_per_step:,} "
                f"tokens, {layout}, {self.precision} on {self.device.type}, grad accumulation "
                f"{accum}, starting at step {self.state.step}",
                file=sys.stderr,
            )

    def train(self, end: int) -> list[dict]:
        """Steps up to ``end``, logging, validating and checkpointing when due (``events_due``); returns the
        records logged. An ordinary step (no event due) reads nothing back from the device: the
        verdicts of the steps since the last read (skips, spikes) are read on the next step that does."""
        state, records = self.state, []
        self.log.start(state.step)
        while state.step < end:
            if self.stop.agreed():  # a collective: every rank answers at the same step
                self._stop_here()
                break
            outcome = self._step()
            state.step += 1
            self.log.count_tokens(self.tokens_per_step)
            due = self.events_due(state.step, end)
            if not due:
                self.watchdog.progress(state.step)
                continue
            if "diagnostics" in due:  # the step that ran, even if a spike now rolls it back
                record = self.diagnostics.read(state.step)  # a collective: every rank reads
                self.log.write(record, line=diagnostics_summary(record))
            if self._read_verdicts():
                continue  # rolled back: the loop goes on from the checkpoint's step
            if "log" in due:
                records.append(self._log_train(outcome))
            if "stragglers" in due and (stragglers := self.stragglers.gather(state.step)) is not None:
                self.log.write(stragglers)
            if "validate" in due:
                self._validate()
            if "evaluate" in due:
                self.log.write(self.evaluator.run(self.model, state.step))
                self.log.start(state.step)  # the pause is not training time
            if "checkpoint" in due and self.saved_step != state.step:
                self._save()
            self.watchdog.progress(state.step)  # a validation or save counts toward its step's time
            if self.best.exhausted:
                records.append(self._stop_early())
                break
        return records

    def _step(self) -> StepOutcome:
        """One training step on the next batch; a NaN or spike fault due at this step acts on this rank's loss."""
        step = self.state.step + 1
        self.ctx.nan_loss = self.faults.fire("nan", step)
        spikes = self.faults.take("spike", step)
        self.ctx.loss_scale = spikes[0].scale if spikes else 1
        diagnostics = self.diagnostics if "diagnostics" in self.events_due(step, self.steps) else None
        if diagnostics is not None:  # no activations while a pipeline's first step infers its shapes
            diagnostics.begin(activations=self.pipe is None or self.pipe.shapes_known)
        with self.stragglers.timing(step) as batch, profiled_step(self.profiler, step) as data:
            self.faults.disrupt(step)  # injected hang, kill or slowness
            return train_step(
                self.stepper,
                self.optimizer,
                self.scheduler,
                batch(data(self.train_loader.next_step)),
                self.ctx,
                self.cfg.optim.grad_clip,
                judge=self._judge,
                diagnostics=diagnostics,
            )

    def events_due(self, step: int, end: int) -> set[str]:
        """The periodic events due after ``step`` (the one list the loop runs and the rule "an ordinary step
        reads nothing back" follows): each reads the device. ``end``: where this call of ``train`` stops."""
        cfg = self.cfg
        due = {
            "diagnostics": self.diagnostics is not None and _due(step, cfg.log.diagnostics_every_steps, self.steps),
            "log": _due(step, cfg.log.every_steps, self.steps),
            "stragglers": self.stragglers.sampled(step),
            "validate": self.val_loader is not None and _due(step, cfg.log.val_every_steps, self.steps),
            "evaluate": self.evaluator is not None and self.evaluator.due(step, self.steps),
            "checkpoint": _due(step, cfg.checkpoint.every_steps, end),
        }
        return {event for event, is_due in due.items() if is_due}

    def _judge(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> torch.Tensor | None:
        """This step's verdict, kept on the device; returns the flag that holds its update back."""
        return self.verdicts.judge(
            self.state.step + 1, loss, None if self.ctx.scaler else grad_norm, self.pipe is None or self.pipe.has_last
        )

    def _read_verdicts(self) -> bool:
        """Act on the verdicts kept since the last read, in step order: count and log skipped steps (too
        many in a row: checkpoint and stop), log spikes and roll back. Returns whether the run rolled back."""
        for step, found, spike in self.verdicts.read():
            if self.cfg.guard:
                self._count_skip(step, found)
            if spike is not None and self._on_spike(spike):
                return True
        return False

    def _on_spike(self, spike: Spike) -> bool:
        """Log the spike and keep the last checkpoint before it; under rollback, reload that checkpoint and
        skip ahead in the data order. Returns whether the run rolled back (without a checkpoint before the
        spike it cannot: the update was held back, as under skip)."""
        policy = self.cfg.spikes
        self.settle_checkpoints()  # the checkpoint before the spike may still be being written
        before = checkpoint.latest_before(self.ckpt_root, spike.step)
        if before is not None and self.rank == 0:
            checkpoint.pin(before, f"the last checkpoint before the loss spike at step {spike.step}")
        self.log.write(spike.record(policy.policy, before))
        if policy.policy != "rollback" or before is None:
            return False
        if self.rollbacks == policy.max_rollbacks:
            raise SpikeError(
                f"step {spike.step}: a loss spike ({spike.loss:.4g}, above {spike.limit:.4g}) after "
                f"{self.rollbacks} rollbacks (spikes.max_rollbacks): stopped; look at the data and the "
                f"learning rate, then resume from {before} with --resume"
            )
        checkpoint.load(before, self.model_state, self.state)
        self.saved_step = None  # the steps ahead are trained anew: their checkpoints are written again
        skipped = max(policy.skip_batches, spike.step - self.state.step)  # at least through the spike's batch
        self.train_loader.skip(skipped)
        self.rollbacks += 1
        self.log.write(
            {
                "kind": "rollback",
                "step": spike.step,
                "rank": spike.rank,
                "cause": "loss spike",
                "to_step": self.state.step,
                "checkpoint": before,
                "skipped_batches": skipped,
                "samples_consumed": self.train_loader.consumed,
                "rollbacks": self.rollbacks,
            }
        )
        self.log.start(self.state.step)
        return True

    def _count_skip(self, step: int, found: NonFinite | None) -> None:
        """Log a skipped step; past ``max_consecutive_skips`` in a row, checkpoint and stop with the reason."""
        if not self.skips.count(found):
            return
        self.log.write(self.skips.record(step, found))
        if self.skips.exhausted:
            self._save()
            raise self.skips.error(step, found)

    def _log_train(self, outcome: StepOutcome) -> dict:
        step = self.state.step
        mean_loss = self.dims.mean_loss(outcome.loss, self.pipe is None or self.pipe.has_last)
        z = {"z_loss": self.dims.mean_loss(self.ctx.z_total, True)} if self.cfg.model.z_loss else {}
        return self.log.log_train(
            step,
            loss=mean_loss,
            lr=outcome.lr,
            grad_norm=outcome.grad_norm.item(),
            tokens=step * self.tokens_per_step,
            **z,
            **self.pp_fields,
            **self._mixture_fields(),
        )

    def _mixture_fields(self) -> dict:
        """With several sources, the training tokens drawn from each so far and their shares (host counts)."""
        if len(self.train_loader.sources) < 2:
            return {}
        drawn = self.train_loader.tokens_drawn()
        total = max(sum(drawn.values()), 1)
        fields = {"source_tokens": drawn, "source_share": {name: n / total for name, n in drawn.items()}}
        if self.train_loader.order.num_phases > 1:  # the phase the last step drew from, and its shares so far
            phase, counts = self.train_loader.order.drawn_in_phase(self.train_loader.consumed)
            fields |= {
                "phase": phase + 1,
                "phase_source_share": {
                    s.name: int(n) / max(int(counts.sum()), 1) for s, n in zip(self.train_loader.sources, counts)
                },
            }
        return fields

    def _validate(self) -> None:
        loss = validation_loss(self.stepper, self.val_loader, self.cfg.log.val_batches, self.ctx, self.dims)
        self.log.write({"kind": "val", "step": self.state.step, "val_loss": loss})
        if self.best.observe(self.state.step, loss) and self.cfg.checkpoint.keep_best:
            self._save()
            self.settle_checkpoints()
            if self.rank == 0:
                checkpoint.mark_best(self.last_checkpoint, loss, self.cfg.checkpoint.keep_last)
        self.log.start(self.state.step)  # the pause is not training time

    def _stop_early(self) -> dict:
        """``early_stop``: the validation loss stopped improving; the weights of this step are saved (the
        best checkpoint too, with ``keep_best``) and the run ends."""
        if self.saved_step != self.state.step:
            self._save()
        self.settle_checkpoints()
        record = self.best.record(self.state.step)
        self.log.write(record)
        if self.rank == 0:
            print(
                f"[train] early stop at step {self.state.step}: no validation improved on {self.best.loss:.4f} "
                f"(step {self.best.step}) by more than {self.best.min_delta:g} for {self.best.patience} "
                "validations",
                file=sys.stderr,
            )
        return record

    def _save(self) -> None:
        """Save (or start saving) a checkpoint; the time it blocked the loop goes into the metrics, where
        ``pretrain plan --save-from`` reads it."""
        save = self.saver.save if self.saver else checkpoint.save
        started = time.perf_counter()
        self.last_checkpoint = save(self.ckpt_root, self.model_state, self.state, self.cfg.checkpoint.keep_last)
        self.saved_step = self.state.step
        self.log.write(
            {
                "kind": "checkpoint",
                "step": self.state.step,
                "blocking_s": time.perf_counter() - started,
                "async": self.saver is not None,
            }
        )
        self.log.start(self.state.step)

    def _stop_here(self) -> None:
        """On a signal: checkpoint the step every rank stopped at (unless it is saved already) and log it."""
        saved = self.last_checkpoint and checkpoint.checkpoint_step(self.last_checkpoint) == self.state.step
        if self.state.step > 0 and not saved:
            self._save()
        self.last_checkpoint = self.last_checkpoint or checkpoint.latest_before(self.ckpt_root, self.state.step + 1)
        self.log.write(
            {"kind": "stop", "step": self.state.step, "signal": self.stop.received, "checkpoint": self.last_checkpoint}
        )

    def settle_checkpoints(self) -> None:
        """Wait until a checkpoint written in the background is committed, on every rank."""
        if self.saver is not None:
            self.saver.wait()
            barrier()

    def finish(self) -> None:
        """At the horizon, the consolidated weights for inference (``model.safetensors``); close the logs."""
        cfg, step = self.cfg, self.state.step
        if self.saver is not None:
            self.saver.close()
        if self.profiler is not None:
            self.profiler.close()  # a run that stopped inside the window: what it recorded
        if step == self.steps:
            path = os.path.join(cfg.out_dir, "model.safetensors")
            if self.pipe is None:
                export_model(self.model, path, {"step": step, "model_config": cfg.model.model_dump_json()})
            else:  # no rank holds every stage: rank 0 reads the final checkpoint whole
                if self.rank == 0:
                    export_checkpoint(self.last_checkpoint or checkpoint.list_checkpoints(self.ckpt_root)[-1], path)
                dist.barrier()
        self.log.close()
        barrier()  # no rank tears its process group down while a peer's last collective is still in flight


def run(
    cfg: TrainConfig, resume: str | None = None, stop_at: int | None = None, inject: tuple[str, ...] | list[str] = ()
) -> list[dict]:
    """Train per ``cfg`` (from a checkpoint when ``resume``), up to the horizon or to step ``stop_at``,
    with the faults ``inject`` names (``nan:step=N,rank=R``); returns the training records logged, and the
    ``early_stop`` record last if the run stopped early (rank 0; empty elsewhere). Raises NonFiniteError after
    too many skipped steps in a row, SpikeError after too
    many rollbacks, Stopped after a SIGINT or SIGTERM (with the checkpoint of the step it stopped at)."""
    with stop_at_once():  # a signal during set-up: nothing to save yet
        trainer = Trainer(cfg, tuple(map(parse_fault, inject)))
        trainer.resume(resume)
        trainer.start_logging()
    with trainer.stop.catching():  # from here a signal stops the loop at a step boundary, with a checkpoint
        try:
            with trainer.watchdog.watching(trainer.state.step):  # from here on a hung rank ends its process
                records = trainer.train(end=min(trainer.steps, stop_at or trainer.steps))
        finally:  # also when the run stops on an error: a checkpoint being written is committed first
            if trainer.saver is not None:
                trainer.saver.wait()
        trainer.finish()
    if trainer.stop.received and trainer.state.step < trainer.steps:
        raise Stopped(trainer.stop.received, trainer.state.step, trainer.last_checkpoint)
    return records if trainer.rank == 0 else []


if __name__ == "__main__":  # torchrun -m pretrain.train CONFIG: the options, checks and messages of `pretrain train`
    from pretrain.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
