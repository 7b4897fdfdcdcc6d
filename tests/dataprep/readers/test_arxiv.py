"""arXiv / LaTeX sources: a paper keeps its sections with macros expanded and without preamble, comments or
bibliography; binary files and cut archives are counted; the ``arxiv`` preset on Spark."""

from __future__ import annotations

import gzip
import tarfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from archives import tar_bytes
from dataprep.core.config import InputConfig, load_config
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.readers import detect_format, iter_documents
from dataprep.readers.arxiv import clean_tex
from pipelines.pipeline_run import run_pipeline
from resume import rerun_after_a_crash

PAPER = Path(__file__).resolve().parents[2] / "data/arxiv/2401.00001"
KEPT = [
    "\\section{Introduction}",
    "Tide tables are old, but TideNet{} learns them from data.",
    "We train TideNet{} on \\textsc{HarbourSet}{} and report the error $\\epsilon_{\\mathrm{tide}}$ in "
    "percent, where 5\\% is good.",
    "\\section{Method}",
    "The model minimises $\\norm{x - y}$ over the \\textsc{HarbourSet}{} harbours.",
    "\\subsection{Training}",
    "Each harbour gives one series; the error $\\epsilon_{\\mathrm{tide}}$ is measured hourly.",
]
GONE = [
    "\\documentclass",
    "\\usepackage",
    "\\newcommand",
    "\\def",
    "\\maketitle",
    "abstract",
    "We predict tides",
    "TODO",
    "trailing comment",
    "unused draft",
    "thebibliography",
    "bibitem",
    "Admiralty",
    "\\end{document}",
    "\\model",
    "\\data",
    "\\err",
    "\\full",
]


def paper_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(PAPER.iterdir())}


def read_all(path, stats=None, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg), stats))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def reasons(dropped: pa.Table) -> Counter:
    return Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()


def test_paper_keeps_its_sections_with_macros_expanded(tmp_path):
    path = tmp_path / "2401.00001.tar.gz"
    path.write_bytes(tar_bytes(paper_files()))
    assert detect_format(str(path)) == "arxiv"
    kept, dropped = read_all(path)
    row = kept.to_pylist()[0]
    assert (row["id"], row["url"], row["source_kind"]) == (
        "arxiv-2401.00001",
        "https://arxiv.org/abs/2401.00001",
        "arxiv",
    )
    text = row["text"]
    assert [k for k in KEPT if k not in text] == [] and [g for g in GONE if g in text] == []
    assert text.index("\\section{Introduction}") < text.index("\\section{Method}")
    assert dropped.num_rows == 0


def test_a_papers_non_tex_files_are_counted_and_the_paper_kept(tmp_path):
    files = {
        **paper_files(),
        "figure.png": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        "plot.eps.gz": gzip.compress(b"%!PS"),
        "notes.tex": b"\0\x01\x02binary",
    }
    path = tmp_path / "2401.00001.tar.gz"
    path.write_bytes(tar_bytes(files))
    stats = StageStats("read")
    kept, dropped = read_all(path, stats)
    assert kept.num_rows == 1 and "\\section{Method}" in kept.column("text")[0].as_py()
    assert reasons(dropped) == {"binary_file": 1}
    assert stats.counters == {"records_skipped:non_tex_file": 2}


def test_a_lone_tex_file_reads_as_a_paper():
    clean, _ = read_all(PAPER / "main.tex")  # one file alone: main.tex's sections only
    assert "\\section{Introduction}" in clean.column("text")[0].as_py()


def _bulk_archive(tmp_path):
    """A bulk archive of three papers: a whole one, one of a single file, one without sections."""
    single = b"\\documentclass{article}\\begin{document}\\section{Only}One file, \\x.\\end{document}\n"
    papers = {
        "2401/2401.00001.gz": gzip.compress(tar_bytes(paper_files(), "w")),
        "2401/2401.00002.gz": gzip.compress(b"\\def\\x{expanded}\n" + single),
        "2401/2401.00003.gz": gzip.compress(b"\\documentclass{article} No sections at all."),
    }
    bulk = tmp_path / "arXiv_src_2401_001.tar"
    bulk.write_bytes(tar_bytes(papers, "w"))
    return bulk


def test_a_bulk_archive_reads_each_paper(tmp_path):
    kept, dropped = read_all(_bulk_archive(tmp_path))
    assert kept.column("id").to_pylist() == ["arxiv-2401.00001", "arxiv-2401.00002"]
    assert kept.column("text")[1].as_py() == "\\section{Only}One file, expanded.\n"
    assert reasons(dropped) == {"no_sections": 1}


def test_a_cut_bulk_archive_keeps_the_papers_before_the_cut(tmp_path):
    bulk_archive = _bulk_archive(tmp_path)
    with tarfile.open(bulk_archive) as archive:
        inside_the_second = archive.getmembers()[1].offset_data + 20
    cut = tmp_path / "cut.tar"
    cut.write_bytes(bulk_archive.read_bytes()[:inside_the_second])
    kept, dropped = read_all(cut)
    assert kept.column("id").to_pylist() == ["arxiv-2401.00001"] and reasons(dropped) == {"error:truncated": 1}


def test_macro_and_comment_edge_cases():
    tex = (
        "\\newcommand*{\\a}{A}\\renewcommand{\\b}{\\a{}B}\\newcommand{\\f}[1]{#1}\n"
        "\\section{S} \\b, \\ab, \\f{x}. 50\\% off % gone\n% gone too\nkept\n\\appendix\n\\section{Proofs}"
    )
    assert clean_tex([tex]) == "\\section{S} A{}B, \\ab, \\f{x}. 50\\% off \nkept\n"


def test_arxiv_preset_on_spark_same_corpus_from_one_or_four_files(spark, tmp_path):
    papers = {}
    for i in range(1, 5):
        files = paper_files()
        files["main.tex"] = files["main.tex"].replace(b"Tide tables", f"Paper {i}: tide tables".encode())
        papers[f"2401.0000{i}"] = tar_bytes(files, "w")
    one, four = tmp_path / "one", tmp_path / "four"
    one.mkdir(), four.mkdir()
    (one / "arXiv_src_2401_001.tar").write_bytes(
        tar_bytes({f"{k}.gz": gzip.compress(v) for k, v in papers.items()} | {"2401.00009.gz": b"not gzip"}, "w")
    )
    for k, v in papers.items():
        (four / f"{k}.tar.gz").write_bytes(gzip.compress(v))
    (four / "2401.00009.tar.gz").write_bytes(b"not gzip")
    corpora = []
    for folder in (one, four):
        config = load_config(
            "arxiv",
            overrides={"input": {"paths": [str(folder)]}, "output": {"dir": str(tmp_path / f"out-{folder.name}")}},
        )
        result = run_pipeline(config, spark=spark)
        stats = {s.stage: s for s in result.stats}
        assert stats["read"].dropped == {"error:malformed_record": 1}  # the file that is no archive
        corpora.append(corpus(result))
    assert corpora[0] == corpora[1]
    assert [r[0] for r in corpora[0]] == [f"arxiv-2401.0000{i}" for i in range(1, 5)]
    assert corpus(rerun_after_a_crash(config, spark)) == corpora[1]  # killed with two of five files read


def corpus(result) -> list[tuple]:
    return sorted((r["id"], r["text"], r["source_kind"]) for r in pq.read_table(result.corpus_dir).to_pylist())
