"""``dataprep`` command line: the data side's commands, those that start Spark among them, so it lives on
the floor that has Spark (``dataprep`` itself imports nothing from here). Each command is a module of
``dataprep.commands`` or ``pipelines.commands`` with ``add_arguments`` and ``main``; ``dispatch``
(``dataprep.core.cli``) holds the conventions ``dataprep`` and ``pretrain`` share.

Also the script ``spark-submit`` runs: ``spark-submit pipelines/cli.py run CONFIG.yaml``.
"""

from __future__ import annotations

import sys

from dataprep.core.cli import dispatch

# command -> (module, one-line help): each module defines add_arguments(parser) and main(args) -> int
COMMANDS = {
    "run": ("pipelines.commands.run", "run a cleaning pipeline config on Spark (local[*] by default)"),
    "filter": (
        "pipelines.commands.filter",
        "a config's corpus and shards from a signals run (dataprep run --signals), new thresholds included",
    ),
    "stages": ("dataprep.commands.stages", "list every stage and its parameters (the config reference)"),
    "demo-data": ("dataprep.commands.demo", "write the bundled sample WARC used by the demo"),
    "train-ppl-model": ("dataprep.commands.perplexity", "train a CCNet-style n-gram perplexity model"),
    "arpa": ("dataprep.commands.arpa", "convert a perplexity model's n-gram model to or from ARPA (KenLM, CCNet)"),
    "train-classifier": ("pipelines.commands.classifier", "train a fastText quality/toxicity classifier"),
    "train-tokenizer": ("pipelines.commands.train_tokenizer", "train a SentencePiece tokenizer on a cleaned corpus"),
    "verify-shards": ("dataprep.commands.verify_shards", "check every token shard against its manifest"),
    "index-shards": (
        "dataprep.commands.index_shards",
        "write manifest.json for Megatron .bin/.idx shards made elsewhere",
    ),
    "export-nanogpt": (
        "dataprep.commands.export_nanogpt",
        "export token shards to nanoGPT's train.bin/val.bin (uint16)",
    ),
    "report": ("dataprep.commands.report", "write an HTML + Markdown report of a pipeline output"),
    "estimate": ("dataprep.commands.estimate", "project a crawl's core-hours, wall time and sizes from a sample run"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(COMMANDS, "dataprep", "Clean Common Crawl into a pretraining corpus.", argv)


if __name__ == "__main__":
    sys.exit(main())
