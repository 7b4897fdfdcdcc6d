"""The scale curve: the whole chain (extract -> langid -> FineWeb quality -> safety -> exact + MinHash
dedup -> tokenize, configs/pipeline/fineweb.yaml) at growing document counts, each in a fresh process.

    python -m bench.pipeline.bench_scale_curve [--docs 10000 100000] [--cores 2] [--json PATH]

Input: WARC files of generated pages (``--per-file`` pages each) whose text is real: each page is a
page shell (title, navigation, footer) around paragraphs of sentences drawn from the real documents and
English sentences in ../shared/data. ``--near-dup`` of the pages repeat an earlier page with edits
(words replaced, a sentence dropped), ``--exact-dup`` repeat an earlier page's article word for word
under another URL and shell, so both dedups have work. Page i is the same at every size, so a smaller
input is a prefix of a larger one.

Per size: process-tree CPU seconds per Spark step (driver Python, JVM and Python workers), the stages'
own task and CPU seconds per document from stats.json, peak RSS of the driver, the JVM and the largest Python worker,
and the bytes each step shuffled (Spark's status API). Then ``dataprep estimate`` from each size's
stats.json (and from it with the size half as large, fitting fixed costs) against the run ten times
larger, where there is one. Run it with ``nice``: it is long.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench.common.paths import ROOT, SHARED

SEED = 38


def sentence_pool() -> list[str]:
    from tests.support.near_duplicates import real_documents

    sentences = []
    for text in real_documents(SHARED):
        sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 40 <= len(s.strip()) <= 400]
    with open(SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        sentences += [row["text"] for row in map(json.loads, fh) if row["lang"] in ("en", "eng", "english")]
    return sentences


def _article(rng: random.Random, pool: list[str]) -> list[list[str]]:
    return [rng.sample(pool, rng.randint(3, 6)) for _ in range(rng.randint(4, 9))]


def _edit(rng: random.Random, article: list[list[str]], pool: list[str]) -> list[list[str]]:
    """A near-duplicate: about one word in a hundred replaced, one sentence dropped."""
    words = [w for s in pool[:200] for w in s.split()]
    edited = [
        [" ".join(rng.choice(words) if rng.random() < 0.01 else w for w in s.split()) for s in p] for p in article
    ]
    paragraph = rng.randrange(len(edited))
    if len(edited[paragraph]) > 1:
        edited[paragraph].pop(rng.randrange(len(edited[paragraph])))
    return edited


def _kind(i: int, near_dup: float, exact_dup: float) -> tuple[str, int]:
    """Whether page ``i`` is an original, a near or an exact copy, and of which original page."""
    rng = random.Random(f"page {i}")
    roll = rng.random()
    if i < 100 or roll >= near_dup + exact_dup:
        return "original", i
    source = rng.randrange(i)
    while _kind(source, near_dup, exact_dup)[0] != "original":  # copies copy an original's text
        source = rng.randrange(i)
    return ("near" if roll < near_dup else "exact"), source


def page(i: int, pool: list[str], near_dup: float, exact_dup: float) -> tuple[str, bytes]:
    """Page ``i``'s URL and HTML; the same for every size of the input."""
    kind, source = _kind(i, near_dup, exact_dup)
    article = _article(random.Random(f"article {source}"), pool)
    if kind == "near":
        article = _edit(random.Random(f"edit {i}"), article, pool)
    origin = source if kind == "exact" else i  # an exact copy: the same page under a second URL
    site = random.Random(f"site {origin}").randrange(5000)
    title = " ".join(article[0][0].split()[:8])
    body = "".join(f"<p>{' '.join(p)}</p>\n" for p in article).replace("&", "&amp;")
    html = (
        f"<html><head><title>{title}</title></head><body><nav><a href='/'>Home</a> <a href='/about'>About us</a> "
        f"<a href='/contact'>Contact</a></nav><article><h1>{title}</h1>\n{body}</article>"
        f"<footer>Copyright site {site}. All rights reserved. <a href='/privacy'>Privacy</a></footer></body></html>"
    )
    return f"http://site{site}.example/{i}", html.encode()


