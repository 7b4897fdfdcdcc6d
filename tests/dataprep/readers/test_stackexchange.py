"""StackExchange Posts.xml: questions with their answers (in any order in the file) as documents, odd and
broken rows counted, and the ``stackexchange`` preset on Spark."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dataprep.core.config import InputConfig, load_config
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.readers import detect_format, iter_documents
from pipelines.pipeline_run import run_pipeline
from resume import rerun_after_a_crash

SITE = "cooking.stackexchange.com"
SAMPLE = Path(__file__).resolve().parents[2] / "data/stackexchange" / SITE / "Posts.xml"


def read_all(path, stats=None, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg), stats))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def reasons(dropped: pa.Table) -> Counter:
    return Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()


def split_rows(xml: str) -> tuple[str, list[str], str]:
    rows = re.findall(r"  <row .*?/>\n", xml)
    return xml[: xml.index("  <row")], rows, "</posts>\n"


def test_each_question_with_its_answers_best_first():
    stats = StageStats("read")
    kept, dropped = read_all(SAMPLE, stats)
    assert detect_format(str(SAMPLE)) == "stackexchange"
    assert kept.column("id").to_pylist() == [f"{SITE}-1", f"{SITE}-2"]
    assert kept.column("url")[0].as_py() == f"https://{SITE}/questions/1"
    assert set(kept.column("source_kind").to_pylist()) == {"stackexchange"}
    pasta = kept.column("text")[0].as_py()
    # Title, question, then answers by score (9, 5 accepted, 2), though two of them precede the question.
    order = [
        "How much salt goes in pasta water?",
        "How much salt should I put in the water when I boil pasta?",
        "My pasta always tastes bland.",
        "Answer:\nTaste the water",
        "Add the salt before the pasta.",
        "Accepted answer:\nUse about ten grams",
        "10 g salt\n1 l water",
        "Answer:\nSalt the water only",
    ]
    positions = [pasta.find(part) for part in order]
    assert -1 not in positions and positions == sorted(positions)
    assert "<p>" not in pasta and "&lt;" not in pasta and "<em>" not in pasta
    assert "Blanch the leaves" in kept.column("text")[1].as_py()
    assert dropped.num_rows == 0
    assert stats.counters == {"records_skipped:post_type_4": 1, "records_skipped:answer_without_question": 1}


def test_a_broken_row_loses_only_itself(tmp_path):
    head, rows, tail = split_rows(SAMPLE.read_text())
    good, _ = read_all(SAMPLE)
    broken = tmp_path / SITE / "Posts.xml"
    broken.parent.mkdir()
    broken.write_text(head + rows[0] + '  <row Id="50" PostTypeId="1" Body="unclosed\n' + "".join(rows[1:]) + tail)
    kept, dropped = read_all(broken)
    assert kept.column("text").to_pylist() == good.column("text").to_pylist()
    assert reasons(dropped) == {"error:malformed_record": 1}


def test_a_cut_file_loses_only_what_follows_the_cut(tmp_path):
    head, rows, tail = split_rows(SAMPLE.read_text())
    data = (head + "".join(rows)).encode()  # no </posts>: cut inside the last row, then before it
    cut = tmp_path / SITE / "Posts-cut.xml.gz"
    cut.parent.mkdir()
    cut.write_bytes(gzip.compress(data[:-20]))
    kept, dropped = read_all(cut, format="stackexchange")
    assert reasons(dropped) == {"error:truncated": 1}
    assert kept.column("id").to_pylist() == [f"{SITE}-1", f"{SITE}-2"]  # only the orphan answer was cut
    gz = gzip.compress((head + "".join(rows) + tail).encode())
    cut.write_bytes(gz[: len(gz) // 2])
    kept, dropped = read_all(cut, format="stackexchange")
    assert reasons(dropped) == {"error:truncated": 1}


def test_stackexchange_preset_on_spark_same_corpus_from_one_or_four_files(spark, tmp_path):
    """A site's rows split over four files (a question and its answers together) give the same corpus."""
    head, rows, tail = split_rows(SAMPLE.read_text())
    bad = '  <row Id="50" PostTypeId="1" Body="unclosed\n'
    corpora = []
    for name, parts in (("one", [rows + [bad]]), ("four", [rows[:4], rows[4:5] + [bad], rows[5:7], rows[7:]])):
        paths = []
        for i, part in enumerate(parts):
            path = tmp_path / name / str(i) / SITE / "Posts.xml"
            path.parent.mkdir(parents=True)
            path.write_text(head + "".join(part) + tail)
            paths.append(str(path))
        config = load_config(
            "stackexchange", overrides={"input": {"paths": paths}, "output": {"dir": str(tmp_path / f"out-{name}")}}
        )
        result = run_pipeline(config, spark=spark)
        stats = {s.stage: s for s in result.stats}
        assert stats["read"].dropped == {"error:malformed_record": 1}
        corpora.append(corpus(result))
    assert corpora[0] == corpora[1]
    assert [r[0] for r in corpora[0]] == [f"{SITE}-1", f"{SITE}-2"]
    assert corpus(rerun_after_a_crash(config, spark)) == corpora[1]  # killed with two of four files read


def corpus(result) -> list[tuple]:
    return sorted((r["id"], r["text"], r["source_kind"]) for r in pq.read_table(result.corpus_dir).to_pylist())
