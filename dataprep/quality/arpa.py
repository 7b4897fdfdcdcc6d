"""ARPA text format for the perplexity models, the format KenLM's ``lmplz`` writes and CCNet's models
come in (the command: ``dataprep arpa``).

Words are the SentencePiece pieces (``<s>``, ``</s>``, ``<unk>`` for bos, eos, unk), as in CCNet.
Scoring an imported model gives KenLM's numbers: a back-off weight missing from the file is 0, and our
extra sentence-start padding only looks up contexts the file does not hold. Exported models also list
the contexts of our padding (``<s> <s> w``); KenLM keeps one ``<s>`` of context, so it scores the first
order-2 tokens of each line with lower-order estimates (``NGramLM.token_logprobs(..., kenlm_start=True)``
does the same). Orders up to ``ngram_lm.MAX_ORDER`` (6).

``import --kenlm`` keeps the ARPA file in the model directory: such a model is scored with KenLM's
sentence start, through the ``kenlm`` package (``pip install "ccpretrain[kenlm]"``) where it is installed
and by our scorer (the same numbers) where it is not.
"""

from __future__ import annotations

import numpy as np

from dataprep.core.errors import UsageError
from dataprep.quality.ngram_lm import MAX_ORDER, NGramLM, pack, unpack

NO_PROB = -99.0  # what KenLM writes for n-grams that are only contexts (e.g. <s>)


def _words(sp) -> list[str]:
    words = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    for token_id, name in ((sp.bos_id(), "<s>"), (sp.eos_id(), "</s>"), (sp.unk_id(), "<unk>")):
        if token_id >= 0:
            words[token_id] = name
    return words


def write_arpa(lm: NGramLM, sp, path: str) -> dict[int, int]:
    """Write ``lm`` as ARPA with ``sp``'s pieces as words; returns the n-gram counts per order."""
    from dataprep.core.storage import atomic_output

    words = np.array(_words(sp), dtype=object)
    sections, counts = [], {}
    for k in range(1, lm.order + 1):
        ctx_keys, ctx_bow = (lm.ctx[k + 1], lm.bow[k + 1]) if k < lm.order else (lm.keys[k][:0], np.zeros(0))
        keys = np.union1d(lm.keys[k], ctx_keys)
        logp = np.full(len(keys), NO_PROB)
        logp[np.searchsorted(keys, lm.keys[k])] = lm.logp[k]
        bow = np.full(len(keys), np.nan)
        bow[np.searchsorted(keys, ctx_keys)] = ctx_bow
        grams = [" ".join(row) for row in words[unpack(keys, k)]]
        lines = [f"{p:.6f}\t{g}" + (f"\t{b:.6f}" if not np.isnan(b) else "") for p, g, b in zip(logp, grams, bow)]
        if k == 1 and "<unk>" not in grams:
            lines.insert(0, f"{lm.unk:.6f}\t<unk>")
        counts[k] = len(lines)
        sections.append(f"\\{k}-grams:\n" + "\n".join(lines) + "\n")
    header = "\\data\\\n" + "".join(f"ngram {k}={n}\n" for k, n in counts.items())
    with atomic_output(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(header + "\n" + "\n".join(sections) + "\n\\end\\\n")
    return counts


def read_arpa(path: str, sp) -> NGramLM:
    """An ARPA model over ``sp``'s pieces as our ``NGramLM`` (words the tokenizer lacks are an error)."""
    ids = {word: i for i, word in enumerate(_words(sp))}
    declared: dict[int, int] = {}
    grams: dict[int, list] = {}
    order, section = 0, None
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line == "\\data\\":
                continue
            if line.startswith("ngram ") and section is None:
                k, n = line[6:].split("=")
                declared[int(k)] = int(n)
            elif line.endswith("-grams:") and line.startswith("\\"):
                section = int(line[1:].split("-")[0])
                order = max(order, section)
                grams[section] = []
            elif line == "\\end\\":
                break
            elif section is not None:
                parts = line.split()
                if len(parts) not in (section + 1, section + 2):
                    raise UsageError(f"{path}:{number}: expected log10 p, {section} words and an optional back-off")
                grams[section].append(parts)
    if not grams or sorted(grams) != list(range(1, order + 1)):
        raise UsageError(f"{path}: not an ARPA file (no \\1-grams: ... sections)")
    if order > MAX_ORDER:
        raise UsageError(f"{path}: order {order}; this scorer handles orders up to {MAX_ORDER}")
    for k, n in declared.items():
        if len(grams.get(k, [])) != n:
            raise UsageError(f"{path}: header declares {n} {k}-grams, the file holds {len(grams.get(k, []))}")
    keys, logp, ctx, bow = {}, {}, {}, {}
    unk = NO_PROB
    for k in range(1, order + 1):
        rows = grams[k]
        missing = sorted({w for parts in rows for w in parts[1 : k + 1] if w not in ids})
        if missing:
            raise UsageError(
                f"{path}: {len(missing)} words are not pieces of the SentencePiece model, e.g. {missing[:5]}"
            )
        token_ids = np.array([[ids[w] for w in parts[1 : k + 1]] for parts in rows], np.uint64).reshape(len(rows), k)
        packed = pack([token_ids[:, j] for j in range(k)])
        probs = np.array([float(parts[0]) for parts in rows])
        if k == 1 and "<unk>" in ids:
            unk = next((float(p[0]) for p in rows if p[1] == "<unk>"), unk)
        sort = np.argsort(packed)
        keys[k], logp[k] = packed[sort], probs[sort].astype(np.float32)
        with_bow = [i for i, parts in enumerate(rows) if len(parts) == k + 2]
        if k < order:
            bsort = np.argsort(packed[with_bow])
            ctx[k + 1] = packed[with_bow][bsort]
            bow[k + 1] = np.array([float(rows[i][-1]) for i in with_bow], np.float32)[bsort]
    ctx[1], bow[1] = np.zeros(1, np.uint64), np.zeros(1, np.float32)
    return NGramLM(order, sp.GetPieceSize(), sp.bos_id(), sp.eos_id(), keys, logp, ctx, bow, unk)


KENLM_FILE = "lm.arpa"  # the ARPA file `import --kenlm` keeps in a model directory


def load_kenlm(path: str):
    """A ``kenlm.Model`` of the ARPA (or KenLM binary) file at ``path``."""
    try:
        import kenlm
    except ImportError:
        raise ImportError('scoring with KenLM needs the kenlm package: pip install "ccpretrain[kenlm]"') from None
    return kenlm.Model(path)


def kenlm_token_logprobs(model, sp, sentences) -> np.ndarray:
    """log10 p of every predicted token of ``sentences`` (piece ids) as the ``kenlm.Model`` ``model``
    scores them: the same layout ``NGramLM.token_logprobs`` returns."""
    words = _words(sp)
    scores = [
        score
        for ids in sentences
        for score, _, _ in model.full_scores(" ".join(words[i] for i in ids), bos=True, eos=True)
    ]
    return np.array(scores, np.float64)
