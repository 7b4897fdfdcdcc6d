"""Pipeline configuration: one YAML file, validated completely before Spark starts.

An unknown key or a bad value is a ``ConfigError`` that names it (``stages[2] (gopher_quality):
min_words: ...``), so a typo never silently falls back to a default on a thousand-core job. Beyond
syntax, ``load_config`` checks what would otherwise fail on every document: model files exist and load
(``Stage.check_assets``), language codes are ones the model can emit, and on WARC input no stage reads
text before ``extract`` has made it. Every problem is reported at once, one per line.

The presets (``fineweb.yaml``, ``fineweb_filters.yaml``, ...) ship inside the package: a config path or an
``include:`` that is not a file is looked up among them, so ``dataprep run fineweb`` and ``include:
fineweb_filters.yaml`` work from any directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator

from dataprep.core.inputs import COMMON_CRAWL_PREFIX
from dataprep.core.registry import MissingDependency, stage_class
from dataprep.core.stage import Stage
from dataprep.core.storage import read_text
from dataprep.core.validation import ConfigError, StrictModel, apply_overrides, did_you_mean, problems

__all__ = ["ConfigError", "PipelineConfig", "find_config", "load_config", "parse_stages", "presets"]

PRESET_DIR = Path(__file__).resolve().parents[1] / "configs"  # the shipped pipeline configs and stage lists


def presets() -> list[str]:
    """Names of the shipped pipeline configs and stage lists (``fineweb``, ``fineweb_filters``, ...)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def find_config(path: str, base_dir: str | None = None) -> str | None:
    """``path`` relative to ``base_dir`` (an including file's folder), then to the working directory,
    then as a shipped preset (``fineweb`` or ``fineweb.yaml``); None when none exists."""
    candidates = (
        [path]
        if os.path.isabs(path) or "://" in path
        else [*([os.path.join(base_dir, path)] if base_dir else []), path]
    )
    name = os.path.basename(path)
    if name == path:
        candidates += [str(PRESET_DIR / name), str(PRESET_DIR / f"{name}.yaml")]
    return next((c for c in candidates if "://" in c or os.path.isfile(c)), None)


SPARK_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn|(spark|k8s|mesos)://\S+)$")


class InputConfig(StrictModel):
    paths: list[str] = Field(
        default_factory=list, description="files, directories, globs, *.paths(.gz) listings, s3:// or https:// URLs"
    )
    format: Literal[
        "auto", "warc", "wet", "jsonl", "parquet", "arrow", "wikipedia", "stackexchange", "books", "arxiv", "code"
    ] = "auto"
    paths_prefix: str = COMMON_CRAWL_PREFIX  # prepended to relative lines of a paths listing
    batch_size: int = Field(500, gt=0, description="documents per Arrow batch")
    batch_bytes: int = Field(
        64 << 20,
        gt=0,
        description="a batch also ends once its kept payloads reach this size (bytes of HTML, characters of text): "
        "bounds a worker's memory on crawls of large pages",
    )
    max_document_bytes: int = Field(5_000_000, gt=0, description="larger payloads are dropped as too_large")
    text_field: str = "text"  # for jsonl/parquet/arrow inputs
    id_field: str = "id"


class OutputConfig(StrictModel):
    dir: str = "out/pipeline"
    write_dropped: bool = False  # keep dropped documents' text, with stage and reason, for audit
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"


class SparkConfig(StrictModel):
    master: str | None = None  # None: spark-submit's --master, else local[*]
    app_name: str = "ccpretrain"
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _known_master(cls, master):
        """A master Spark cannot parse fails only once its JVM starts, in a long Java traceback."""
        if master is not None and not SPARK_MASTER.match(master):
            raise ValueError(
                f"{master!r} is not a Spark master: local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL"
            )
        return master

    @field_validator("conf", mode="before")
    @classmethod
    def _as_strings(cls, conf):
        """Spark takes every setting as a string; YAML reads ``512`` and ``true`` as numbers and booleans."""
        if isinstance(conf, dict):
            return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()}
        return conf


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
    _source_path: str | None = PrivateAttr(None)  # the YAML file it was read from (lineage), if any

    @property
    def source_path(self) -> str | None:
        return self._source_path


