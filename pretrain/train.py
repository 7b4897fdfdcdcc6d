"""The training loop: ``pretrain train CONFIG`` (one process) or
``torchrun --nproc_per_node=K -m pretrain.train CONFIG`` (K processes, any number of nodes).

``run`` reads top to bottom: set up (``Trainer()``: process group and mesh, data, model, optimizer), resume,
the loop (``Trainer.train``), the final weights (``Trainer.finish``). The step itself is
``pretrain.train_step``; the models and loaders are built in ``pretrain.train_setup``; what the loop does
at an event lives beside it: ``train_logging`` (metrics), ``train_validation`` (validation, early stop) and
``train_recovery`` (checkpoints, skipped steps, spikes and rollbacks).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from dataprep.core.errors import UsageError
from pretrain.components import checkpoint, checkpoint_folder
from pretrain.components.batch_change import BatchRecord, batch_change, set_peak_lr
from pretrain.components.best import BestValidation
from pretrain.components.dataloader import fingerprint
from pretrain.components.device import resolve_device, resolve_precision
from pretrain.components.diagnostics import LayerDiagnostics, diagnostics_summary
from pretrain.components.faults import Fault, FaultInjector, parse_fault
from pretrain.components.guard import SkipCounter
from pretrain.components.in_loop_eval import InLoopEval
from pretrain.components.optimizer import build_lr_scheduler, build_optimizer
from pretrain.components.preemption import Stopped, StopSignal, stop_at_once
from pretrain.components.profiling import StepProfiler, profiled_step
from pretrain.components.safetensors_export import export_checkpoint, export_model
from pretrain.components.spikes import SpikeDetector
from pretrain.components.stragglers import StragglerMonitor
from pretrain.components.verdicts import StepVerdicts
from pretrain.components.warm_start import warm_start
from pretrain.components.watchdog import Watchdog, process_group_timeout
from pretrain.config.train import TrainConfig
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.distributed.process_group import barrier, init_distributed
from pretrain.lineage import LineageState, training_lineage
from pretrain.train_logging import TrainLogging
from pretrain.train_recovery import TrainRecovery
from pretrain.train_setup import build_model, build_train_loaders, total_steps, warn_unused_vocab
from pretrain.train_step import StepOutcome, TrainStepContext, train_step
from pretrain.train_validation import TrainValidation


def _due(step: int, every: int, last: int) -> bool:
    """Whether an every-N event falls on ``step``: on multiples of N and on the last step."""
    return step % every == 0 or step == last


class Trainer(TrainLogging, TrainRecovery, TrainValidation):
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
        self.train_loader, self.val_loader = build_train_loaders(cfg, self.rank, dp)
        if self.rank == 0:
            warn_unused_vocab(cfg.model, max(s.vocab_size for s in self.train_loader.sources))
        self.pipe, self.model = build_model(
            cfg, self.dims, self.device, self.precision, self.train_loader.grad_accum_steps
        )
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

    def resume(self, resume: str | None) -> None:
        """Restore from a checkpoint when asked (``--resume``), else start from ``init_from``'s weights if
        set; a fresh start refuses an out_dir that already holds checkpoints."""
        if resume in (None, "", "none") and checkpoint_folder.list_checkpoints(self.ckpt_root):
            raise UsageError(
                f"{self.ckpt_root} already holds checkpoints: pass --resume auto to continue "
                "that run, or choose another out_dir"
            )
        path = checkpoint_folder.resolve(resume, self.ckpt_root)
        if path is not None and resume in checkpoint_folder.RESUME_NEWEST:  # the newest that loads (latest-intact)
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
                    export_checkpoint(
                        self.last_checkpoint or checkpoint_folder.list_checkpoints(self.ckpt_root)[-1], path
                    )
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
