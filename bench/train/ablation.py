"""Data-value ablation: does cleaning pay? The same tiny model, trained on an equal number of tokens of
(a) raw extracted text and (b) the cleaned corpus, evaluated on held-out clean text neither saw.

    nice -n 19 python -m bench.train.ablation [--seeds 3] [--steps 300] [--out out/ablation]

Input (one crawl for both arms): the demo crawl (``dataprep demo-data``), the 200 real pages of
``shared/data/html/trafilatura-eval`` wrapped as WARC response records (bench/common/make_bench_warc.py), and
every WARC file under ``shared/data/warc`` (WET/WAT left out: they repeat the WARC's text).

* raw: ``configs/pipeline/ingest.yaml`` (extract + langid labelling every language, dropping nothing
  but records with no text);
* cleaned: ``configs/pipeline/demo.yaml`` (every stage) without its tokenize step;
* one SentencePiece tokenizer trained on the union of both corpora (the raw text plus the cleaned
  text, which differs only by PII placeholders), so neither arm gets a vocabulary fitted to it alone
  and the losses are in the same units;
* held-out evaluation, seen by neither arm nor the tokenizer: ``web``, the 50 documents of
  ``shared/data/documents`` (CCNet/Dolma/RedPajama/C4 text), and ``lingua``, the Leipzig sentences of
  the six languages the cleaned corpus keeps (en de fr es zh ru), grouped by language into documents of
  ``--sentences-per-doc`` sentences;
* per seed, both arms share the seed (init and sample order); steps, batch and sequence length are the
  same, so both see ``steps * batch * seq_len`` tokens, repeating epochs of the smaller corpus.

Prints each arm's validation loss per eval set, and (raw - cleaned) per seed with mean and std over the
seeds; writes ``OUT/results.json``. Positive difference = the cleaned arm has the lower loss.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

from bench.common.make_bench_warc import load_pages, warc_response
from bench.common.paths import ROOT, SHARED
from dataprep.core.stage import DOC_SCHEMA

PIPELINES = ROOT / "configs" / "pipeline"
EVAL_LANGS = ("en", "de", "fr", "es", "zh", "ru")  # the cleaned arm's languages (demo.yaml langid)
ARMS = ("raw", "cleaned")


def log(msg: str) -> None:
    print(f"[ablation {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- input ----------------------------------------------------------------------------------------


def build_inputs(out: Path) -> list[str]:
    """The crawl both arms read: demo WARC, the trafilatura-eval pages as a WARC, the shared WARCs."""
    from dataprep.commands.demo import main as demo_main
    from dataprep.core.storage import atomic_write_bytes

    inp = out / "input"
    demo_main(argparse.Namespace(output=str(inp)))
    pages = inp / "trafilatura-eval.warc.gz"
    atomic_write_bytes(str(pages), b"".join(warc_response(url, html) for url, html in load_pages()))
    shared = sorted(
        p
        for p in glob.glob(str(SHARED / "warc" / "**" / "*"), recursive=True)
        if os.path.isfile(p) and ".warc" in p and not p.endswith((".wet", ".wat", ".wet.gz", ".wat.gz"))
    )
    return [str(inp / "demo.warc.gz"), str(pages), *shared]


def write_configs(out: Path, inputs: list[str]) -> dict[str, Path]:
    """The two pipeline configs, written next to the outputs so each arm can be rerun by hand."""
    import yaml

    from dataprep.core.storage import atomic_write_text

    raw = yaml.safe_load((PIPELINES / "ingest.yaml").read_text())
    clean = yaml.safe_load((PIPELINES / "demo.yaml").read_text())
    stages = []
    for stage in clean["stages"]:
        if stage.get("stage") == "tokenize":
            continue  # both arms are tokenized below with the one shared tokenizer
        if stage.get("stage") == "perplexity":
            stage = {**stage, "models": {"en": str(out / "ppl-en")}}
        if "include" in stage:
            stage = {"include": str(PIPELINES / stage["include"])}
        stages.append(stage)
    clean["stages"] = stages
    paths = {}
    for arm, cfg in (("raw", raw), ("cleaned", clean)):
        cfg["input"] = {**cfg.get("input", {}), "paths": inputs}
        cfg["output"] = {**cfg.get("output", {}), "dir": str(out / arm / "pipeline")}
        cfg["spark"] = {"master": "local[2]"}
        paths[arm] = out / arm / "pipeline.yaml"
        atomic_write_text(str(paths[arm]), yaml.safe_dump(cfg, sort_keys=False))
    return paths


def run_pipelines(out: Path, configs: dict[str, Path]) -> dict[str, dict]:
    """Run both pipelines on Spark; returns each corpus's documents and characters."""
    import pyarrow.parquet as pq

    from dataprep.core.config import load_config
    from pipelines.cli import main as dataprep_main
    from pipelines.pipeline_run import run_pipeline

    dataprep_main(
        [
            "train-ppl-model",
            "--input",
            str(out / "input" / "reference_en.jsonl"),
            "--lang",
            "en",
            "--output",
            str(out / "ppl-en"),
            "--vocab-size",
            "500",
        ]
    )
    sizes = {}
    for arm in ARMS:
        log(f"{arm}: dataprep run {configs[arm]}")
        result = run_pipeline(load_config(str(configs[arm])))
        texts = pq.read_table(result.corpus_dir, columns=["text"]).column("text").to_pylist()
        sizes[arm] = {"corpus": result.corpus_dir, "documents": len(texts), "chars": sum(len(t or "") for t in texts)}
        log(f"{arm}: {sizes[arm]['documents']} documents, {sizes[arm]['chars']:,} characters")
    return sizes


