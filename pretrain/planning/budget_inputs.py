"""What ``pretrain budget`` is given (``pretrain.planning.budget_answer``): the question, one field per flag;
the one quantity it starts from (compute, GPU-hours, parameters or tokens); the corpus and its unique tokens;
and a ``--model`` config, whose N (or with ``--tokens`` whose run) each law counts its own way."""

from __future__ import annotations

from dataclasses import dataclass

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.components.shard_totals import shard_totals
from pretrain.config import ModelConfig
from pretrain.planning.budget import METHODS, compute_from_gpus, params_of_model, parse_number, positive

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


def budget_input(q: BudgetQuestion, unique: float | None) -> tuple[dict, str]:
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


def budget_corpus(q: BudgetQuestion) -> tuple[float | None, str, int | None]:
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


def budget_model(q: BudgetQuestion, vocab: int | None) -> ModelConfig | None:
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


def budget_model_inputs(
    q: BudgetQuestion, model: ModelConfig, seq_len: int
) -> tuple[dict[str, dict], str, float | None]:
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


def check_budget_flags(q: BudgetQuestion) -> None:
    """Flags the chosen inputs may not use are checked too: a typo is never silently ignored."""
    from pretrain.planning.hardware import get_gpu

    if not 0 < q.mfu <= 1:
        raise UsageError(f"--mfu {q.mfu}: must be in (0, 1]")
    if q.seq_len is not None and q.seq_len < 1:
        raise UsageError(f"--seq-len {q.seq_len}: must be at least 1")
    if q.peak_flops is not None:
        positive(parse_number(q.peak_flops), "--peak-flops")
    get_gpu(q.gpu)
