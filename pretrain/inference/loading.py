"""A trained model ready for inference, from any CHECKPOINT form; ``generate``, ``eval`` and ``export``
start here.

A CHECKPOINT is a ``step-*`` directory, a run's checkpoint folder or out_dir (its best checkpoint when
``checkpoint.keep_best`` marked one, else the latest), or a
``model.safetensors`` written at the end of a run (or by ``pretrain export --to ccpretrain``). The run's
``config.yaml`` is looked up beside it; through it the tokenizer is found: the run's own ``tokenizer/``
copy (written by ``save_run_dir`` when training starts, so a run folder can move or be copied to
another machine), else the run's data sources -> their ``tokenizer/`` (or an explicit folder).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass

import torch

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import join_path
from dataprep.core.validation import ConfigError
from dataprep.tokenize.manifest import TOKENIZER_DIR, load_manifest
from dataprep.tokenize.tokenizer import Tokenizer
from pretrain.components import checkpoint, checkpoint_folder
from pretrain.components.remote_shards import is_remote, load_remote_manifest
from pretrain.config.loading import load_model_config, load_train_config
from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig
from pretrain.models.llama import Llama

RUN_CONFIG = "config.yaml"  # written by pretrain.train into out_dir
RUN_MANIFEST = "data_manifest.json"  # the first data source's manifest, beside out_dir/tokenizer/
FINAL_WEIGHTS = "model.safetensors"


@dataclass
class Trained:
    """A trained model's weights (our names, full tensors) and what describes it."""

    weights: dict[str, torch.Tensor]
    model: ModelConfig
    run: TrainConfig | None  # None when the run's config.yaml is not beside the checkpoint
    path: str
    step: int | None
    run_dir: str | None = None  # the folder holding the run's config.yaml


def save_run_dir(cfg: TrainConfig) -> None:
    """The run's ``config.yaml`` with absolute paths (no meaning that depends on the working directory)
    and a copy of its tokenizer with the data manifest, so eval, generate and export work on the run
    folder alone, wherever it is moved."""
    from dataprep.core.storage import atomic_write_text
    from pretrain.config.loading import save_yaml

    sources = [
        s if is_remote(s.path) else s.model_copy(update={"path": os.path.abspath(s.path)}) for s in cfg.data.sources
    ]
    # the sources a mixture named are written out, so the mixture is not named again (both would not load)
    portable = cfg.model_copy(
        update={
            "data": cfg.data.model_copy(update={"sources": sources, "mixture": None}),
            "out_dir": os.path.abspath(cfg.out_dir),
            "init_from": cfg.init_from and os.path.abspath(cfg.init_from),
            "eval": cfg.eval and _absolute_eval_paths(cfg.eval),
        }
    )
    load_train_config(portable.model_dump(mode="json"))  # what eval, generate and export will read must load
    save_yaml(portable, os.path.join(cfg.out_dir, RUN_CONFIG))
    manifests = [load_remote_manifest(s.path) if is_remote(s.path) else load_manifest(s.path) for s in sources]
    tokenizers = {json.dumps(m.get("tokenizer"), sort_keys=True) for m in manifests}
    if len(tokenizers) == 1 and _copy_tokenizer(sources[0].path, os.path.join(cfg.out_dir, TOKENIZER_DIR)):
        atomic_write_text(os.path.join(cfg.out_dir, RUN_MANIFEST), json.dumps(manifests[0], indent=1))


def _absolute_eval_paths(section):
    """The ``eval:`` section with its task folder and document files as absolute paths."""
    return section.model_copy(
        update={
            "include_path": section.include_path and os.path.abspath(section.include_path),
            "documents": {
                name: path if is_remote(path) else os.path.abspath(path) for name, path in section.documents.items()
            },
        }
    )


def _copy_tokenizer(source: str, folder: str) -> bool:
    """The data source's ``tokenizer/`` copied to ``folder`` (from a URL: read, checked and saved);
    False when the source has none."""
    import shutil

    from dataprep.core.storage import atomic_directory, exists
    from dataprep.tokenize.tokenizer import META_NAME
    from dataprep.tokenize.tokenizer_json_reader import JSON_NAME

    found = join_path(source, TOKENIZER_DIR)
    if is_remote(source):
        if not any(exists(join_path(found, name)) for name in (META_NAME, JSON_NAME)):
            return False
        tokenizer = Tokenizer.load(found)
        with atomic_directory(folder) as tmp:
            tokenizer.save(tmp)
    elif os.path.isdir(found):
        with atomic_directory(folder) as tmp:
            shutil.copytree(found, tmp, dirs_exist_ok=True)
    else:
        return False
    return True


def _find_run_config(path: str) -> TrainConfig | None:
    """The run's config.yaml in the checkpoint's folder or up to three folders above it (None when there is
    none); one that does not load is an error that says why, never taken for a missing one."""
    folder = _find_run_dir(path)
    if folder is None:
        return None
    found = os.path.join(folder, RUN_CONFIG)
    try:
        return load_train_config(found)
    except ConfigError as exc:
        raise ConfigError(f"the run's {found} does not load: {exc}") from None


def _find_run_dir(path: str) -> str | None:
    folder = os.path.dirname(os.path.abspath(path)) if os.path.isfile(path) else os.path.abspath(path)
    for _ in range(4):
        if os.path.isfile(os.path.join(folder, RUN_CONFIG)):
            return folder
        folder = os.path.dirname(folder)
    return None


