"""Issue 27's scoreboard: our pipeline against datatrove 0.10.1, by CPU time (and wall), same input,
one run. Four ratios:

  1. steady state, CC-shaped input   few large WARC files, thousands of pages each: the second job in a
                                     Spark session (workers up, models loaded) against datatrove's run
  2. steady state, many small files  the same pages split over many small files (one task each)
  3. cold                            a job's first run: our session's start (JVM, Python workers,
                                     imports, models) included, as datatrove's interpreter start is
  4. the whole chain                 WARC -> extraction -> langid -> Gopher/C4/FineWeb -> exact + MinHash
                                     dedup -> token shards, against datatrove's FineWeb chain (cleaning,
                                     its four MinHash steps, its tokenizer step), with where each spends it

plus MinHash agreement (bench_dedup.py: removed-id Jaccard of our `verify: exact` default and of the
FineWeb-equivalent `verify: none` with datatrove's removals, same corpus) and extraction quality
(bench_extract.py: trafilatura-eval snippet scores, the multilingual article pages).

    python -m bench.pipeline.bench_throughput [--quick] [--cores 2] [--allow-busy] [--json PATH]

CPU time is the whole process tree's (bench/common/proctree.py): for us the driver, the Spark JVM and its
Python workers; for datatrove its process and its forked workers. The machine's load average is
printed at the start and the end; a run whose 1-minute load is above the core count at the start (or
above it plus the bench's own ``--cores`` at the end) refuses to report (exit 3) unless ``--allow-busy``,
and then its figures are marked as measured under load.
Input: copies of the 200 trafilatura-eval pages (make_bench_warc.py); the tokenizer both engines use
is a SentencePiece BPE trained here once (outside any timing) and its tokenizer.json for datatrove.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common.make_bench_warc import write_bench_warcs
from bench.common.paths import ROOT, SHARED
from bench.datatrove.environment import datatrove_python
from bench.pipeline.bench_pipeline import run_datatrove, run_ours

BUSY_EXIT = 3


def load() -> tuple[float, float, float]:
    return os.getloadavg()


def busy(cores: int) -> bool:
    return load()[0] > cores


def per_doc(run: dict, docs: int) -> dict:
    return {"cpu_ms_per_doc": 1000 * run["cpu_seconds"] / docs, "wall_ms_per_doc": 1000 * run["seconds"] / docs}


def ratio(ours: dict, theirs: dict) -> dict:
    """How many times cheaper ours is per document: by CPU time and by wall time (same cores)."""
    return {key: theirs[f"{key}_ms_per_doc"] / ours[f"{key}_ms_per_doc"] for key in ("cpu", "wall")}


def shape(name: str, files: list[str], work: Path, cores: int) -> dict:
    """Both engines on one input shape: datatrove once, ours cold then warm in one session."""
    print(f"\n[{name}] {len(files)} WARC files", flush=True)
    dt = run_datatrove(files, str(work), cores)
    ours = run_ours(files, str(work), cores)
    if not dt or not ours:
        return {"failed": True}
    docs = dt["read"]
    entry = {"docs": docs, "files": len(files), "datatrove": {**dt, **per_doc(dt, docs)}}
    for key in ("cold", "warm"):
        entry[f"ours {key}"] = {**ours[key], **per_doc(ours[key], ours[key]["read"])}
        entry[f"ratio {key}"] = ratio(entry[f"ours {key}"], entry["datatrove"])
    entry["session_cpu_seconds"] = ours["session_cpu_seconds"]
    for engine in ("datatrove", "ours cold", "ours warm"):
        e = entry[engine]
        split = f"  (JVM {e['cpu_seconds_jvm']:.1f} s, Python {e['cpu_seconds_python']:.1f} s)"
        print(
            f"  {engine:<10} {e['read'] if 'read' in e else docs:>6} docs {e['seconds']:7.1f} s wall "
            f"{e['cpu_seconds']:7.1f} s CPU"
            f" {e['cpu_ms_per_doc']:6.2f} CPU ms/doc{split}",
            flush=True,
        )
    return entry


def make_tokenizer(work: Path) -> Path:
    """A small SentencePiece BPE (ours) and the same tokenizer as tokenizer.json (datatrove's), trained
    once on the real documents in ../shared/data, outside every timing."""
    from dataprep.tokenize.tokenizer import train_tokenizer
    from dataprep.tokenize.tokenizer_json_writer import write_hf_tokenizer
    from tests.support.near_duplicates import real_documents

    folder = work / "tokenizer"
    if not (folder / "tokenizer.json").exists():
        tokenizer = train_tokenizer(real_documents(SHARED), str(folder), vocab_size=4000)
        write_hf_tokenizer(tokenizer, str(folder))
    return folder


def chain(files: list[str], work: Path, cores: int) -> dict:
    """The whole chain, both engines, per-step CPU."""
    from dataprep.classify.langid import default_model_path

    print(f"\n[whole chain] {len(files)} WARC files", flush=True)
    tokenizer = make_tokenizer(work)
    from bench.common.proctree import TreeMonitor

    cmd = [
        datatrove_python(),
        "-m",
        "bench.datatrove.datatrove_chain",
        default_model_path(),
        str(tokenizer / "tokenizer.json"),
        str(work / "datatrove-chain"),
        "--workers",
        str(cores),
        *files,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    monitor = TreeMonitor(proc.pid).start()
    stdout, stderr = proc.communicate()
    usage = monitor.stop()
    if proc.returncode != 0:
        print(stderr[-3000:], file=sys.stderr)
        return {"failed": True}
    dt = {**json.loads(stdout.strip().splitlines()[-1]), **usage}  # the outside view counts start-up too
    dt["seconds"] = sum(s["seconds"] for s in dt["steps"].values())
    ours = run_ours(files, str(work / "chain"), cores, tokenizer=str(tokenizer))
    if not ours:
        return {"failed": True}
    docs = dt["read"]
    entry = {"docs": docs, "datatrove": {**dt, **per_doc(dt, docs)}}
    for key in ("cold", "warm"):
        entry[f"ours {key}"] = {**ours[key], **per_doc(ours[key], docs)}
        entry[f"ratio {key}"] = ratio(entry[f"ours {key}"], entry["datatrove"])
    print(
        f"  datatrove: {docs} read, {dt['cleaned']} cleaned, {dt['removed_minhash']} removed by MinHash, "
        f"{dt['tokens']:,} tokens"
    )
    print(
        f"  ours:      {ours['warm']['read']} read, {ours['warm']['written']} cleaned, "
        f"{ours['warm']['kept']} kept after dedup"
    )
    print("  where the CPU goes (seconds; ours: the warm job, JVM + Python):")
    steps = [(f"datatrove {name}", s["cpu_seconds"]) for name, s in dt["steps"].items()]
    steps.append(
        ("datatrove start-up and imports", dt["cpu_seconds"] - sum(s["cpu_seconds"] for s in dt["steps"].values()))
    )
    warm = entry["ours warm"]
    steps += [(f"ours {name}", s["cpu_jvm"] + s["cpu_python"]) for name, s in warm["steps"].items()]
    steps.append(
        (
            "ours driver between steps",
            warm["cpu_seconds"] - sum(s["cpu_jvm"] + s["cpu_python"] for s in warm["steps"].values()),
        )
    )
    for name, cpu in steps:
        print(f"    {name:<42}{cpu:8.1f}")
    entry["where"] = dict(steps)
    return entry


def run_json(module: str, args: list[str], out: Path) -> dict | None:
    cmd = [sys.executable, "-m", module, *args, "--json", str(out)]
    print(f"\n$ python {' '.join(cmd[1:])}", flush=True)
    if subprocess.run(cmd, cwd=ROOT).returncode != 0 or not out.exists():
        print(f"{module} failed; its figures are missing below", file=sys.stderr)
        return None
    return json.loads(out.read_text())


def report(results: dict, cores: int, under_load: bool) -> None:
    print("\n" + "=" * 86)
    print(
        "ours vs datatrove 0.10.1, CPU ms per document (x = times cheaper)"
        + ("   ** MEASURED UNDER LOAD **" if under_load else "")
    )
    print("=" * 86)
    print(f"{'':<34}{'datatrove':>10}{'ours':>9}{'by CPU':>9}{'by wall':>9}")
    rows = [
        ("1. steady, CC-shaped", "cc", "warm"),
        ("2. steady, many small files", "small", "warm"),
        ("3. cold (first run), CC-shaped", "cc", "cold"),
        ("3. cold (first run), small files", "small", "cold"),
        ("4. whole chain (steady)", "chain", "warm"),
        ("4. whole chain (cold)", "chain", "cold"),
    ]
    for label, key, kind in rows:
        entry = results.get(key) or {}
        if "datatrove" in entry:
            r = entry[f"ratio {kind}"]
            print(
                f"{label:<34}{entry['datatrove']['cpu_ms_per_doc']:>10.1f}"
                f"{entry[f'ours {kind}']['cpu_ms_per_doc']:>9.2f}"
                f"{r['cpu']:>8.1f}x{r['wall']:>8.1f}x"
            )
    minhash = results.get("minhash")
    if minhash and minhash.get("sizes"):
        n, entry = max(minhash["sizes"].items(), key=lambda kv: int(kv[0]))
        print(
            f"\nMinHash at {n} documents, removed-id Jaccard with datatrove's removals:"
            f" verify exact (default) {entry['ours']['agreement_with_first']:.3f} ({entry['ours']['removed']} removed),"
            " verify none (FineWeb-equivalent) "
            f"{entry.get('ours_verify_none', {}).get('agreement_with_first', float('nan')):.3f}"
            f" ({entry.get('ours_verify_none', {}).get('removed', '?')} removed, and"
            f" {entry.get('ours_verify_none', {}).get('first_removed_in_our_clusters', float('nan')):.3f} of "
            "datatrove's removals"
            f" in its clusters); datatrove removed {entry['datatrove']['removed']};"
            f" {entry.get('ratio_docs_per_s_per_core', float('nan')):.1f}x its docs/s/core"
        )
    extraction = results.get("extraction")
    if extraction:
        q, t = extraction["quality"], extraction["trafilatura_quality"]
        print(
            f"extraction {extraction['default']}: main text found {q['with_found']:.3f} (Trafilatura "
            f"{t['with_found']:.3f}),"
            f" boilerplate kept out {q['without_absent']:.3f} ({t['without_absent']:.3f}); "
            f"{extraction['speed_ratio_vs_trafilatura']:.1f}x its pages/s"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N] and datatrove workers")
    parser.add_argument("--quick", action="store_true", help="smaller inputs (about 10 minutes on 2 idle cores)")
    parser.add_argument(
        "--allow-busy", action="store_true", help="report even when the 1-minute load is above the core count"
    )
    parser.add_argument("--pages-per-file", type=int, help="pages in each CC-shaped file (default 3000, --quick 500)")
    parser.add_argument(
        "--only", nargs="+", choices=["cc", "small", "chain", "minhash", "extraction"], help="run only these parts"
    )
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ccpretrain-bench", "throughput"))
    parser.add_argument("--json", help="write all figures here")
    args = parser.parse_args()
    machine_cores = os.cpu_count() or 1
    start = load()
    print(f"load average at start: {start[0]:.2f} {start[1]:.2f} {start[2]:.2f} on {machine_cores} cores", flush=True)
    if start[0] > machine_cores and not args.allow_busy:
        print(
            f"the machine is busy (1-min load {start[0]:.1f} > {machine_cores} cores): figures would not be ours alone;"
            " wait, or pass --allow-busy to measure anyway",
            file=sys.stderr,
        )
        return BUSY_EXIT
    parts = set(args.only or ["cc", "small", "chain", "minhash", "extraction"])
    work = Path(args.work)
    per_file, small_files = (500, 20) if args.quick else (3000, 120)  # CC files hold ~30k pages; thousands stand in
    per_file = args.pages_per_file or per_file
    big = lambda: write_bench_warcs(str(work / "warc-cc"), repeat=per_file * args.cores // 200, files=args.cores)  # noqa: E731
    results: dict = {"cores": args.cores, "load_start": start}
    if "cc" in parts:
        results["cc"] = shape("steady state + cold, CC-shaped", big(), work / "cc", args.cores)
    if "small" in parts:
        files = write_bench_warcs(str(work / "warc-small"), repeat=per_file * args.cores // 400, files=small_files)
        results["small"] = shape("steady state + cold, many small files", files, work / "small", args.cores)
    if "chain" in parts:
        results["chain"] = chain(big(), work, args.cores)
    if "minhash" in parts:
        size = "10000" if args.quick else "50000"
        results["minhash"] = run_json(
            "bench.dedup.bench_dedup",
            ["--sizes", size, "--cores", str(args.cores), "--verify", "exact", "none"],
            work / "dedup.json",
        )
    if "extraction" in parts:
        results["extraction"] = run_json(
            "bench.extraction.bench_extract", ["--rounds", "1" if args.quick else "3"], work / "extract.json"
        )
    end = load()
    results["load_end"] = end
    print(f"\nload average at end: {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} on {machine_cores} cores", flush=True)
    # The last minute's load includes this bench's own engines (up to --cores busy): allowed for at the end.
    under_load = start[0] > machine_cores or end[0] > machine_cores + args.cores
    if under_load and not args.allow_busy:
        print(
            f"the machine became busy (1-min load {end[0]:.1f} > {machine_cores} cores + this bench's "
            f"{args.cores}): not reporting;"
            " rerun, or pass --allow-busy",
            file=sys.stderr,
        )
        return BUSY_EXIT
    results["under_load"] = under_load
    report(results, args.cores, under_load)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
