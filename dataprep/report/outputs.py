"""Reading what a ``dataprep run`` wrote: ``stats.json``, a sample of ``corpus/``, the dropped documents
in each step's data, and the token-shard manifests. Local folders and fsspec URLs alike.

Counts come from ``stats.json`` and are exact; the corpus is read a few columns at a time, over at
most ``max_docs`` documents taken file by file in a fixed random order, so a large corpus is never
read whole.
"""

from __future__ import annotations

import json
import os
import random

import pyarrow as pa
import pyarrow.compute as pc

from dataprep.code.secrets import PLACEHOLDERS as SECRET_PLACEHOLDERS
from dataprep.code.secrets import find_secrets
from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.stage import DROP_REASON, DROP_STAGE
from dataprep.core.stats import STATS_MARK
from dataprep.core.storage import exists, is_url, join_path, read_text
from dataprep.safety.pii import find_pii, redact
from dataprep.tokenize.manifest import MANIFEST_NAME, load_manifest

CATEGORIES = ("lang", "ppl_bucket", "source_kind")  # string columns worth counting; other strings are ids
EXAMPLE_WINDOW = 25_000  # the start of a dropped text that is scrubbed, then cut: the longest secret (a PEM key) fits


def load_stats(output_dir: str) -> dict:
    path = join_path(output_dir, "stats.json")
    if not exists(path):
        raise MissingPath(f"{path} not found: {output_dir} is not the output of a finished `dataprep run`")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None


def _dataset(path: str):
    """A Parquet dataset of a local folder or fsspec URL (Spark's _SUCCESS and markers are ignored)."""
    import fsspec
    import pyarrow.dataset as ds

    fs, local = fsspec.core.url_to_fs(path)
    return ds.dataset(local, format="parquet", filesystem=fs if is_url(path) else None)


def read_corpus_sample(corpus_dir: str, max_docs: int) -> tuple[pa.Table | None, int]:
    """Numeric columns, ``lang``, ``ppl_bucket`` and ``chars`` (text length) of at most ``max_docs``
    documents, whole files in a fixed random order; and the corpus's document count."""
    if not exists(corpus_dir):
        return None, 0
    dataset = _dataset(corpus_dir)
    names = [
        f.name
        for f in dataset.schema
        if f.name in CATEGORIES or pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
    ]
    has_text = "text" in dataset.schema.names
    fragments = list(dataset.get_fragments())
    random.Random(0).shuffle(fragments)
    tables, n = [], 0
    for batch in (b for f in fragments for b in f.to_batches(columns=names + ["text"] * has_text)):
        if n >= max_docs:
            break
        table = pa.Table.from_batches([batch]).slice(0, max_docs - n)
        if has_text:
            chars = pc.fill_null(pc.utf8_length(table.column("text")), 0).cast(pa.int64())
            table = table.drop_columns(["text"]).append_column("chars", chars)
        tables.append(table)
        n += table.num_rows
    sample = (
        pa.concat_tables(tables, promote_options="permissive") if tables else dataset.schema.empty_table().select(names)
    )
    return sample, dataset.count_rows()


def drop_examples(
    output_dir: str, per_reason: int = 3, max_rows: int = 1_000_000, snippet: int = 160
) -> dict[tuple, list[str]]:
    """Up to ``per_reason`` dropped documents per (stage, reason), scanning each step's data: the URL,
    and the start of the text where the run kept dropped text (``output.write_dropped``), so a reader
    sees what each rule removed."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(join_path(output_dir, "steps"))
    examples: dict[tuple, list[str]] = {}
    for data in sorted(fs.glob(f"{root.rstrip('/')}/*/data")):
        dataset = _dataset(fs.unstrip_protocol(data) if is_url(output_dir) else data)
        if not {DROP_STAGE, DROP_REASON, "url"} <= set(dataset.schema.names):
            continue
        columns = [DROP_STAGE, DROP_REASON, "url"] + ["text"] * ("text" in dataset.schema.names)
        dropped = pc.field(DROP_REASON).is_valid() & (pc.field(DROP_STAGE) != STATS_MARK)
        seen = 0
        for batch in dataset.to_batches(columns=columns, filter=dropped):
            texts = batch.column("text").to_pylist() if "text" in columns else [None] * batch.num_rows
            for stage, reason, url, text in zip(*(batch.column(i).to_pylist() for i in range(3)), texts):
                found = examples.setdefault((stage, reason), [])
                if (url or text) and len(found) < per_reason:
                    found.append(_example(url, text, snippet))
            seen += batch.num_rows
            if seen >= max_rows:
                break
    return examples


def source_funnel(output_dir: str) -> tuple[dict, dict] | None:
    """Exact counts per source kind: documents into the first step, and documents dropped per (kind, stage,
    reason) over every step, from each step's data (its input, kept and dropped rows), reading only the
    columns ``source_kind``, ``drop_stage`` and ``drop_reason``. None when the run has no ``source_kind``."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(join_path(output_dir, "steps"))
    into: dict[str, int] = {}
    dropped: dict[tuple, int] = {}
    for i, data in enumerate(sorted(fs.glob(f"{root.rstrip('/')}/*/data"))):
        dataset = _dataset(fs.unstrip_protocol(data) if is_url(output_dir) else data)
        if not {"source_kind", DROP_STAGE, DROP_REASON} <= set(dataset.schema.names):
            return None
        table = dataset.to_table(columns=["source_kind", DROP_STAGE, DROP_REASON])
        table = table.filter(pc.fill_null(pc.not_equal(table.column(DROP_STAGE), STATS_MARK), True))
        for row in table.group_by(["source_kind", DROP_STAGE, DROP_REASON]).aggregate([([], "count_all")]).to_pylist():
            kind = row["source_kind"] or "web"
            if i == 0:
                into[kind] = into.get(kind, 0) + row["count_all"]
            if row[DROP_REASON] is not None:
                key = (kind, row[DROP_STAGE], row[DROP_REASON])
                dropped[key] = dropped.get(key, 0) + row["count_all"]
    return (into, dropped) if into else None


def _example(url: str | None, text: str | None, snippet: int) -> str:
    """'URL: start of the text…' on one line (either part may be missing), with PII and secrets replaced
    by the pipeline's own placeholders: a dropped document never went through the pii or code_secrets
    stage, and a report is read by people who must not see either."""
    flat = " ".join(scrub((text or "")[:EXAMPLE_WINDOW]).split())
    if len(flat) > snippet:
        flat = flat[:snippet].rstrip() + "…"
    return ": ".join(part for part in (scrub(url or "")[:100], flat) if part)


def scrub(text: str) -> str:
    """``text`` with every secret and every piece of PII the project's detectors find replaced."""
    text = redact(text, find_secrets(text), SECRET_PLACEHOLDERS)
    return redact(text, find_pii(text))


def find_manifests(output_dir: str) -> list[tuple[str, dict | str]]:
    """Every token-shard manifest under the output: (folder, manifest), or (folder, error message)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(output_dir)
    found = []
    for path in sorted(fs.glob(f"{root.rstrip('/')}/**/{MANIFEST_NAME}")):
        folder = fs.unstrip_protocol(os.path.dirname(path)) if is_url(output_dir) else os.path.dirname(path)
        try:
            found.append((folder, load_manifest(folder)))
        except (ValueError, FileNotFoundError) as exc:
            found.append((folder, str(exc)))
    return found
