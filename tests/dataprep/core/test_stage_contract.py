"""The stage contract: declared output columns, a stage's own counters, one registration per stage,
and a missing optional dependency named instead of a stage silently vanishing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dataprep.core import registry
from dataprep.core.config import ConfigError, parse_stages
from dataprep.core.runner import fused_schema, run_stages
from dataprep.core.stage import DocumentStage, GlobalStage


def _docs(texts: list[str]) -> pa.Table:
    n = len(texts)
    return pa.table(
        {"id": [str(i) for i in range(n)], "url": [None] * n, "date": [None] * n, "source": ["t"] * n, "text": texts}
    )


class _Shouty(DocumentStage):
    """Adds ``shout`` and counts exclamation marks; drops texts without one."""

    name = "shouty"

    def output_fields(self) -> list[pa.Field]:
        return [pa.field("shout", pa.bool_())]

    def process(self, batch):
        texts = batch.column("text").to_pylist()
        self.count("exclamations", sum(t.count("!") for t in texts))
        batch = batch.append_column("shout", pa.array(["!" in t for t in texts]))
        return batch, [None if "!" in t else "quiet" for t in texts]


class _Undeclared(DocumentStage):
    name = "undeclared"

    def process(self, batch):
        return batch.append_column("surprise", pa.array([1] * batch.num_rows)), [None] * batch.num_rows


def test_schema_comes_from_declarations_without_running_the_stage():
    class NeverRuns(_Shouty):
        def process(self, batch):
            raise AssertionError("the schema must not need a run")

    schema = fused_schema([NeverRuns()], _docs([]).schema)
    assert schema.names == ["id", "url", "date", "source", "text", "shout", "drop_stage", "drop_reason"]


def test_every_document_stage_returns_what_it_declares():
    extract = registry.stage_class("extract")()
    assert "html" not in extract.output_schema(pa.schema([("text", pa.string()), ("html", pa.binary())])).names
    langid = registry.stage_class("langid")()
    assert langid.output_schema(_docs([]).schema).names[-2:] == ["lang", "lang_score"]
    result, _ = run_stages([langid], _docs(["A plain English sentence about the weather today."]))
    assert result.kept.column_names[-2:] == ["lang", "lang_score"]


def test_an_undeclared_column_fails_loudly_instead_of_vanishing_on_spark():
    with pytest.raises(RuntimeError, match="surprise.*declare"):
        _Undeclared().apply(_docs(["text"]))


def test_a_stage_counts_its_own_events_into_its_stats():
    (result, stats) = run_stages([_Shouty()], _docs(["hi!!", "hello", "yes!"]))
    assert result.kept.num_rows == 2
    (shouty,) = stats
    assert shouty.counters == {"exclamations": 3}
    assert shouty.to_dict()["counters"] == {"exclamations": 3}
    assert type(shouty).from_dict(shouty.to_dict()).counters == {"exclamations": 3}


def test_extract_reports_pages_routed_to_trafilatura():
    listing = (
        "<html><body>" + "".join(f'<div><a href="/p{i}">Product {i}</a></div>' for i in range(40)) + "</body></html>"
    )
    table = _docs([""]).append_column("html", pa.array([listing.encode()], pa.binary()))
    _, (stats,) = run_stages([registry.stage_class("extract")()], table)
    assert stats.counters["routed_to_trafilatura"] == 1


def test_every_global_stage_is_one_definition_with_a_spark_decision():
    """No global stage writes its own in-memory runner: it declares the parts, and Spark knows its decision."""
    from pipelines.global_runners import global_runner

    found = []
    for name in registry.stage_names():
        cls = registry.stage_class(name)
        if not issubclass(cls, GlobalStage):
            continue
        found.append(name)
        assert all("run_local" not in base.__dict__ for base in cls.__mro__ if base is not GlobalStage), (
            f"{name} overrides run_local"
        )
        assert cls.decide is not GlobalStage.decide and cls.applier is not GlobalStage.applier, name
        assert cls.prepared_schema is None or cls.prepare is not GlobalStage.prepare, name
        runner = global_runner(cls.model_construct())
        assert not runner.prepares or cls.prepared_schema is not None, name
    assert set(found) >= {"exact_dedup", "minhash_dedup", "url_dedup", "paragraph_dedup", "top_fraction", "tokenize"}


def test_a_missing_optional_dependency_names_the_package(tmp_path, monkeypatch):
    (tmp_path / "needs_a_package.py").write_text("import no_such_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry.STAGE_CLASSES, "fancy", "needs_a_package:Fancy")
    with pytest.raises(registry.MissingDependency, match="stage 'fancy' needs .*no_such_package_xyz.*pip install"):
        registry.stage_class("fancy")
    with pytest.raises(ConfigError, match=r"stages\[0\]: stage 'fancy' needs"):
        parse_stages([{"stage": "fancy"}])
