"""The training config's ``data:`` section: the token-shard sources, their mixture weights and phases, the
cache for shards at a URL, and document masking."""

from __future__ import annotations

import math

from pydantic import Field, ValidationError, field_validator, model_validator

from dataprep.core.validation import ConfigError, StrictModel, describe


class DataSource(StrictModel):
    path: str  # a token-shard directory with manifest.json: a local folder or an fsspec URL
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)  # share of training tokens drawn from this source
    name: str | None = None  # in the metrics' per-source token counts (default: the path)
    preset: str | None = None  # the pipeline preset that builds it, named when the folder is missing


class DataCacheConfig(StrictModel):
    """Where and how shards at a URL (s3://, gs://, https://, file://) are cached; local shards are memory-mapped."""

    dir: str | None = None  # default: <out_dir>/data_cache; each process uses its own rank-<k> subfolder
    max_bytes: int = Field(8 * 2**30, gt=0)  # per process; least recently used blocks are evicted first
    block_bytes: int = Field(2**20, gt=0)  # one ranged request reads one block
    read_ahead_steps: int = Field(4, ge=0)  # optimizer steps of samples fetched ahead by worker threads
    workers: int = Field(32, gt=0)  # requests in flight at once: at least samples/s x latency
    retries: int = Field(5, ge=0)  # on connection errors and 5xx, with exponential backoff
    backoff_s: float = Field(0.5, ge=0)  # wait before the first retry; doubles each time

    @model_validator(mode="after")
    def _check_block(self) -> "DataCacheConfig":
        if self.block_bytes > self.max_bytes:
            raise ValueError(f"data.cache.block_bytes {self.block_bytes} exceeds data.cache.max_bytes {self.max_bytes}")
        return self


class MixturePhase(StrictModel):
    """Until ``until`` (a fraction of the run's tokens, after the previous phase's), draw the sources by
    ``weights`` (source name -> share of training tokens; a source left out gets none)."""

    until: float = Field(gt=0, le=1)
    weights: dict[str, float]

    @model_validator(mode="after")
    def _check_weights(self) -> "MixturePhase":
        if any(w < 0 for w in self.weights.values()) or not any(w > 0 for w in self.weights.values()):
            raise ValueError(
                f"data.phases: the phase until {self.until:g} needs non-negative weights, one of them positive"
            )
        return self


class DataConfig(StrictModel):
    sources: list[DataSource]
    mixture: str | None = None  # a mixture preset name or file (pretrain/mixture_presets.py); it fills sources
    val_fraction: float = Field(0.01, ge=0, lt=1)  # documents held out for validation
    seed: int = 1234
    cache: DataCacheConfig = Field(default_factory=DataCacheConfig)  # for sources given as URLs
    # attention within documents (pretrain/models/documents.py), and rotary positions restarting at each
    # document (default: on with the mask)
    document_mask: bool = False
    document_positions: bool | None = None
    # the mixture's weights in phases of the run (pretrain/components/mixture_order.py); None: the sources'
    # weights throughout. Validation keeps the sources' weights, so its loss compares across phases.
    phases: list[MixturePhase] | None = None

    def source_names(self) -> list[str]:
        """Each source's name in the metrics and in ``phases``: its ``name``, else its path."""
        return [s.name or s.path for s in self.sources]

    @model_validator(mode="after")
    def _check_phases(self) -> "DataConfig":
        if not self.phases:
            return self
        untils = [p.until for p in self.phases]
        if any(b <= a for a, b in zip(untils, untils[1:])) or untils[-1] != 1.0:
            raise ValueError(
                f"data.phases: `until` must increase and the last be 1.0 (the end of the run), got {untils}"
            )
        names = self.source_names()
        for phase in self.phases:
            unknown = sorted(set(phase.weights) - set(names))
            if unknown:
                raise ValueError(
                    f"data.phases: the phase until {phase.until:g} weighs {', '.join(unknown)}, not a "
                    f"source of this run (sources: {', '.join(names)})"
                )
        return self

    def phase_weights(self) -> list[tuple[float, list[float]]]:
        """Each phase's end (a fraction of the run) and its weight per source, in the order of ``sources``."""
        phases = self.phases or [
            MixturePhase(until=1.0, weights=dict(zip(self.source_names(), (s.weight for s in self.sources))))
        ]
        return [(p.until, [p.weights.get(name, 0.0) for name in self.source_names()]) for p in phases]

    @model_validator(mode="after")
    def _check_documents(self) -> "DataConfig":
        if self.document_positions and not self.document_mask:
            raise ValueError(
                "data.document_positions restarts positions at documents the model attends across: "
                "set data.document_mask: true too"
            )
        if self.document_positions is None:
            self.document_positions = self.document_mask
        return self

    @field_validator("sources")
    @classmethod
    def _check_sources(cls, sources: list[DataSource]) -> list[DataSource]:
        """Weights that add up to a number, and each folder and name once (a source listed twice would be
        drawn as two, and its per-source counts would merge)."""
        if not sources:
            raise ValueError("empty: name at least one token-shard folder")
        if not math.isfinite(sum(s.weight for s in sources)):
            raise ValueError(
                f"the weights {[s.weight for s in sources]} do not add up to a finite number: give "
                "them as shares (0.7, 0.3) or token counts"
            )
        for key in ("path", "name"):
            seen: dict[str, int] = {}
            for i, source in enumerate(sources):
                value = source.path if key == "path" else source.name or source.path
                if value in seen:
                    raise ValueError(
                        f"source {i} has the {key} {value!r} of source {seen[value]}: list each "
                        "source once (its weight is its share)"
                    )
                seen[value] = i
        return sources


def check_sources(sources: list, where: str) -> None:
    """The checks ``data.sources`` gets (weights, each source once) for sources read on their own (a
    mixture), so that ``pretrain budget`` refuses what ``pretrain train`` refuses; ``where`` names them."""
    try:
        DataConfig.model_validate({"sources": sources})
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe(exc, DataConfig)}") from None
