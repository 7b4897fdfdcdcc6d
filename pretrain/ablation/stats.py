"""Per arm, the mean and spread of each measure over seeds; per pair of arms, the paired difference with a
95% t-interval over the per-seed differences (seeds - 1 degrees of freedom) and the arm that wins where
the interval excludes zero."""

from __future__ import annotations

import itertools
import math
import statistics

LOWER_IS_BETTER = ("bpb",)  # measure suffixes; the rest (acc, correct_prob) are better higher


def t_quantile(dof: int) -> float:
    """The two-sided 95% quantile of Student's t with ``dof`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.975, dof))


def paired_interval(a: list[float], b: list[float]) -> tuple[float, tuple[float, float]]:
    """Mean of ``a[i] - b[i]`` (the same seed in both arms) and its 95% paired t-interval."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return mean, (-math.inf, math.inf)
    half = t_quantile(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return mean, (mean - half, mean + half)


def winner(a: str, b: str, measure: str, low: float, high: float) -> str | None:
    """The better arm when the interval of ``a - b`` excludes zero, else None."""
    if low <= 0 <= high:
        return None
    a_higher = low > 0
    return (b if a_higher else a) if measure.endswith(LOWER_IS_BETTER) else (a if a_higher else b)


def summarise(scores: dict[str, dict[int, dict[str, float]]]) -> dict:
    """``scores[arm][seed][measure]`` -> per arm ``{measure: {mean, std, values}}`` and the ``pairs`` list."""
    arms = list(scores)
    seeds = sorted(set.intersection(*(set(s) for s in scores.values())))
    measures = sorted(set.intersection(*(set(scores[a][s]) for a in arms for s in seeds)))
    per_arm = {}
    for arm in arms:
        per_arm[arm] = {}
        for m in measures:
            values = [scores[arm][s][m] for s in seeds]
            per_arm[arm][m] = {
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "values": values,
            }
    pairs = []
    for a, b in itertools.combinations(arms, 2):
        for m in measures:
            diff, (low, high) = paired_interval(per_arm[a][m]["values"], per_arm[b][m]["values"])
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "measure": m,
                    "difference": diff,
                    "ci95": [low, high],
                    "winner": winner(a, b, m, low, high),
                }
            )
    return {"seeds": seeds, "measures": measures, "arms": per_arm, "pairs": pairs}
