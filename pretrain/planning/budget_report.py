"""``pretrain budget``: compute-optimal N and D for a budget, every method side by side (Chinchilla's,
the refits, DeepSeek LLM's), the peak learning rate and batch that budget calls for, and what a corpus of
limited size and an expected inference load change about the answer.

Give one of: --compute FLOPs; --gpus/--hours with --gpu (or --peak-flops) and --mfu; --params N;
--tokens D; or --model CONFIG (N = its exact parameter count, and the Appendix F FLOPs of that
architecture are shown next to 6ND), with --tokens D for a run whose model and tokens are both chosen
(the table then splits that run's compute each law's way). The learning rate and batch (DeepSeek LLM) are
those of the --fit answer, or of the fixed run. With --data SHARDS (or --unique-tokens U) every answer also
gives its epochs over the corpus and effective tokens D', and a data-constrained section (Muennighoff et
al. 2023) gives the best N and epochs under the cap; --epochs E evaluates E passes over the corpus (alone
it sets D = E x U). --inference-tokens adds the size of least training + inference FLOPs (Sardana et al.
2023). Those two sections need a loss fit (--fit); every constant's source is printed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.components.shard_totals import shard_totals
from pretrain.config import ModelConfig, check_sources
from pretrain.planning import data_constrained, hyperparameters, inference_aware
from pretrain.planning.budget import (
    FITS,
    FITTED_MIN_PARAMS,
    FITTED_MIN_TOKENS,
    METHODS,
    compute_from_gpus,
    estimate,
    parametric_fit,
    params_of_model,
    parse_number,
    positive,
)
from pretrain.planning.data_constrained import (
    Allocation,
    allocation,
    at_epochs,
    best_allocation,
    constrained_loss,
    epochs_text,
    repetition_warning,
)

ALLOCATION_FITS = ["deepseek"]  # --fit choices without a loss: they size N, D and the hyperparameters only


@dataclass(frozen=True)
class BudgetQuestion:
    """What ``pretrain budget`` is asked, one field per flag (numbers as text take suffixes: 7B, 1.4T)."""

    compute: str | None = None
    gpus: int | None = None
    hours: float | None = None
    gpu: str = "h100"
    peak_flops: str | None = None
    mfu: float = 0.4
    params: str | None = None
    tokens: str | None = None
    model: str | None = None
    seq_len: int | None = None
    method: list[str] | None = None
    data: list[str] | None = None
    unique_tokens: str | None = None
    epochs: float | None = None
    fit: str = "approach3"
    inference_tokens: str | None = None


def _budget_input(q: BudgetQuestion, unique: float | None) -> tuple[dict, str]:
    """The one given quantity as estimate() keyword arguments, and a line saying where it came from."""
    if q.gpus is not None or q.hours is not None:
        if q.gpus is None or q.hours is None:
            raise UsageError("--gpus and --hours go together")
        from pretrain.planning.hardware import get_gpu

        peak = parse_number(q.peak_flops) if q.peak_flops else get_gpu(q.gpu).peak_flops_bf16
        c = compute_from_gpus(q.gpus, q.hours, peak, q.mfu)
        source = f"C = {q.gpus} GPUs x {q.hours:g} h x {peak:.3g} FLOP/s x MFU {q.mfu:g} = {c:.3g} FLOPs"
        return {"compute": c}, source
    given = {k: getattr(q, k) for k in ("compute", "params", "tokens") if getattr(q, k) is not None}
    if len(given) > 1:
        raise UsageError("give only one of --compute, --params, --tokens, --gpus/--hours")
    if not given and q.epochs is not None and unique is not None:
        return {"tokens": q.epochs * unique}, f"D = {q.epochs:g} epochs x {human(unique)} unique tokens"
    if not given:
        raise UsageError("give one of --compute, --gpus/--hours, --params, --tokens, --model or --epochs with --data")
    ((key, text),) = given.items()
    value = parse_number(text)
    return {key: value}, f"given {key} = {value:.4g}"


def _corpus(q: BudgetQuestion) -> tuple[float | None, str, int | None]:
    """Unique tokens U, where they came from, and the shards' vocabulary (None without --data)."""
    if q.data and q.unique_tokens:
        raise UsageError("give --data or --unique-tokens, not both")
    if q.data and len(set(q.data)) < len(q.data):
        raise UsageError(f"--data names a folder twice ({', '.join(q.data)}): its tokens would count twice")
    if q.data:
        corpus = shard_totals(q.data)
        return (
            float(corpus["tokens"]),
            f"U = {corpus['tokens']:,} tokens in {corpus['documents']:,} documents (manifest of {', '.join(q.data)})",
            corpus["vocab_size"],
        )
    if q.unique_tokens:
        unique = parse_number(q.unique_tokens)
        if not unique > 0:
            raise UsageError(f"unique tokens must be positive, got {unique}")
        return unique, f"U = {human(unique)} unique tokens (given)", None
    if q.epochs is not None:
        raise UsageError("--epochs needs the corpus: --data SHARDS or --unique-tokens")
    return None, "", None


