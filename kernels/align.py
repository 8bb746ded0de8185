"""Alignment and edit scores over all cyclic offsets of a fixed key sequence.

Input is ``M[..., n, L]``: the (centred) evidence of text token ``i`` against key position
``m``. Offset ``j`` pairs token ``i`` with key position ``(i + j) mod L``. Both scores are
computed for every prefix of the text at once and vectorised over offsets and any leading
batch axes (e.g. null keys).

* align (MarkMyWords Fig. 10 S2, Kuditipudi et al.): ``max_j sum_i M[i, (i + j) mod L]``.
* edit (S3): for each offset a Levenshtein-style alignment between the text and the key
  window of the same length, maximising ``sum of matched evidence - psi * gaps``. The DP row of
  text token ``i`` is ``D[i, k] = max(D[i-1, k-1] + M_j[i, k], D[i-1, k] - psi, D[i, k-1] -
  psi)``; the in-row recurrence is a running maximum, evaluated with one cumulative max.
"""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops


def _diag_index(ops: Ops, rows: int, cols: int, key_len: int) -> Any:
    """``idx[r, c] = (r + c) mod key_len``."""
    return (ops.arange(rows)[:, None] + ops.arange(cols)[None, :]) % key_len


def align_prefix(ops: Ops, m: Any) -> tuple[Any, Any]:
    """Best alignment score of every prefix and its offset: shapes ``[..., n]``."""
    n, key_len = m.shape[-2], m.shape[-1]
    idx = _diag_index(ops, n, key_len, key_len)  # [n, L]: position i, offset j
    idx = idx.reshape((1,) * (m.ndim - 2) + (n, key_len))
    per_offset = ops.ordered_cumsum(ops.take_along(m, idx, axis=-1), axis=-2)  # [..., n, L]
    return ops.amax(per_offset, axis=-1), ops.argmax(per_offset, axis=-1)


def edit_prefix(ops: Ops, m: Any, psi: float) -> tuple[Any, Any]:
    """Best edit score of every prefix and its offset (max over offsets): ``[..., n]``.

    Runs the DP in shifted coordinates ``E[i, k] = D[i, k] + psi * k``, where the row update
    is ``E[i] = cummax(max(E[i-1] - psi, E[i-1] shifted right + M + psi))``; the key window of
    offset ``j`` is a sliding view of the text row's evidence tiled along the key.
    """
    n, key_len = m.shape[-2], m.shape[-1]
    batch = tuple(m.shape[:-2])
    width = key_len + n - 1
    tiled_idx = (ops.arange(width) % key_len).reshape((1,) * (m.ndim - 1) + (width,))
    tiled = ops.take_along(m + psi, tiled_idx, axis=-1)  # [..., n, L + n - 1]
    prev = ops.zeros(batch + (key_len, n + 1))  # E[0, k] = 0
    out, arg = [], []
    for i in range(n):
        window = ops.windows(tiled[..., i, :], n)[..., :key_len, :]  # [..., L, n]
        cur = prev - psi
        cur[..., 1:] = ops.maximum(cur[..., 1:], prev[..., :-1] + window)
        cur = ops.cummax(cur, axis=-1)
        diag = cur[..., i + 1]
        out.append(ops.amax(diag, axis=-1) - psi * (i + 1))
        arg.append(ops.argmax(diag, axis=-1))
        prev = cur
    return ops.stack(out, axis=-1), ops.stack(arg, axis=-1)
