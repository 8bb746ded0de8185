"""``evalrun.detect`` and ``evalrun.watermark``: the detectors of ``evalrun detect`` and the
logits processors of ``evalrun run``, on a researcher's own texts and generation loop."""

from __future__ import annotations

import os
from typing import Any, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import ModelSpec, model_argument, tokenizer_source
from evalrun.model.token_logits import model_logits
from evalrun.model.tokenization import TextTokenizer, load_tokenizer
from evalrun.watermark.base import Detection, WatermarkScheme
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV, parse_watermark

Text = str | Sequence[int]


def _key(key: str | None, scheme: WatermarkScheme) -> str:
    found = key if key is not None else os.environ.get(KEY_ENV)
    if not found:
        raise EvalrunError(f"no watermark key: pass key=... or set {KEY_ENV}")
    scheme.check_key(found)
    warn_if_weak(found, from_option=key is not None)
    return found


class Watermark:
    """One watermark scheme (``evalrun.watermark("kgw:gamma=0.25,delta=2")``): the processor
    ``evalrun run`` generates with and the detector ``evalrun detect`` uses, both under the
    caller's key."""

    def __init__(self, spec: str) -> None:
        scheme = parse_watermark(spec)
        if scheme is None:
            raise EvalrunError(f"--watermark {spec}: 'none' has no processor and nothing to detect")
        self.scheme = scheme
        #: the canonical spec, as the store writes it (defaults filled in; no secret)
        self.spec = str(scheme.spec)

    def __repr__(self) -> str:
        return f"evalrun.watermark({self.spec!r})"

    def logits_processor(self, key: str | None, tokenizer_or_vocab: Any, *, temperature: float = 1.0,
                         seed: int = 0) -> Any:
        """A Hugging Face ``LogitsProcessor`` for ``model.generate(logits_processor=[...])``.
        ``tokenizer_or_vocab``: the model's vocabulary size (its logit width) or its tokenizer
        (``len(tokenizer)``; pass the logit width when the model pads its embeddings). Sample
        with ``do_sample=True, temperature=1.0`` and give the processor your temperature: it
        applies it before watermarking, as ``evalrun run`` does."""
        vocab = tokenizer_or_vocab if isinstance(tokenizer_or_vocab, int) else len(tokenizer_or_vocab)
        return self.scheme.logits_processor(_key(key, self.scheme), int(vocab), temperature=temperature, seed=seed)

    def detect(self, text_or_ids: Text, key: str | None = None, **how: Any) -> Detection:
        """:func:`detect` with this scheme."""
        return self.detect_many([text_or_ids], key, **how)[0]

    def detect_many(self, texts: Sequence[Text], key: str | None = None, *, tokenizer: str | None = None,
                    model: str | ModelSpec | None = None, vocab_size: int | None = None,
                    prefixes: bool = False) -> list[Detection]:
        """:func:`detect_many` with this scheme."""
        scheme = self.scheme
        secret = _key(key, scheme)
        spec = _model(model)
        kwargs: dict[str, Any] = {}
        if scheme.needs_model:
            if spec is None:
                raise EvalrunError(f"--watermark {scheme.spec} reads the generating model's logits at detection: "
                                   "pass model=SPEC (embedded, hf:PATH)")
            kwargs["logits"] = model_logits(spec)
        tok = _tokenizer(tokenizer, spec) if tokenizer is not None or spec is not None else None
        ids: list[list[int]] = []
        for text in texts:
            if isinstance(text, str):
                if tok is None:
                    raise EvalrunError("a text needs tokenizer=PATH (or 'embedded'), or model=SPEC; token ids "
                                       "need neither")
                ids.append(tok.encode(text))
            else:
                ids.append([int(t) for t in text])
        width = vocab_size or (kwargs["logits"].vocab_size if "logits" in kwargs else None) or (tok and tok.vocab_size)
        if not width:
            raise EvalrunError("token ids need vocab_size=N (the logit width they were watermarked over), "
                               "a tokenizer or a model")
        found = scheme.detect_many(ids, secret, int(width), **kwargs)
        if prefixes:
            for det, p in zip(found, scheme.prefix_p_values_many(ids, secret, int(width), **kwargs)):
                det.extra["prefix_p_values"] = [float(v) for v in p]
        return list(found)


def watermark(spec: str) -> Watermark:
    """The scheme named by ``spec`` (``evalrun run --watermark`` syntax)."""
    return Watermark(spec)


def _model(model: str | ModelSpec | None) -> ModelSpec | None:
    return model_argument(model) if isinstance(model, str) else model


def _tokenizer(tokenizer: str | None, model: ModelSpec | None) -> TextTokenizer:
    """``tokenizer`` (a local directory, or ``embedded``), else the model's own."""
    if tokenizer is not None and tokenizer != "embedded":
        return load_tokenizer(tokenizer)
    spec = model if tokenizer is None and model is not None else model_argument("embedded")
    source = tokenizer_source(spec, None)
    if source is None:
        raise EvalrunError(f"model {spec}: evalrun has no tokenizer for it; pass tokenizer=PATH")
    return load_tokenizer(source)


def detect_many(texts: Sequence[Text], *, watermark: str, key: str | None = None, tokenizer: str | None = None,
                model: str | ModelSpec | None = None, vocab_size: int | None = None,
                prefixes: bool = False) -> list[Detection]:
    """Detect ``watermark`` in each text (a string, tokenized with ``tokenizer`` or the model's
    tokenizer, or a list of token ids) under ``key`` (default ``$EVALRUN_WATERMARK_KEY``), with
    the detector of ``evalrun detect`` (batched where the scheme batches). ``model``: the
    generating model, needed by schemes whose detector reads it (SWEET, EWD, Unbiased) and a
    source of the tokenizer. ``vocab_size``: the logit width the text was watermarked over
    (default: the tokenizer's or the model's). ``prefixes``: also each prefix's p-value, in
    ``extra["prefix_p_values"]``."""
    return Watermark(watermark).detect_many(texts, key, tokenizer=tokenizer, model=model, vocab_size=vocab_size,
                                            prefixes=prefixes)


def detect(text_or_ids: Text, *, watermark: str, key: str | None = None, tokenizer: str | None = None,
           model: str | ModelSpec | None = None, vocab_size: int | None = None,
           prefixes: bool = False) -> Detection:
    """Detect ``watermark`` in one text or list of token ids (see :func:`detect_many`): a
    :class:`~evalrun.watermark.base.Detection` with ``p_value``, ``score``,
    ``num_tokens_scored`` and the scheme's evidence in ``extra``."""
    return Watermark(watermark).detect(text_or_ids, key, tokenizer=tokenizer, model=model,
                                       vocab_size=vocab_size, prefixes=prefixes)
