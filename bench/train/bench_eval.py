"""What ``pretrain eval --tasks`` costs (run by hand; prints figures, no asserts).

A multiple-choice task in HellaSwag's shape (a context of about ``--context-words`` words of web text, four
endings of about 20 words, one right) written as a local task file, scored by ``evaluate_tasks`` on a model
of a preset's shape with fresh weights (the cost does not depend on what the model learned), with a
SentencePiece tokenizer trained on the same text. Reports CPU and wall seconds per item and the time for
HellaSwag's 10,042 items at that rate.

    python -m bench.train.bench_eval [--model tiny --items 200 --device cpu --batch-size 16]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from pretrain.config.loading import load_model_config
from pretrain.inference.harness import evaluate_tasks
from pretrain.models.llama import Llama, num_params
from tests.support.tokenizer_texts import load_texts

HELLASWAG_ITEMS = 10_042


def write_task(folder: str, texts: list[str], items: int, context_words: int) -> str:
    words = [t.split() for t in texts if len(t.split()) > context_words + 100]
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "items.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(items):
            doc, others = words[i % len(words)], [words[(i + k) % len(words)] for k in (7, 13, 29)]
            endings = [" ".join(doc[context_words : context_words + 20])] + [
                " ".join(o[context_words : context_words + 20]) for o in others
            ]
            fh.write(json.dumps({"ctx": " ".join(doc[:context_words]), "endings": endings, "label": 0}) + "\n")
    with open(os.path.join(folder, "bench_mc.yaml"), "w", encoding="utf-8") as fh:
        fh.write(
            f"task: bench_mc\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {path}\n"
            "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{ctx}}'\n"
            "doc_to_choice: '{{endings}}'\ndoc_to_target: '{{label}}'\n"
            "metric_list:\n  - metric: acc\n  - metric: acc_norm\n"
        )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model preset under configs/model")
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--context-words", type=int, default=60)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--shared-data", default=os.environ.get("CCP_SHARED_DATA", "../shared/data"))
    args = parser.parse_args()
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from dataprep.tokenize.tokenizer import train_tokenizer

    _, docs = load_texts(Path(args.shared_data))
    cfg = load_model_config(f"configs/model/{args.model}.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = train_tokenizer(docs[:2000], os.path.join(tmp, "tok"), vocab_size=min(cfg.vocab_size, 8000))
        cfg = cfg.model_copy(update={"vocab_size": max(cfg.vocab_size, tokenizer.vocab_size)})
        with torch.device(args.device):
            model = Llama(cfg)
        model.init_weights(0)
        folder = write_task(os.path.join(tmp, "tasks"), docs, args.items, args.context_words)
        cpu, wall = time.process_time(), time.perf_counter()
        scores = evaluate_tasks(
            model, tokenizer, ["bench_mc"], folder, batch_size=args.batch_size, precision=args.precision
        )
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    per_item = wall / args.items
    print(
        f"{args.model}: {num_params(cfg):,} parameters on {args.device} ({args.precision}), {args.items} items x 4 "
        f"endings, {torch.get_num_threads()} threads: {wall:.1f} s wall, {cpu:.1f} s CPU, {1000 * per_item:.0f} ms "
        f"per item; HellaSwag's {HELLASWAG_ITEMS:,} items at that rate: {per_item * HELLASWAG_ITEMS / 60:.1f} min "
        f"(acc {scores['bench_mc']['acc']:.3f}, chance 0.25)"
    )


if __name__ == "__main__":
    main()
