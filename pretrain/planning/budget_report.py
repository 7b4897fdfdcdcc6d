"""``pretrain budget``'s text: the answer (``pretrain.planning.budget_answer.budget_answer``) as the table of
every method, the learning rate and batch, the data-constrained, inference-aware and mixture sections, the
warnings and every constant's source."""

from __future__ import annotations

from dataprep.core.units import human
from pretrain.planning import hyperparameters
from pretrain.planning.budget import FITTED_MIN_PARAMS, FITTED_MIN_TOKENS, METHODS
from pretrain.planning.data_constrained import epochs_text


def _line(name: str, a: dict) -> str:
    loss = (
        "loss beyond the fit's range"
        if a["loss"] is None
        else f"loss {a['loss']:.3f} (fresh-data optimum +{a['loss_above_fresh_optimum']:.3f})"
    )
    return (
        f"  {name:<22} N {human(a['params']):>7}  D {human(a['tokens']):>7}  {epochs_text(a['epochs']):>7} epochs  "
        f"D' {human(a['effective_tokens']):>7}  {loss}"
    )


def format_report(result: dict) -> str:
    rows, unique = result["estimates"], result["unique_tokens"]
    lines = [result["input"]] + ([result["unique_tokens_source"]] if unique is not None else [])
    header = f"{'method':<38} {'N':>8} {'D':>8} {'D/N':>6} {'C (6ND)':>9} {'loss':>6}"
    if unique is not None:
        header += f" {'epochs':>7} {'D_eff':>8}"
    if "flops_for_model" in rows[0]:
        header += f" {'App. F C':>9} {'F/6ND':>6}"
    lines.append(header)
    for row in rows:
        loss = f"{row['loss']:.3f}" if row["loss"] is not None else "-"
        if row.get("loss_beyond_fit"):
            loss = f">{METHODS[row['method']].uniform_loss:.1f}"
        line = (
            f"{row['label']:<38} {human(row['params']):>8} {human(row['tokens']):>8} "
            f"{row['tokens_per_param']:>6.1f} {row['flops']:>9.3g} {loss:>6}"
        )
        if unique is not None:
            line += f" {epochs_text(row['epochs']):>7} {human(row['effective_tokens']):>8}"
        if "flops_for_model" in row:
            f = row["flops_for_model"]
            line += f" {f['appendix_f']:>9.3g} {f['ratio']:>6.3f}"
        lines.append(line)
    h = result["hyperparameters"]
    lines += [
        "",
        f"learning rate and batch (DeepSeek LLM) for {h['basis']}:",
        f"  peak learning rate {h['learning_rate']:.2e}, global batch {hyperparameters.batch_text(h)}"
        f"{hyperparameters.fit_note(h)}",
    ]
    fit = METHODS[result["fit"]].name
    if "data_constrained" in result:
        dc = result["data_constrained"]
        verdict = "exceeds" if dc["exceeds_unique"] else "fits in"
        lines += [
            "",
            f"data-constrained ({fit}), C = {dc['compute']:.3g} FLOPs: the fresh-data D {verdict} "
            f"U = {human(dc['unique_tokens'])} tokens",
            _line("fresh-data answer", dc["chinchilla"]),
            _line("best under the cap", dc["best"]),
        ]
        if "at_epochs" in dc:
            lines.append(_line(f"at {dc['at_epochs']['epochs']:g} epochs", dc["at_epochs"]))
    if "inference_aware" in result:
        inf = result["inference_aware"]
        lines += [
            "",
            f"inference-aware ({fit}): {human(inf['inference_tokens'])} inference tokens, same loss "
            f"{inf['target_loss']:.3f}",
        ]
        for key, name in (("reference", "compute-optimal"), ("inference_optimal", "inference-optimal")):
            a = inf[key]
            lines.append(
                f"  {name:<18} N {human(a['params']):>7}  D {human(a['tokens']):>7}  {epochs_text(a['epochs']):>7} "
                f"epochs  training {a['flops']:.3g} + inference {a['inference_flops']:.3g} = "
                f"{a['lifetime_flops']:.3g} FLOPs"
            )
        lines.append(f"  saving {100 * inf['saving']:.1f}% of lifetime FLOPs")
    if "mixture" in result:
        rows = result["mixture"]
        lines += [
            "",
            f"mixture at D = {human(sum(r['tokens'] for r in rows))} tokens (the planned D), repetition "
            "per source (Muennighoff et al. 2023):",
            f"  {'source':<16} {'weight':>6} {'U':>8} {'w x D':>8} {'epochs':>7} {'D_eff':>8}",
        ]
        for r in rows:
            by_phase = (
                ("  (" + ", ".join(f"phase {k + 1}: {p['epochs']:.1f}" for k, p in enumerate(r["phases"])) + " epochs)")
                if "phases" in r
                else ""
            )
            lines.append(
                f"  {r['name']:<16} {r['weight']:>6.3f} {human(r['unique_tokens']):>8} {human(r['tokens']):>8} "
                f"{epochs_text(r['epochs']):>7} {human(r['effective_tokens']):>8}{by_phase}"
            )
        lines += [f"  warning: {r['name']}: {r['warning']}" for r in rows if r["warning"]]
    if result.get("corpus_warning"):
        lines += ["", f"warning: {result['corpus_warning']}"]
    if any(r.get("loss_beyond_fit") for r in result["estimates"]) or result.get("data_constrained", {}).get(
        "chinchilla", {}
    ).get("loss_beyond_fit"):
        lines += [
            "",
            "note: >10.4 (>10.8): the fit predicts a loss above ln V, a uniform guess over the vocabulary "
            "its losses were measured with (32K tokens; GPT-2's 50K for the C4 fit): no model's loss, the "
            "formula says nothing about models or corpora this small",
        ]
    if result["extrapolated"]:
        lines += [
            "",
            f"note: N below {human(FITTED_MIN_PARAMS)} or D below {human(FITTED_MIN_TOKENS)} tokens lies "
            "outside the runs the fits were made on: read the losses as trends, not predictions",
        ]
    lines += ["", "sources:"]
    for key, source in result["sources"].items():
        law = METHODS.get(key)
        name = key if law is None else law.name + (f" [{law.note}]" if law.note else "")
        lines.append(f"  {name}: {source}")
    return "\n".join(lines)