# --- tokens ---------------------------------------------------------------------------------------


def read_corpus(corpus_dir: str):
    import pyarrow.parquet as pq

    return pq.read_table(corpus_dir, columns=["id", "url", "date", "source", "text"])


def eval_documents() -> dict[str, list[str]]:
    """Held-out clean text: shared web documents, and lingua sentences grouped into documents."""
    web = []
    for path in sorted(glob.glob(str(SHARED / "documents" / "*"))):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            web += [json.loads(line)["text"] for line in fh if line.strip()]
    by_lang: dict[str, list[str]] = {}
    with open(SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["lang"] in EVAL_LANGS:
                by_lang.setdefault(row["lang"], []).append(row["text"])
    return {"web": web, "lingua": by_lang}


def seen_in(texts: list[str], corpus: str, probe: int = 50) -> int:
    """How many of ``texts`` share a ``probe``-character string (taken every 500 characters) with
    ``corpus``: a contamination check of the held-out sets against the training text."""
    return sum(any(t[i : i + probe] in corpus for i in range(0, max(1, len(t) - probe), 500)) for t in texts)


def write_eval_sets(out: Path, sentences_per_doc: int, tokenizer_dir: Path, train_text: str) -> dict[str, Path]:
    """Eval sets as JSONL documents (what ``pretrain eval --data FILE.jsonl`` reads) and as token shards
    made with the shared tokenizer (the same tokens that command would make, encoded once for all runs)."""
    from dataprep.core.storage import atomic_write_text
    from dataprep.tokenize.stage import Tokenize

    docs = eval_documents()
    lingua = []
    for lang, sents in sorted(docs["lingua"].items()):
        sep = "" if lang == "zh" else " "
        for i in range(0, len(sents), sentences_per_doc):
            lingua.append(
                {"id": f"lingua-{lang}-{i // sentences_per_doc}", "text": sep.join(sents[i : i + sentences_per_doc])}
            )
    sets = {"web": [{"id": f"web-{i}", "text": t} for i, t in enumerate(docs["web"])], "lingua": lingua}
    shards = {}
    for name, rows in sets.items():
        path = out / "eval" / f"{name}.jsonl"
        atomic_write_text(str(path), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        shards[name] = out / "eval" / name
        table = pa.Table.from_pylist(
            [{"id": r["id"], "url": None, "date": None, "source": "eval", "text": r["text"]} for r in rows],
            schema=DOC_SCHEMA,
        )
        Tokenize(tokenizer=str(tokenizer_dir), output_dir=str(shards[name])).run_local(table)
        tokens = json.loads((shards[name] / "manifest.json").read_text())["tokens"]
        seen = seen_in([r["text"] for r in rows], train_text)
        log(
            f"eval set {name}: {len(rows)} documents, {sum(len(r['text']) for r in rows):,} characters, "
            f"{tokens:,} tokens, {seen} sharing a 50-character string with the raw corpus -> {path}"
        )
    return shards


def tokenize_arms(out: Path, sizes: dict[str, dict], vocab_size: int) -> tuple[dict[str, Path], int]:
    """One tokenizer on the union of both corpora; each corpus -> token shards with it."""
    from dataprep.tokenize.stage import Tokenize
    from dataprep.tokenize.tokenizer import train_tokenizer

    tables = {arm: read_corpus(sizes[arm]["corpus"]) for arm in ARMS}
    union = list(dict.fromkeys(t for arm in ARMS for t in tables[arm].column("text").to_pylist() if t))
    tok_dir = out / "tokenizer"
    tokenizer = train_tokenizer(union, str(tok_dir), vocab_size=vocab_size, seed=0)
    log(f"tokenizer: vocab {tokenizer.vocab_size} trained on {len(union)} distinct documents (raw + cleaned)")
    shards = {}
    for arm in ARMS:
        shards[arm] = out / arm / "shards"
        Tokenize(tokenizer=str(tok_dir), output_dir=str(shards[arm]), tokens_per_shard=10_000_000).run_local(
            tables[arm]
        )
        manifest = json.loads((shards[arm] / "manifest.json").read_text())
        sizes[arm]["tokens"] = manifest["tokens"]
        log(f"{arm}: {sizes[arm]['tokens']:,} tokens -> {shards[arm]}")
    return shards, tokenizer.vocab_size


# --- train and evaluate ---------------------------------------------------------------------------


def train_config(shards: Path, run_dir: Path, vocab: int, seed: int, args) -> dict:
    """configs/train/tiny_cpu.yaml's model and optimizer, sized to the shared tokenizer; no internal
    validation split (evaluation is on the external held-out sets)."""
    import yaml

    model = yaml.safe_load((ROOT / "configs" / "model" / "tiny.yaml").read_text())
    model.update(
        vocab_size=vocab, d_model=args.d_model, n_layers=args.layers, ffn_dim=3 * args.d_model, max_seq_len=args.seq_len
    )
    return {
        "model": model,
        "data": {"sources": [{"path": str(shards)}], "val_fraction": 0.0, "seed": seed},
        "seq_len": args.seq_len,
        "micro_batch_size": args.batch,
        "global_batch_size": args.batch,
        "max_steps": args.steps,
        "precision": "fp32",
        "device": "cpu",
        "seed": seed,
        "optim": {
            "lr": args.lr,
            "schedule": "cosine",
            "warmup_steps": max(1, args.steps // 10),
            "min_lr_ratio": 0.1,
            "weight_decay": 0.1,
            "grad_clip": 1.0,
        },
        "checkpoint": {"every_steps": args.steps, "keep_last": 1},
        "log": {"every_steps": max(1, args.steps // 5), "val_every_steps": args.steps, "val_batches": 1},
        "out_dir": str(run_dir),
    }


def eval_batches(args) -> int | None:
    """Batches per eval set: the same seeded windows for every run (a paired comparison); None = all."""
    return max(1, args.eval_tokens // (args.eval_batch * args.seq_len)) if args.eval_tokens else None


def train_and_eval(out: Path, shards: dict[str, Path], vocab: int, eval_sets: dict[str, Path], args) -> list[dict]:
    import shutil

    import torch
    import yaml

    from dataprep.core.storage import atomic_write_text
    from pretrain.config.loading import load_train_config
    from pretrain.inference.evaluate import evaluate_shards
    from pretrain.inference.loading import load_trained
    from pretrain.train import run

    device = torch.device("cpu")
    results = []
    for seed in range(args.seeds):
        row = {"seed": seed}
        for arm in ARMS:
            run_dir = out / arm / f"train-seed{seed}"
            shutil.rmtree(run_dir, ignore_errors=True)
            cfg_path = out / arm / f"train-seed{seed}.yaml"
            atomic_write_text(
                str(cfg_path), yaml.safe_dump(train_config(shards[arm], run_dir, vocab, seed, args), sort_keys=False)
            )
            t0 = time.perf_counter()
            records = run(load_train_config(str(cfg_path)))
            trained = load_trained(str(run_dir))
            row[arm] = {"train_loss": records[-1]["loss"], "train_seconds": round(time.perf_counter() - t0, 1)}
            for name, path in eval_sets.items():
                res = evaluate_shards(trained, str(path), device, args.seq_len, args.eval_batch, eval_batches(args))
                row[arm][name] = res["loss"]
                row[arm][f"{name}_tokens"] = res["tokens"]
            log(
                f"seed {seed} {arm}: train loss {row[arm]['train_loss']:.3f}, "
                + ", ".join(f"{n} {row[arm][n]:.4f}" for n in eval_sets)
                + f" ({row[arm]['train_seconds']}s)"
            )
        results.append(row)
    return results


# --- report ---------------------------------------------------------------------------------------


def summarize(results: list[dict], names: list[str]) -> dict:
    summary = {}
    for name in names:
        col = {arm: [r[arm][name] for r in results] for arm in ARMS}
        diff = [r["raw"][name] - r["cleaned"][name] for r in results]
        summary[name] = {
            **{
                arm: {"mean": statistics.mean(v), "std": statistics.stdev(v) if len(v) > 1 else 0.0}
                for arm, v in col.items()
            },
            "raw_minus_cleaned": {
                "mean": statistics.mean(diff),
                "std": statistics.stdev(diff) if len(diff) > 1 else 0.0,
                "per_seed": diff,
                "cleaned_better_seeds": sum(d > 0 for d in diff),
            },
        }
    return summary


def print_table(results: list[dict], summary: dict, names: list[str]) -> None:
    print("\nvalidation loss (nats/token) on held-out clean text; diff = raw - cleaned (> 0: cleaning helps)")
    print(f"{'eval set':<8} {'seed':>4} {'raw':>8} {'cleaned':>8} {'diff':>8}")
    for name in names:
        for r in results:
            print(
                f"{name:<8} {r['seed']:>4} {r['raw'][name]:>8.4f} {r['cleaned'][name]:>8.4f} "
                f"{r['raw'][name] - r['cleaned'][name]:>+8.4f}"
            )
        s = summary[name]
        d = s["raw_minus_cleaned"]
        print(
            f"{name:<8} {'mean':>4} {s['raw']['mean']:>8.4f} {s['cleaned']['mean']:>8.4f} {d['mean']:>+8.4f}"
            f"   (std over seeds: raw {s['raw']['std']:.4f}, cleaned {s['cleaned']['std']:.4f}, diff {d['std']:.4f}; "
            f"cleaned better in {d['cleaned_better_seeds']}/{len(results)} seeds)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run (both arms)")
    parser.add_argument("--batch", type=int, default=16, help="sequences per step")
    parser.add_argument("--eval-batch", type=int, default=64, help="sequences per evaluation forward")
    parser.add_argument("--eval-tokens", type=int, default=65_536, help="tokens evaluated per eval set (0 = all)")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--vocab-size", type=int, default=4096, help="shared tokenizer vocabulary")
    parser.add_argument("--sentences-per-doc", type=int, default=10, help="lingua sentences per eval document")
    parser.add_argument("--out", default=str(ROOT / "out" / "ablation"))
    args = parser.parse_args()
    if args.seeds < 1 or args.steps < 1:
        parser.error("--seeds and --steps must be positive")
    os.nice(max(0, 19 - os.nice(0)))  # share the machine: lowest priority, for Spark workers and torch too
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    out = Path(args.out).resolve()
    t0 = time.perf_counter()

    inputs = build_inputs(out)
    log(f"input: {len(inputs)} WARC files: " + ", ".join(os.path.basename(p) for p in inputs))
    sizes = run_pipelines(out, write_configs(out, inputs))
    shards, vocab = tokenize_arms(out, sizes, args.vocab_size)
    raw_text = "\n".join(t for t in read_corpus(sizes["raw"]["corpus"]).column("text").to_pylist() if t)
    eval_sets = write_eval_sets(out, args.sentences_per_doc, out / "tokenizer", raw_text)
    tokens_seen = args.steps * args.batch * args.seq_len
    log(
        f"each run: {args.steps} steps x {args.batch} x {args.seq_len} = {tokens_seen:,} tokens "
        f"(raw {tokens_seen / sizes['raw']['tokens']:.1f} epochs, cleaned "
        f"{tokens_seen / sizes['cleaned']['tokens']:.1f} epochs)"
    )
    results = train_and_eval(out, shards, vocab, eval_sets, args)

    names = list(eval_sets)
    summary = summarize(results, names)
    print_table(results, summary, names)
    report = {
        "args": vars(args),
        "inputs": inputs,
        "corpora": sizes,
        "tokens_per_run": tokens_seen,
        "results": results,
        "summary": summary,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    (out / "results.json").write_text(json.dumps(report, indent=1))
    print(
        f"\nwall time {report['wall_seconds']:.0f}s; results: {out / 'results.json'}; "
        f"one eval by hand: pretrain eval {out}/cleaned/train-seed0 --data {out}/eval/web "
        f"--batch-size {args.eval_batch}" + (f" --max-batches {eval_batches(args)}" if args.eval_tokens else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
