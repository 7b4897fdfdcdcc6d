"""Tiny offline lm-evaluation-harness tasks (local JSONL through ``dataset_path: json``) for the eval tests."""

from __future__ import annotations

import json
import os

QUESTIONS = [
    ("The capital of France is", ["Paris", "a dog", "blue and green"], 0),
    ("Water is made of hydrogen and", ["oxygen", "music", "the number seven"], 0),
    ("One, two, three,", ["four", "apple", "yesterday evening"], 0),
    ("The sun rises in the", ["east", "kitchen", "mathematics"], 0),
    ("Cats and dogs are", ["animals", "rivers", "prime numbers"], 0),
    ("Der Himmel ist", ["blau", "ein Tisch", "schnell gelaufen"], 0),
    ("In the morning I drink", ["coffee", "the moon", "seventeen"], 0),
    ("A week has seven", ["days", "elephants", "colours of grey"], 0),
]
DOCUMENTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Ein kleiner Text auf Deutsch, mit Umlauten: äöü.",
    "Numbers 12345 and symbols !? are text too.",
]


def write_tasks(folder) -> str:
    """A multiple-choice task (``tiny_mc``), a rolling log-likelihood task (``tiny_docs``) and a generation
    task (``tiny_gen``) in ``folder``; returns the folder (the ``--include-path``)."""
    os.makedirs(folder, exist_ok=True)
    items = os.path.join(folder, "mc.jsonl")
    with open(items, "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"question": question, "choices": choices, "answer": answer}) + "\n"
            for question, choices, answer in QUESTIONS
        )
    docs = os.path.join(folder, "docs.jsonl")
    with open(docs, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps({"text": text}) + "\n" for text in DOCUMENTS)
    common = "dataset_path: json\ntest_split: test\n"
    tasks = {
        "tiny_mc": f"{common}dataset_kwargs:\n  data_files:\n    test: {items}\noutput_type: multiple_choice\n"
        "doc_to_text: '{{question}}'\ndoc_to_choice: '{{choices}}'\ndoc_to_target: '{{answer}}'\n"
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n",
        "tiny_docs": f"{common}dataset_kwargs:\n  data_files:\n    test: {docs}\noutput_type: loglikelihood_rolling\n"
        "doc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n",
        "tiny_gen": f"{common}dataset_kwargs:\n  data_files:\n    test: {items}\noutput_type: generate_until\n"
        "doc_to_text: '{{question}}'\ndoc_to_target: '{{choices[answer]}}'\n"
        "generation_kwargs:\n  until: ['.']\n  max_gen_toks: 4\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n",
    }
    for name, body in tasks.items():
        with open(os.path.join(folder, f"{name}.yaml"), "w", encoding="utf-8") as fh:
            fh.write(f"task: {name}\n{body}")
    return str(folder)
