"""The report's sections as one Markdown document and one self-contained HTML page (PNGs beside it).

Everything shown is escaped: crawled URLs and rule names can hold anything, markup included.
"""

from __future__ import annotations

import html
import string

from dataprep.report import Section


def _md(v) -> str:
    """Markdown renderers pass HTML tags through: neutralise them (crawled URLs can hold anything)."""
    return str(v).replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def render_markdown(title: str, sections: list[Section]) -> str:
    lines = [f"# {title}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""] + [x for p in s.text for x in (_md(p), "")]
        for headers, rows in s.tables:
            if not headers:
                lines += [f"- **{_md(k)}**: {_md(v)}" for k, v in rows]
            else:
                lines += ["| " + " | ".join(map(_md, headers)) + " |", "|" + "---|" * len(headers)]
                lines += ["| " + " | ".join(map(_md, row)) + " |" for row in rows]
            lines.append("")
        lines += [x for img in s.images if img for x in (f"![{s.title}]({img})", "")]
    return "\n".join(lines)


PAGE = string.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>$title</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { border-bottom: 2px solid #444; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
nav a { margin-right: 1em; } table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td { max-width: 420px; overflow-wrap: anywhere; }
img { max-width: 100%; display: block; margin: 1em 0; }
</style></head>
<body><h1>$title</h1>
<nav>$nav</nav>
$body
</body></html>
""")


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(v, tag="td"):
        return f"<{tag}>{html.escape(str(v)).replace(chr(10), '<br>')}</{tag}>"

    head = "<tr>" + "".join(cell(h, "th") for h in headers) + "</tr>" if headers else ""
    key = "td" if headers else "th"  # a key-value table (no headers) shows its keys as row headers
    body = "".join("<tr>" + cell(row[0], key) + "".join(map(cell, row[1:])) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def render_html(title: str, sections: list[Section]) -> str:
    nav, body = [], []
    for i, s in enumerate(sections):
        nav.append(f'<a href="#s{i}">{html.escape(s.title)}</a>')
        body.append(f'<section id="s{i}"><h2>{html.escape(s.title)}</h2>')
        body += [f"<p>{html.escape(p)}</p>" for p in s.text]
        body += [f'<img src="{html.escape(img)}" alt="{html.escape(s.title)}">' for img in s.images if img]
        body += [_html_table(h, r) for h, r in s.tables] + ["</section>"]
    return PAGE.substitute(title=html.escape(title), nav="".join(nav), body="\n".join(body))