USEFUL_EPOCHS = 4  # Muennighoff et al. 2023, Section 5: up to ~4 epochs are worth almost as much as fresh tokens


def _mixture(q: BudgetQuestion) -> tuple[list[dict], list[dict] | None] | None:
    """The sources and phases of a ``--data`` mixture (a preset name or YAML file, not a shard folder);
    --data then lists their folders. None when --data names shard folders."""
    import os

    from pretrain.mixture_presets import check_built, find_mixture, load_mixture, load_mixture_phases

    specs = q.data or []
    if not any(not os.path.isdir(d) and find_mixture(d) for d in specs):
        return None
    if len(specs) > 1:
        raise UsageError("--data takes one mixture, or shard folders: not both, nor two mixtures")
    sources = load_mixture(specs[0])
    check_sources(sources, f"mixture {specs[0]}")
    check_built(sources)
    return sources, load_mixture_phases(specs[0])


def _phase_shares(sources: list[dict], phases: list[dict] | None) -> list[tuple[float, list[float]]]:
    """Each phase's share of the run and each source's share of that phase (one phase: the weights)."""
    from pretrain.config import DataConfig

    data = DataConfig.model_validate({"sources": sources, "phases": phases})
    out, before = [], 0.0
    for until, weights in data.phase_weights():
        out.append((until - before, [w / sum(weights) for w in weights]))
        before = until
    return out


def _mixture_section(sources: list[dict], tokens: float, phases: list[dict] | None = None) -> list[dict]:
    """Per source: unique tokens U_i, its share w_i x D of the planned tokens (summed over the phases, each
    phase's part beside), its epochs and Muennighoff's effective tokens, and a warning past the useful range
    of repetition."""
    parts = _phase_shares(sources, phases)
    rows = []
    for i, s in enumerate(sources):
        unique = float(shard_totals([s["path"]])["tokens"])
        per_phase = [length * shares[i] * tokens for length, shares in parts]
        drawn = sum(per_phase)
        share = drawn / tokens
        epochs = drawn / unique
        warning = None
        if epochs > data_constrained.R_D_STAR:
            warning = (
                f"{epochs_text(epochs)} epochs: little value left (past R_D* = {data_constrained.R_D_STAR:.1f} repeats "
                "a token's worth has decayed by 1/e); lower its weight or add data"
            )
        elif epochs > USEFUL_EPOCHS:
            warning = (
                f"{epochs:.1f} epochs: diminishing returns beyond {USEFUL_EPOCHS} (repeated tokens count for less)"
            )
        rows.append(
            {
                "name": s.get("name") or s["path"],
                "path": s["path"],
                "weight": share,
                "unique_tokens": unique,
                "tokens": drawn,
                "epochs": epochs,
                "effective_tokens": data_constrained.effective_tokens(drawn, unique),
                "warning": warning,
                **({"phases": [{"tokens": t, "epochs": t / unique} for t in per_phase]} if phases else {}),
            }
        )
    return rows


def _answer(a: Allocation, fit: str) -> dict:
    """An allocation's figures, and how far its loss is above the fresh-data optimum of its compute (no
    losses where the fit's are beyond a uniform guess: ``_sensible``)."""
    answer = a.to_dict() | {"loss_above_fresh_optimum": a.loss - estimate(fit, compute=a.flops).loss}
    if _sensible(a.loss, fit) is None:
        answer |= dict.fromkeys(("loss", "fresh_loss", "repetition_penalty", "loss_above_fresh_optimum")) | {
            "loss_beyond_fit": True
        }
    return answer


def _sensible(loss: float | None, method: str) -> float | None:
    """``loss``, or None when it exceeds ln V, a uniform guess's loss: the formula is far outside its range."""
    law = METHODS[method]
    return loss if loss is None or loss <= law.uniform_loss else None


def _data_section(q: BudgetQuestion, law, ref, unique: float, fixed_params: bool) -> dict:
    chinchilla = allocation(law, ref.params, ref.tokens, unique)
    section = {
        "fit": q.fit,
        "compute": ref.flops,
        "unique_tokens": unique,
        "exceeds_unique": ref.tokens > unique,
        "chinchilla": _answer(chinchilla, q.fit),
        "best": _answer(best_allocation(law, ref.flops, unique), q.fit),
    }
    if q.epochs is not None:
        fixed = {"params": ref.params} if fixed_params else {"compute": ref.flops}
        section["at_epochs"] = _answer(at_epochs(law, q.epochs, unique, **fixed), q.fit)
    return section


