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

What it is given: ``budget_inputs.py``; a mixture's section: ``budget_mixture.py``; the text: ``budget_report.py``.
"""

from __future__ import annotations

from dataclasses import replace

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.config import ModelConfig
from pretrain.planning import data_constrained, hyperparameters, inference_aware
from pretrain.planning.budget import (
    FITS,
    FITTED_MIN_PARAMS,
    FITTED_MIN_TOKENS,
    METHODS,
    estimate,
    parametric_fit,
    parse_number,
)
from pretrain.planning.budget_inputs import (
    ALLOCATION_FITS,
    BudgetQuestion,
    budget_corpus,
    budget_input,
    budget_model,
    budget_model_inputs,
    check_budget_flags,
)
from pretrain.planning.budget_mixture import mixture_section, mixture_sources
from pretrain.planning.data_constrained import (
    USEFUL_EPOCHS,
    Allocation,
    allocation,
    at_epochs,
    best_allocation,
    constrained_loss,
    repetition_warning,
)


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


def budget_answer(q: BudgetQuestion) -> dict:
    """Every method's N and D for the question, the learning rate and batch, and the sections the corpus
    and the inference load call for; what ``pretrain budget --json`` prints."""
    check_budget_flags(q)
    if q.tokens is not None and q.epochs is not None:
        raise UsageError("--epochs sets the tokens (epochs x unique tokens); do not combine it with --tokens")
    mixture, phases = mixture_sources(q) or (None, None)
    if mixture is not None:  # the mixture's shard folders are the corpus
        q = replace(q, data=[s["path"] for s in mixture])
    unique, unique_source, vocab = budget_corpus(q)
    model = budget_model(q, vocab)
    seq_len = q.seq_len or (model.max_seq_len if model else ModelConfig.model_fields["max_seq_len"].default)
    run_tokens = None
    if model is not None:
        inputs, source, run_tokens = budget_model_inputs(q, model, seq_len)
    else:
        given, source = budget_input(q, unique)
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
        result["mixture"] = mixture_section(mixture, ref.tokens if run_tokens is None else run_tokens, phases)
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
