"""``pretrain plot RUN_DIR``: loss (train and validation) and throughput curves of a run, as one PNG, with
the run's events (skipped steps, loss spikes, rollbacks) marked on the loss curve and, when the run evaluated
during training (``eval:``), the bits per byte and task scores of its ``kind: eval`` records; and when the run logged
per-layer diagnostics (``log.diagnostics_every_steps``), one heat map (layer x step) per quantity, as a
second PNG beside it (``diagnostics_png``).

The same curves, with a summary of the run, are the Training section of ``dataprep report --train-run``
(``training_section``, registered under the ``ccpretrain.report_sections`` entry points).
"""

from __future__ import annotations

import json
import os

import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.report import Section
from pretrain.components.diagnostics import QUANTITIES
from pretrain.components.metrics import read_metrics


def find_metrics(run: str, name: str = "metrics.jsonl") -> str:
    """The metrics file of a run folder, or ``run`` itself when it is the file."""
    path = run if os.path.isfile(run) else os.path.join(run, name)
    if not os.path.exists(path):
        raise MissingPath(f"{path} not found: give a training run folder or its metrics JSONL")
    return path


def train_and_val(metrics_path: str) -> tuple[list[dict], list[dict]]:
    """The training records (with a loss) and the validation records (with a val_loss) of a run."""
    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("kind", "train") == "train" and "loss" in r]
    val = [r for r in records if r.get("kind") == "val" and "val_loss" in r]
    if not train:
        raise UsageError(f"{metrics_path} holds no training records")
    return train, val


def eval_curves(metrics_path: str) -> dict[str, tuple[list[int], list[float]]]:
    """Each measure of the run's ``kind: eval`` records (``held_out/bpb``, ``TASK/acc``): (steps, values)."""
    curves: dict[str, tuple[list[int], list[float]]] = {}
    for record in read_metrics(metrics_path):
        if record.get("kind") != "eval":
            continue
        for key, value in record.items():
            if "/" in key and isinstance(value, (int, float)) and not isinstance(value, bool):
                steps, values = curves.setdefault(key, ([], []))
                steps.append(record["step"])
                values.append(value)
    return curves


EVENTS = {
    "skip": ("skipped step", "tab:orange"),
    "spike": ("loss spike", "tab:red"),
    "rollback": ("rollback", "tab:purple"),
}  # kind -> (label, colour)


def events(metrics_path: str) -> dict[str, list[dict]]:
    """The event records of a run by kind (only kinds that occurred)."""
    found: dict[str, list[dict]] = {}
    for record in read_metrics(metrics_path):
        if record.get("kind") in EVENTS:
            found.setdefault(record["kind"], []).append(record)
    return found


def describe_events(found: dict[str, list[dict]]) -> str:
    """ "2 skipped steps (steps 3, 4), 1 loss spike (step 5)": a line for the report and the JSON."""
    return ", ".join(
        f"{len(rs)} {EVENTS[kind][0]}{'s' if len(rs) > 1 else ''} (step{'s' if len(rs) > 1 else ''} "
        f"{', '.join(str(r['step']) for r in rs[:5])}{', ...' if len(rs) > 5 else ''})"
        for kind, rs in found.items()
    )


def diagnostics_grid(metrics_path: str) -> dict[str, tuple[list[str], list[int], np.ndarray]]:
    """Each diagnostic quantity the run logged as (layers input to output, steps, values layers x steps;
    NaN where a step lacks the value)."""
    records = [r for r in read_metrics(metrics_path) if r.get("kind") == "diagnostics"]
    steps = [r["step"] for r in records]
    grids = {}
    for quantity in QUANTITIES:
        layers = list(
            dict.fromkeys(key.split("/", 1)[1] for r in records for key in r if key.startswith(quantity + "/"))
        )
        if layers:
            values = np.array(
                [[r.get(f"{quantity}/{layer}", np.nan) for r in records] for layer in layers], dtype=float
            )
            grids[quantity] = (layers, steps, values)
    return grids


def diagnostics_png(png_path: str) -> str:
    """Where the heat maps go: beside the curves (``curves.png`` -> ``curves-diagnostics.png``)."""
    root, ext = os.path.splitext(png_path)
    return f"{root}-diagnostics{ext or '.png'}"


