"""``pretrain generate CHECKPOINT --prompt TEXT``: sample continuations, for a quick look at what a model
learned.

The prompt is encoded as a document start is seen in training: after the end-of-document token that
closes the previous document (or BOS when the data had one), so a model that learned document
openings uses them. Greedy decoding or temperature + nucleus (top-p) sampling, seeded; stops at the
end-of-document token. No KV cache: every step reruns the window, which is fine for short samples.
"""

from __future__ import annotations

import torch


def next_token(
    logits: torch.Tensor, temperature: float, top_p: float, greedy: bool, generator: torch.Generator | None = None
) -> int:
    """One token id from the last position's logits (vocab,)."""
    if greedy or temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        outside = sorted_probs.cumsum(0) - sorted_probs >= top_p  # the mass before a token already suffices
        sorted_probs[outside] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def generate(
    model,
    ids: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    stop_id: int | None = None,
    vocab_limit: int | None = None,
    generator: torch.Generator | None = None,
) -> list[int]:
    """The new token ids after ``ids`` (at most ``max_new_tokens``, ending at ``stop_id`` if drawn);
    ids at or beyond ``vocab_limit`` (padding of the embedding table) are never drawn."""
    device = model.output.weight.device
    tokens = torch.tensor([ids], dtype=torch.long, device=device)
    new: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(tokens[:, -model.cfg.max_seq_len :])[0, -1].float()
        if vocab_limit is not None:
            logits[vocab_limit:] = float("-inf")
        token = next_token(logits.cpu(), temperature, top_p, greedy, generator)
        new.append(token)
        if token == stop_id:
            break
        tokens = torch.cat([tokens, torch.tensor([[token]], device=device)], dim=1)
    return new


def document_prefix(tokenizer, manifest: dict) -> list[int]:
    """What precedes a document's tokens in the training stream."""
    return [tokenizer.bos_id] if manifest.get("add_bos") else [tokenizer.eos_id]
