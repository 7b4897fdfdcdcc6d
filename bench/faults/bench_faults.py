"""The fault-injection cases (tests/support/fault_cases.py, asserted by tests/pipelines/test_fault_injection.py),
each in a fresh process: outcome, wall time and peak RSS of the Python process (for the Spark case, the driver's;
Spark's JVM is not included).

    python -m bench.faults.bench_faults            # every case, one table
    python -m bench.faults.bench_faults --case X   # one case, JSON (what the table runs)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support import fault_cases as cases


def _reader(outcome: dict) -> str:
    leaked = " HEADER TEXT LEAKED" if outcome["header_text_leaked"] else ""
    return f"kept {len(outcome['kept'])}/{cases.GOOD_PAGES}, dropped {outcome['dropped']}{leaked}"


def _extract(outcome: dict) -> str:
    return f"kept {len(outcome['texts'])}, dropped {outcome['dropped']}, counted {outcome['counters']}"


def _error_budget(folder: Path) -> str:
    """langid's model disappears after the config check: the step fails, the rerun resumes."""
    from dataprep.classify.langid import default_model_path
    from dataprep.core.config import load_config
    from dataprep.core.stats import ErrorBudgetExceeded
    from pipelines.pipeline_run import run_pipeline

    model = folder / "lid.ftz"
    shutil.copy(default_model_path(), model)
    warc = cases.write_warc(folder / "in.warc.gz", [cases.response_record(i, cases.page(i)) for i in range(200)], True)
    config = {
        "input": {"paths": [str(warc)]},
        "output": {"dir": str(folder / "out")},
        "stages": [{"stage": "extract"}, {"stage": "exact_dedup"}, {"stage": "langid", "model_path": str(model)}],
    }
    checked = load_config(config)
    model.rename(folder / "away")
    try:
        run_pipeline(checked)
        failed = "step finished (WRONG)"
    except ErrorBudgetExceeded as exc:
        failed = "exit 1: " + str(exc).split(";")[0]
    (folder / "away").rename(model)
    resumed = run_pipeline(load_config(config))
    return f"{failed}; rerun skipped {resumed.skipped_steps} steps"


CASES = {
    "content_length_long_warc": lambda d: _reader(cases.bad_content_length(d, 40, 2, False)),
    "content_length_long_warc_gz": lambda d: _reader(cases.bad_content_length(d, 40, 2, True)),
    "content_length_short_warc": lambda d: _reader(cases.bad_content_length(d, -10, 2, False)),
    "content_length_short_warc_gz": lambda d: _reader(cases.bad_content_length(d, -10, 2, True)),
    "content_length_past_eof": lambda d: _reader(cases.bad_content_length(d, 100_000, 2, True)),
    "empty_files": lambda d: str(cases.empty_files(d)),
    "charset_lie_utf16_on_latin1": lambda d: repr(cases.charset_lie(d)["texts"][0][:30]),
    "replacement_chars": lambda d: _extract(cases.replacement_chars(d)),
    "trafilatura_timeout": lambda d: _extract(cases.trafilatura_timeout(d)),
    "stage_errors_past_budget": _error_budget,
}


def run_case(name: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        outcome = CASES[name](Path(tmp))
        seconds = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # the Python process (Spark's JVM not included)
    return {"case": name, "outcome": outcome, "seconds": round(seconds, 2), "peak_rss_mb": round(own / 1024)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=sorted(CASES))
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return 0
    print(f"{'case':<30}{'sec':>7}{'RSS MB':>8}  outcome")
    for name in CASES:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.faults.bench_faults", "--case", name],
            capture_output=True,
            text=True,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
        if proc.returncode:
            print(f"{name:<30} FAILED\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{name:<30}{r['seconds']:>7.2f}{r['peak_rss_mb']:>8}  {r['outcome']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
