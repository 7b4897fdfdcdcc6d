"""``dataprep train-tokenizer``: a SentencePiece tokenizer from a uniform sample of a cleaned corpus
(``pipelines.train_tokenizer`` draws the sample on Spark)."""

from __future__ import annotations

import argparse

from dataprep.core.arguments import non_negative_int, output_folder, positive_float, positive_int, spark_master
from dataprep.core.errors import UsageError
from dataprep.core.validation import validated
from dataprep.tokenize.stage import TokenizerTraining
from dataprep.tokenize.tokenizer import tokenizer_exists
from pipelines.train_tokenizer import text_dataframe, train_from_dataframe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    corpus = parser.add_argument_group("the corpus and its sample")
    sp = parser.add_argument_group("SentencePiece")
    defaults = TokenizerTraining()
    corpus.add_argument(
        "--input", nargs="+", required=True, help="cleaned corpus: Parquet or JSONL files, folders or globs"
    )
    sp.add_argument(
        "--vocab-size",
        type=positive_int,
        required=True,
        help="vocabulary size including special and byte tokens; a sample too small for it gives the largest it "
        "supports",
    )
    sp.add_argument("--exact-vocab-size", action="store_true", help="a sample too small for --vocab-size is an error")
    parser.add_argument("--output", type=output_folder, required=True, help="tokenizer folder to write")
    sp.add_argument("--model-type", choices=["bpe", "unigram"], default=defaults.model_type)
    corpus.add_argument(
        "--sample-documents",
        type=positive_int,
        default=defaults.sample_documents,
        help="documents in the uniform sample (default %(default)s)",
    )
    sp.add_argument(
        "--input-sentence-size",
        type=non_negative_int,
        default=defaults.input_sentence_size,
        help="SentencePiece's sentence cap, 0 = all",
    )
    sp.add_argument("--character-coverage", type=positive_float, default=defaults.character_coverage)
    corpus.add_argument("--seed", type=int, default=defaults.seed)
    corpus.add_argument("--format", choices=["auto", "parquet", "jsonl"], default="auto")
    corpus.add_argument("--text-field", default="text")
    corpus.add_argument(
        "--master", type=spark_master, default=None, help="Spark master (default: local[*] or spark-submit's)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing tokenizer")


def main(args: argparse.Namespace) -> int:
    from pipelines.spark import get_spark

    if tokenizer_exists(args.output) and not args.force:
        raise UsageError(
            f"{args.output} already holds a tokenizer; pass --force to replace it (shards made with it will "
            "no longer verify)"
        )
    training = validated(
        TokenizerTraining,
        vocab_size=args.vocab_size,
        model_type=args.model_type,
        sample_documents=args.sample_documents,
        input_sentence_size=args.input_sentence_size,
        character_coverage=args.character_coverage,
        seed=args.seed,
        exact_vocab_size=args.exact_vocab_size,
    )
    spark = get_spark(args.master, app_name="ccpretrain-train-tokenizer")
    tok = train_from_dataframe(text_dataframe(spark, args.input, args.format, args.text_field), args.output, training)
    t = tok.meta["training"]
    print(
        f"tokenizer: {args.output} ({tok.meta['model_type']}, vocab {tok.vocab_size}, sha256 {tok.sha256[:12]}); "
        f"sample {t['sample_documents']} of {t['corpus_documents']} documents, {t['sample_bytes']} bytes"
    )
    return 0
