"""A ``--data`` mixture in ``pretrain budget``: its sources and phases, and what the planned tokens draw
from each source: its share, epochs and effective tokens (Muennighoff et al. 2023), with a warning past the
useful range of repetition."""

from __future__ import annotations

from dataprep.core.errors import UsageError
from pretrain.components.shard_totals import shard_totals
from pretrain.config import check_sources
from pretrain.planning import data_constrained
from pretrain.planning.budget_inputs import BudgetQuestion
from pretrain.planning.data_constrained import USEFUL_EPOCHS, epochs_text


def mixture_sources(q: BudgetQuestion) -> tuple[list[dict], list[dict] | None] | None:
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


def mixture_section(sources: list[dict], tokens: float, phases: list[dict] | None = None) -> list[dict]:
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
