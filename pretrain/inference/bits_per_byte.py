"""Bits per byte: the model's total negative log-likelihood, in bits, over the UTF-8 bytes of the text it
scored. Unlike a loss per token it does not depend on the tokenizer, so runs with different tokenizers
compare.

* documents (``document_bits_per_byte``): every token of each document, each predicted from all the
  document before it (windows of ``seq_len`` tokens, each conditioned on the ``seq_len`` tokens before
  it, as the harness's rolling log-likelihood), the first from what opens a document in the training stream
  (EOS, or BOS when the data had one); the bytes are those of the documents' text.
* token windows (the validation split, a shard folder): the loss the loop reports over its windows of
  ``seq_len + 1`` tokens, over the bytes of the tokens it predicted (``token_byte_lengths``).
"""

from __future__ import annotations

import contextlib
import json
import math
import re

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

LN2 = math.log(2)


def bits_per_byte(nats: float, n_bytes: int) -> float | None:
    return nats / LN2 / n_bytes if n_bytes else None


BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # a byte-fallback token


def token_byte_lengths(tokenizer, size: int) -> np.ndarray:
    """UTF-8 bytes each token id stands for in decoded text (0 for special tokens and ids beyond the
    tokenizer's vocabulary): a byte-fallback piece is one byte, a byte-level BPE token (a Hugging Face
    ``tokenizer.json`` with a ByteLevel decoder) one byte per character, other pieces their text with the
    space marker as a space."""
    lengths = np.zeros(size, dtype=np.int64)
    sp = getattr(tokenizer, "sp", None)
    if sp is not None:
        pieces = [
            "" if sp.is_control(i) or sp.is_unknown(i) else "<0x00>" if sp.is_byte(i) else sp.id_to_piece(i)
            for i in range(tokenizer.vocab_size)
        ]
        byte_level = False
    else:
        specials = set(tokenizer.special_ids.values())
        pieces = ["" if i in specials else tokenizer.tk.id_to_token(i) or "" for i in range(tokenizer.vocab_size)]
        byte_level = "ByteLevel" in json.dumps(json.loads(tokenizer.json_text).get("decoder"))
    for i, piece in enumerate(pieces[:size]):
        if byte_level or BYTE_PIECE.fullmatch(piece):
            lengths[i] = 1 if BYTE_PIECE.fullmatch(piece) else len(piece)
        else:
            lengths[i] = len(piece.replace("\u2581", " ").encode("utf-8"))
    return lengths


def window_bytes(batches, lengths: np.ndarray) -> int:
    """Bytes of the predicted tokens (all but the first of each row) of micro-batches (rows of seq_len + 1)."""
    return int(sum(lengths[batch[:, 1:].numpy()].sum() for batch in batches))


def _score_windows(tokens: list[int], seq_len: int) -> list[tuple[list[int], list[int]]]:
    """(input ids, the tokens its last positions predict) covering every token after the first: each input
    at most ``seq_len`` ids, each predicted token conditioned on up to ``seq_len`` ids before it."""
    windows, start = [], 1
    while start < len(tokens):
        end = min(start + seq_len, len(tokens))
        windows.append((tokens[max(0, end - 1 - seq_len) : end - 1], tokens[start:end]))
        start = end
    return windows


@torch.no_grad()
def document_nats(
    model, token_lists: list[list[int]], seq_len: int, batch_size: int = 16, precision: str = "fp32"
) -> float:
    """Total negative log-likelihood in nats of every token after the first of each list (the first is the
    document's opening: EOS or BOS), on this process's model."""
    device = model.output.weight.device
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = (lambda: torch.autocast(device.type, dtype=dtype)) if dtype else contextlib.nullcontext
    windows = [w for tokens in token_lists for w in _score_windows(tokens, seq_len)]
    windows.sort(key=lambda w: -len(w[0]))  # similar lengths share a batch: little padding
    total = torch.zeros((), dtype=torch.float64, device=device)
    for start in range(0, len(windows), batch_size):
        chunk = windows[start : start + batch_size]
        batch = torch.zeros(len(chunk), len(chunk[0][0]), dtype=torch.long)  # right padding: causal, never seen
        targets = torch.zeros_like(batch)
        scored = torch.zeros(batch.shape, dtype=torch.bool)
        for row, (ids, predicted) in enumerate(chunk):
            batch[row, : len(ids)] = torch.tensor(ids)
            targets[row, len(ids) - len(predicted) : len(ids)] = torch.tensor(predicted)
            scored[row, len(ids) - len(predicted) : len(ids)] = True
        with autocast():
            logits = model(batch.to(device))
        logprobs = F.log_softmax(logits.float(), dim=-1).gather(2, targets.to(device)[..., None]).squeeze(2)
        total -= torch.where(scored.to(device), logprobs, 0.0).sum(dtype=torch.float64)
    return float(total)


def document_bits_per_byte(
    model, tokenizer, texts: list[str], prefix: list[int], seq_len: int, batch_size: int = 16, precision: str = "fp32"
) -> dict:
    """Bits per byte of ``texts`` (see the module docstring); under ``torch.distributed`` each rank scores
    a share of the documents with its whole copy of the model and every rank gets the total."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    mine = texts[rank::world]
    ids = tokenizer.encode_batch(mine, add_bos=False, add_eos=False) if mine else []
    nats = document_nats(model, [prefix + [int(t) for t in doc] for doc in ids], seq_len, batch_size, precision)
    sums = torch.tensor(
        [nats, float(sum(len(t.encode("utf-8")) for t in mine)), float(sum(map(len, ids)))],
        dtype=torch.float64,
        device=model.output.weight.device,
    )
    if world > 1:
        dist.all_reduce(sums)
    nats, n_bytes, tokens = sums.tolist()
    return {
        "bits_per_byte": bits_per_byte(nats, int(n_bytes)),
        "nats": nats,
        "bytes": int(n_bytes),
        "tokens": int(tokens),
        "documents": len(texts),
    }
