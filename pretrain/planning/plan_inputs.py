"""What ``pretrain plan`` is given, as the planner's inputs: the model (a config, a preset or a parameter
count), the GPU with any figure overridden, and the tokens to train on."""

from __future__ import annotations

from dataclasses import replace

from dataprep.core.errors import UsageError
from dataprep.core.validation import ConfigError
from pretrain.config.model import ModelConfig
from pretrain.planning.budget import parse_number, positive
from pretrain.planning.hardware import GPUSpec, get_gpu
from pretrain.planning.sizing import PRESET_SIZES, resolve_model, size_model


def plan_model(spec: str, seq_len: int | None = None) -> ModelConfig:
    """A model config YAML, a preset, or a parameter count shaped as ``pretrain size`` would (long enough
    for ``seq_len``)."""
    try:
        return resolve_model(spec)
    except ConfigError:  # a model YAML that is missing or does not validate: its own message
        raise
    except ValueError:  # not a preset: a parameter count
        try:
            params = parse_number(spec)
        except ValueError:
            raise UsageError(
                f"model {spec!r} is not a model config YAML, a preset (tiny, "
                f"{', '.join(PRESET_SIZES)}) or a parameter count such as 1.3B"
            ) from None
    cfg = size_model(params)
    return cfg.model_copy(update={"max_seq_len": max(cfg.max_seq_len, seq_len)}) if seq_len else cfg


def plan_gpu(
    name: str,
    precision: str,
    memory_gb: float | None = None,
    peak_flops: str | None = None,
    intra_node_gbs: float | None = None,
    inter_node_gbs: float | None = None,
) -> GPUSpec:
    """The named GPU's specs with the given figures in place of its own."""
    gpu = get_gpu(name)
    if memory_gb is not None:
        gpu = replace(gpu, memory_gb=memory_gb)
    if peak_flops is not None:
        gpu = gpu.with_peak(precision, positive(parse_number(peak_flops), "--peak-flops"))
    for flag, value in (("intra_node_gbs", intra_node_gbs), ("inter_node_gbs", inter_node_gbs)):
        if value is not None:
            if not value > 0:
                raise UsageError(f"--{flag.replace('_', '-')} must be positive")
            gpu = replace(gpu, **{flag: value})
    return gpu


def plan_tokens(tokens: str | None, epochs: float | None, unique: float | None) -> tuple[float | None, str]:
    """The tokens to train on (None: the scaling law's) and where they came from: given, or ``epochs``
    passes over the ``unique`` tokens of the data."""
    if epochs is None:
        return (parse_number(tokens) if tokens else None), "given"
    if tokens or unique is None or not epochs > 0:
        raise UsageError("--epochs needs --data shards with a manifest, a positive count, and no --tokens")
    return epochs * unique, f"{epochs:g} epochs of the data"


def plan_document_tokens(spec: str | None, data: list[str] | None) -> float | None:
    """``--document-mask``: the token-weighted mean document length, given or read from the ``data`` shards'
    index (None: no mask)."""
    if spec is None:
        return None
    if spec != "data":
        value = parse_number(spec)
        return positive(value, "--document-mask")
    if not data:
        raise UsageError(
            "--document-mask without a length reads the documents of the --data shards: give --data, "
            "or the mean document length (--document-mask 900)"
        )
    from dataprep.tokenize.shards import open_dataset
    from pretrain.components.document_bounds import mean_document_tokens

    shards = [shard for path in data for shard in open_dataset(path)]
    return mean_document_tokens(shards)
