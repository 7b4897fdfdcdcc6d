"""The report's PNG charts: one matplotlib figure per file in the report folder, in one look."""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np

from dataprep.core.storage import atomic_output


class Charts:
    """One matplotlib figure per PNG in the report folder (Agg backend: no display needed)."""

    def __init__(self, folder: str):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.folder, self.plt = folder, plt

    @contextmanager
    def figure(self, name: str, height: float = 3.6):
        fig, ax = self.plt.subplots(figsize=(9, height))
        yield ax
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_output(os.path.join(self.folder, name)) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        self.plt.close(fig)

    def hist(self, name: str, series: dict[str, np.ndarray], xlabel: str, log_x: bool = False) -> str | None:
        series = {k: v[v > 0] if log_x else v for k, v in series.items()}
        series = {k: v for k, v in series.items() if len(v)}
        if not series:
            return None
        values = np.concatenate(list(series.values()))
        lo, hi = values.min(), max(values.max(), values.min() * 1.01 if log_x else values.min() + 1)
        with self.figure(name) as ax:
            for label, v in series.items():
                ax.hist(v, bins=np.geomspace(lo, hi, 40) if log_x else np.linspace(lo, hi, 40), alpha=0.6, label=label)
            ax.set(xlabel=xlabel, ylabel="documents", xscale="log" if log_x else "linear")
            if len(series) > 1:
                ax.legend()
        return name

    def barh(self, name: str, labels: list[str], values: list, xlabel: str, colors=None, log: bool = False) -> str:
        with self.figure(name, height=1.2 + 0.28 * len(labels)) as ax:
            ax.barh(range(len(labels)), values, color=colors, log=log)
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(xlabel)
            if log:
                ax.set_xlim(left=0.5)  # bars of 1 stay visible
        return name
