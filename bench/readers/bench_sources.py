"""Readers of the other sources on samples 100x the test samples (generated, not shipped): documents/s and
CPU seconds per reader in one process, and wikitext to text against mwparserfromhell's own ``strip_code``.

    python -m bench.readers.bench_sources [--copies 100]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import io
import re
import tarfile
import tempfile
import time
from pathlib import Path

from dataprep.core.config import InputConfig
from dataprep.readers import iter_documents

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"


# Each generator writes ``copies`` copies of its test sample, with ids shifted per copy, spread over ``files``
# input files (copy i in file i % files), so the same documents can be read as one task or several. Each copy's
# text carries its number ("Copy i."), so exact dedup keeps every copy.


def wikipedia(folder: Path, copies: int, files: int = 1) -> list[Path]:
    xml = (DATA / "wikipedia/enwiki-sample-pages-articles.xml").read_text()
    first, last = xml.index("  <page>"), xml.rindex("</page>\n") + len("</page>\n")
    pages = xml[first:last].replace("</text>", "\n\nCopy {i}.</text>")
    paths = [folder / f"enwiki-pages-articles{f}.xml.bz2" for f in range(files)]
    for f, path in enumerate(paths):
        body = "".join(
            re.sub(r"<id>(\d+)</id>", lambda m: f"<id>{int(m.group(1)) + 1000 * i}</id>", pages).replace("{i}", str(i))
            for i in range(f, copies, files)
        )
        path.write_bytes(bz2.compress((xml[:first] + body + xml[last:]).encode()))
    return paths


def stackexchange(folder: Path, copies: int, files: int = 1) -> list[Path]:
    xml = (DATA / "stackexchange/cooking.stackexchange.com/Posts.xml").read_text()
    rows = re.findall(r"  <row .*?/>\n", xml)

    def shift(row: str, i: int) -> str:  # the i-th copy's post ids and text
        row = row.replace('Body="', f'Body="&lt;p&gt;Copy {i}.&lt;/p&gt;')
        return re.sub(
            r'(?<= )(Id|ParentId|AcceptedAnswerId)="(\d+)"',
            lambda m: f'{m.group(1)}="{int(m.group(2)) + 100 * i}"',
            row,
        )

    paths = [folder / str(f) / "cooking.stackexchange.com" / "Posts.xml" for f in range(files)]
    for f, path in enumerate(paths):  # a copy's questions and answers stay in one file, as in a site's dump
        path.parent.mkdir(parents=True)
        path.write_text(
            xml[: xml.index("  <row")]
            + "".join(shift(r, i) for i in range(f, copies, files) for r in rows)
            + "</posts>\n"
        )
    return paths


def books(folder: Path, copies: int, files: int = 1) -> list[Path]:
    """One file per book, whatever ``files`` says: a book file holds one book."""
    book = (DATA / "books/pg99999-lamplighter.txt").read_bytes()
    paths = [folder / f"pg{i}.txt" for i in range(copies)]
    for i, path in enumerate(paths):
        path.write_bytes(
            book.replace(b"#99999", f"#{i}".encode()).replace(b"CHAPTER I\n", f"CHAPTER I\n\nCopy {i}.\n".encode(), 1)
        )
    return paths


def arxiv(folder: Path, copies: int, files: int = 1) -> list[Path]:
    def tar(files: dict[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    files_of_paper = {p.name: p.read_bytes() for p in sorted((DATA / "arxiv/2401.00001").iterdir())}

    def paper(i: int) -> bytes:
        intro = b"\\section{Introduction}\n"
        return tar(
            files_of_paper | {"main.tex": files_of_paper["main.tex"].replace(intro, intro + f"Copy {i}.\n".encode())}
        )

    paths = [folder / f"arXiv_src_2401_{f:03d}.tar" for f in range(files)]
    for f, path in enumerate(paths):
        path.write_bytes(tar({f"2401.{i:05d}.gz": gzip.compress(paper(i)) for i in range(f, copies, files)}))
    return paths


def measure(paths: list[Path]) -> tuple[int, float, float]:
    """Kept documents, CPU seconds and wall seconds of reading ``paths``."""
    cpu, wall, kept = time.process_time(), time.perf_counter(), 0
    for path in paths:
        kept += sum(r.kept.num_rows for r in iter_documents(str(path), InputConfig(max_document_bytes=30_000_000)))
    return kept, time.process_time() - cpu, time.perf_counter() - wall


def wikitext_against_reference(copies: int, repeats: int = 3) -> tuple[int, float, float]:
    """Our wikitext to text and mwparserfromhell's ``strip_code`` on the same articles' wikitext (no XML, no
    redirect or namespace rules), alternated, the least CPU of ``repeats`` each: (pages, ours, strip_code)."""
    import html

    import mwparserfromhell

    from dataprep.readers.wikipedia import wikitext_to_text

    xml = (DATA / "wikipedia/enwiki-sample-pages-articles.xml").read_text()
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", xml, flags=re.S)] * copies
    convert = {"ours": wikitext_to_text, "strip_code": lambda text: mwparserfromhell.parse(text).strip_code()}
    best = dict.fromkeys(convert, float("inf"))
    for _ in range(repeats):
        for name, fn in convert.items():
            cpu = time.process_time()
            for text in texts:
                fn(text)
            best[name] = min(best[name], time.process_time() - cpu)
    return len(texts), best["ours"], best["strip_code"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=100)
    args = parser.parse_args()
    print(f"{'reader':<16}{'documents':>10}{'CPU s':>8}{'docs/s (CPU)':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for make in (wikipedia, stackexchange, books, arxiv):
            folder = Path(tmp) / make.__name__
            folder.mkdir()
            kept, cpu, _ = measure(make(folder, args.copies))
            print(f"{make.__name__:<16}{kept:>10}{cpu:>8.2f}{kept / cpu:>14.0f}")
    pages, ours, reference = wikitext_against_reference(args.copies)
    print(f"{'wikitext (ours)':<16}{pages:>10}{ours:>8.2f}{pages / ours:>14.0f}  (pages' wikitext only, every page)")
    print(
        f"{'mwparser strip':<16}{pages:>10}{reference:>8.2f}{pages / reference:>14.0f}  "
        f"ours / strip_code CPU: {ours / reference:.2f}"
    )


if __name__ == "__main__":
    main()
