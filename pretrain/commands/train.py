"""``pretrain train CONFIG``: train a model, in one process or one of torchrun's (``pretrain.train``)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch.distributed as dist

from dataprep.core.cli import add_output_argument, add_set_argument
from dataprep.core.errors import UsageError
from dataprep.core.storage import check_output_path
from pretrain.components import checkpoint_folder
from pretrain.components.guard import NonFiniteError
from pretrain.components.metrics import check_trackers
from pretrain.components.preemption import Stopped
from pretrain.components.spikes import SpikeError
from pretrain.config.loading import load_train_config
from pretrain.config.train import TrainConfig
from pretrain.train import run
from pretrain.train_setup import total_steps


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="training config YAML (see configs/train/)")
    parser.add_argument(
        "--resume",
        default="none",
        metavar="auto|latest-intact|none|PATH",
        help="auto: continue from the latest checkpoint in the run's checkpoint dir, if any (one "
        "that does not load is an error); latest-intact: the same, passing over newer "
        "checkpoints that do not load, with a warning (for requeued jobs); PATH: from that "
        "checkpoint; none (default): start fresh",
    )
    add_output_argument(
        parser, old=("--out-dir",), metavar="DIR", help="the run's folder: overrides out_dir of the config"
    )
    parser.add_argument("--max-steps", type=int, help="override max_steps of the config")
    parser.add_argument(
        "--stop-at-step",
        type=int,
        metavar="N",
        help="checkpoint and exit at step N without changing the schedule's horizon "
        "(for jobs shorter than the run; continue with --resume auto)",
    )
    add_set_argument(parser)
    parser.add_argument(
        "--inject",
        action="append",
        default=[],
        metavar="KIND:step=N,rank=R",
        help="inject a fault, once per run, for tests and drills: nan (that rank's loss NaN at "
        "step N; rank 0 by default), spike (that rank's loss times scale=X, default 100), "
        "hang (the rank blocks at step N), kill (the rank is killed at step N), "
        "slow:rank=R,ms=M (the rank sleeps M ms every step); repeat for several",
    )
    parser.add_argument(
        "--profile",
        metavar="START:END",
        help="record steps START to END (included) with the "
        "PyTorch profiler on every rank: traces and a time split in OUT_DIR/profile/ "
        "(log.profile_steps)",
    )
    parser.add_argument("--json", action="store_true", help="print the run's outcome as JSON on stdout (rank 0)")


def main(args: argparse.Namespace) -> int:
    sets = list(getattr(args, "set", None) or [])
    sets += [
        f"{key}={value}"
        for key, value in (("out_dir", args.output), ("max_steps", args.max_steps))
        if value is not None
    ]
    if getattr(args, "profile", None):
        sets.append(f"log.profile_steps={profile_window(args.profile)}")
    cfg = load_train_config(args.config, sets=sets)  # validated: --max-steps -5 is an error
    check_trackers(cfg.log)  # a missing tracker package fails here, not after set-up
    if args.stop_at_step is not None and args.stop_at_step <= 0:
        raise UsageError(f"--stop-at-step {args.stop_at_step}: must be a positive step number")
    _check_paths(cfg, args.resume)
    quiet = contextlib.redirect_stdout(sys.stderr) if getattr(args, "json", False) else contextlib.nullcontext()
    try:
        with quiet:
            records = run(cfg, args.resume, args.stop_at_step, getattr(args, "inject", ()))
    except (NonFiniteError, SpikeError) as exc:  # the run stopped on purpose: one clear line, its own exit status
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except Stopped as stop:  # Ctrl-C or SIGTERM: the step it stopped at is saved; one line says how to go on
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"pretrain train: {stop}", file=sys.stderr, flush=True)
            if getattr(args, "json", False):
                import json

                print(
                    json.dumps(
                        {
                            "ok": False,
                            "exit_status": stop.exit_status,
                            "stopped_by": stop.signal_name,
                            "step": stop.step,
                            "checkpoint": stop.checkpoint,
                            "error": str(stop),
                        }
                    )
                )
        return stop.exit_status
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    stopped = records.pop() if records and records[-1]["kind"] == "early_stop" else None
    final = _handed_over(cfg, stopped is not None)
    if int(os.environ.get("RANK", "0")) == 0 and not getattr(args, "json", False):
        _say_where(cfg, final, stopped)
    if getattr(args, "json", False) and int(os.environ.get("RANK", "0")) == 0:
        import json

        print(
            json.dumps(
                {
                    "out_dir": os.path.abspath(cfg.out_dir),
                    "steps": total_steps(cfg),
                    "last_step": records[-1]["step"] if records else None,
                    "loss": records[-1]["loss"] if records else None,
                    "model": final and os.path.abspath(final),
                    "early_stop": stopped,
                    "metrics": os.path.abspath(os.path.join(cfg.out_dir, cfg.log.jsonl)) if cfg.log.jsonl else None,
                }
            )
        )
    return 0


def profile_window(text: str) -> list[int]:
    """``--profile 5:8`` as [5, 8] (one step: ``--profile 5``)."""
    start, _, end = text.partition(":")
    try:
        return [int(start), int(end or start)]
    except ValueError:
        raise UsageError(f"--profile {text}: expected START:END, two step numbers such as 5:8") from None


def _check_paths(cfg: TrainConfig, resume: str) -> None:
    """The run's paths, before any set-up: a file where a folder goes (or under one) is a usage error."""
    if resume not in ("none", *checkpoint_folder.RESUME_NEWEST) and not os.path.isdir(resume):
        raise UsageError(
            f"--resume {resume}: not a checkpoint folder; use auto, latest-intact, none or a checkpoints/step-* folder"
        )
    check_output_path(cfg.out_dir, "out_dir", folder=True)
    check_output_path(os.path.join(cfg.out_dir, cfg.checkpoint.dir), "checkpoint.dir", folder=True)
    if cfg.data.cache.dir:
        check_output_path(cfg.data.cache.dir, "data.cache.dir", folder=True)
    if cfg.log.jsonl:
        check_output_path(os.path.join(cfg.out_dir, cfg.log.jsonl), "log.jsonl", folder=False)


def _handed_over(cfg: TrainConfig, stopped: bool) -> str | None:
    """What eval, generate and export take from the run: its best checkpoint (``checkpoint.keep_best``),
    else the final weights, else, after an early stop, its last checkpoint; None: the run is unfinished."""
    root = os.path.join(cfg.out_dir, cfg.checkpoint.dir)
    final = os.path.join(cfg.out_dir, "model.safetensors")
    if not (stopped or os.path.exists(final)):
        return None
    if (best := checkpoint_folder.find_best(root)) is not None:
        return best
    return final if os.path.exists(final) else checkpoint_folder.list_checkpoints(root)[-1]


def _say_where(cfg: TrainConfig, model: str | None, stopped: dict | None) -> None:
    """The run's last line: where the model went and what to run next (or how to continue)."""
    import shlex

    if model is None:
        print(f"checkpoints in {os.path.join(cfg.out_dir, cfg.checkpoint.dir)}: continue with --resume auto")
        return
    run = shlex.quote(cfg.out_dir)
    why = f"stopped early at step {stopped['step']}; " if stopped else ""
    print(
        f"{why}model: {model}; next: pretrain eval {run} | pretrain generate {run} --prompt 'The' | "
        f"pretrain export {run} --output {shlex.quote(os.path.join(cfg.out_dir, 'hf'))}"
    )
