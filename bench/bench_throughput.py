"""Issue 11's scoreboard: the three ratios against datatrove / Trafilatura and the projected cost of a
3-billion-page Common Crawl snapshot, from the three benchmarks run one after the other:

    python bench/bench_throughput.py [--quick] [--cores 2] [--json PATH]

  1. extraction  (bench_extract.py):  our default extractor's quality on trafilatura-eval and its
                                      pages/s against Trafilatura's, same process, same pages.
  2. pipeline    (bench_pipeline.py): WARC -> extract -> langid -> Gopher/C4/FineWeb -> Parquet on Spark
                                      local[N] against datatrove's FineWeb-like pipeline with N workers.
  3. MinHash     (bench_dedup.py):    documents/s per core against datatrove's MinhashDedup, same
                                      settings (5-grams, 14 x 8), plus recall and false removals.

Each benchmark installs nothing itself except datatrove's separate venv (bench/datatrove_env.sh) and
prints its own detailed table; this script collects their ``--json`` outputs. ``--quick`` runs one
round of each on smaller inputs (about 10 minutes on 2 cores); the default takes about 40 minutes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SNAPSHOT_PAGES = 3e9
ISSUE_DATATROVE_RATE = 30.0  # docs/s/core of datatrove's FineWeb-like pipeline as issue 11 measured it


def run_bench(script: str, args: list[str], out: Path) -> dict | None:
    """Run one benchmark (its own output streams through) and return its --json figures."""
    cmd = [sys.executable, str(BENCH / script), *args, "--json", str(out)]
    print(f"\n$ {' '.join(cmd[1:])}", flush=True)
    if subprocess.run(cmd).returncode != 0 or not out.exists():
        print(f"{script} failed; its figures are missing below", file=sys.stderr)
        return None
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description="issue 11 scoreboard: extraction, pipeline and MinHash vs datatrove")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one round each, smaller inputs")
    parser.add_argument("--json", help="write all figures here")
    args = parser.parse_args()
    rounds = "1" if args.quick else "3"
    work = Path(tempfile.mkdtemp(prefix="ccpretrain-scoreboard-"))
    extraction = run_bench("bench_extract.py", ["--rounds", rounds], work / "extract.json")
    pipeline = run_bench("bench_pipeline.py", ["--rounds", rounds, "--cores", str(args.cores)], work / "pipeline.json")
    sizes = ["20000"] if args.quick else ["50000"]
    minhash = run_bench("bench_dedup.py", ["--sizes", *sizes, "--cores", str(args.cores)], work / "dedup.json")

    print("\n" + "=" * 78 + "\nissue 11 scoreboard (ratios measured side by side inside each benchmark)\n" + "=" * 78)
    if extraction:
        q, t = extraction["quality"], extraction["trafilatura_quality"]
        print(
            f"1. extraction  {extraction['default']}: {extraction['speed_ratio_vs_trafilatura']:.1f}x Trafilatura's pages/s;"
            f" main text found {q['with_found']:.3f} (Trafilatura {t['with_found']:.3f}),"
            f" boilerplate kept out {q['without_absent']:.3f} (Trafilatura {t['without_absent']:.3f})"
        )
    if pipeline and "ratio ours warm" in pipeline:
        warm, cold = pipeline["ratio ours warm"], pipeline["ratio ours cold"]
        print(
            f"2. pipeline    {warm['wall']:.1f}x datatrove's docs/s/core on Spark local[{args.cores}] (steady state;"
            f" CPU time {warm['cpu']:.1f}x); first job of a fresh session {cold['wall']:.1f}x"
        )
    if minhash:
        print(
            f"3. MinHash     {minhash['ratio_docs_per_s_per_core']:.1f}x datatrove's docs/s/core;"
            f" recall {minhash['recall']:.3f} of pairs with Jaccard >= 0.8,"
            f" {minhash['removed_below_0_5']} removals of pairs below 0.5"
        )
    if pipeline and "core_hours_per_snapshot" in pipeline:
        hours = pipeline["core_hours_per_snapshot"]
        print(
            f"\nextraction + filtering of a 3-billion-page snapshot: ours {hours['ours warm']:,.0f} core-hours"
            f" (first-job rate: {hours['ours cold']:,.0f}); datatrove {hours['datatrove']:,.0f} core-hours"
        )
        issue_hours = SNAPSHOT_PAGES / ISSUE_DATATROVE_RATE / 3600
        print(
            f"  (these pages are heavier than the issue's: at its datatrove rate of {ISSUE_DATATROVE_RATE:.0f} docs/s/core,"
            f" {issue_hours:,.0f} core-hours, our ratio gives {issue_hours / pipeline['ratio ours warm']['wall']:,.0f})"
        )
    if minhash and minhash.get("sizes"):
        largest = minhash["sizes"][max(minhash["sizes"], key=int)]["ours"]
        print(f"MinHash over the same 3 billion documents: {SNAPSHOT_PAGES / largest['docs_per_s_per_core'] / 3600:,.0f} core-hours")
    if args.json:
        Path(args.json).write_text(json.dumps({"extraction": extraction, "pipeline": pipeline, "minhash": minhash}, indent=1))


if __name__ == "__main__":
    main()
