"""``dataprep verify-shards DIR``: check a token-shard directory (or a URL) against its manifest
(``dataprep.tokenize.verify``); exit status 1 and one line per problem."""

from __future__ import annotations

import argparse

from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.verify import verify_dataset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="token-shard directory (holds manifest.json), local or a URL (s3://, https://)")
    parser.add_argument("--quick", action="store_true", help="skip SHA-256 (structure and counts only)")


def main(args: argparse.Namespace) -> int:
    problems = verify_dataset(args.dir, checksums=not args.quick)
    manifest = load_manifest(args.dir)
    for problem in problems:
        print(f"FAIL {problem}")
    status = "FAILED" if problems else "OK"
    print(
        f"{status}: {manifest['num_shards'] if 'num_shards' in manifest else len(manifest['shards'])} shards, "
        f"{manifest.get('documents', '?')} documents, {manifest.get('tokens', '?')} tokens ({manifest['dtype']}, "
        f"vocab {manifest['vocab_size']}, tokenizer {str(manifest['tokenizer'].get('model_sha256'))[:12]})"
        + (f"; {len(problems)} problem(s)" if problems else "")
    )
    return 1 if problems else 0
