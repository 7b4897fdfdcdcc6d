"""``pretrain plan``'s tables: the planner's result (``pretrain.planning.plan.plan``) as text."""

from __future__ import annotations

from dataprep.core.units import human
from pretrain.planning.budget import DEEPSEEK
from pretrain.planning.data_constrained import epochs_text, repetition_warning
from pretrain.planning.hyperparameters import batch_text, fit_note
from pretrain.planning.plan_layouts import ZERO_LEVEL_NAMES
from pretrain.planning.plan_memory import GB, OVERLAP


def format_report(r: dict, more: tuple[str, ...] = ()) -> str:
    """The plan as text; ``more``: lines to print before the file it wrote (the cost)."""
    lay, t, m = r["layout"], r["time"], r["model"]
    lines = [
        f"model: {human(m['params'])} params ({m['n_layers']} layers, d_model {m['d_model']}), "
        f"seq {r['seq_len']}, micro-batch {r['micro_batch']}, {r['precision']}; "
        f"{r['cluster']['gpus']} x {r['cluster']['name']}",
        "",
        "decisions:",
    ] + [f"  {line}" for line in r["decisions"]]
    degrees = ", ".join(f"{k} {lay[k]}" for k in ("dp_replicate", "dp_shard", "tp", "pp", "cp"))
    lines += [
        "",
        f"chosen: {lay['name']} ({degrees}{', offload' if lay['offload'] else ''}"
        f"{', compiled blocks' if lay['compiled'] else ''})",
    ]
    if lay["pp"] > 1:
        lines.append(
            f"pipeline: {lay['pp_schedule']}, {lay['pp_stages_per_rank']} stage(s) per rank, bubble {lay['bubble']:.1%}"
        )
    comm, parts = lay["communication"], t["step_breakdown"]
    lines.append(
        "communication per GPU per step, GB: "
        + ", ".join(f"{k} {v / GB:.1f}" for k, v in comm.items() if v or k == "total")
    )
    main = ("compute", "bubble", "exposed_comm", "host_optimizer")
    links = ", ".join(
        f"{k.removesuffix('_comm')} {v:.2f}"
        for k, v in parts.items()
        if k.endswith("_comm") and k != "exposed_comm" and v
    )
    lines.append(
        f"step time: {parts['total']:.2f} s = "
        + " + ".join(f"{k} {parts[k]:.2f}" for k in main if parts[k])
        + (
            f"; link time per dimension, s: {links} (dp, cp and host hide behind up to {OVERLAP:.0%} of "
            f"compute; {r['cluster']['intra_node_gbs']:g} GB/s per GPU within a node, "
            f"{r['cluster']['inter_node_gbs']:g} across nodes)"
            if links
            else ""
        )
    )
    for tp, rows in r["breakdown"].items():
        lines += [
            "",
            f"per-GPU memory, GB (TP {tp}, checkpointing: {lay['checkpointing']}):",
            f"  {'':<15}{'params':>8}{'grads':>8}{'optim':>8}{'activ':>8}{'fsdp':>8}{'total':>8}",
        ]
        for level, mem in rows.items():
            cells = "".join(
                f"{mem[k] / GB:>8.1f}" for k in ("params", "grads", "optimizer", "activations", "fsdp_buffers", "total")
            )
            lines.append(f"  {ZERO_LEVEL_NAMES[level]:<15}{cells}")
    acts = ", ".join(f"{k} {v / GB:.1f}" for k, v in r["activations_by_checkpointing"].items())
    lines += [
        "",
        f"activations per GPU by checkpointing (GB): {acts}",
        f"batch: {lay['global_batch']} sequences = micro-batch {r['micro_batch']} x {lay['dp']} data-parallel "
        f"x {lay['grad_accum']} accumulation steps ({human(lay['tokens_per_step'])} tokens), gradients "
        + (
            "held unsharded until the last micro-batch (no-sync)"
            if lay["no_sync_accumulation"]
            else "reduce-scattered every micro-batch"
        ),
        f"time at MFU {t['mfu']:g} of the {r['precision']} peak ({t['peak_flops'] / 1e12:g} TFLOP/s): "
        f"{t['step_seconds']:.2f} s/step, {human(t['tokens_per_day'])} tokens/day, "
        f"{t['days']:.1f} days for {human(t['target_tokens'])} tokens "
        f"({t['target_source']}, {t['steps']:,} steps)",
    ]
    if "document_mask" in r:
        doc = r["document_mask"]
        lines.append(
            f"document mask: documents of {doc['mean_document_tokens']:,.0f} tokens (token-weighted mean), "
            f"attention over ~{doc['attention_span']:,.0f} keys per query instead of {r['seq_len']:,}; "
            f"block mask {lay['memory']['document_mask'] / 2**20:.2f} MiB per GPU; no CP"
        )
    lines += _hyperparameter_lines(r["hyperparameters"], r["micro_batch"], lay["dp"])
    if t.get("epochs") is not None:
        lines.append(
            f"data: {human(t['unique_tokens'])} unique tokens, so {human(t['target_tokens'])} tokens are "
            f"{epochs_text(t['epochs'])} epochs (what repeats are worth: pretrain budget --data)"
        )
        if (warning := repetition_warning(t["target_tokens"], t["unique_tokens"])) is not None:
            lines.append(f"warning: {warning}")
    if "checkpoint_interval" in r:
        lines.append(checkpoint_interval_line(r["checkpoint_interval"], r["cluster"]["gpus"]))
    lines += more
    if "written" in r:
        lines.append(f"wrote {r['written']}")
    return "\n".join(lines)


def _hyperparameter_lines(h: dict, micro_batch: int, dp: int) -> list[str]:
    """The learning rate and batch the config gets, where each comes from, and the law beside them."""
    law = h["law"]
    from_law = h["global_batch_from"] == "law"
    rounded = f", to a multiple of micro-batch {micro_batch} x {dp} data-parallel" if from_law else ""
    lines = [
        f"hyperparameters: peak learning rate {h['learning_rate']:.2e} ({h['learning_rate_from']}), global batch "
        f"{h['global_batch']} sequences ({h['global_batch_from']}{rounded}), warmup {h['warmup_steps']:,} steps",
        f"  law: DeepSeek LLM at C = M x D = {law['compute']:.3g} FLOPs: learning rate "
        f"{law['learning_rate']:.2e}, batch {batch_text(law)} ({DEEPSEEK}, Section 3.1){fit_note(law)}",
    ]
    return lines + [f"  differs from the law: {line}" for line in h["differs_from_law"]]


def checkpoint_interval_line(c: dict, gpus: int) -> str:
    """Young/Daly's interval and what it costs, with the figures it came from."""
    return (
        f"checkpoint every {c['every_steps']:,} steps ({c['interval_s'] / 60:.1f} min; sqrt(2 x save "
        f"{c['save_s']:.3g} s x job MTBF {c['mtbf_job_s'] / 3600:.3g} h) = {c['optimum_s'] / 60:.1f} min, job MTBF = "
        f"{c['mtbf_hours_per_gpu']:g} h per GPU / {gpus} GPUs; save time {c['save_from']}): expected time "
        f"lost {c['lost_fraction']:.2%} (saving + work redone after failures)"
    )
