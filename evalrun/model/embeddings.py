"""Text embeddings for ``evalrun distinguish``, cached in the store.

An *embedder* is any ``--model`` spec whose provider can ``embed(texts)`` (duck-typed; the core
never imports a provider): ``embedded`` (the default, offline: the embedded model's
mean-pooled last hidden states), ``hf:<path>`` (any local transformers model, encoders
included: built with ``task="embed"``, mean-pooled likewise), ``openai:<name>`` (an
OpenAI-compatible ``/embeddings`` endpoint, ``--base-url``).

The cache is the store's ``embeddings`` table (schema version 4), keyed by the SHA-256 of the
text and the embedder's identity: its model identity and its revision (the local model's
files, or the endpoint), so new weights or another server never reuse old vectors. Vectors are
float32, little-endian. A text is embedded once per embedder, ever; when every text is cached
the model is not even loaded.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import ModelSpec, check_model, make_provider, provider_kind
from evalrun.store.database import Store

#: the offline default embedder
DEFAULT_EMBEDDER = ModelSpec("embedded")


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedder_identity(spec: ModelSpec, *, base_url: str | None = None) -> str:
    """What the cache is keyed by besides the text: ``<model identity>|<revision>``."""
    revision = provider_kind(spec.name).revision(spec, None, SimpleNamespace(base_url=base_url, vocab_size=None))
    return f"{spec.identity()}|{revision}" if revision else spec.identity()


def embed_texts(store: Store, spec: ModelSpec, texts: Sequence[str], *, base_url: str | None = None,
                make: Callable[..., Any] | None = None) -> tuple[np.ndarray, int]:
    """``(vectors [len(texts), dim], number of texts newly embedded)``: cached vectors are read,
    the others computed by the embedder's provider in one call and stored."""
    check_model(spec)
    identity = embedder_identity(spec, base_url=base_url)
    digests = [text_digest(t) for t in texts]
    cached = store.embeddings(identity, digests)
    missing: dict[str, str] = {}
    for digest, text in zip(digests, texts):
        if digest not in cached and digest not in missing:
            missing[digest] = text
    if missing:
        provider = (make or make_provider)(spec, base_url=base_url, task="embed")
        try:
            embed = getattr(provider, "embed", None)
            if embed is None:
                raise EvalrunError(f"--embedder {spec}: this provider cannot embed texts (use embedded, hf:<path> "
                                   "or openai:<name>)")
            vectors = np.asarray(embed(list(missing.values())), dtype=np.float32)
        finally:
            provider.close()
        if vectors.ndim != 2 or vectors.shape[0] != len(missing):
            raise EvalrunError(f"--embedder {spec}: expected {len(missing)} vectors, got shape {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise EvalrunError(f"--embedder {spec}: returned non-finite values")
        rows = [(d, int(v.shape[0]), v.astype("<f4").tobytes()) for d, v in zip(missing, vectors)]
        store.store_embeddings(identity, rows)
        cached.update({d: blob for d, _, blob in rows})
    arrays = [np.frombuffer(cached[d], dtype="<f4") for d in digests]
    dims = {a.shape[0] for a in arrays}
    if len(dims) > 1:
        raise EvalrunError(f"--embedder {spec}: the cache holds vectors of different sizes {sorted(dims)} for "
                           f"{identity}")
    out = np.stack(arrays).astype(np.float32) if arrays else np.zeros((0, 0), dtype=np.float32)
    return out, len(missing)
