"""The ablation's page: ``OUTPUT/index.html``, the per-arm and per-pair tables around one chart
(``OUTPUT/ablation.png``: each pair's difference per measure, with its interval against zero)."""

from __future__ import annotations

import html
import os

from dataprep.core.storage import atomic_write_text
from dataprep.report.charts import Charts


def write_page(folder: str, results: dict) -> str:
    _chart(folder, results)
    arms, measures = list(results["arms"]), results["measures"]
    head = "".join(f"<th>{html.escape(m)}</th>" for m in measures)
    rows = "".join(
        f"<tr><td>{html.escape(a)}</td>"
        + "".join(
            f"<td>{results['arms'][a][m]['mean']:.4f} ± {results['arms'][a][m]['std']:.4f}</td>" for m in measures
        )
        + "</tr>"
        for a in arms
    )
    pairs = "".join(
        f"<tr><td>{html.escape(p['a'])} − {html.escape(p['b'])}</td><td>{html.escape(p['measure'])}</td>"
        f"<td>{p['difference']:+.4f}</td><td>[{p['ci95'][0]:+.4f}, {p['ci95'][1]:+.4f}]</td>"
        f"<td>{html.escape(p['winner'] or 'no difference shown')}</td></tr>"
        for p in results["pairs"]
    )
    s = results["settings"]
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Data ablation</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:3px 10px;text-align:left}}</style></head><body>
<h1>Data ablation</h1>
<p>Model {html.escape(s["model"])}, {results["tokens_per_model"]:,} tokens per model, seeds {results["seeds"]};
bits per byte (bpb) lower is better, accuracy and the probability of the correct answer higher.</p>
<img src="ablation.png" alt="differences between arms with their 95% intervals">
<h2>Per arm: mean ± standard deviation over seeds</h2><table><tr><th>arm</th>{head}</tr>{rows}</table>
<h2>Per pair: difference and 95% paired t-interval over seeds</h2>
<table><tr><th>pair</th><th>measure</th><th>difference</th><th>95% interval</th><th>winner</th></tr>{pairs}</table>
</body></html>
"""
    path = os.path.join(folder, "index.html")
    atomic_write_text(path, page)
    return path


def _chart(folder: str, results: dict) -> None:
    """One panel: per pair of arms and measure, the difference ``a - b`` and its 95% interval against zero."""
    pairs = results["pairs"]
    with Charts(folder).figure("ablation.png", height=1.2 + 0.45 * len(pairs)) as ax:
        for y, p in enumerate(pairs):
            low, high = p["ci95"]
            color = "tab:gray" if p["winner"] is None else ("tab:blue" if p["winner"] == p["a"] else "tab:orange")
            ax.errorbar(
                [p["difference"]],
                [y],
                xerr=[[p["difference"] - low], [high - p["difference"]]],
                fmt="o",
                color=color,
                capsize=4,
            )
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_yticks(range(len(pairs)), [f"{p['a']} − {p['b']}: {p['measure']}" for p in pairs])
        ax.invert_yaxis()
        ax.set_xlabel("difference a − b (mean over seeds) with its 95% paired t-interval")
