"""The planner's result (``pretrain.planning.plan.plan``): the chosen layout's figures, the memory tables beside
it and the time to train (what ``pretrain plan --json`` prints), and the chosen layout as a training config."""

import math

from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig
from pretrain.models.llama import num_params
from pretrain.planning.flops import flops_per_token
from pretrain.planning.plan_layouts import RUNNABLE_ZERO_LEVELS, Layout
from pretrain.planning.plan_memory import RECOMPUTE, activations, communication, layout_memory


def plan_result(
    cfg,
    chosen: Layout,
    tried,
    *,
    gpus,
    gpu,
    seq_len,
    precision,
    mfu,
    tokens,
    show_tp,
    tokens_source,
    unique_tokens,
    no_sync,
    gpus_per_node,
    attention_span=None,
    document_tokens=None,
) -> dict:
    """The chosen layout's figures, its memory by ZeRO level (at TP 1, the chosen TP and ``show_tp``), the
    activations by checkpointing and the time to train: what ``pretrain plan --json`` prints, but for the
    hyperparameters (``plan`` adds them). ``gpus_per_node``: the one the layouts were chosen for."""
    n = num_params(cfg)
    micro_batch = chosen.micro_batch
    global_batch = micro_batch * chosen.dp * chosen.grad_accum
    tokens_per_step = global_batch * seq_len
    breakdown = _memory_by_zero_level(
        cfg, chosen, gpus=gpus, seq_len=seq_len, precision=precision, no_sync=no_sync, show_tp=show_tp
    )
    act = {
        ac: activations(
            cfg,
            seq_len // chosen.cp,
            micro_batch,
            ac,
            chosen.tp,
            precision,
            chosen.tp > 1,
            bf16_stream=chosen.dp * chosen.cp > 1,
            compiled=chosen.compiled,
        )["total"]
        for ac in RECOMPUTE
    }
    return {
        "model": {"params": n, "non_embedding_params": num_params(cfg, exclude_embedding=True), **cfg.model_dump()},
        "cluster": {"gpus": gpus, **gpu.to_dict(), "gpus_per_node": gpus_per_node},
        "precision": precision,
        "seq_len": seq_len,
        "micro_batch": micro_batch,
        "layout": {
            "name": chosen.name,
            "zero_level": chosen.zero_level,
            "dp": chosen.dp,
            **chosen.degrees(),
            "pp_schedule": chosen.schedule if chosen.pp > 1 else None,
            "pp_stages_per_rank": chosen.stages_per_rank,
            "bubble": chosen.bubble,
            "checkpointing": chosen.checkpointing,
            "compiled": chosen.compiled,
            "grad_accum": chosen.grad_accum,
            "no_sync_accumulation": no_sync,
            "reshard_after_forward": chosen.zero_level != "zero2",
            "global_batch": global_batch,
            "tokens_per_step": tokens_per_step,
            "memory": chosen.memory,
            "communication": communication(cfg, chosen, seq_len, precision),
        },
        "decisions": [t.reason for t in tried],
        "breakdown": {str(tp): rows for tp, rows in breakdown.items()},
        "activations_by_checkpointing": act,
        "time": _time_to_train(
            cfg,
            chosen,
            gpu=gpu,
            seq_len=seq_len,
            precision=precision,
            mfu=mfu,
            tokens=tokens,
            tokens_source=tokens_source,
            unique_tokens=unique_tokens,
            attention_span=attention_span,
        ),
        **(
            {"document_mask": {"mean_document_tokens": document_tokens, "attention_span": attention_span}}
            if document_tokens
            else {}
        ),
    }


def _memory_by_zero_level(cfg, chosen: Layout, *, gpus, seq_len, precision, no_sync, show_tp) -> dict:
    """Per-GPU memory of the chosen layout at each runnable ZeRO level, at TP 1, the chosen TP and ``show_tp``."""
    kw = dict(gpus=gpus, seq_len=seq_len, precision=precision, no_sync=no_sync, **chosen.memory_settings())
    breakdown = {
        tp: {level: layout_memory(cfg, level, tp, chosen.checkpointing, **kw) for level in RUNNABLE_ZERO_LEVELS}
        for tp in sorted({1, chosen.tp, show_tp or 1})
        if gpus % (tp * chosen.pp * chosen.cp) == 0
    }
    return breakdown


def _time_to_train(
    cfg, chosen: Layout, *, gpu, seq_len, precision, mfu, tokens, tokens_source, unique_tokens, attention_span
) -> dict:
    """The chosen layout's step time, tokens per day and the steps, days and epochs the target takes."""
    tokens_per_step = chosen.micro_batch * chosen.dp * chosen.grad_accum * seq_len
    seconds = chosen.time["total"]
    tokens_per_day = tokens_per_step / seconds * 86400
    return {
        "mfu": mfu,
        "peak_flops": gpu.peak(precision),
        "flops_per_token": flops_per_token(cfg, seq_len, attention_span),
        "recompute_factor": RECOMPUTE[chosen.checkpointing],
        "step_seconds": seconds,
        "step_breakdown": chosen.time,
        "tokens_per_day": tokens_per_day,
        "target_tokens": tokens,
        "target_source": tokens_source,
        "steps": math.ceil(tokens / tokens_per_step),
        "days": tokens / tokens_per_day,
        "unique_tokens": unique_tokens,
        "epochs": tokens / unique_tokens if unique_tokens else None,
    }


def train_config(result: dict, cfg: ModelConfig, data: list[str], out_dir: str) -> TrainConfig:
    """The chosen layout as a ``pretrain train`` config, every degree named (DDP is ``dp_replicate``), with the
    plan's learning rate, batch and warmup."""
    lay, hyper = result["layout"], result["hyperparameters"]
    return TrainConfig.model_validate(
        {
            "model": cfg.model_dump(),
            "data": {
                "sources": [{"path": p} for p in data],
                **({"document_mask": True} if "document_mask" in result else {}),
            },
            "seq_len": result["seq_len"],
            "micro_batch_size": result["micro_batch"],
            "global_batch_size": lay["global_batch"],
            "max_tokens": int(result["time"]["target_tokens"]),
            "precision": result["precision"],
            "device": "auto",
            "parallel": {
                "dp_replicate": lay["dp_replicate"],
                "dp_shard": lay["dp_shard"],
                "tp": lay["tp"],
                "pp": lay["pp"],
                "cp": lay["cp"],
                "activation_checkpointing": lay["checkpointing"],
                "compile": lay["compiled"],
                "loss_parallel": lay["tp"] > 1,
                "no_sync_accumulation": lay["no_sync_accumulation"] and lay["pp"] == 1,
                "reshard_after_forward": lay["reshard_after_forward"],
                "offload": lay["offload"],
                "shard_optimizer": lay["shard_optimizer"],
                **(
                    {"pp_schedule": lay["pp_schedule"], "pp_stages_per_rank": lay["pp_stages_per_rank"]}
                    if lay["pp"] > 1
                    else {}
                ),
            },
            "optim": {"lr": hyper["learning_rate"], "warmup_steps": hyper["warmup_steps"]},
            "out_dir": out_dir,
            "planned": {
                "global_batch_size": lay["global_batch"],
                "law_lr": hyper["law"]["learning_rate"],
                "step_seconds": result["time"]["step_seconds"],
            },
            **(
                {
                    "checkpoint": {
                        "every_steps": result["checkpoint_interval"]["every_steps"],
                        "async_save": result["checkpoint_interval"]["async_save"],
                    }
                }
                if "checkpoint_interval" in result
                else {}
            ),
        }
    )
