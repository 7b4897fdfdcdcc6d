"""Imports go one way (ARCHITECTURE.md): ``dataprep`` (the data floor) imports neither ``pipelines`` nor
``pretrain``; ``pipelines`` (Spark) and ``pretrain`` (torch) never import each other. Every import counts,
those inside functions too: the source files are read with ``ast``, not imported. The training section
of ``dataprep report`` reaches ``pretrain`` through the ``ccpretrain.report_sections`` entry point, a name
in pyproject.toml, not an import. No two modules of the project import each other, directly or round a
longer loop."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dataprep", "pipelines", "pretrain")
FORBIDDEN = {"dataprep": {"pipelines", "pretrain"}, "pipelines": {"pretrain"}, "pretrain": {"pipelines"}}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports anywhere in its source: ``from a.b import c`` counts as
    ``a.b.c`` when that is a module, else as ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names)
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {
        name: {m for m in _imports(name, path, known) if m in known and m != name} for name, path in modules.items()
    }


def test_the_walk_sees_imports_inside_functions():
    """The walk itself: an import inside a function body is found (the commands import lazily)."""
    graph = _graph()
    assert "pipelines.spark" in graph["pipelines.commands.classifier"]
    assert "dataprep.quality.arpa" in graph["dataprep.quality.perplexity"]  # imported inside PerplexityModel methods


def test_imports_go_one_way_between_packages():
    offending = sorted(
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if target.split(".")[0] in FORBIDDEN[module.split(".")[0]]
    )
    assert not offending, "\n".join(offending)


def test_no_import_cycle_between_modules():
    graph = _graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_entry_points_sit_on_the_floors_that_hold_their_commands():
    """``dataprep`` starts Spark for some commands, so its entry point is on the pipelines floor."""
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"dataprep": "pipelines.cli:main", "pretrain": "pretrain.cli:main"}


def _top_level_imports(path: Path) -> set[str]:
    """The first name of every module ``path`` imports, anywhere in its source."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_tests_share_helpers_through_support():
    """A helper two test modules use lives in tests/support/, never in a test module."""
    tests = ROOT / "tests"
    test_modules = {p.stem for p in tests.rglob("test_*.py")}
    for path in sorted(tests.rglob("*.py")):
        assert not _top_level_imports(path) & test_modules, (
            f"{path.relative_to(ROOT)} imports a test module: move the helper to tests/support/"
        )


def test_only_the_bench_tests_import_bench_code():
    """A bench imports what it shares with the tests from tests/support/, never the other way round."""
    tests = ROOT / "tests"
    for path in sorted(tests.rglob("*.py")):
        if tests / "bench" not in path.parents:
            assert "bench" not in _top_level_imports(path), f"{path.relative_to(ROOT)} imports bench code"