def _inference_section(q: BudgetQuestion, law, reference: Allocation, unique: float | None) -> dict:
    served = parse_number(q.inference_tokens)
    if served < 0:
        raise UsageError(f"inference tokens must not be negative, got {served:g}")
    n, d = inference_aware.inference_optimal(
        lambda n, d: constrained_loss(law, n, d, unique), reference.loss, served, reference.params
    )
    out = {"fit": q.fit, "inference_tokens": served, "target_loss": reference.loss}
    for key, a in (("reference", reference), ("inference_optimal", allocation(law, n, d, unique))):
        out[key] = a.to_dict() | {
            "inference_flops": 2 * a.params * served,
            "lifetime_flops": inference_aware.lifetime_flops(a.params, a.tokens, served),
        }
    out["saving"] = 1 - out["inference_optimal"]["lifetime_flops"] / out["reference"]["lifetime_flops"]
    return out


def _model(q: BudgetQuestion, vocab: int | None) -> ModelConfig | None:
    """The --model config, at the shards' vocabulary when --data names shards (None without --model)."""
    if not q.model:
        return None
    from pretrain.planning.sizing import resolve_model

    if any(getattr(q, k) is not None for k in ("compute", "params", "gpus", "hours")):
        raise UsageError(
            "--model fixes N; give it alone or with --tokens (a fixed run), not with --compute, "
            "--params or --gpus/--hours"
        )
    model = resolve_model(q.model)
    return model if vocab is None else model.model_copy(update={"vocab_size": vocab})


def _model_inputs(q: BudgetQuestion, model: ModelConfig, seq_len: int) -> tuple[dict[str, dict], str, float | None]:
    """estimate() keywords per method: the model's N, or with --tokens the fixed run's compute, each counted
    its law's way; the line saying so; and the run's tokens (None without --tokens)."""
    from pretrain.models.llama import num_params
    from pretrain.planning.flops import compare

    n = num_params(model)
    source = f"N = {n:,} parameters of {q.model}"
    if q.tokens is None:
        return {m: {"params": params_of_model(m, model, seq_len)} for m in METHODS}, source, None
    tokens = parse_number(q.tokens)
    if not tokens > 0:
        raise UsageError(f"token count must be positive, got {tokens:g}")
    flops = compare(model, tokens, seq_len)
    source += (
        f", D = {human(tokens)} tokens at seq {seq_len} (a fixed run): C = 6ND = {flops['six_nd']:.3g} FLOPs "
        f"(Appendix F: {flops['appendix_f']:.3g}); the table splits that compute each method's way"
    )
    return {m: {"compute": 6 * params_of_model(m, model, seq_len) * tokens} for m in METHODS}, source, tokens


def _loss_fit(q: BudgetQuestion):
    """The --fit's parametric loss, which the data-constrained and inference-aware answers need."""
    if q.fit in ALLOCATION_FITS:
        raise UsageError(
            f"--fit {q.fit} has no loss formula: the data-constrained and inference-aware answers "
            f"need one of {', '.join(FITS)}"
        )
    return parametric_fit(q.fit)


def _hyperparameters(q: BudgetQuestion, ref, model: ModelConfig | None, seq_len: int, run_tokens: float | None) -> dict:
    """DeepSeek's learning rate and batch for the fixed run or the --fit answer: C = M D when the model is
    known, else the answer's C (6ND standing in for M D)."""
    if model is None:
        law = hyperparameters.optimal_hyperparameters(ref.flops, seq_len)
        basis = f"C = {ref.flops:.3g} FLOPs ({q.fit}'s answer; its 6ND stands in for M x D)"
        return law.to_dict() | {"flops_per_token": None, "tokens": ref.tokens, "basis": basis}
    from pretrain.planning.flops import deepseek_flops_per_token

    m = deepseek_flops_per_token(model, seq_len)
    tokens = ref.tokens if run_tokens is None else run_tokens
    law = hyperparameters.optimal_hyperparameters(m * tokens, seq_len)
    whose = "the run's" if run_tokens is not None else f"{q.fit}'s D"
    basis = f"C = M x D = {m:.3g} FLOPs/token x {human(tokens)} tokens ({whose}) = {law.compute:.3g} FLOPs"
    return law.to_dict() | {"flops_per_token": m, "tokens": tokens, "basis": basis}


def _row(method: str, inputs: dict, unique: float | None) -> dict:
    est = estimate(method, **inputs)
    row = est.to_dict() | {
        "label": METHODS[method].name,
        "source": METHODS[method].source,
        "unique_tokens": unique,
        "epochs": 1.0 if unique is None else est.tokens / unique,
        "effective_tokens": data_constrained.effective_tokens(est.tokens, unique),
        "loss": _sensible(est.loss, method),
    }
    if est.loss is not None and row["loss"] is None:
        row["loss_beyond_fit"] = True
    if unique is not None and method in FITS:
        row["loss_with_repeats"] = _sensible(constrained_loss(METHODS[method], est.params, est.tokens, unique), method)
    return row


