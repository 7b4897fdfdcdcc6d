"""A fastText supervised text classifier: train on labelled texts, score the probability of a label.

Shared by the quality classifier (DCLM-style) and the toxicity stage. fastText reads one example per
line, so newlines inside a text become spaces; it is fast enough to score every document on CPU.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import atomic_output

LABEL_PREFIX = "__label__"
_MAGIC = 793712314  # first int32 of every fastText .bin/.ftz model file
# lr/epoch suit corpora of thousands of documents; 200k n-gram buckets keep a dim-64 model ~50 MB
# (fastText's 2M default makes 500+ MB files).
_DEFAULTS = {"lr": 0.5, "epoch": 20, "wordNgrams": 2, "dim": 64, "bucket": 200_000, "minCount": 1, "verbose": 0}


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


class FastTextClassifier:
    """Thin wrapper over a ``fasttext`` supervised model with label probabilities on demand."""

    def __init__(self, model, path: str | None = None) -> None:
        self.model = model
        self.path = path
        self.labels = [label.removeprefix(LABEL_PREFIX) for label in model.get_labels()]

    @classmethod
    def train(cls, texts: list[str], labels: list[str], output_path: str, **fasttext_params) -> "FastTextClassifier":
        """Train on ``texts`` with one label each and save the model to ``output_path`` (atomically).
        Parameters are ``fasttext.train_supervised`` ones (lr, epoch, wordNgrams, dim, ...)."""
        import fasttext

        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if len(set(labels)) < 2:
            raise UsageError(f"need at least two distinct labels to train a classifier, got {sorted(set(labels))}")
        params = {**_DEFAULTS, **fasttext_params}
        params["bucket"] = _buckets_for(texts, params)
        directory = os.path.dirname(os.path.abspath(output_path))
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            train_file = os.path.join(tmp, "train.txt")
            with open(train_file, "w", encoding="utf-8", errors="replace") as fh:
                for text, label in zip(texts, labels):
                    fh.write(f"{LABEL_PREFIX}{_one_line(str(label)).replace(' ', '_')} {_one_line(text)}\n")
            model_file = os.path.join(tmp, "model.bin")
            # Each attempt trains in a fresh process: in a long-lived one (a test session, a notebook that
            # trained before) fastText reports "Encountered NaN" on small sets at any lr, measured, while
            # the same training in a new process succeeds. Real divergence (NaN) on tiny, highly repetitive
            # sets remains: single-threaded retries at lower rates, otherwise say what to change.
            error = ""
            for attempt, divisor in enumerate((1, 4, 16)):
                retry = {} if attempt == 0 else {"lr": params["lr"] / divisor, "thread": 1}
                error = _train_in_child(train_file, {**params, **retry}, model_file)
                if not error:
                    break
            else:
                raise UsageError(
                    f"fastText training failed ({error}); give more or more varied examples, or a lower lr"
                )
            model = fasttext.load_model(model_file)
            with atomic_output(output_path) as tmp_model:
                model.save_model(tmp_model)
        return cls(model, output_path)

    @classmethod
    def load(cls, path: str) -> "FastTextClassifier":
        """Load a model saved by ``train`` (or any fastText supervised .bin/.ftz); a missing, truncated
        or foreign file raises ValueError/FileNotFoundError naming it instead of crashing fastText."""
        import fasttext

        if not os.path.isfile(path):
            raise MissingPath(f"classifier model {path!r} does not exist")
        problem = _check_model_file(path)
        if problem:
            raise UsageError(f"{path!r} is not a usable fastText model: {problem}")
        try:
            model = fasttext.load_model(path)
        except Exception as exc:  # noqa: BLE001 - fastText raises assorted errors on corrupt files
            raise UsageError(f"cannot load fastText model {path!r}: {exc}") from None
        if not model.get_labels() or not str(model.get_labels()[0]).startswith(LABEL_PREFIX):
            raise UsageError(f"{path!r} is a fastText word-vector model, not a supervised classifier")
        return cls(model, path)

    def score(self, texts: list[str], label: str) -> list[float]:
        """Probability in [0, 1] of ``label`` for each text (0.0 for empty text)."""
        if label not in self.labels:
            raise UsageError(f"label {label!r} not in model labels {self.labels}")
        if not texts:
            return []
        lines = [_one_line(t) for t in texts]
        labels, probs = self.model.predict(lines, k=-1, threshold=0.0)
        want = LABEL_PREFIX + label
        out = np.zeros(len(lines), dtype=np.float64)
        for i, (row_labels, row_probs) in enumerate(zip(labels, probs)):
            if not lines[i]:
                continue
            for lab, p in zip(row_labels, row_probs):
                if lab == want:
                    out[i] = p
                    break
        return np.clip(out, 0.0, 1.0).tolist()


def _buckets_for(texts: list[str], params: dict) -> int:
    """The n-gram hash table's rows: ``bucket`` is a ceiling, and a training set with fewer distinct word
    n-grams gets a table a few times their number (a power of two). The table is most of a model's
    file, and a few thousand examples do not need hundreds of MB of rows nobody hashes to."""
    ceiling = int(params["bucket"])
    n = int(params.get("wordNgrams", 1))
    if n < 2 and int(params.get("maxn", 0)) == 0:
        return min(ceiling, 1024)  # no n-grams are hashed at all
    if int(params.get("maxn", 0)) > 0:
        return ceiling  # character n-grams: as many as the ceiling allows
    grams: set[int] = set()
    for text in texts:
        words = _one_line(text).split()
        for size in range(2, n + 1):
            grams.update(hash(tuple(words[i : i + size])) for i in range(len(words) - size + 1))
        if len(grams) * 4 >= ceiling:
            return ceiling
    return min(ceiling, max(1024, 1 << (4 * len(grams)).bit_length()))


def _train_in_child(train_file: str, params: dict, model_file: str) -> str:
    """One fastText training in a new Python process, saved to ``model_file``; its error, or "" when it
    succeeded. (A subprocess, not multiprocessing: spawning would re-run the caller's main script.)"""
    code = (
        "import json, sys, fasttext; "
        "fasttext.train_supervised(input=sys.argv[1], **json.loads(sys.argv[2])).save_model(sys.argv[3])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, train_file, json.dumps(params), model_file], capture_output=True, text=True
    )
    if done.returncode == 0 and os.path.isfile(model_file):
        return ""
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def _check_model_file(path: str) -> str | None:
    """Walk the fastText file layout (header, dictionary, matrix sizes) and say what is wrong, if
    anything: fastText itself hangs or allocates wildly on a truncated or foreign file."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < 8 + 56 + 28:
            return "bad header (not a fastText .bin/.ftz file)"
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _walk_layout(data)


def _walk_layout(data) -> str | None:
    if len(data) < 8 + 56 + 28 or struct.unpack_from("<i", data)[0] != _MAGIC:
        return "bad header (not a fastText .bin/.ftz file)"
    pos = 8 + 56  # magic, version, then 12 int32 args and one double
    size, _nwords, _nlabels, _ntokens, prune_size = struct.unpack_from("<iiiqq", data, pos)
    pos += 28
    if size < 0 or prune_size < -1:
        return "corrupt dictionary header"
    for _ in range(size):  # each entry: NUL-terminated word, int64 count, int8 type
        end = data.find(b"\0", pos)
        if end < 0 or end + 10 > len(data):
            return "truncated dictionary"
        pos = end + 10
    pos += 8 * max(prune_size, 0)
    for _matrix in ("input", "output"):
        if pos + 1 > len(data):
            return "truncated before the matrices"
        if data[pos]:  # quantized matrices have a complex layout; fastText checks the rest
            return None
        if pos + 17 > len(data):
            return "truncated matrix header"
        rows, cols = struct.unpack_from("<qq", data, pos + 1)
        pos += 17 + 4 * rows * cols
        if rows < 0 or cols < 0 or pos > len(data):
            return f"truncated {_matrix} matrix"
    return None
