"""What a run writes as it trains: the run folder, the metrics logger and its opening line, and each logged
training record with its pipeline-bubble and per-source mixture fields."""

from __future__ import annotations

import sys

from pretrain.components.batch_change import describe
from pretrain.components.document_bounds import masked_attention_span
from pretrain.components.metrics import MetricsLogger, bubble_fraction
from pretrain.inference.loading import save_run_dir
from pretrain.lineage import write_run_lineage
from pretrain.models.llama import num_params
from pretrain.planning.flops import flops_per_token
from pretrain.train_step import StepOutcome


class TrainLogging:
    """A part of ``Trainer`` (pretrain/train.py), whose ``__init__`` sets up the state these methods use:
    the run folder and metrics, and the training records."""

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
