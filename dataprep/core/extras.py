"""What to install when an import fails: the extra of ``pyproject.toml`` that brings the package.

One table for both places that ask: a command whose side of the install is missing, and a stage whose
optional dependency is.
"""

from __future__ import annotations

# import name -> the extra (pyproject.toml's optional-dependencies) that brings it
EXTRAS = {
    "pyspark": "data",
    "pandas": "data",
    "resiliparse": "data",
    "trafilatura": "data",
    "fasttext": "data",
    "xxhash": "data",
    "profanity_check": "data",
    "jieba": "data",
    "opencc": "data",
    "lingua": "data",
    "mwparserfromhell": "data",
    "identify": "data",
    "ukkonen": "data",
    "torch": "train",
    "safetensors": "train",
    "transformers": "hf",
    "tokenizers": "hf",
    "lm_eval": "eval",
    "accelerate": "eval",
    "pythainlp": "th",
    "sudachipy": "ja",
    "sudachidict_core": "ja",
    "kenlm": "kenlm",
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "s3fs": "s3",
    "aiohttp": "http",
}


def install_command(module: str) -> str:
    """The ``pip install`` line for a missing top-level import: its extra, else a package of that name."""
    extra = EXTRAS.get(module)
    return f"pip install 'ccpretrain[{extra}]'" if extra else f"pip install {module}"
