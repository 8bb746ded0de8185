"""Why a text was or was not detected, token by token, computed on demand with the key.

The evidence comes from the same detector code that graded the result (the scheme's
``prefix_p_values``, and ``analyse`` where the scheme has it), on the same stored token ids
and vocabulary (:func:`evalrun.pack.grade.stored_tokens`), so the running p-value's last value
is the graded p-value and the first prefix at the threshold is the graded watermark size.

Per token, where the scheme can say it:

* ``score``: the token's share of the detector's score (the score of the prefix ending at the
  token minus the one before): 1 or 0 for green-list schemes (green or red), a positive real
  for exp, binary and its; ``scored`` is false for tokens the detector skips (the first
  context tokens, repeats, skipped positions);
* schemes with one fixed green list (unigram) give ``green`` from that list;
* alignment scores (align, edit over a fixed key) and schemes without a per-token
  decomposition (SynthID, Waterfall, reference-compatible kgw) give the running p-value only.

The key stays in the server's memory: it is never part of a response, a log line or a file.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun._util.specs import is_none
from evalrun.model.providers import stored_model, tokenizer_source
from evalrun.model.tokenization import TextTokenizer, load_tokenizer
from evalrun.pack.grade import stored_tokens
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.verdict import DEFAULT_THRESHOLD, first_detected_prefix

#: tokenizers loaded, by source: one load per source for the viewer's life
_TOKENIZERS: dict[str, TextTokenizer] = {}
#: held while loading one: transformers' lazy module fails a second thread's ``from transformers
#: import AutoTokenizer`` while the first is still importing it (the viewer's request threads and
#: its cache warmer load at once)
_LOADING = threading.Lock()


def tokenizer_for(row: Mapping[str, Any], run: Mapping[str, Any] | None) -> TextTokenizer | str:
    """The tokenizer the result's ids came from (its model's own, else its run's
    ``--tokenizer``), or why there is none."""
    source = tokenizer_source(stored_model(row["model"]), ((run or {}).get("config") or {}).get("tokenizer"))
    if not source:
        return f"no tokenizer is known for {row['model']} (its run gave no --tokenizer)"
    with _LOADING:
        if str(source) not in _TOKENIZERS:
            try:
                _TOKENIZERS[str(source)] = load_tokenizer(str(source))
            except EvalrunError as exc:
                return str(exc)
        return _TOKENIZERS[str(source)]


def token_texts(tokenizer: TextTokenizer, ids: list[int]) -> list[str]:
    """Each token's share of the decoded text: the text of the first ``i + 1`` ids minus that of
    the first ``i`` (byte-level tokens that split a character show it on the token that
    completes it), so the pieces join to exactly the decoded text."""
    pieces, before = [], ""
    for i in range(len(ids)):
        text = tokenizer.decode(ids[: i + 1])
        pieces.append(text[len(before):] if text.startswith(before) else text)
        before = text
    return pieces


def _per_token(scheme: Any, ids: list[int], key: str, vocab: int) -> dict[str, list[Any]]:
    analyse = getattr(scheme, "analyse", None)
    fixed = getattr(getattr(scheme, "randomness", None), "fixed", False)
    if analyse is not None and not fixed:
        found = analyse(ids, key, vocab)
        score = np.asarray(found["score"], dtype=float)
        n = np.asarray(found["n"])
        share = np.diff(np.concatenate([[0.0], score]))
        scored = np.diff(np.concatenate([[0], n])) > 0
        return {"score": [float(s) if k else None for s, k in zip(share, scored)], "scored": scored.tolist()}
    green_mask = getattr(scheme, "green_mask", None)
    if green_mask is not None:
        mask = green_mask(key, vocab)
        return {"green": [bool(mask[t]) for t in ids]}
    return {}


def evidence(row: Mapping[str, Any], transform: Mapping[str, Any] | None, run: Mapping[str, Any] | None, *,
             key: str, watermark: str, threshold: float | None = None, attacked: bool = False) -> dict[str, Any]:
    """The evidence of one text of a result (its output, or with ``attacked`` its attacked
    text) under ``watermark``: ``tokens: [{text, id, p, score?, scored?, green?}]``, the
    threshold, the watermark size (first prefix at the threshold), the final p-value. Raises
    :class:`EvalrunError` with the reason when it cannot be computed."""
    if is_none(watermark):
        raise EvalrunError("an unwatermarked result has no watermark to show evidence for: choose one")
    scheme = parse_watermark(watermark)
    assert scheme is not None  # not none, checked above
    tokens = stored_tokens(row, transform if attacked else None)
    if tokens.token_ids is None:
        raise EvalrunError(f"no token ids: {tokens.note or 'the store holds none'}")
    if tokens.vocab_size is None:
        raise EvalrunError("the stored output does not record the vocabulary size its ids index")
    tokenizer = tokenizer_for(row, run)
    ids = list(tokens.token_ids)
    texts = token_texts(tokenizer, ids) if not isinstance(tokenizer, str) else [f"#{t}" for t in ids]
    limit = float(threshold) if threshold is not None else DEFAULT_THRESHOLD
    p = np.asarray(scheme.prefix_p_values(ids, key, tokens.vocab_size) if ids else np.zeros(0), dtype=float)
    per_token = _per_token(scheme, ids, key, tokens.vocab_size) if ids else {}
    out = [{"text": texts[i], "id": ids[i], "p": float(p[i]), **{k: v[i] for k, v in per_token.items()}}
           for i in range(len(ids))]
    return {"watermark": watermark, "threshold": limit, "size": first_detected_prefix(p.tolist(), limit) if ids else None,
            "p_value": float(p[-1]) if ids else None, "evidence": sorted(per_token) or ["p"],
            "tokens": out, "tokenizer": None if isinstance(tokenizer, str) else tokenizer.source,
            "tokenizer_note": tokenizer if isinstance(tokenizer, str) else None}
