"""Size limits that keep each module about one concern (ARCHITECTURE.md, "Where a thing goes"): no module of the three
packages over 400 lines, no class in ``pipelines/`` over 250 and no function anywhere over 100. A module that
outgrows its limit is split along its concerns, not squeezed under it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dataprep", "pipelines", "pretrain")
MODULE_LINES = 400
PIPELINES_CLASS_LINES = 250
FUNCTION_LINES = 100


def _sources() -> dict[str, str]:
    return {
        p.relative_to(ROOT).as_posix(): p.read_text()
        for package in PACKAGES
        for p in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def definitions_over(source: str, kinds: tuple[type, ...], limit: int) -> list[str]:
    """``name (N lines)`` for each definition of ``kinds`` in ``source`` longer than ``limit`` lines,
    decorators included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, kinds):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - first + 1
            if length > limit:
                found.append(f"{node.name} ({length} lines)")
    return found


def test_definitions_over_counts_a_class_with_its_decorators():
    source = "@dataclass\nclass Run:\n    a: int\n    b: int\n\ndef short():\n    return 1\n"
    assert definitions_over(source, (ast.ClassDef,), 3) == ["Run (4 lines)"]
    assert definitions_over(source, (ast.FunctionDef,), 2) == []


def test_no_module_is_over_the_line_limit():
    long = {path: len(text.splitlines()) for path, text in _sources().items()}
    assert {path: n for path, n in long.items() if n > MODULE_LINES} == {}


def test_no_pipelines_class_is_over_the_line_limit():
    found = {
        path: over
        for path, text in _sources().items()
        if path.startswith("pipelines/") and (over := definitions_over(text, (ast.ClassDef,), PIPELINES_CLASS_LINES))
    }
    assert found == {}


def test_no_function_is_over_the_line_limit():
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef)
    found = {path: over for path, text in _sources().items() if (over := definitions_over(text, kinds, FUNCTION_LINES))}
    assert found == {}
