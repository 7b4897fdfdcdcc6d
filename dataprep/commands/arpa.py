"""``dataprep arpa export MODEL_DIR --output lm.arpa`` and ``dataprep arpa import lm.arpa --sp-model sp.model
--lang en --reference ref.jsonl --output MODEL_DIR``: a perplexity model's n-gram model to or from
ARPA (``dataprep.quality.arpa``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil

from dataprep.core.arguments import output_file, output_folder
from dataprep.core.cli import add_output_argument
from dataprep.core.errors import UsageError
from dataprep.quality.arpa import KENLM_FILE, read_arpa, write_arpa


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    export = sub.add_parser("export", help="write a perplexity model's n-gram model as ARPA")
    export.add_argument("model_dir")
    add_output_argument(export, type=output_file, metavar="FILE", help="ARPA file to write")
    export.add_argument(
        "arpa_file", nargs="?", type=output_file, help=argparse.SUPPRESS
    )  # the older spelling, for a release
    imp = sub.add_parser("import", help="a perplexity model directory from an ARPA file and its SentencePiece model")
    imp.add_argument("arpa")
    imp.add_argument("--sp-model", required=True, help="the SentencePiece model the ARPA's words are pieces of")
    imp.add_argument("--lang", required=True)
    imp.add_argument(
        "--reference", required=True, nargs="+", help="held-out JSONL texts: the head/middle/tail cut-offs"
    )
    imp.add_argument("--text-field", default="text")
    add_output_argument(imp, type=output_folder, required=True, metavar="DIR", help="model directory to write")
    imp.add_argument(
        "--kenlm",
        action="store_true",
        help="keep the ARPA file in the model and score as KenLM does (with the kenlm package when installed)",
    )


def main(args: argparse.Namespace) -> int:
    import sentencepiece as spm

    from dataprep.core.inputs import read_jsonl_field
    from dataprep.core.storage import atomic_directory
    from dataprep.quality.perplexity import PerplexityModel, load_model, write_model_files

    if args.action == "export":
        output = args.output or args.arpa_file
        if not output:
            raise UsageError("give --output FILE: the ARPA file to write")
        model = PerplexityModel.load(args.model_dir)
        counts = write_arpa(model.lm, model.sp, output)
        print(json.dumps({"output": output, "order": model.lm.order, "ngrams": counts}))
        return 0
    sp = spm.SentencePieceProcessor(model_file=args.sp_model)
    lm = read_arpa(args.arpa, sp)
    held, _ = read_jsonl_field(args.reference, args.text_field)
    with atomic_directory(args.output) as tmp:
        shutil.copy(args.sp_model, os.path.join(tmp, "sp.model"))
        if args.kenlm:
            shutil.copy(args.arpa, os.path.join(tmp, KENLM_FILE))
        meta = write_model_files(
            tmp, sp, lm, args.lang, held, {"arpa": os.path.abspath(args.arpa)}, kenlm=KENLM_FILE if args.kenlm else None
        )
    load_model.cache_clear()
    print(json.dumps({"output": args.output, **meta}))
    return 0
