"""A source file's programming language: by its name (extension or a known file name such as
``Makefile``), else by its ``#!`` line, through pre-commit's ``identify`` tables.

``identify`` tags a file name with what it is (``{"python", "text"}``, ``{"c", "c++", "header", "text"}``);
``LANGUAGES`` says which tags are languages, by what name a record carries them, and which wins when a
name has several (a ``.h`` header is C, as in The Stack).
"""

from __future__ import annotations

import io
import os

import pyarrow as pa
from identify import identify
from pydantic import Field, field_validator

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage
from dataprep.core.validation import did_you_mean

# identify tag -> language name, in the order a file with several tags is decided
LANGUAGES = {
    "jupyter": "Jupyter Notebook",
    "python": "Python",
    "pyi": "Python",
    "cython": "Cython",
    "javascript": "JavaScript",
    "jsx": "JavaScript",
    "ts": "TypeScript",
    "tsx": "TypeScript",
    "java": "Java",
    "c": "C",
    "c++": "C++",
    "c#": "C#",
    "cuda": "CUDA",
    "go": "Go",
    "rust": "Rust",
    "ruby": "Ruby",
    "php": "PHP",
    "swift": "Swift",
    "kotlin": "Kotlin",
    "scala": "Scala",
    "objective-c": "Objective-C",
    "bash": "Shell",
    "shell": "Shell",
    "zsh": "Shell",
    "powershell": "PowerShell",
    "batch": "Batchfile",
    "perl": "Perl",
    "lua": "Lua",
    "r": "R",
    "julia": "Julia",
    "haskell": "Haskell",
    "elixir": "Elixir",
    "erlang": "Erlang",
    "clojure": "Clojure",
    "dart": "Dart",
    "ocaml": "OCaml",
    "f#": "F#",
    "fortran": "Fortran",
    "groovy": "Groovy",
    "zig": "Zig",
    "nim": "Nim",
    "asm": "Assembly",
    "sql": "SQL",
    "html": "HTML",
    "css": "CSS",
    "scss": "SCSS",
    "sass": "Sass",
    "less": "Less",
    "vue": "Vue",
    "svelte": "Svelte",
    "tex": "TeX",
    "markdown": "Markdown",
    "rst": "reStructuredText",
    "json": "JSON",
    "yaml": "YAML",
    "toml": "TOML",
    "xml": "XML",
    "ini": "INI",
    "csv": "CSV",
    "proto": "Protocol Buffer",
    "makefile": "Makefile",
    "cmake": "CMake",
    "dockerfile": "Dockerfile",
    "terraform": "HCL",
    "solidity": "Solidity",
    "elm": "Elm",
    "purescript": "PureScript",
    "idris": "Idris",
    "coffee": "CoffeeScript",
    "vim": "Vim Script",
    "tcl": "Tcl",
    "awk": "Awk",
    "gherkin": "Gherkin",
    "graphql": "GraphQL",
}


def language(path: str, head: bytes = b"") -> str | None:
    """The language of the file at ``path`` (a name; nothing is opened) whose content starts with
    ``head``; None when neither its name nor its ``#!`` line says one."""
    name = os.path.basename(path)
    found = _first_language(identify.tags_from_filename(name))
    if found is None and head.startswith(b"#!"):
        command = identify.parse_shebang(io.BytesIO(head))
        if command:
            found = _first_language(identify.tags_from_interpreter(command[0]))
    return found


def is_binary_name(path: str) -> bool:
    """Whether the file's name alone says it is binary (images, archives, compiled objects)."""
    return "binary" in identify.tags_from_filename(os.path.basename(path))


def _first_language(tags: set[str]) -> str | None:
    return next((name for tag, name in LANGUAGES.items() if tag in tags), None)


@register("code_language")
class CodeLanguage(DocumentStage):
    """Keeps code files of the listed languages (every language ``LANGUAGES`` names when the list is empty);
    drops a file neither its name nor its ``#!`` line places as ``no_language``, another language as
    ``language:<name>``. Rows without a ``language`` column (not code) pass untouched."""

    languages: list[str] = Field(
        default_factory=list, description="language names kept (Python, C++, ...); empty: every known one"
    )

    @field_validator("languages")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        known = sorted(set(LANGUAGES.values()))
        for name in names:
            if name not in known:
                raise ValueError(f"unknown language {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}")
        return names

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        if "language" not in batch.column_names:
            return batch, [None] * batch.num_rows
        wanted = set(self.languages)
        return batch, [
            ("no_language" if lang is None else None if not wanted or lang in wanted else f"language:{lang}")
            for lang in batch.column("language").to_pylist()
        ]