def expand_includes(items: list, base_dir: str) -> list:
    """Replace ``{include: preset.yaml}`` entries with that file's ``stages`` list (path relative to
    the including file, then to the working directory, then a shipped preset)."""
    out = []
    for item in items:
        if isinstance(item, dict) and set(item) == {"include"}:
            path = item["include"]
            found = find_config(path, base_dir)
            if found is None:
                raise ConfigError(
                    f"stages: include {path!r} not found next to the config, in the working directory "
                    f"or among the presets ({', '.join(presets())}){did_you_mean(path, presets())}"
                )
            preset = yaml.safe_load(read_text(found)) or {}
            if not isinstance(preset, dict) or not isinstance(preset.get("stages"), list):
                raise ConfigError(f"stages: include {path!r} must be a mapping with a 'stages' list")
            out.extend(expand_includes(preset["stages"], os.path.dirname(found)))
        else:
            out.append(item)
    return out


def parse_stages(items: list, base_dir: str = ".") -> list[Stage]:
    """Validated stages from a config's ``stages`` list, ``include:`` entries expanded."""
    items = expand_includes(items, base_dir) if isinstance(items, list) else None
    stages, errors = _parse_stages(items, base_dir)
    if errors:
        raise ConfigError("\n".join(errors))
    return stages


def _parse_stages(items: list | None, base_dir: str) -> tuple[list[Stage], list[str]]:
    """The validated stages and one message per problem (all stages are checked)."""
    if items is None:
        return [], ["stages: must be a list of {stage: NAME, ...parameters}"]
    stages: list[Stage] = []
    errors: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "stage" not in item:
            errors.append(f"stages[{i}]: each entry needs a 'stage: NAME' key")
            continue
        params = dict(item)
        name = params.pop("stage")
        try:
            cls = stage_class(name)
        except (KeyError, MissingDependency) as exc:
            errors.append(f"stages[{i}]: {exc.args[0]}")
            continue
        try:
            stages.append(cls.model_validate(params))
        except ValidationError as exc:
            errors += [f"stages[{i}] ({name}): {line}" for line in problems(exc, cls)]
    return stages, errors


def load_config(
    data: dict | str, overrides: dict | None = None, check_assets: bool = True, sets: list[str] | None = None
) -> PipelineConfig:
    """Build a validated config from a YAML path (or a preset name) or a dict.

    ``overrides`` (from the command line) replace top-level sections' keys, e.g. {"input": {"paths":
    [...]}, "output": {"dir": ...}}; ``sets`` are dotted assignments (``stages.1.threshold=0.5``,
    indices of the stage list after includes are expanded). ``check_assets`` False skips loading models
    (for configs whose models an earlier command makes). Raises one ConfigError listing every problem."""
    base_dir, source = ".", None
    if isinstance(data, str):
        path = source = find_config(data)
        if path is None:
            raise ConfigError(
                f"config file {data!r} does not exist (presets: {', '.join(presets())}){did_you_mean(data, presets())}"
            )
        base_dir = os.path.dirname(os.path.abspath(path))
        try:
            data = yaml.safe_load(read_text(path)) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("config must be a mapping with input/output/spark/stages sections")
    data = dict(data)
    for section, values in (overrides or {}).items():
        data[section] = {**(data.get(section) or {}), **values}
    if isinstance(data.get("stages"), list):
        data["stages"] = expand_includes(data["stages"], base_dir)
    data = apply_overrides(data, sets or [])
    raw_stages = data.pop("stages", []) or []
    stages, errors = _parse_stages(raw_stages if isinstance(raw_stages, list) else None, base_dir)
    try:
        config = PipelineConfig.model_validate(data)
    except ValidationError as exc:
        errors = [*problems(exc, PipelineConfig), *errors]
        config = None
    if errors:
        raise ConfigError("\n".join(errors))
    config.stages = stages
    config._source_path = source and os.path.abspath(source)
    check_stages(config, check_assets)
    return config


def check_stages(config: PipelineConfig, check_assets: bool = True) -> None:
    """Failures that would otherwise show only as every document dropped: unloadable models and
    tokenizers, and a stage that reads text before ``extract`` on HTML input."""
    errors = []
    for i, stage in enumerate(config.stages if check_assets else []):
        try:
            stage.check_assets()
        except (ValueError, OSError) as exc:
            errors.append(f"stages[{i}] ({stage.name}): {exc}")
    if errors:
        raise ConfigError("\n".join(errors))
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
