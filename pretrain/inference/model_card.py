"""The model card (``README.md``) ``pretrain export --to hf`` writes beside the weights: the model, the data
it was trained on back to the crawl (``pretrain.lineage``: sources, shard digests, the pipeline config and
input files), the training budget, the final losses and the evaluation scores the run logged."""

from __future__ import annotations

import os

from pretrain.components.metrics import read_metrics
from pretrain.inference.loading import Trained
from pretrain.models.llama import num_params


def model_card(trained: Trained, lineage: dict | None) -> str:
    m = trained.model
    name = os.path.basename(trained.run_dir or os.path.dirname(os.path.abspath(trained.path)))
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: text-generation",
        "tags: [ccpretrain, llama]",
        "---",
        f"# {name}",
        "",
        f"A Llama-style decoder trained from scratch with ccpretrain: {num_params(m):,} parameters ({m.n_layers} "
        f"layers, d_model {m.d_model}, {m.n_heads} heads, {m.n_kv_heads} key/value heads, feed-forward "
        f"{m.ffn_dim}), vocabulary {m.vocab_size:,}, context {m.max_seq_len:,} tokens. Exported from "
        f"`{trained.path}`" + (f" (step {trained.step:,})." if trained.step is not None else "."),
        "",
    ]
    lines += _data(lineage) + _budget(trained) + _results(trained)
    lines += [
        "## Lineage",
        "",
        (
            "`lineage.json` in this folder holds the chain from this model to the crawl; "
            "`pretrain lineage FOLDER` prints it, and `pretrain lineage --uses CORPUS RUNS...` "
            "finds the models trained on a corpus."
        ),
        "",
    ]
    return "\n".join(lines)


def _data(lineage: dict | None) -> list[str]:
    lines = ["## Data", ""]
    if not lineage:
        return lines + ["Not recorded (the run predates lineage records).", ""]
    current = lineage["current"]
    if current.get("mixture"):
        lines += [
            f"Mixture `{current['mixture']['name']}` (`{current['mixture']['path']}`, sha256 "
            f"`{current['mixture']['sha256']}`).",
            "",
        ]
    lines += ["| source | weight | tokens | documents | manifest SHA-256 |", "| --- | --- | --- | --- | --- |"]
    lines += [
        f"| `{s['path']}` | {s['weight']:g} | {s['tokens']:,} | {s['documents']:,} | `{s['manifest_sha256']}` |"
        for s in current["sources"]
    ]
    lines.append("")
    for s in current["sources"]:
        run = s.get("pipeline_run")
        if not run:
            lines += [f"`{s['name']}`: token shards made outside a ccpretrain pipeline.", ""]
            continue
        listing, code = run.get("input_listing") or {}, run.get("code") or {}
        names = listing.get("names") or []
        lines += [
            f"`{s['name']}` was made by the pipeline config `{run.get('config')}` (settings sha256 "
            f"`{run.get('config_sha256')}`; stages {', '.join(run.get('stages') or [])}) with "
            f"{code.get('package')} {code.get('version')}"
            + (f" at commit `{code['git_commit']}`" if code.get("git_commit") else "")
            + (" with uncommitted changes" if code.get("git_dirty") else "")
            + f", at {run.get('time')}, from {listing.get('files', 0):,} input file(s) (listing sha256 "
            f"`{listing.get('sha256')}`):",
            "",
        ]
        lines += [f"- `{n}`" for n in names]
        if listing.get("files", 0) > len(names):
            lines.append(f"- ... and {listing['files'] - len(names):,} more")
        lines.append("")
    if lineage.get("earlier"):
        lines += [
            f"Earlier stretches of this model's training read other data: {len(lineage['earlier'])} record(s) "
            "under `earlier` in `lineage.json`.",
            "",
        ]
    return lines


def _budget(trained: Trained) -> list[str]:
    run = trained.run
    if run is None or not trained.step:
        return []
    tokens_per_step = run.global_batch_size * run.seq_len
    tokens = trained.step * tokens_per_step
    return [
        "## Training",
        "",
        f"{tokens:,} tokens ({trained.step:,} steps x {tokens_per_step:,} tokens: global batch "
        f"{run.global_batch_size} sequences of {run.seq_len}), about {6 * num_params(trained.model) * tokens:.3g} "
        f"FLOPs (6ND); peak learning rate {run.optim.lr:g}, precision {run.precision}.",
        "",
    ]


def _results(trained: Trained) -> list[str]:
    path = os.path.join(trained.run_dir or "", "metrics.jsonl")
    if not trained.run_dir or not os.path.isfile(path):
        return []
    records = [r for r in read_metrics(path) if trained.step is None or r["step"] <= trained.step]
    train = [r for r in records if r.get("kind", "train") == "train" and "loss" in r]
    val = [r for r in records if r.get("kind") == "val"]
    evals = [r for r in records if str(r.get("kind", "")).startswith("eval")]
    lines = ["## Results", ""]
    if train:
        lines.append(f"- training loss at step {train[-1]['step']:,}: {train[-1]['loss']:.4f}")
    if val:
        best = min(val, key=lambda r: r["val_loss"])
        lines.append(
            f"- validation loss at step {val[-1]['step']:,}: {val[-1]['val_loss']:.4f} (best "
            f"{best['val_loss']:.4f} at step {best['step']:,})"
        )
    for r in evals:
        scores = ", ".join(
            f"{k} {v:.4g}" for k, v in r.items() if isinstance(v, (int, float)) and k not in ("step", "time", "rank")
        )
        lines.append(f"- {r['kind']} at step {r['step']:,}: {scores}")
    return lines + [""] if len(lines) > 2 else []
