"""Reference MAUVE values from the ``mauve-text`` package, for tests/judges/test_mauve_score.py.

Run in a scratch environment (not a project dependency): ``pip install mauve-text==0.4.0
faiss-cpu numpy scikit-learn``, then ``python scripts/mauve_reference.py > tests/judges/data/mauve_reference.json``.

Two kinds of cases: histograms (mauve-text's divergence curve and trapezoid area, no
clustering), and embeddings drawn around well-separated centres, where any k-means finds the
same clusters, so the whole ``compute_mauve`` is comparable with evalrun's.
"""

from __future__ import annotations

import json

import numpy as np
from mauve.compute_mauve import compute_mauve, get_divergence_curve_for_multinomials
from sklearn.metrics import auc


def histogram_case(rng: np.random.Generator, buckets: int, zeros: int) -> dict:
    p = rng.random(buckets)
    q = rng.random(buckets)
    p[rng.choice(buckets, zeros, replace=False)] = 0.0
    p, q = p / p.sum(), q / q.sum()
    curve = get_divergence_curve_for_multinomials(p, q, np.linspace(1e-6, 1 - 1e-6, 25), 5)
    x, y = curve.T
    i1, i2 = np.argsort(x), np.argsort(y)
    score = 0.5 * (auc(x[i1], y[i1]) + auc(y[i2], x[i2]))
    return {"p": p.tolist(), "q": q.tolist(), "mauve": float(score)}


def blob_case(rng: np.random.Generator, centres: int, dim: int, n: int, shift: float) -> dict:
    """P and Q drawn from ``centres`` tight clusters; Q's weights tilted by ``shift``."""
    means = np.eye(centres, dim) * 10.0  # equidistant centres: one right clustering
    weights_p = np.full(centres, 1.0 / centres)
    tilt = np.linspace(-shift, shift, centres)
    weights_q = np.clip(weights_p + tilt / centres, 0.0, None)
    weights_q /= weights_q.sum()
    labels_p = rng.choice(centres, n, p=weights_p)
    labels_q = rng.choice(centres, n, p=weights_q)
    p = means[labels_p] + rng.normal(size=(n, dim)) * 0.01
    q = means[labels_q] + rng.normal(size=(n, dim)) * 0.01
    out = compute_mauve(p_features=p, q_features=q, num_buckets=centres, verbose=False)
    truth = sorted(zip(np.bincount(labels_p, minlength=centres) / n, np.bincount(labels_q, minlength=centres) / n))
    found = sorted(zip(np.asarray(out.p_hist), np.asarray(out.q_hist)))
    if not np.allclose(truth, found):
        raise SystemExit(f"mauve-text did not find the {centres} clusters; choose another case")
    return {"p": p.round(6).tolist(), "q": q.round(6).tolist(), "buckets": centres, "mauve": float(out.mauve),
            "p_hist": np.asarray(out.p_hist).tolist(), "q_hist": np.asarray(out.q_hist).tolist()}


def main() -> None:
    rng = np.random.default_rng(20261126)
    cases = {
        "histograms": [histogram_case(rng, b, z) for b, z in ((2, 0), (5, 0), (10, 1), (10, 3), (20, 0))],
        "embeddings": [blob_case(rng, c, d, n, s) for c, d, n, s in ((4, 8, 60, 0.0), (5, 16, 100, 0.6),
                                                                      (6, 12, 80, 0.9))],
    }
    print(json.dumps({"source": "mauve-text 0.4.0 (compute_mauve, faiss k-means)", **cases}, indent=1))


if __name__ == "__main__":
    main()
