"""Inference-aware sizing: the model that is cheapest to train and then serve for a given loss.

Source: Sardana et al. 2023, "Beyond Chinchilla-Optimal: Accounting for Inference in Language Model
Scaling Laws" (arXiv:2401.00448), Section 2: minimise training plus inference FLOPs,
6 N D_train + 2 N D_inference, subject to L(N, D_train) = the target loss. A model that will serve many
tokens should be smaller and trained longer than Chinchilla's; with no inference tokens the answer is
Chinchilla's frontier point (the same curve, seen from the loss side). The loss may be the
data-constrained one (``pretrain.planning.data_constrained``), so a capped corpus limits how far this can go.
"""

from __future__ import annotations

import math
from typing import Callable

from dataprep.core.errors import UsageError
from pretrain.planning.budget import minimise_log

SOURCE = (
    "Sardana et al. 2023, arXiv:2401.00448, Section 2: minimise 6 N D_train + 2 N D_inference "
    "subject to L(N, D_train) = the target loss"
)
Loss = Callable[[float, float], float]  # (N, D) -> predicted loss
_MAX_TOKENS = 1e40  # beyond any corpus: a loss not reached by then is not reachable at this N


def tokens_for_loss(loss: Loss, params: float, target: float) -> float:
    """The D at which N parameters reach ``target`` (inf when no amount of data gets there)."""
    from scipy.optimize import brentq

    if loss(params, _MAX_TOKENS) >= target:
        return math.inf
    if loss(params, 1.0) <= target:
        return 1.0
    return math.exp(
        brentq(lambda x: loss(params, math.exp(x)) - target, 0.0, math.log(_MAX_TOKENS), xtol=1e-13, rtol=1e-15)
    )


def lifetime_flops(params: float, tokens: float, inference_tokens: float) -> float:
    """Training (6ND) plus inference (2N per generated or read token) FLOPs."""
    return 6 * params * tokens + 2 * params * inference_tokens


def inference_optimal(loss: Loss, target: float, inference_tokens: float, near: float) -> tuple[float, float]:
    """(N, D_train) of least lifetime FLOPs reaching ``target``; ``near`` is a model size that reaches it
    (the Chinchilla answer), around which the search runs."""
    if inference_tokens < 0:
        raise UsageError(f"inference tokens must not be negative, got {inference_tokens}")

    def cost(n: float) -> float:
        return lifetime_flops(n, tokens_for_loss(loss, n, target), inference_tokens)

    n = minimise_log(cost, near * 1e-4, near * 1e2)
    return n, tokens_for_loss(loss, n, target)
