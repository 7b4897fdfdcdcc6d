"""The run's tokenizer as a Hugging Face ``tokenizer.json``, encoding exactly as it does.

Written by ``pretrain export --to hf`` so ``AutoTokenizer`` gives the ids the model was trained on. Our
SentencePiece model becomes a ``tokenizers`` BPE with byte fallback whose merges are ranked by piece
score, as SentencePiece applies them; the only normalization is SentencePiece's space marker, and
special tokens are never matched in text. A run trained with a Hugging Face ``tokenizer.json``
(``dataprep.tokenize.tokenizer_json_reader``) gets that file back, its post-processor set to add
exactly what our shards added (BOS or nothing). Needs the ``tokenizers`` package (the ``hf`` extra).
"""

from __future__ import annotations

import json
import os

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_text
from dataprep.tokenize.tokenizer import Tokenizer
from dataprep.tokenize.tokenizer_json_reader import HFTokenizer


def write_hf_tokenizer(
    tokenizer: Tokenizer | HFTokenizer, directory: str, add_bos: bool = False, model_max_length: int | None = None
) -> None:
    """``tokenizer.json`` + ``tokenizer_config.json`` in ``directory`` encoding exactly like ``tokenizer``
    (plus BOS when the training data had one). Only BPE models trained by ``dataprep train-tokenizer``
    convert exactly; others are refused."""
    if isinstance(tokenizer, HFTokenizer):
        return _write_tokenizer_json(tokenizer, directory, add_bos, model_max_length)
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, decoders, models, normalizers
    from tokenizers import Tokenizer as RustTokenizer

    proto = sentencepiece_model_pb2.ModelProto.FromString(tokenizer.model_proto)
    norm, spec = proto.normalizer_spec, proto.trainer_spec
    if norm.name != "identity" or norm.add_dummy_prefix or norm.remove_extra_whitespaces or not spec.byte_fallback:
        raise UsageError(
            "only SentencePiece models trained by `dataprep train-tokenizer` (identity normalization, "
            "no dummy prefix, whitespace kept, byte fallback) can be converted"
        )
    if spec.model_type != spec.BPE:
        # a Unigram model's Viterbi ties break differently in `tokenizers`, so ids could differ
        raise UsageError("only BPE SentencePiece models can be exported exactly (this one is not BPE)")
    normal = 1  # ModelProto.SentencePiece.Type.NORMAL: the only pieces SentencePiece matches in text
    pieces = [p.piece for p in proto.pieces]
    rank = {p.piece: (-p.score, i) for i, p in enumerate(proto.pieces) if p.type == normal}
    merges = sorted(  # every split of a piece into two pieces, in the order of the piece's score
        (rank[piece], rank[piece[:k]], rank[piece[k:]], piece[:k], piece[k:])
        for piece in rank
        for k in range(1, len(piece))
        if piece[:k] in rank and piece[k:] in rank
    )
    model = models.BPE(
        {piece: i for i, piece in enumerate(pieces)},
        [(a, b) for *_, a, b in merges],
        unk_token=pieces[tokenizer.unk_id],
        byte_fallback=True,
        fuse_unk=True,
    )
    hf = RustTokenizer(model)
    hf.normalizer = normalizers.Replace(" ", "\u2581")
    hf.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    specials = {"unk": tokenizer.unk_id, "bos": tokenizer.bos_id, "eos": tokenizer.eos_id, "pad": tokenizer.pad_id}
    names = {key: pieces[i] for key, i in specials.items() if i >= 0}
    hf.add_special_tokens([AddedToken(names[k], special=True, normalized=False) for k in names])
    hf.post_processor = _bos_template(names["bos"], tokenizer.bos_id) if add_bos else None
    hf.save(os.path.join(directory, "tokenizer.json"))
    # "<s>" in text is text, as in SentencePiece
    _write_config(directory, names, add_bos, model_max_length, {"split_special_tokens": True})


def _write_tokenizer_json(tokenizer: HFTokenizer, directory: str, add_bos: bool, model_max_length: int | None) -> None:
    """The user's ``tokenizer.json`` with the post-processor our shards imply (the tokenize stage encodes
    without the file's own special tokens and adds BOS itself), and a config naming its special tokens.
    Special tokens written in text are matched, as ``HFTokenizer.encode`` does."""
    from tokenizers import Tokenizer as RustTokenizer

    hf = RustTokenizer.from_str(tokenizer.json_text)
    names = {kind: hf.id_to_token(i) for kind, i in tokenizer.special_ids.items()}
    hf.post_processor = _bos_template(names["bos"], tokenizer.bos_id) if add_bos else None
    hf.save(os.path.join(directory, "tokenizer.json"))
    kept = {k: tokenizer.config[k] for k in ("chat_template",) if k in tokenizer.config}
    _write_config(directory, names, add_bos, model_max_length, kept)


def _bos_template(bos: str, bos_id: int):
    from tokenizers import processors

    return processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])


def _write_config(directory: str, names: dict, add_bos: bool, model_max_length: int | None, extra: dict) -> None:
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{f"{k}_token": v for k, v in names.items()},
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length or 1_000_000_000,
        **extra,
    }
    atomic_write_text(os.path.join(directory, "tokenizer_config.json"), json.dumps(config, indent=2) + "\n")
