"""Training a quality classifier from reference text, as DCLM did: the text you want more of (its
positives: instruction data and ELI5 answers; yours: Wikipedia, curated pages) against pages sampled
at random from the crawl the classifier will filter (its negatives), and keeping the top share.

The DCLM recipe is fastText supervised with word bigrams. DCLM's released classifier
(mlfoundations/fasttext-oh-eli5, ``openhermes_reddit_eli5_vs_rw_v2_bigram_200k_train.bin``) is
bigram, trained on 200k examples; the fastText training step DCLM's authors publish with their later
classifiers (mlfoundations-dev ``train_fasttext`` records) sets ``dim 256, lr 0.1, epoch 3,
wordNgrams 2, minCount 3``; everything else is fastText's default. ``bucket`` is ours: fastText's
2M buckets make a dim-256 model about 2 GB; 200k keep it about 200 MB at the same bigram features.
"""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from dataprep.core.inputs import expand_inputs, read_jsonl_records
from dataprep.core.storage import open_stream

DCLM_RECIPE = {"dim": 256, "lr": 0.1, "epoch": 3, "wordNgrams": 2, "minCount": 3, "bucket": 200_000}
POSITIVE, NEGATIVE = "hq", "cc"  # DCLM's label names
KEEP_SHARES = (0.1, 0.2, 0.5)


def read_texts(paths: list[str], text_field: str = "text") -> tuple[list[str], int]:
    """Texts of JSONL (``.jsonl``/``.json``, gzip allowed), Parquet, or plain text (one document per
    non-blank line) files, and how many records had no text (counted, not fatal)."""
    texts, missing = [], 0
    for path in expand_inputs(paths, skip_links_out=True):
        name = path.removesuffix(".gz")
        if os.path.basename(path).startswith(("_", ".")):  # Spark/Hadoop markers beside part files
            continue
        if name.endswith(".parquet"):
            column = pq.read_table(path, columns=[text_field]).column(text_field).to_pylist()
            found = [t for t in column if isinstance(t, str) and t.strip()]
            texts += found
            missing += len(column) - len(found)
        elif name.endswith((".jsonl", ".json")):
            for record, _, _ in read_jsonl_records([path]):
                text = record.get(text_field) if record else None
                if isinstance(text, str) and text.strip():
                    texts.append(text)
                else:
                    missing += 1
        else:
            with open_stream(path) as raw:
                texts += [
                    line.strip() for line in raw.read().decode("utf-8", errors="replace").splitlines() if line.strip()
                ]
    return texts, missing


def precision_recall_at_shares(scores: list[float], positive: list[bool], shares=KEEP_SHARES) -> list[dict]:
    """Keeping the top ``share`` of the examples by score (the cut-off top_fraction would apply), the
    share of kept examples that are positive (precision) and of positives that are kept (recall)."""
    from dataprep.quality.top_fraction import TopFraction

    rows = []
    total_positive = sum(positive)
    for share in shares:
        cut = TopFraction(score="score", keep=share).cutoff_of(list(scores))
        kept = [p for s, p in zip(scores, positive) if cut is None or s > cut]
        hits = sum(kept)
        rows.append(
            {
                "keep": share,
                "threshold": cut,
                "kept": len(kept),
                "precision": round(hits / len(kept), 4) if kept else None,  # None (JSON null): undefined here
                "recall": round(hits / total_positive, 4) if total_positive else None,
            }
        )
    return rows


def format_report(rows: list[dict]) -> str:
    lines = ["keep   threshold  kept  precision  recall"]
    for r in rows:
        threshold = "-" if r["threshold"] is None else f"{r['threshold']:.4f}"
        precision, recall = ("-" if r[k] is None else r[k] for k in ("precision", "recall"))
        lines.append(f"{r['keep']:<6} {threshold:>9}  {r['kept']:>4}  {precision:>9}  {recall:>6}")
    return "\n".join(lines)
