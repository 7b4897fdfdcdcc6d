"""Budgets for a corpus of U unique tokens: what repeating it is worth (Muennighoff et al. 2023).

Source: Muennighoff et al. 2023, "Scaling Data-Constrained Language Models" (arXiv:2305.16264),
Section 5. Training on D tokens drawn from U_D = min(U, D) unique ones repeats them R_D = D/U_D - 1 times
beyond the first epoch; repeated tokens are worth less than fresh ones, as effective data

    D' = U_D + U_D R_D* (1 - exp(-R_D / R_D*))

(D itself for one epoch, ~D for a few: 4 epochs are worth 3.73 U; never more than (1 + R_D*) U).
Parameters beyond U_N = min(N, the compute-optimal size for U_D tokens) decay the same way with R_N*.
The loss is the chosen fit's L(N', D') = E + A/N'^alpha + B/D'^beta; for fresh data (D <= U) on the
compute-optimal frontier it is the plain Chinchilla loss, so fresh-data answers do not change.
R_D* and R_N* are the fitted values published with the paper (its text rounds them to 15.4 and 5.3);
they were fitted with the paper's own C4 loss fit (``approach3-c4``), and carry over to other fits
only approximately.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dataprep.core.errors import UsageError
from pretrain.planning.budget import ParametricLoss, minimise_log

R_D_STAR = 15.387756  # repetitions of the data after which its value has decayed by 1/e
R_N_STAR = 5.309743  # the same for parameters beyond the compute-optimal size for the data
USEFUL_EPOCHS = 4  # Section 5: up to ~4 epochs are worth almost as much as fresh tokens
SOURCE = (
    "Muennighoff et al. 2023, arXiv:2305.16264, Section 5: R_D* = 15.387756, R_N* = 5.309743 as published "
    "in github.com/huggingface/datablations ('Parametric Fit'; the paper prints 15.4 and 5.3)"
)


def epochs_text(epochs: float) -> str:
    """Epochs for people: one decimal, or 11M past ten thousand (a corpus far too small for the tokens)."""
    from dataprep.core.units import human

    return f"{epochs:.1f}" if epochs < 1e4 else human(epochs)


def repetition_warning(tokens: float, unique: float) -> str | None:
    """What to say when D repeats the corpus more than R_D* times: past that, more repeats are worth almost
    nothing (D' never exceeds (1 + R_D*) U). None below."""
    from dataprep.core.units import human

    epochs = tokens / unique
    if epochs <= R_D_STAR:
        return None
    return (
        f"{human(tokens)} tokens are {epochs_text(epochs)} epochs of a corpus of {human(unique)}: past "
        f"R_D* = {R_D_STAR:.1f} repeats a token's worth has decayed by 1/e, and D' never exceeds "
        f"{1 + R_D_STAR:.1f} U = {human((1 + R_D_STAR) * unique)} tokens (Muennighoff et al. 2023): "
        "add data, or train on fewer tokens"
    )


def _decayed(unique: float, repeats: float, star: float) -> float:
    return unique + unique * star * -math.expm1(-repeats / star)


def effective_tokens(tokens: float, unique: float | None) -> float:
    """D': what D tokens over ``unique`` distinct ones are worth in fresh tokens (D when unique is None)."""
    if unique is None or tokens <= unique:
        return tokens
    return _decayed(unique, tokens / unique - 1, R_D_STAR)


def effective_params(law: ParametricLoss, params: float, tokens: float, unique: float | None) -> float:
    """N': parameters beyond the compute-optimal size for the unique tokens seen count for less."""
    unique_tokens = tokens if unique is None else min(unique, tokens)
    base = min(params, law.params_for_compute(law.compute_for_tokens(unique_tokens)))
    return _decayed(base, params / base - 1, R_N_STAR)


def constrained_loss(law: ParametricLoss, params: float, tokens: float, unique: float | None) -> float:
    """Predicted loss of N parameters trained on D tokens drawn from ``unique`` distinct ones."""
    return law.loss(effective_params(law, params, tokens, unique), effective_tokens(tokens, unique))


@dataclass(frozen=True)
class Allocation:
    """One (N, D) on a corpus of ``unique_tokens`` (None: as many fresh tokens as needed)."""

    params: float
    tokens: float
    unique_tokens: float | None
    effective_params: float  # N'
    effective_tokens: float  # D'
    loss: float  # L(N', D'): with the repeats
    fresh_loss: float  # L(N, D): had every token been new

    @property
    def flops(self) -> float:
        return 6 * self.params * self.tokens

    @property
    def epochs(self) -> float:
        return 1.0 if self.unique_tokens is None else self.tokens / self.unique_tokens

    def to_dict(self) -> dict:
        return {
            "params": self.params,
            "tokens": self.tokens,
            "flops": self.flops,
            "epochs": self.epochs,
            "unique_tokens": self.unique_tokens,
            "effective_tokens": self.effective_tokens,
            "effective_params": self.effective_params,
            "tokens_per_param": self.tokens / self.params,
            "loss": self.loss,
            "fresh_loss": self.fresh_loss,
            "repetition_penalty": self.loss - self.fresh_loss,
        }


def allocation(law: ParametricLoss, params: float, tokens: float, unique: float | None) -> Allocation:
    return Allocation(
        params,
        tokens,
        unique,
        effective_params(law, params, tokens, unique),
        effective_tokens(tokens, unique),
        constrained_loss(law, params, tokens, unique),
        law.loss(params, tokens),
    )


def best_allocation(law: ParametricLoss, compute: float, unique: float) -> Allocation:
    """The N (and D = C / 6N) of least loss for ``compute`` FLOPs when only ``unique`` tokens exist."""
    n = minimise_log(lambda n: constrained_loss(law, n, compute / (6 * n), unique), 1.0, compute / 6)
    return allocation(law, n, compute / (6 * n), unique)


def at_epochs(
    law: ParametricLoss, epochs: float, unique: float, *, compute: float | None = None, params: float | None = None
) -> Allocation:
    """``epochs`` passes over the corpus (D = epochs x U) at a fixed compute (N = C / 6D) or a fixed N."""
    if not epochs > 0:
        raise UsageError(f"epochs must be positive, got {epochs}")
    tokens = epochs * unique
    if (compute is None) == (params is None):
        raise UsageError("give the compute or the parameter count the epochs are evaluated at")
    return allocation(law, params if params is not None else compute / (6 * tokens), tokens, unique)
