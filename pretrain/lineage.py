"""Which data made a model: from the crawl to the checkpoint and back.

The tokenize step writes its pipeline run's identity into the shards' manifest (``pipeline_run``: the
config's path and digest, the input listing's digest and names, the code version, the time). Training
records, for every source it reads, the manifest's SHA-256 (which covers every shard's SHA-256, listed
too), that identity, the mixture and the phases: in ``OUT_DIR/lineage.json`` and in every checkpoint's
train state (``LineageState``, which keeps the data of earlier stretches of a resumed run as well). Export
copies it beside the model with a model card; ``pretrain lineage`` reads it from any of these, and finds
the runs that trained on a corpus.
"""

from __future__ import annotations

import hashlib
import json
import os

from dataprep.core.errors import MissingPath
from dataprep.core.provenance import code_version, now, sha256_file, sha256_json
from dataprep.core.storage import join_path, read_text
from dataprep.tokenize.manifest import MANIFEST_NAME, parse_manifest
from pretrain.config.data import DataSource
from pretrain.config.train import TrainConfig

LINEAGE_FILE = "lineage.json"  # in a run folder and an exported model's folder
KIND = "ccpretrain-lineage"


def source_record(source: DataSource) -> dict:
    """One source as training read it: its manifest's digest and counts, each shard's digests, and the
    pipeline run that wrote it (None for shards made elsewhere)."""
    path = join_path(source.path, MANIFEST_NAME)
    text = read_text(path)
    manifest = parse_manifest(path, text)
    return {
        "name": source.name or source.path,
        "path": source.path,
        "weight": source.weight,
        "manifest_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "tokens": manifest["tokens"],
        "documents": manifest["documents"],
        "tokenizer_sha256": (manifest.get("tokenizer") or {}).get("model_sha256"),
        "shards": [
            {"name": s["name"], "bin_sha256": s["bin_sha256"], "idx_sha256": s["idx_sha256"]}
            for s in manifest["shards"]
        ],
        "pipeline_run": manifest.get("pipeline_run"),
    }


def _mixture(spec: str | None) -> dict | None:
    if not spec:
        return None
    from pretrain.mixture_presets import find_mixture

    path = find_mixture(spec)
    return {"name": spec, "path": path and os.path.abspath(path), "sha256": path and sha256_file(path)}


def training_lineage(cfg: TrainConfig) -> dict:
    """What this run trains on and with which code: the record every checkpoint carries."""
    settings = cfg.model_dump(mode="json")
    return {
        "kind": KIND,
        "out_dir": os.path.abspath(cfg.out_dir),
        "config_sha256": sha256_json(settings),
        "code": code_version(),
        "time": now(),
        "sources": [source_record(s) for s in cfg.data.sources],
        "mixture": _mixture(cfg.data.mixture),
        "phases": settings.get("phases"),
    }


def _data_key(record: dict) -> list[str]:
    return [s["manifest_sha256"] for s in record.get("sources", [])]


class LineageState:
    """The lineage as a checkpoint component: this run's record, and those of earlier stretches of the
    training (a resumed checkpoint trained on other data) under ``earlier``. Checkpoints from before it
    existed resume without one (``optional``)."""

    optional = True

    def __init__(self, current: dict):
        self.current, self.earlier = current, []

    def state_dict(self) -> dict:
        return {"current": self.current, "earlier": self.earlier}

    def load_state_dict(self, state: dict) -> None:
        earlier = list(state.get("earlier") or [])
        before = state.get("current")
        if before and _data_key(before) != _data_key(self.current):
            earlier.append(before)
        self.earlier = earlier


def write_run_lineage(out_dir: str, state: LineageState) -> str:
    from dataprep.core.storage import atomic_write_text

    path = os.path.join(out_dir, LINEAGE_FILE)
    atomic_write_text(path, json.dumps(state.state_dict(), indent=1) + "\n")
    return path


# --- reading it back ------------------------------------------------------------------------------


def read_lineage(path: str) -> dict:
    """The lineage (``{"current", "earlier"}``) of an exported model folder, a run folder, a ``step-*``
    checkpoint or a ``model.safetensors``, with ``found_in`` saying which file held it."""
    from pretrain.components.checkpoint_folder import STATE_FILE, list_checkpoints

    folder = os.path.dirname(os.path.abspath(path)) if os.path.isfile(path) else os.path.abspath(path)
    if not os.path.isdir(folder):
        raise MissingPath(f"{path} does not exist")
    newest = list_checkpoints(os.path.join(folder, "checkpoints"))[-1:]  # a run folder without lineage.json
    candidates = [
        os.path.join(folder, STATE_FILE),
        os.path.join(folder, LINEAGE_FILE),
        *(os.path.join(c, STATE_FILE) for c in newest),
    ]
    for candidate in candidates:
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as fh:
                data = json.load(fh)
            record = data.get("lineage") if candidate.endswith(STATE_FILE) else data
            if record and record.get("current"):
                return record | {"found_in": candidate}
    raise MissingPath(
        f"{path}: no lineage found (no {LINEAGE_FILE}, and no checkpoint train state with one): "
        "trained before ccpretrain recorded lineage, or not a model, run or checkpoint"
    )


def format_lineage(record: dict) -> str:
    """The chain from the model back to the crawl, every name and digest spelt out."""
    lines = [f"lineage: {record['found_in']}"]
    if record.get("model"):
        lines.append(f"model exported from {record['model']['exported_from']} (step {record['model']['step']})")
    for i, stretch in enumerate([record["current"], *record.get("earlier", [])]):
        lines += _stretch_lines(stretch, "" if i == 0 else "earlier in this model's training (a resumed checkpoint): ")
    return "\n".join(lines)


