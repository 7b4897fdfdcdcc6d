"""Pipeline configuration: one YAML file, validated completely before Spark starts.

An unknown key or a bad value is a ``ConfigError`` that names it (``stages[2] (gopher_quality):
min_words: ...``), so a typo never silently falls back to a default on a thousand-core job. Beyond
syntax, ``load_config`` checks what would otherwise fail on every document: model files exist and load
(``Stage.check_assets``), language codes are ones the model can emit, and on WARC input no stage reads
text before ``extract`` has made it.
"""

from __future__ import annotations

import os
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from dataprep.io import COMMON_CRAWL_PREFIX, read_text
from dataprep.registry import MissingDependency, stage_class
from dataprep.stage import Stage
from dataprep.validation import ConfigError, StrictModel, describe

__all__ = ["ConfigError", "PipelineConfig", "load_config", "parse_stages"]


class InputConfig(StrictModel):
    paths: list[str] = Field(default_factory=list, description="files, directories, globs, *.paths(.gz) listings, s3:// or https:// URLs")
    format: Literal["auto", "warc", "wet", "jsonl", "parquet"] = "auto"
    paths_prefix: str = COMMON_CRAWL_PREFIX  # prepended to relative lines of a paths listing
    batch_size: int = Field(500, gt=0, description="documents per Arrow batch")
    max_document_bytes: int = Field(5_000_000, gt=0, description="larger payloads are dropped as too_large")
    text_field: str = "text"  # for jsonl/parquet inputs
    id_field: str = "id"


class OutputConfig(StrictModel):
    dir: str = "out/pipeline"
    write_dropped: bool = False  # keep dropped documents' text, with stage and reason, for audit
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"


class SparkConfig(StrictModel):
    master: str | None = None  # None: spark-submit's --master, else local[*]
    app_name: str = "ccpretrain"
    conf: dict[str, str] = Field(default_factory=dict)


class ErrorBudget(StrictModel):
    """A step fails (no done marker, non-zero exit) when one of its stages drops more documents as
    ``error:*`` than both ``min_errors`` and ``max_fraction`` of its input: a broken model or install
    then stops the job instead of silently emptying the corpus."""

    max_fraction: float = Field(0.05, ge=0.0, le=1.0, description="errors allowed as a share of a stage's documents")
    min_errors: int = Field(10, ge=0, description="errors always allowed (small inputs, a few odd records)")


class PipelineConfig(StrictModel):
    input: InputConfig = Field(default_factory=InputConfig)
    output: OutputConfig = Field(default_factory=OutputConfig)
    spark: SparkConfig = Field(default_factory=SparkConfig)
    error_budget: ErrorBudget = Field(default_factory=ErrorBudget)
    stages: list[Stage] = Field(default_factory=list)



def expand_includes(items: list, base_dir: str) -> list:
    """Replace ``{include: preset.yaml}`` entries with that file's ``stages`` list (path relative to
    the including file, then to the working directory)."""
    out = []
    for item in items:
        if isinstance(item, dict) and set(item) == {"include"}:
            path = item["include"]
            candidates = [os.path.join(base_dir, path), path] if not os.path.isabs(path) else [path]
            found = next((p for p in candidates if os.path.exists(p)), None)
            if found is None:
                raise ConfigError(f"stages: include {path!r} not found (looked in {', '.join(candidates)})")
            preset = yaml.safe_load(read_text(found)) or {}
            if not isinstance(preset, dict) or not isinstance(preset.get("stages"), list):
                raise ConfigError(f"stages: include {path!r} must be a mapping with a 'stages' list")
            out.extend(expand_includes(preset["stages"], os.path.dirname(found)))
        else:
            out.append(item)
    return out


def parse_stages(items: list, base_dir: str = ".") -> list[Stage]:
    stages: list[Stage] = []
    if not isinstance(items, list):
        raise ConfigError("stages: must be a list of {stage: NAME, ...parameters}")
    for i, item in enumerate(expand_includes(items, base_dir)):
        if not isinstance(item, dict) or "stage" not in item:
            raise ConfigError(f"stages[{i}]: each entry needs a 'stage: NAME' key")
        params = dict(item)
        name = params.pop("stage")
        try:
            cls = stage_class(name)
        except (KeyError, MissingDependency) as exc:
            raise ConfigError(f"stages[{i}]: {exc.args[0]}") from None
        try:
            stages.append(cls.model_validate(params))
        except ValidationError as exc:
            raise ConfigError(f"stages[{i}] ({name}): {describe(exc)}") from None
    return stages


def load_config(data: dict | str, overrides: dict | None = None, check_assets: bool = True) -> PipelineConfig:
    """Build a validated config from a YAML path or a dict; ``overrides`` (from the command line)
    replace top-level sections' keys, e.g. {"input": {"paths": [...]}, "output": {"dir": ...}}.
    ``check_assets`` False skips loading models (for configs whose models an earlier command makes)."""
    base_dir = "."
    if isinstance(data, str):
        base_dir = os.path.dirname(os.path.abspath(data))
        try:
            data = yaml.safe_load(read_text(data)) or {}
        except FileNotFoundError:
            raise ConfigError(f"config file {data!r} does not exist") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config must be a mapping with input/output/spark/stages sections")
    data = dict(data)
    for section, values in (overrides or {}).items():
        data[section] = {**(data.get(section) or {}), **values}
    stages = parse_stages(data.pop("stages", []) or [], base_dir)
    try:
        config = PipelineConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe(exc)) from None
    config.stages = stages
    check_stages(config, check_assets)
    return config


def check_stages(config: PipelineConfig, check_assets: bool = True) -> None:
    """Failures that would otherwise show only as every document dropped: unloadable models and
    tokenizers, and a stage that reads text before ``extract`` on HTML input."""
    for i, stage in enumerate(config.stages if check_assets else []):
        try:
            stage.check_assets()
        except (ValueError, OSError) as exc:
            raise ConfigError(f"stages[{i}] ({stage.name}): {exc}") from None
    if not _html_input(config.input):
        return
    for i, stage in enumerate(config.stages):
        if stage.name == "extract":
            return
        if stage.reads_text:
            raise ConfigError(
                f"stages[{i}] ({stage.name}) reads the document text, but the input is WARC (HTML) and no extract "
                "stage comes before it: every document would be dropped as empty. Put `- stage: extract` first."
            )


def _html_input(cfg: InputConfig) -> bool:
    """Whether documents arrive as HTML (WARC responses) rather than text (WET, JSONL, Parquet)."""
    if cfg.format != "auto":
        return cfg.format == "warc"
    names = [p.lower().removesuffix(".gz") for p in cfg.paths]
    return any(n.endswith(".warc") or n.endswith("warc.paths") for n in names)
