"""The stage table (``dataprep.core.registry.STAGE_CLASSES``) is complete and right: every stage class in
dataprep's sources is listed under the name its ``@register`` gives it, and every entry imports to a
stage class of that name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import dataprep
from dataprep.core import registry
from dataprep.core.stage import Stage

SOURCES = Path(dataprep.__file__).parent


def _registered_in_sources() -> dict[str, str]:
    """name -> "module:Class" of every class decorated ``@register("name")`` in dataprep's sources."""
    found = {}
    for path in sorted(SOURCES.rglob("*.py")):
        module = ".".join(("dataprep", *path.relative_to(SOURCES).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for decorator in getattr(node, "decorator_list", []) if isinstance(node, ast.ClassDef) else []:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "register":
                    name = decorator.args[0].value
                    assert name not in found, f"stage {name!r} registered twice: {found[name]} and {module}:{node.name}"
                    found[name] = f"{module}:{node.name}"
    return found


def test_the_table_lists_every_registered_stage_class_under_its_name():
    assert registry.STAGE_CLASSES == _registered_in_sources()


@pytest.mark.parametrize("name", sorted(registry.STAGE_CLASSES))
def test_every_entry_imports_to_a_stage_of_that_name(name):
    cls = registry.stage_class(name)
    assert issubclass(cls, Stage) and cls.name == name
    assert f"{cls.__module__}:{cls.__qualname__}" == registry.STAGE_CLASSES[name]


def test_no_concrete_stage_class_is_left_out():
    """Stage subclasses that carry a name (abstract bases have none), found by importing every dataprep
    module: each is in the table."""
    for info in pkgutil.walk_packages([str(SOURCES)], "dataprep."):
        importlib.import_module(info.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    named = {
        f"{c.__module__}:{c.__qualname__}"
        for c in subclasses(Stage)
        if c.__module__.startswith("dataprep.") and isinstance(c.name, str) and c.name
    }
    assert named and named <= set(registry.STAGE_CLASSES.values())


def test_a_wrong_entry_is_refused_with_what_is_wrong(monkeypatch):
    monkeypatch.setitem(registry.STAGE_CLASSES, "renamed", "dataprep.quality.c4:C4Quality")
    with pytest.raises(RuntimeError, match="whose @register name is 'c4_quality'"):
        registry.stage_class("renamed")
