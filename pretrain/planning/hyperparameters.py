"""The peak learning rate and global batch a compute budget calls for, and the warmup of a run.

Source: Bi et al. 2024 (DeepSeek LLM), arXiv:2401.02954, Section 3.1. Over a grid of batch sizes and learning
rates on small budgets, the best values follow the compute C alone:

    eta_opt = 0.3118 C^-0.1250,   B_opt = 0.2920 C^0.3271 tokens,

with C = M D and M the model's non-embedding FLOPs per token (``pretrain.planning.flops.deepseek_flops_per_token``).
The authors found a wide band of near-optimal values around these, and set their 7B and 67B runs by them.
They are peak values for AdamW under a warmup then step-decay schedule (our ``wsd`` is the closest).
"""

from __future__ import annotations

from dataclasses import dataclass

from dataprep.core.errors import UsageError
from pretrain.planning.budget import DEEPSEEK

LR_COEFFICIENT, LR_EXPONENT = 0.3118, -0.1250
BATCH_COEFFICIENT, BATCH_EXPONENT = 0.2920, 0.3271
SOURCE = (
    f"{DEEPSEEK}, Section 3.1: eta_opt = 0.3118 C^-0.1250, B_opt = 0.2920 C^0.3271 tokens, "
    "C = M D (M = 72 n_layer d_model^2 + 6 n_layer d_model l_seq, Section 3.2)"
)
# The smallest budget of DeepSeek's grid searches: below it the law is extrapolated (their 7B and 67B runs
# extrapolated it upwards, by their choice).
SMALLEST_FITTED_COMPUTE = 1e17
# DeepSeek LLM warmed up for 2000 steps (Section 2.3); a short run warms up for its first hundredth instead.
MAX_WARMUP_STEPS, WARMUP_FRACTION = 2000, 0.01


@dataclass(frozen=True)
class Hyperparameters:
    """The law's peak learning rate and global batch for a budget of ``compute`` FLOPs (C = M D)."""

    compute: float
    learning_rate: float
    batch_tokens: float
    seq_len: int

    @property
    def batch_sequences(self) -> float:
        return self.batch_tokens / self.seq_len

    @property
    def below_fit(self) -> bool:
        """A budget smaller than any the law was fitted on: its values are an extrapolation."""
        return self.compute < SMALLEST_FITTED_COMPUTE

    def to_dict(self) -> dict:
        return {
            "compute": self.compute,
            "learning_rate": self.learning_rate,
            "batch_tokens": self.batch_tokens,
            "batch_sequences": self.batch_sequences,
            "seq_len": self.seq_len,
            "source": SOURCE,
            "below_fit": self.below_fit,
        }


def optimal_hyperparameters(compute: float, seq_len: int) -> Hyperparameters:
    """The compute-optimal peak learning rate and batch (in tokens; in sequences of ``seq_len``) for C = M D."""
    if not compute > 0:
        raise UsageError(f"compute must be a positive number of FLOPs, got {compute!r}")
    if seq_len < 1:
        raise UsageError(f"sequence length must be at least 1, got {seq_len}")
    return Hyperparameters(
        compute, LR_COEFFICIENT * compute**LR_EXPONENT, BATCH_COEFFICIENT * compute**BATCH_EXPONENT, seq_len
    )


def warmup_steps(steps: int) -> int:
    """Warmup for a run of ``steps`` optimizer steps: DeepSeek's, or a hundredth of a shorter run."""
    return max(1, min(MAX_WARMUP_STEPS, int(steps * WARMUP_FRACTION)))


def batch_text(law: dict) -> str:
    """The law's batch in tokens and sequences; under one sequence (a tiny budget), the one sequence to use."""
    from dataprep.core.units import human

    tokens = f"{human(law['batch_tokens'])} tokens"
    if law["batch_sequences"] < 1:
        return f"{tokens}, less than one sequence of {law['seq_len']}: 1 sequence, the smallest batch"
    return f"{tokens} = {law['batch_sequences']:,.0f} sequences of {law['seq_len']}"


def fit_note(law: dict) -> str:
    """What a report adds when the budget is below the law's fitted range."""
    return (
        f" (extrapolated: below the smallest budget it was fitted on, {SMALLEST_FITTED_COMPUTE:.0e} FLOPs)"
        if law["below_fit"]
        else ""
    )
