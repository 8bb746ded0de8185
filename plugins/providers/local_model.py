"""What the providers that run a model in this process (hf, vllm) share: how a prompt becomes
token ids, how a tokenizer is fingerprinted for the store, and batch-by-batch generation in
which a failing batch becomes stored errors rather than a failed run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.model.generation import Generation, GenerationRequest, ResultSink
from evalrun.model.tokenization import encode_prompt, prompt_text, render_plain, tokenizer_fingerprint  # noqa: F401  (re-exported for providers)


def resolve_model_path(model_path: str, *, provider: str) -> str:
    """A local model directory, or a hub id whose local cache will be consulted. Anything
    that looks like a path must exist and be a directory: said before a run starts."""
    path = Path(model_path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise EvalrunError(f"--model {provider}:{model_path}: not a directory")
        return str(path)
    if model_path.startswith(("/", ".", "~")) or model_path.count("/") > 1:
        raise EvalrunError(f"--model {provider}:{model_path}: no such model directory")
    return model_path  # a hub id: only its local cache is consulted


def generate_in_batches(requests: Sequence[GenerationRequest], batch_size: int,
                        run_batch: Callable[[list[GenerationRequest]], list[Generation]], sink: ResultSink,
                        *, served_model: str | None, tokenizer_hash: str | None) -> None:
    """Run ``run_batch`` on consecutive batches and hand each result to ``sink`` as its batch
    ends. A batch that raises stores its error (watermark keys blanked) on each request."""
    for start in range(0, len(requests), batch_size):
        batch = list(requests[start:start + batch_size])
        t0 = time.perf_counter()
        try:
            results = run_batch(batch)
        except Exception as exc:  # one bad batch must not end the run
            message = f"{type(exc).__name__}: {exc}"
            for req in batch:
                if req.key:
                    message = message.replace(req.key, "<key>")
            results = [Generation(text=None, error=message, served_model=served_model,
                                  tokenizer_hash=tokenizer_hash) for _ in batch]
        batch_ms = (time.perf_counter() - t0) * 1000.0
        for req, gen, share in zip(batch, results, batch_shares(results)):
            gen.latency_ms = batch_ms * share
            gen.extra.update(latency_kind=BATCH_SHARE, batch_ms=batch_ms, batch_size=len(batch))
            sink(req, gen)


#: ``latency_kind`` of batched local generation: each item's share of its batch's wall time
BATCH_SHARE = "batch share"


def batch_shares(results: Sequence[Generation]) -> list[float]:
    """Each item's share of its batch's wall time, in proportion to the tokens it generated
    (decoding steps dominate a batch), so the items' latencies add up to the batch's time.
    Equal shares when token counts are unknown or all zero."""
    counts = [g.tokens_out for g in results]
    if any(c is None for c in counts) or not sum(counts):  # type: ignore[arg-type]
        return [1.0 / len(results)] * len(results) if results else []
    total = float(sum(counts))  # type: ignore[arg-type]
    return [c / total for c in counts]  # type: ignore[operator]
