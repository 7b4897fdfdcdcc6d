"""Throughput of the safety stages (documents/s in one process, i.e. per core), as ratios against
baselines measured in the same run, since the machine is noisy:

- ``split``: ``len(text.split())`` over the same texts, a machine-speed anchor;
- datatrove 0.10.1's ``PIIFormatter`` (e-mail + IP only) for the PII stage, when .venv-datatrove exists.

    python -m bench.safety.bench_safety [--repeat 3]      # needs ../shared/data

Texts: the parity set of bench/quality/quality_golden.py (shared documents, WARC text, trafilatura pages).
URLs: the trafilatura-eval page URLs plus one blocked URL per ten. Patterns are compiled at import,
lists and models load on the first batch (not timed: a pipeline worker pays it once).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

import pyarrow as pa

from bench.common.paths import ROOT, SHARED
from bench.quality.quality_golden import build_texts

DATATROVE_SIDE = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from datatrove.data import Document
from datatrove.pipeline.formatters import PIIFormatter
texts = json.load(open(sys.argv[1])); repeat = int(sys.argv[2])
f = PIIFormatter()
best = float("inf")
for _ in range(repeat):
    docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
    t0 = time.perf_counter()
    for d in docs: d.text = f.format(d.text)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"pii_datatrove": best}))
"""


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _urls(n: int) -> list[str]:
    gold = SHARED / "html" / "trafilatura-eval" / "gold.jsonl"
    urls = [json.loads(line)["url"] for line in gold.read_text(encoding="utf-8").splitlines() if line.strip()]
    blocked = ["https://www.pornhub.com/view_video.php?viewkey=1", "https://sports.bet365.com/#/AS/B1", "https://best-casino-bonus.example.com/slots"]
    out = []
    for i in range(n):
        out.append(blocked[i % 3] if i % 10 == 9 else urls[i % len(urls)])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from dataprep.safety.harmful import HarmfulContent
    from dataprep.safety.pii import PiiScrubber
    from dataprep.safety.toxicity import ToxicityFilter
    from dataprep.safety.url_filter import UrlFilter

    texts = [t["text"] for t in build_texts(SHARED)]
    n = len(texts)
    batch = pa.table({"id": [str(i) for i in range(n)], "url": _urls(n), "text": texts, "lang": ["en"] * n})
    stages = {
        "url_filter": UrlFilter(),
        "harmful_content": HarmfulContent(),
        "toxicity (word lists)": ToxicityFilter(model="none"),
        "toxicity (lists + profanity model)": ToxicityFilter(),
        "toxicity (remove_lines)": ToxicityFilter(action="remove_lines"),
        "pii": PiiScrubber(),
    }
    seconds = {"split": _best(lambda: [len(t.split()) for t in texts], args.repeat)}
    for name, stage in stages.items():
        stage.apply(batch.slice(0, 1))  # load lists/models once, as a worker does
        seconds[name] = _best(lambda: stage.apply(batch), args.repeat)

    datatrove_python = ROOT / ".venv-datatrove" / "bin" / "python"
    if datatrove_python.exists():
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(texts, fh)
        out = subprocess.run([str(datatrove_python), "-c", DATATROVE_SIDE, fh.name, str(args.repeat)], capture_output=True, text=True, check=True)
        seconds.update(json.loads(out.stdout.strip().splitlines()[-1]))

    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    print(f"{n} documents, {mb:.1f} MB; best of {args.repeat}; one process")
    print(f"{'stage':<36}{'docs/s':>10}{'MB/s':>8}{'time / split':>13}")
    for name, s in seconds.items():
        print(f"{name:<36}{n / s:>10.0f}{mb / s:>8.2f}{s / seconds['split']:>13.1f}")
    if "pii_datatrove" in seconds:
        print(f"pii (ours, 7 types) / datatrove PIIFormatter (e-mail + IP) docs/s ratio: {seconds['pii_datatrove'] / seconds['pii']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