def plot_diagnostics(metrics_path: str, png_path: str) -> str | None:
    """One heat map per diagnostic quantity, layers (embeddings at the bottom, head at the top) by steps,
    on a log colour scale where the values are positive; None when the run logged no diagnostics."""
    grids = diagnostics_grid(metrics_path)
    if not grids:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import MaxNLocator

    rows = -(-len(grids) // 2)
    fig, axes = plt.subplots(rows, 2, figsize=(12, 3.2 * rows), squeeze=False)
    for ax, (quantity, (layers, steps, values)) in zip(axes.flat, grids.items()):
        finite = values[np.isfinite(values)]
        norm = LogNorm() if finite.size and (finite > 0).all() else None
        mesh = ax.pcolormesh(
            steps, np.arange(len(layers)), np.ma.masked_invalid(values), shading="nearest", norm=norm, cmap="viridis"
        )
        ax.set_yticks(np.arange(len(layers)), layers, fontsize=7 if len(layers) < 20 else 5)
        ax.set_title(quantity)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.colorbar(mesh, ax=ax)
    for ax in list(axes.flat)[len(grids) :]:
        ax.axis("off")
    fig.suptitle(os.path.basename(os.path.dirname(os.path.abspath(metrics_path))) + ": per-layer diagnostics")
    fig.tight_layout()
    return _save(fig, png_path)


def _save(fig, png_path: str) -> str:
    """Write a figure as PNG atomically and free it."""
    import matplotlib.pyplot as plt

    from dataprep.core.storage import atomic_output

    with atomic_output(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return png_path


def plot(metrics_path: str, png_path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    train, val = train_and_val(metrics_path)
    curves = eval_curves(metrics_path)
    fig, axes = plt.subplots(3 if curves else 2, 1, figsize=(8, 10 if curves else 7), sharex=True)
    ax_loss, ax_tps = axes[0], axes[1]
    ax_loss.plot([r["step"] for r in train], [r["loss"] for r in train], label="train")
    if val:
        ax_loss.plot([r["step"] for r in val], [r["val_loss"] for r in val], "o-", label="validation")
    for kind, records in events(metrics_path).items():
        label, colour = EVENTS[kind]
        for i, record in enumerate(records):
            ax_loss.axvline(record["step"], color=colour, linestyle=":", alpha=0.7, label=label if i == 0 else None)
    for k, (step, shares) in enumerate(phase_shares(train)[1:]):  # where each later mixture phase began
        ax_loss.axvline(step, color="tab:gray", linestyle="--", alpha=0.7, label="mixture phase" if k == 0 else None)
        ax_loss.annotate(
            ", ".join(f"{n} {v:.0%}" for n, v in shares.items()),
            (step, 1),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            va="top",
            rotation=90,
        )
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    ax_loss.grid(alpha=0.3)
    ax_tps.plot([r["step"] for r in train], [r["tokens_per_s"] for r in train], color="tab:green")
    ax_tps.set_ylabel("tokens / s")
    if any("mfu" in r for r in train):
        ax_mfu = ax_tps.twinx()
        ax_mfu.plot(
            [r["step"] for r in train if "mfu" in r],
            [100 * r["mfu"] for r in train if "mfu" in r],
            color="tab:red",
            alpha=0.6,
        )
        ax_mfu.set_ylabel("MFU %")
    ax_tps.grid(alpha=0.3)
    if curves:
        _plot_eval(axes[2], curves)
    axes[-1].set_xlabel("step")
    fig.suptitle(os.path.basename(os.path.dirname(os.path.abspath(metrics_path))))
    fig.tight_layout()
    return _save(fig, png_path)


def _plot_eval(ax, curves: dict[str, tuple[list[int], list[float]]]) -> None:
    """Bits per byte of the held-out document sets on the left axis, task scores on the right."""
    scores = (
        ax.twinx() if any(k.endswith("/bpb") for k in curves) and any(not k.endswith("/bpb") for k in curves) else ax
    )
    for key, (steps, values) in curves.items():
        target = ax if key.endswith("/bpb") or scores is ax else scores
        target.plot(steps, values, "s-" if key.endswith("/bpb") else "^--", label=key)
    ax.set_ylabel("bits per byte" if any(k.endswith("/bpb") for k in curves) else "task score")
    if scores is not ax:
        scores.set_ylabel("task score")
        scores.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)


def phase_shares(train: list[dict]) -> list[tuple[int, dict[str, float]]]:
    """Per mixture phase (``data.phases``) the first step logged in it and the source shares drawn in it (its
    last record's ``phase_source_share``); empty for a run without phases."""
    first: dict[int, int] = {}
    last: dict[int, dict] = {}
    for r in train:
        if "phase" in r:
            first.setdefault(r["phase"], r["step"])
            last[r["phase"]] = r["phase_source_share"]
    return [(first[k], last[k]) for k in sorted(first)]


def training_section(run: str, folder: str) -> Section:
    """The report's Training section: these curves (as ``training.png`` in the report ``folder``) and the
    run's loss, validation and throughput in a few rows."""
    path = find_metrics(run)
    image = os.path.basename(plot(path, os.path.join(folder, "training.png")))
    diagnostics = plot_diagnostics(path, os.path.join(folder, "training-diagnostics.png"))
    train, val = train_and_val(path)
    rows = [
        ["metrics", path],
        ["steps logged", f"{len(train):,} (last step {int(train[-1]['step']):,})"],
        ["train loss first → last", f"{train[0]['loss']:.4f} → {train[-1]['loss']:.4f}"],
    ]
    if "tokens" in train[-1]:
        rows.append(["tokens trained", f"{int(train[-1]['tokens']):,}"])
    if "source_share" in train[-1]:  # a mixture: the tokens drawn from each source
        rows.append(
            [
                "tokens per source",
                ", ".join(
                    f"{name} {int(train[-1]['source_tokens'][name]):,} ({share:.1%})"
                    for name, share in train[-1]["source_share"].items()
                ),
            ]
        )
    for k, (step, shares) in enumerate(phase_shares(train)):
        rows.append(
            [
                f"phase {k + 1} (from step {step:,}) source share",
                ", ".join(f"{name} {share:.1%}" for name, share in shares.items()),
            ]
        )
    if val:
        best = min(val, key=lambda r: r["val_loss"])
        rows.append(
            [
                "validation loss last / best",
                f"{val[-1]['val_loss']:.4f} / {best['val_loss']:.4f} (step {int(best['step']):,})",
            ]
        )
    for key, (steps, values) in eval_curves(path).items():
        rows.append(
            [f"eval {key} first → last", f"{values[0]:.4f} → {values[-1]:.4f} (steps {steps[0]:,} → {steps[-1]:,})"]
        )
    if found := events(path):
        rows.append(["events", describe_events(found)])
    for key, label, scale, unit in (("tokens_per_s", "tokens/s", 1, ""), ("mfu", "MFU", 100, "%")):
        values = [r[key] for r in train if key in r]
        if values:
            rows.append([f"{label} (median)", f"{scale * np.median(values):,.1f}{unit}"])
    rows += profile_rows(os.path.dirname(path))
    from pretrain.lineage import report_rows

    rows += report_rows(os.path.dirname(path))
    images = [image] + ([os.path.basename(diagnostics)] if diagnostics else [])
    return Section("Training", images=images, tables=[([], rows)])


def profile_rows(run: str) -> list[list[str]]:
    """The profiled steps' time split (``log.profile_steps``), when the run recorded any."""
    path = os.path.join(run, "profile", "profile.json")
    if not os.path.exists(path):
        return []
    from pretrain.components.profiling import profile_split_line

    with open(path) as fh:
        report = json.load(fh)
    (start, end), mean = report["steps"], report["mean"]
    rows = [[f"profiled step (steps {start}-{end}, mean of {report['ranks']} rank(s))", profile_split_line(mean)]]
    if mean["collectives"]:
        rows.append(
            [
                "collectives per step (hidden or not)",
                ", ".join(f"{kind} {s:.4f} s" for kind, s in mean["collectives"].items()),
            ]
        )
    return rows
