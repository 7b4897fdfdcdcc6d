"""Compute-optimal model size N and token count D for a compute budget C (FLOPs): Chinchilla's methods,
their refits and DeepSeek LLM's allocation.

Source: Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (arXiv:2203.15556).
Every method answers the same three questions: given C, or N, or D, what are the other two? All use
C = 6 N D (the paper's frontier constraint; Table 3 rows satisfy it to <0.3% except the Gopher row).

- Approach 1 (training-curve envelope) and Approach 2 (IsoFLOP profiles): N_opt = k C^a. The paper
  prints only the exponents (Table 2: a = 0.50 and 0.49); k and a here are least-squares fits of
  log N on log C to the rows of Table 3 (Approach 1) and Table A3 (Approach 2), leaving out the
  67B row, which is Gopher's budget rather than a point of the fitted law (its tokens break C = 6ND).
- Approach 3: the parametric loss L(N, D) = E + A/N^alpha + B/D^beta and its closed-form frontier
  N_opt = G (C/6)^a, D_opt = G^-1 (C/6)^b, G = (alpha A / (beta B))^(1/(alpha+beta)),
  a = beta/(alpha+beta), b = alpha/(alpha+beta) (Section 3.3), with three constant sets: the paper's
  unrounded TeX-source values (give a = 0.46 and 40B for Gopher's 5.76e23 FLOPs, as printed), the
  rounded values of Appendix D.2 (a = 0.45 and 32B: they do not reproduce the paper, kept because
  they are widely copied), Epoch AI's refit (Besiroglu et al. 2024, arXiv:2404.10102) and the C4 fit
  that Muennighoff et al. 2023 made jointly with their repetition constants (``pretrain.planning.data_constrained``).
- The 20 tokens per parameter rule of thumb: D = 20 N.
- DeepSeek LLM's allocation (Bi et al. 2024, arXiv:2401.02954, Section 3.2): M_opt = 0.1715 C^0.5243,
  D_opt = 5.8316 C^0.4757, with the model's scale M in non-embedding FLOPs per token
  (``pretrain.planning.flops.deepseek_flops_per_token``) and C = M D. Here N stands for M / 6, so C = 6 N D
  holds as for the others; a model's N is measured each law's way (``params_of_model``). Their learning rate
  and batch for C are ``pretrain.planning.hyperparameters``.

Every method names its ``source``; the CLI prints it next to the answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from dataprep.core.errors import UsageError

GOPHER_FLOPS = 5.76e23  # Table 3's "1 Gopher unit" and the Chinchilla/Gopher training budget
HOFFMANN = "Hoffmann et al. 2022, arXiv:2203.15556"
DEEPSEEK = "Bi et al. 2024 (DeepSeek LLM), arXiv:2401.02954"
# The fits were made on models of 70M to 16B parameters and 5B to 500B tokens (Hoffmann et al. Section 3;
# Epoch AI refit the same runs): losses for smaller N or D are extrapolations, good for trends only.
FITTED_MIN_PARAMS, FITTED_MIN_TOKENS = 7e7, 5e9


def positive(value: float, what: str) -> float:
    if value is None or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what} must be a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Estimate:
    method: str
    params: float  # N
    tokens: float  # D
    flops: float  # C = 6 N D
    loss: float | None  # predicted loss (Approach 3 only), nats per token on the paper's MassiveText
    note: str = ""

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params

    def to_dict(self) -> dict:
        return {**asdict(self), "tokens_per_param": self.tokens_per_param}


@dataclass(frozen=True)
class PowerLaw:
    """N_opt = k C^a with D_opt = C / (6 N_opt): Approaches 1 and 2 and the 20x rule (a = 1/2)."""

    name: str
    k: float
    a: float
    note: str = ""
    source: str = HOFFMANN

    def params_for_compute(self, c: float) -> float:
        return self.k * c**self.a

    def compute_for_params(self, n: float) -> float:
        return (n / self.k) ** (1 / self.a)

    def compute_for_tokens(self, d: float) -> float:
        # D = C / (6 k C^a)  =>  C = (6 k D)^(1 / (1 - a))
        return (6 * self.k * d) ** (1 / (1 - self.a))

    def loss(self, n: float, d: float) -> float | None:
        return None


@dataclass(frozen=True)
class FlopsPerTokenLaw(PowerLaw):
    """A power law in DeepSeek's model scale M (non-embedding FLOPs per token): M_opt = 6 k C^a and
    D_opt = C / M_opt, so N here is M / 6 and C = 6 N D = M D."""

    @property
    def m_base(self) -> float:
        return 6 * self.k


@dataclass(frozen=True)
class ParametricLoss:
    """Approach 3: L(N, D) = E + A/N^alpha + B/D^beta, minimised under C = 6 N D."""

    name: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    note: str = ""
    source: str = HOFFMANN
    vocab_size: int = 32_000  # of the tokenizer the fit's losses were measured with (MassiveText's SentencePiece)

    @property
    def uniform_loss(self) -> float:
        """ln V: the loss of a uniform guess over the fit's vocabulary. A predicted loss above it is no
        model's: N or D lies so far below the fitted range that the formula means nothing there."""
        return math.log(self.vocab_size)

    @property
    def a(self) -> float:
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        return (self.alpha * self.A / (self.beta * self.B)) ** (1 / (self.alpha + self.beta))

    def loss(self, n: float, d: float) -> float:
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def params_for_compute(self, c: float) -> float:
        return self.G * (c / 6) ** self.a

    def compute_for_params(self, n: float) -> float:
        return 6 * (n / self.G) ** (1 / self.a)

    def compute_for_tokens(self, d: float) -> float:
        return 6 * (self.G * d) ** (1 / self.b)


