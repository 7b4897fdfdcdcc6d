"""The docs name what exists: docs/stages.md, the stage reference, has one section per registered stage
(a ``### `name``` heading), no section for a stage that does not exist, and the settings it names are the
stage's own; every repository file, test and ``package.module.name`` that docs/*.md and ARCHITECTURE.md
name is there, in the module that defines it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES_DOC = ROOT / "docs" / "stages.md"


def documented_stages(text: str) -> dict[str, list[str]]:
    """Stage name -> the lines of its section (from its ``### `name``` heading to the next heading)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = re.match(r"^(#+)\s", line)
        if heading:
            name = re.fullmatch(r"### `([A-Za-z0-9_]+)`\s*", line)
            current = None
            if name:
                assert name.group(1) not in sections, f"docs/stages.md documents {name.group(1)!r} twice"
                current = sections[name.group(1)] = []
        elif current is not None:
            current.append(line)
    return sections


def _setting_names(section: list[str]) -> list[str]:
    """The settings a section's bullets lead with: the backticked names before the first colon, outside
    parentheses (``- `ngram`, `char_ngram`: the shingles`` names ngram and char_ngram)."""
    bullets: list[str] = []
    in_bullet = False
    for line in section:
        if line.startswith("- "):
            bullets.append(line[2:])
            in_bullet = True
        elif in_bullet and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()  # the bullet's continuation
        else:
            in_bullet = False
    names = []
    for bullet in bullets:
        lead = re.sub(r"\([^()]*\)", "", bullet).split(":", 1)[0]
        names += re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", lead)
    return names


def test_stage_reference_documents_exactly_the_registered_stages():
    from dataprep.core.registry import stage_names

    documented = set(documented_stages(STAGES_DOC.read_text(encoding="utf-8")))
    registered = set(stage_names())
    assert sorted(registered - documented) == [], "stages missing from docs/stages.md: add a section for each"
    assert sorted(documented - registered) == [], "docs/stages.md documents stages the registry does not know"


def test_stage_reference_names_each_stages_kind():
    from dataprep.core.registry import stage_class
    from dataprep.core.stage import DocumentStage

    for name, section in documented_stages(STAGES_DOC.read_text(encoding="utf-8")).items():
        first = next(line for line in section if line.strip())
        kind = "Document stage" if issubclass(stage_class(name), DocumentStage) else "Global stage"
        assert first.startswith(kind), f"docs/stages.md: {name} should start with {kind!r}: {first!r}"


def test_stage_reference_names_only_real_settings():
    from dataprep.core.registry import stage_class

    for name, section in documented_stages(STAGES_DOC.read_text(encoding="utf-8")).items():
        cls = stage_class(name)
        settings = _setting_names(section)
        assert settings, f"docs/stages.md names no settings of {name}"
        unknown = sorted(set(settings) - set(cls.model_fields))
        assert unknown == [], f"docs/stages.md names settings {name} does not have: {unknown}"


TOP_FOLDERS = "dataprep|pipelines|pretrain|bench|tests|scripts|configs|docs"
REPO_PATH = re.compile(rf"(?<![\w./-])((?:{TOP_FOLDERS})/[\w./-]*\w)(?:::(\w+))?")
FILE_NAME = re.compile(r"(?<![\w./-])([\w-]+\.(?:py|yaml|sh|sbatch))\b")
DOTTED = re.compile(r"(?<![\w./-])((?:dataprep|pipelines|pretrain|bench)(?:\.\w+)+)")
NOT_REPO_FILES = {
    "docs/s": "documents per second",
    "job.yaml": "the user's own config in an example",
    "_pb2.py": "a file-name pattern (protobuf's generated modules) code_quality drops",
}


def _defined_names(node: ast.Module | ast.ClassDef) -> dict[str, ast.AST]:
    """Names a module or class body defines itself (functions, classes, assignments): an imported name
    does not count, so a doc names the module where a function lives, not one that re-exports it."""
    names: dict[str, ast.AST] = {}
    for child in node.body:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[child.name] = child
        elif isinstance(child, (ast.Assign, ast.AnnAssign)):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            names.update((n.id, child) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _missing_dotted(dotted: str) -> str | None:
    """Why ``package.module[.name[.attribute]]`` does not exist, or None: the longest prefix that is a
    module or package, then each name defined in it (a class's methods and fields for the next one)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:i])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not source.is_file():
            continue
        scope: dict[str, ast.AST] = _defined_names(ast.parse(source.read_text(encoding="utf-8")))
        for name in parts[i:]:
            if name not in scope:
                return f"{'.'.join(parts[:i])} does not define {name}"
            node = scope[name]
            scope = _defined_names(node) if isinstance(node, ast.ClassDef) else {}
        return None
    return "no such module"


def named_in_docs(text: str, repo_files: set[str]) -> list[str]:
    """What a page names that is not there: repository paths (``tests/x.py::test_y`` with its test),
    bare file names no tracked file has, and dotted module paths."""
    problems = []
    for match in REPO_PATH.finditer(text):
        path, test = match.group(1).rstrip("."), match.group(2)
        if path in NOT_REPO_FILES:
            continue
        if not (ROOT / path).exists():
            problems.append(f"{path}: no such file")
        elif test and not re.search(rf"^\s*def {test}\(", (ROOT / path).read_text(encoding="utf-8"), re.M):
            problems.append(f"{path}::{test}: no such test")
    for match in FILE_NAME.finditer(text):
        name = match.group(1)
        if name not in NOT_REPO_FILES and not name.split(".")[0].isupper() and name not in repo_files:
            problems.append(f"{name}: no file of that name")
    for match in DOTTED.finditer(text):
        dotted = match.group(1).rstrip(".")
        if re.search(r"\.(py|md|yaml|json|sh)$", dotted):
            continue  # a file name, checked above
        why = _missing_dotted(dotted)
        if why:
            problems.append(f"{dotted}: {why}")
    return problems


def test_docs_name_only_files_tests_and_functions_that_exist():
    repo_files = {p.name for folder in TOP_FOLDERS.split("|") for p in (ROOT / folder).rglob("*") if p.is_file()}
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "ARCHITECTURE.md"]
    problems = [
        f"{page.relative_to(ROOT)}: {problem}"
        for page in pages
        for problem in named_in_docs(page.read_text(encoding="utf-8"), repo_files)
    ]
    assert problems == [], "docs name what does not exist (fix the name, or NOT_REPO_FILES for a non-file)"


def test_the_docs_check_catches_a_function_named_in_a_module_that_only_imports_it():
    """pretrain.planning.plan imports layout_memory from plan_memory, where it is defined."""
    text = (
        "`pretrain.planning.plan.layout_memory`, `tests/pretrain/planning/test_plan.py::test_nothing_here`, `nope.py`"
    )
    assert named_in_docs(text, {"plan.py"}) == [
        "tests/pretrain/planning/test_plan.py::test_nothing_here: no such test",
        "nope.py: no file of that name",
        "pretrain.planning.plan.layout_memory: pretrain.planning.plan does not define layout_memory",
    ]
    assert named_in_docs("`pretrain.planning.plan_memory.layout_memory` in `pretrain/planning/plan.py`", set()) == []


PACKAGES = ("dataprep", "pipelines", "pretrain")


def architecture_map(text: str) -> list[str]:
    """The module paths ARCHITECTURE.md's map lists, in its order: each ``### `folder/``` heading, then the
    ``- `name.py``` bullets under it."""
    listed: list[str] = []
    folder = None
    for line in text.splitlines():
        heading = re.match(r"^#{2,3} `([a-z_/]+)/`", line)
        if heading:
            folder = heading.group(1)
        elif line.startswith("#"):
            folder = None
        elif folder:
            bullet = re.match(r"^- `([a-z0-9_]+\.py)`:", line)
            if bullet:
                listed.append(f"{folder}/{bullet.group(1)}")
    return listed


def package_modules() -> list[str]:
    """Every module of the three packages, folder by folder in the tree's order (``__init__.py`` left out)."""
    modules = [
        p.relative_to(ROOT).as_posix()
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    ]
    return sorted(modules, key=lambda path: (path.rsplit("/", 1)[0], path.rsplit("/", 1)[1]))


def test_architecture_map_lists_every_module_once_in_tree_order():
    listed = architecture_map((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    modules = package_modules()
    assert sorted(set(modules) - set(listed)) == [], "modules missing from ARCHITECTURE.md's map: add a line each"
    assert sorted(set(listed) - set(modules)) == [], "ARCHITECTURE.md's map lists modules that do not exist"
    assert len(listed) == len(set(listed)), "ARCHITECTURE.md's map lists a module twice"
    assert listed == modules, "ARCHITECTURE.md's map is not in the tree's order (folders, then names, sorted)"


def test_the_architecture_check_catches_a_missing_module():
    text = "### `pretrain/models/`\n- `llama.py`: the decoder.\n## Elsewhere\n- `hf_adapter.py`: not in a folder."
    assert architecture_map(text) == ["pretrain/models/llama.py"]
