"""What every config in the project shares: the error type, the strict base model and the message.

Both the pipeline configs (``dataprep.config``) and the model/training configs (``pretrain.config``)
build on these, so a typo reads the same everywhere: the key, then what is wrong with it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class ConfigError(ValueError):
    """A configuration problem, with the offending key in the message."""


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


def describe(err: ValidationError) -> str:
    """One line per problem: ``dotted.key: message`` (``unknown key`` for a typo)."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        parts.append(f"{loc}: {'unknown key' if e['type'] == 'extra_forbidden' else e['msg']}")
    return "; ".join(parts)