Method = PowerLaw | ParametricLoss

METHODS: dict[str, Method] = {
    "approach1": PowerLaw(
        "Approach 1 (training-curve envelope)",
        k=0.09934852556683499,
        a=0.4980916391736001,
        note="fit to Table 3",
        source=f"{HOFFMANN}, Table 3 (least-squares fit here)",
    ),
    "approach2": PowerLaw(
        "Approach 2 (IsoFLOP profiles)",
        k=0.1455740332274308,
        a=0.48992737468486774,
        note="fit to Table A3",
        source=f"{HOFFMANN}, Table A3 (least-squares fit here)",
    ),
    "approach3": ParametricLoss(
        "Approach 3 (parametric loss)",
        E=1.69337368,
        A=406.401018,
        B=410.722827,
        alpha=0.33917084,
        beta=0.2849083,
        note="paper's unrounded constants",
        source=f"{HOFFMANN}, Section 3.3 (unrounded constants of the TeX source)",
    ),
    "approach3-rounded": ParametricLoss(
        "Approach 3, rounded constants",
        E=1.69,
        A=406.4,
        B=410.7,
        alpha=0.34,
        beta=0.28,
        note="as printed in App. D.2; does NOT reproduce the paper",
        source=f"{HOFFMANN}, Appendix D.2",
    ),
    "approach3-epoch": ParametricLoss(
        "Approach 3, Epoch AI refit",
        E=1.8172,
        A=482.01,
        B=2085.43,
        alpha=0.3478,
        beta=0.3658,
        note="Besiroglu et al. 2024",
        source="Besiroglu et al. 2024, arXiv:2404.10102 (refit of Hoffmann's data)",
    ),
    # Fitted on C4 with GPT-2 tokens together with R_D*, R_N*; published as logs of A, B, E.
    "approach3-c4": ParametricLoss(
        "Approach 3 form, Muennighoff C4 fit",
        E=math.exp(0.6254804),
        A=math.exp(6.255414),
        B=math.exp(7.3049974),
        alpha=0.3526596,
        beta=0.3526596,
        note="fitted with the repetition constants R_D*, R_N*",
        source="Muennighoff et al. 2023, arXiv:2305.16264 (constants from "
        "github.com/huggingface/datablations, 'Parametric Fit')",
        vocab_size=50_257,
    ),  # GPT-2's tokenizer
    # M_opt = 0.1715 C^0.5243 (Eq. 4); its D_opt = 5.8316 C^0.4757 is C / M_opt (0.1715 x 5.8316 = 1.0001)
    "deepseek": FlopsPerTokenLaw(
        "DeepSeek LLM (N = M/6)",
        k=0.1715 / 6,
        a=0.5243,
        note="M: non-embedding FLOPs/token; their final data",
        source=f"{DEEPSEEK}, Section 3.2, Eq. 4 (M_opt = 0.1715 C^0.5243, D_opt = "
        "5.8316 C^0.4757, fitted on their current data: Table 4, a = 0.524)",
    ),
    "20x": PowerLaw(
        "20 tokens per parameter",
        k=1 / math.sqrt(120),
        a=0.5,
        note="rule of thumb: D = 20 N",
        source="rule of thumb from Hoffmann et al. 2022's Table 3 (~20 tokens per parameter)",
    ),
}
FITS = [name for name, law in METHODS.items() if isinstance(law, ParametricLoss)]  # methods with a loss