def _check_flags(q: BudgetQuestion) -> None:
    """Flags the chosen inputs may not use are checked too: a typo is never silently ignored."""
    from pretrain.planning.hardware import get_gpu

    if not 0 < q.mfu <= 1:
        raise UsageError(f"--mfu {q.mfu}: must be in (0, 1]")
    if q.seq_len is not None and q.seq_len < 1:
        raise UsageError(f"--seq-len {q.seq_len}: must be at least 1")
    if q.peak_flops is not None:
        positive(parse_number(q.peak_flops), "--peak-flops")
    get_gpu(q.gpu)


def budget_answer(q: BudgetQuestion) -> dict:
    """Every method's N and D for the question, the learning rate and batch, and the sections the corpus
    and the inference load call for; what ``pretrain budget --json`` prints."""
    _check_flags(q)
    if q.tokens is not None and q.epochs is not None:
        raise UsageError("--epochs sets the tokens (epochs x unique tokens); do not combine it with --tokens")
    mixture, phases = _mixture(q) or (None, None)
    if mixture is not None:  # the mixture's shard folders are the corpus
        q = replace(q, data=[s["path"] for s in mixture])
    unique, unique_source, vocab = _corpus(q)
    model = _model(q, vocab)
    seq_len = q.seq_len or (model.max_seq_len if model else ModelConfig.model_fields["max_seq_len"].default)
    run_tokens = None
    if model is not None:
        inputs, source, run_tokens = _model_inputs(q, model, seq_len)
    else:
        given, source = _budget_input(q, unique)
        inputs = dict.fromkeys(METHODS, given)
    rows = [_row(m, inputs[m], unique) for m in q.method or list(METHODS)]
    result = {
        "input": source,
        "unique_tokens": unique,
        "unique_tokens_source": unique_source or None,
        "fit": q.fit,
        "estimates": rows,
        "extrapolated": any(r["params"] < FITTED_MIN_PARAMS or r["tokens"] < FITTED_MIN_TOKENS for r in rows),
    }
    if model is not None and run_tokens is None:
        from pretrain.planning.flops import compare

        for row in result["estimates"]:
            # the architecture fixes N; D follows from each method's budget for it
            row["flops_for_model"] = compare(model, row["tokens"], seq_len)
    ref = estimate(q.fit, **inputs[q.fit])
    if mixture is not None:
        result["mixture"] = _mixture_section(mixture, ref.tokens if run_tokens is None else run_tokens, phases)
    if unique is not None:
        result["corpus_warning"] = _corpus_warning(q.fit, ref.tokens if run_tokens is None else run_tokens, unique)
    result["hyperparameters"] = _hyperparameters(q, ref, model, seq_len, run_tokens)
    if unique is not None or q.inference_tokens is not None:
        law = _loss_fit(q)
        reference = allocation(law, ref.params, ref.tokens, None)
        if unique is not None:
            fixed_params = "params" in inputs[q.fit]
            result["data_constrained"] = _data_section(q, law, ref, unique, fixed_params=fixed_params)
            reference = best_allocation(law, ref.flops, unique)
        if q.inference_tokens is not None:
            result["inference_aware"] = _inference_section(q, law, reference, unique)
    result["sources"] = {r["method"]: r["source"] for r in rows} | {
        q.fit: METHODS[q.fit].source,
        "hyperparameters": hyperparameters.SOURCE,
    }
    if unique is not None:
        result["sources"]["R_D*, R_N*"] = data_constrained.SOURCE
    if mixture is not None:
        result["sources"]["repetition per source"] = (
            f"Muennighoff et al. 2023, arXiv:2305.16264: up to ~{USEFUL_EPOCHS} epochs repeated data is worth almost "
            "as much as fresh (Section 5, Figure 3); a warning past that and past R_D* repeats"
        )
    if q.inference_tokens is not None:
        result["sources"]["inference-aware"] = inference_aware.SOURCE
    return result


def _corpus_warning(fit: str, tokens: float, unique: float) -> str | None:
    """When the answer repeats the corpus past R_D* times: say so, and the budget 4 epochs of it call for."""
    warning = repetition_warning(tokens, unique)
    if warning is None:
        return None
    fitting = estimate(fit, tokens=USEFUL_EPOCHS * unique)
    return (
        f"{warning}; {USEFUL_EPOCHS} epochs of this corpus call for C = {fitting.flops:.3g} FLOPs "
        f"(N = {human(fitting.params)}, {fit})"
    )


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