def write_input(work: Path, docs: int, per_file: int, near_dup: float, exact_dup: float) -> list[str]:
    from bench.common.make_bench_warc import warc_response

    folder = work / f"warc-v2-{per_file}-{near_dup}-{exact_dup}"
    folder.mkdir(parents=True, exist_ok=True)
    pool = sentence_pool()
    paths = []
    for f in range((docs + per_file - 1) // per_file):
        path = folder / f"scale-{f:05d}.warc.gz"
        paths.append(str(path))
        if path.exists():
            continue
        with open(f"{path}.tmp", "wb") as fh:
            for i in range(f * per_file, (f + 1) * per_file):
                fh.write(warc_response(*page(i, pool, near_dup, exact_dup)))
        os.replace(f"{path}.tmp", path)
    return paths


class PeakSampler:
    """Peak RSS of the driver (this process), the JVM and the largest Python worker, polled."""

    def __init__(self, interval: float = 0.5):
        self.peaks = {"driver": 0, "jvm": 0, "worker": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.interval = interval

    def _loop(self) -> None:
        from bench.common.proctree import _sample, _tree

        me = os.getpid()
        while not self._stop.wait(self.interval):
            for pid in _tree(me):
                s = _sample(pid)
                if s is None:
                    continue
                kind, _, rss, _ = s
                key = "driver" if pid == me else ("jvm" if kind == "jvm" else "worker")
                self.peaks[key] = max(self.peaks[key], rss)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def shuffle_bytes(spark) -> int | None:
    """Bytes written to shuffles by every stage of this session so far (Spark's status API); None when
    the API does not answer (a very busy machine)."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
    for _ in range(3):
        try:
            with urllib.request.urlopen(url, timeout=120) as fh:
                return sum(stage.get("shuffleWriteBytes", 0) for stage in json.load(fh))
        except OSError:
            time.sleep(5)
    return None


def child(files: list[str], out: str, cores: int, tokenizer: str) -> dict:
    from bench.common.proctree import TreeMonitor
    from dataprep.core.config import load_config
    from pipelines.pipeline_run import PipelineRun
    from pipelines.spark import get_spark

    monitor = TreeMonitor().start()
    spark = get_spark(f"local[{cores}]", "bench-scale-curve", {"spark.ui.enabled": "true", "spark.ui.port": "0"})
    steps: dict = {}

    class MeasuredRun(PipelineRun):
        def _lap(self, name, fn, *args):
            cpu0, t0, shuffled0 = monitor.cpu_by_kind(), time.perf_counter(), shuffle_bytes(spark)
            result = fn(*args)
            cpu1, shuffled1 = monitor.cpu_by_kind(), shuffle_bytes(spark)
            steps[name] = {
                "seconds": round(time.perf_counter() - t0, 1),
                **{f"cpu_{k}": round(cpu1[k] - cpu0[k], 1) for k in cpu1},
                "shuffle_bytes": None if shuffled0 is None or shuffled1 is None else shuffled1 - shuffled0,
            }
            return result

        def _run_step(self, step, *args):
            return self._lap(step.name, super()._run_step, step, *args)

        def _write_corpus(self, *args):
            return self._lap("corpus", super()._write_corpus, *args)

    preset, overrides = (
        str(ROOT / "configs" / "pipeline" / "fineweb.yaml"),
        {"input": {"paths": files}, "output": {"dir": out}},
    )
    last = len(load_config(preset, overrides).stages) - 1  # tokenize
    config = load_config(preset, overrides, sets=[f"stages.{last}.tokenizer={tokenizer}"])
    t0 = time.perf_counter()
    with PeakSampler() as peaks:
        result = MeasuredRun(config, spark=spark, force=True).run()
    seconds = time.perf_counter() - t0
    usage = monitor.stop()
    spark.stop()
    return {
        "seconds": round(seconds, 1),
        **usage,
        "steps": steps,
        "peak_rss_mb": {k: round(v / 1024) for k, v in peaks.peaks.items()},
        "stages": [s.to_dict() for s in result.stats],
        "stats": str(Path(out) / "stats.json"),
    }


def compare_estimate(work: Path, samples: list[int], large: int) -> dict:
    """``dataprep estimate`` from the sample runs' stats.json (one, or several sizes fitting fixed costs)
    against the larger run's measured stats: the error of the projected core-seconds per stage."""
    from dataprep.core.estimate import Sample, estimate, global_stage_names
    from dataprep.core.stats import StageStats

    docs = {n: json.loads((work / f"out-{n}" / "stats.json").read_text()) for n in (*samples, large)}
    stats = {n: [StageStats.from_dict(d) for d in doc["stages"]] for n, doc in docs.items()}
    measured = Sample(stats[large], docs[large]["cores"])
    whole = global_stage_names(stats[large])
    est = estimate(
        [Sample(stats[n], docs[n]["cores"], docs[n]["steps"][0]["tasks"]) for n in samples], measured.pages, 2, whole
    )
    real = measured.core_seconds(whole, est.basis == "cpu")
    rows = {}
    print(
        f"\n  estimate from {' + '.join(map(str, samples))} documents against the run on {large} "
        f"({est.basis} seconds per stage; * a whole-corpus step: its Spark tasks' CPU seconds)"
    )
    for row in est.stages:
        projected, got = row.core_hours * 3600, real[row.stage]
        rows[row.stage] = {
            "projected_s": round(projected, 1),
            "measured_s": round(got, 1),
            "error": round(projected / got - 1, 3) if got else None,
        }
        print(
            f"    {row.stage + (' *' if row.whole_corpus else ''):<22}{projected:>10.1f}s projected "
            f"{got:>10.1f}s measured {projected / got - 1:>+8.1%}"
        )
    total = sum(real.values())
    rows["total"] = {
        "projected_s": round(est.core_hours * 3600, 1),
        "measured_s": round(total, 1),
        "error": round(est.core_hours * 3600 / total - 1, 3),
    }
    print(
        f"    {'total':<22}{rows['total']['projected_s']:>10.1f}s projected {total:>10.1f}s measured "
        f"{rows['total']['error']:>+8.1%}"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument(
        "--per-file",
        type=int,
        default=1000,
        help="pages per WARC file (small local files share first-step tasks: pipelines.steps.file_tasks)",
    )
    parser.add_argument(
        "--near-dup", type=float, default=0.2, help="share of pages that are edited copies of an earlier one"
    )
    parser.add_argument(
        "--exact-dup", type=float, default=0.05, help="share of pages whose article repeats an earlier one's"
    )
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ccpretrain-bench", "scale-curve"))
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--compare",
        type=int,
        nargs="+",
        metavar="DOCS",
        help="only compare: the estimate from the finished runs of these sizes but the last, against the last",
    )
    parser.add_argument("--child", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.out, args.cores, args.tokenizer)))
        return
    if args.compare:
        compare_estimate(Path(args.work), args.compare[:-1], args.compare[-1])
        return
    from bench.pipeline.bench_throughput import make_tokenizer

    work = Path(args.work)
    tokenizer = make_tokenizer(work)
    results = {}
    for docs in args.docs:
        t0 = time.perf_counter()
        files = write_input(work, docs, args.per_file, args.near_dup, args.exact_dup)
        print(f"\n[{docs} docs] {len(files)} WARC files ({time.perf_counter() - t0:.0f}s to write)", flush=True)
        cmd = [
            sys.executable,
            "-m",
            "bench.pipeline.bench_scale_curve",
            "--cores",
            str(args.cores),
            "--out",
            str(work / f"out-{docs}"),
            "--tokenizer",
            str(tokenizer),
            "--child",
            *files,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            continue
        results[docs] = r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"  {r['seconds']}s wall, {r['cpu_seconds']}s CPU ({1000 * r['cpu_seconds'] / docs:.2f} ms/doc); "
            f"peak RSS MB {r['peak_rss_mb']}",
            flush=True,
        )
        for name, s in r["steps"].items():
            cpu = s["cpu_jvm"] + s["cpu_python"]
            print(
                f"    {name:<34}{s['seconds']:>8.1f}s wall {cpu:>8.1f}s CPU {1000 * cpu / docs:>7.3f} "
                f"ms/doc  shuffle {(s['shuffle_bytes'] or 0) / 2**20:>8.1f} MB",
                flush=True,
            )
        for s in r["stages"]:
            print(
                f"    stage {s['stage']:<24}{s['docs_in']:>8} in {s['docs_kept']:>8} kept "
                f"{1000 * s['seconds'] / max(s['docs_in'], 1):>7.3f} ms/doc in"
                f" {1000 * s.get('cpu_seconds', 0) / docs:>7.3f} CPU ms per page",
                flush=True,
            )
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
    done = [n for n in args.docs if (work / f"out-{n}" / "stats.json").exists()]
    for small in done:
        if 10 * small in done:
            results[f"estimate {small} -> {10 * small}"] = compare_estimate(work, [small], 10 * small)
            if small // 2 in done:  # two sample sizes: fixed costs apart from costs per page
                results[f"estimate {small // 2} + {small} -> {10 * small}"] = compare_estimate(
                    work, [small // 2, small], 10 * small
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