def estimate(
    method: str, *, compute: float | None = None, params: float | None = None, tokens: float | None = None
) -> Estimate:
    """Compute-optimal (N, D, C) from exactly one of C, N or D under the named method."""
    given = [x is not None for x in (compute, params, tokens)]
    if sum(given) != 1:
        raise UsageError("give exactly one of compute, params or tokens")
    if method not in METHODS:
        raise UsageError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    law = METHODS[method]
    if compute is not None:
        c = positive(compute, "compute (FLOPs)")
        n = law.params_for_compute(c)
    elif params is not None:
        n = positive(params, "parameter count")
        c = law.compute_for_params(n)
    else:
        c = law.compute_for_tokens(positive(tokens, "token count"))
        n = law.params_for_compute(c)
    d = c / (6 * n)
    return Estimate(method, n, d, c, law.loss(n, d), law.note)


def minimise_log(f, lo: float, hi: float, points_per_decade: int = 40) -> float:
    """The x in [lo, hi] that minimises f: a log-spaced grid, then Brent's method around its best point
    (the losses and costs minimised here have one minimum, sometimes at a kink)."""
    from scipy.optimize import minimize_scalar

    a, b = math.log(lo), math.log(hi)
    steps = max(2, math.ceil((b - a) / math.log(10) * points_per_decade))
    grid = [a + (b - a) * i / steps for i in range(steps + 1)]
    values = [f(math.exp(x)) for x in grid]
    i = min(range(len(grid)), key=values.__getitem__)
    lo_i, hi_i = grid[max(i - 1, 0)], grid[min(i + 1, steps)]
    best = minimize_scalar(lambda x: f(math.exp(x)), bounds=(lo_i, hi_i), method="bounded", options={"xatol": 1e-10})
    return math.exp(best.x) if best.fun <= values[i] else math.exp(grid[i])


def params_of_model(method: str, cfg, seq_len: int) -> float:
    """A model's N as the named law counts it: every parameter for Chinchilla's (Hoffmann et al. count the
    embeddings), M / 6 for DeepSeek's (no vocabulary, attention included)."""
    from pretrain.models.llama import num_params
    from pretrain.planning.flops import deepseek_flops_per_token

    if isinstance(METHODS[method], FlopsPerTokenLaw):
        return deepseek_flops_per_token(cfg, seq_len) / 6
    return float(num_params(cfg))


def parametric_fit(name: str) -> ParametricLoss:
    """The named loss fit (a method with a parametric loss), for answers that need a loss."""
    if name not in FITS:
        raise UsageError(f"{name!r} is not a parametric loss fit; known: {', '.join(FITS)}")
    return METHODS[name]


def compute_from_gpus(gpus: int, hours: float, peak_flops: float, mfu: float) -> float:
    """Training FLOPs a cluster delivers: GPUs x seconds x peak FLOP/s x model FLOPs utilisation."""
    positive(gpus, "GPU count")
    positive(hours, "hours")
    positive(peak_flops, "peak FLOP/s")
    if not 0 < mfu <= 1:
        raise UsageError(f"MFU must be in (0, 1], got {mfu}")
    return gpus * hours * 3600 * peak_flops * mfu


_SUFFIXES = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


def parse_number(text: str | float) -> float:
    """'7B', '1.4T', '125m', '3e23', '6.3e23' -> float (K, M, B/G, T, P, E suffixes)."""
    if isinstance(text, (int, float)):
        return float(text)
    match = re.fullmatch(r"\s*([-+]?[0-9.]+(?:e[+-]?\d+)?)\s*([KMBGTPE]?)\s*", str(text), re.IGNORECASE)
    if not match:
        raise UsageError(f"cannot read number {text!r} (examples: 7B, 1.4T, 3e23)")
    try:
        return float(match.group(1)) * _SUFFIXES[match.group(2).upper()]
    except ValueError:
        raise UsageError(f"cannot read number {text!r} (examples: 7B, 1.4T, 3e23)") from None