def _locate(path: str) -> str:
    """A step-* directory or a safetensors file for any accepted CHECKPOINT form."""
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise MissingPath(f"checkpoint {path!r} does not exist")
    if os.path.isfile(os.path.join(path, checkpoint_folder.STATE_FILE)):
        return path
    run = _find_run_config(path) if os.path.isfile(os.path.join(path, RUN_CONFIG)) else None
    roots = [path] + ([os.path.join(path, run.checkpoint.dir)] if run else []) + [os.path.join(path, "checkpoints")]
    for root in roots:
        best = checkpoint_folder.find_best(root)
        if best is not None:  # checkpoint.keep_best: the lowest validation loss, not the last step
            print(
                f"{path}: using its best checkpoint, step {checkpoint_folder.checkpoint_step(best)} (lowest validation "
                "loss; give a step-* folder for another)",
                file=sys.stderr,
            )
            return best
        found = checkpoint_folder.list_checkpoints(root)
        if found:
            return found[-1]
    if os.path.isfile(os.path.join(path, FINAL_WEIGHTS)):
        return os.path.join(path, FINAL_WEIGHTS)
    raise MissingPath(f"{path}: no step-* checkpoint or {FINAL_WEIGHTS} found")


def load_trained(path: str) -> Trained:
    """Weights and configs of any accepted CHECKPOINT form (see module docstring)."""
    resolved = _locate(path)
    if os.path.isfile(resolved):
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(resolved, "pt") as fh:
                meta = fh.metadata() or {}
                weights = {k: fh.get_tensor(k) for k in fh.keys()}
        except SafetensorError as exc:
            raise UsageError(
                f"{resolved}: not a readable safetensors file ({exc}); give a run folder, a step-* "
                "checkpoint or a model.safetensors"
            ) from None
        if "model_config" not in meta:
            raise UsageError(f"{resolved}: no model_config in its metadata (not written by pretrain train/export)")
        model_cfg, step = json.loads(meta["model_config"]), meta.get("step")
    else:
        weights, state = checkpoint.read_model_weights(resolved)
        model_cfg, step = state.get("model_config"), state.get("step")
        if model_cfg is None:
            raise checkpoint_folder.CheckpointError(
                f"checkpoint {resolved}: {checkpoint_folder.STATE_FILE} lacks model_config"
            )
    cfg = load_model_config(model_cfg)  # a damaged or foreign file: a config error, not a traceback
    run = _find_run_config(resolved)
    if run is not None and run.model != cfg:  # a config.yaml above an unrelated model
        run = None
    if cfg.tie_embeddings:
        output = weights.setdefault("output.weight", weights["tok_embeddings.weight"])
        if not torch.equal(output, weights["tok_embeddings.weight"]):  # the weights say what was trained
            warnings.warn(
                f"{resolved}: tie_embeddings is set but the output and embedding weights differ; "
                "treating the model as untied"
            )
            cfg = cfg.model_copy(update={"tie_embeddings": False})
    return Trained(
        weights,
        cfg,
        run,
        resolved,
        int(step) if step is not None else None,
        _find_run_dir(resolved) if run is not None else None,
    )


def model_for_inference(trained: Trained, device: str | torch.device = "cpu") -> Llama:
    """Our model on one device with the trained weights, in eval mode (no parallelism)."""
    with torch.device("meta"):
        model = Llama(trained.model)
    model.to_empty(device=device)
    if trained.model.tie_embeddings:  # to_empty gives every parameter its own storage
        model.output.weight = model.tok_embeddings.weight
    missing, unexpected = model.load_state_dict(trained.weights, strict=False)
    if missing or unexpected:
        raise checkpoint_folder.CheckpointError(
            f"{trained.path}: weights do not match the model config (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]})"
        )
    model.reset_buffers()
    return model.eval()


def find_tokenizer(trained: Trained, override: str | None = None) -> tuple[Tokenizer, dict]:
    """The tokenizer the model was trained with, and the first data source's manifest (``add_bos`` ...)."""
    if override:
        return Tokenizer.load(override), {}
    own = os.path.join(trained.run_dir or "", TOKENIZER_DIR)
    if trained.run_dir and os.path.isdir(own) and os.path.isfile(os.path.join(trained.run_dir, RUN_MANIFEST)):
        with open(os.path.join(trained.run_dir, RUN_MANIFEST), encoding="utf-8") as fh:
            return Tokenizer.load(own), json.load(fh)
    if trained.run is None:
        raise MissingPath(f"{trained.path}: the run's {RUN_CONFIG} was not found; pass --tokenizer DIR")
    found = {}
    for source in trained.run.data.sources:
        if is_remote(source.path):
            manifest = load_remote_manifest(source.path)
        elif not os.path.isdir(source.path):
            raise MissingPath(f"the run's data source {source.path!r} is not reachable from here; pass --tokenizer DIR")
        else:
            manifest = load_manifest(source.path)
        sha = (manifest.get("tokenizer") or {}).get("model_sha256")
        if not sha:
            raise MissingPath(
                f"{source.path}: its manifest names no tokenizer model (shards indexed without one); pass "
                "--tokenizer DIR"
            )
        found.setdefault(sha, (source.path, manifest))
    if len(found) > 1:
        raise UsageError(f"the run's data sources use {len(found)} different tokenizers; pass --tokenizer DIR")
    ((sha, (source_path, manifest)),) = found.items()
    tokenizer = Tokenizer.load(join_path(source_path, TOKENIZER_DIR))
    if tokenizer.sha256 != sha:
        raise UsageError(f"{source_path}/{TOKENIZER_DIR} is not the tokenizer its manifest names")
    return tokenizer, manifest