def _code(code: dict | None) -> str:
    code = code or {}
    commit = f", git commit {code['git_commit']}" if code.get("git_commit") else ""
    if commit and code.get("git_dirty"):
        commit += " with uncommitted changes"
    return f"{code.get('package', '?')} {code.get('version') or '(version unknown)'}{commit}"


def _stretch_lines(r: dict, prefix: str) -> list[str]:
    lines = [
        f"{prefix}training run {r['out_dir']} (config sha256 {r['config_sha256']}; {_code(r.get('code'))}; "
        f"started {r.get('time')})"
    ]
    if r.get("mixture"):
        m = r["mixture"]
        lines.append(f"  mixture {m['name']}: {m['path']} (sha256 {m['sha256']})")
    if r.get("phases"):
        lines.append(f"  phases: {json.dumps(r['phases'])}")
    for s in r["sources"]:
        lines += [
            f"  source {s['name']} (weight {s['weight']:g}): {s['path']}",
            f"    {s['tokens']:,} tokens in {s['documents']:,} documents, {len(s['shards'])} shard(s); "
            f"manifest sha256 {s['manifest_sha256']}; tokenizer sha256 {s['tokenizer_sha256']}",
        ]
        lines += [
            f"      {shard['name']}: bin sha256 {shard['bin_sha256']}, idx sha256 {shard['idx_sha256']}"
            for shard in s["shards"]
        ]
        run = s.get("pipeline_run")
        if not run:
            lines.append("    made outside a ccpretrain pipeline (no pipeline run in its manifest)")
            continue
        listing = run.get("input_listing") or {}
        lines += [
            f"    made by pipeline run {run.get('identity')} into {run.get('output')} at {run.get('time')} with "
            f"{_code(run.get('code'))}",
            f"      config: {run.get('config') or '(given as a dict, not a file)'} (settings sha256 "
            f"{run.get('config_sha256')})",
            f"      stages: {', '.join(run.get('stages') or [])}",
            f"      input: {', '.join(run.get('inputs') or [])}: {listing.get('files', 0):,} file(s), listing "
            f"sha256 {listing.get('sha256')}",
        ]
        names = listing.get("names") or []
        lines += [f"        {name}" for name in names]
        if listing.get("files", 0) > len(names):
            lines.append(f"        ... and {listing['files'] - len(names):,} more")
    return lines


# --- which runs used a corpus ---------------------------------------------------------------------


def corpus_identity(path: str) -> dict:
    """A token-shard folder, or a pipeline output (its ``shards/``, or wherever its tokenize step wrote them):
    the manifest's digest and pipeline run, or the output folder the pipeline run names."""
    for folder in (path, join_path(path, "shards")):
        manifest_path = join_path(folder, MANIFEST_NAME)
        if os.path.isfile(manifest_path):
            text = read_text(manifest_path)
            run = parse_manifest(manifest_path, text).get("pipeline_run") or {}
            return {
                "path": os.path.abspath(folder),
                "manifest_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "pipeline_run": run.get("identity"),
                "pipeline_output": run.get("output"),
            }
    if not os.path.isdir(path):
        raise MissingPath(f"{path}: not a token-shard folder or a pipeline output")
    return {
        "path": os.path.abspath(path),
        "manifest_sha256": None,
        "pipeline_run": None,
        "pipeline_output": os.path.abspath(path),
    }


SKIP_DIRS = {"checkpoints", "data_cache", "profile", "tokenizer", "tb", ".git"}


def runs_using(corpus: dict, roots: list[str]) -> list[dict]:
    """Run folders and exported models under ``roots`` whose lineage holds the corpus: the same manifest,
    shards of the same pipeline run, or of a pipeline run into the same output folder."""
    found = []
    for root in roots:
        if not os.path.isdir(root):
            raise MissingPath(f"{root}: not a folder")
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            if LINEAGE_FILE not in files:
                continue
            record = read_lineage(folder)
            for stretch in [record["current"], *record.get("earlier", [])]:
                matched = [s for s in stretch["sources"] if _same_corpus(s, corpus)]
                if matched:
                    found.append(
                        {
                            "path": os.path.abspath(folder),
                            "run": stretch["out_dir"],
                            "exported": "model" in record,  # export adds what it was exported from
                            "sources": [s["name"] for s in matched],
                        }
                    )
                    break
    return found


def _same_corpus(source: dict, corpus: dict) -> bool:
    run = source.get("pipeline_run") or {}
    return (
        source["manifest_sha256"] == corpus["manifest_sha256"]
        or bool(run.get("identity") and run["identity"] == corpus["pipeline_run"])
        or bool(run.get("output") and run["output"] == corpus["pipeline_output"])
    )


def report_rows(run_dir: str) -> list[list[str]]:
    """A run's data chain in a few rows, for ``dataprep report --train-run`` (none when not recorded)."""
    try:
        current = read_lineage(run_dir)["current"]
    except FileNotFoundError:
        return []
    rows = []
    for s in current["sources"]:
        run = s.get("pipeline_run") or {}
        listing = run.get("input_listing") or {}
        made = (
            f" ← pipeline run {run.get('identity')}: config {run.get('config')}, {listing.get('files', 0):,} input "
            f"file(s) ({', '.join(listing.get('names', [])[:3])}{', ...' if listing.get('files', 0) > 3 else ''}), "
            f"{_code(run.get('code'))}"
            if run
            else " (shards made outside a ccpretrain pipeline)"
        )
        rows.append(
            [
                f"trained on {s['name']}",
                f"{s['tokens']:,} tokens in {len(s['shards'])} shard(s), manifest "
                f"sha256 {s['manifest_sha256'][:16]}…{made}",
            ]
        )
    return rows
