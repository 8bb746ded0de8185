"""evalrun watermarks inside vLLM V1, through its batch-level logits-processor interface.

vLLM V1 builds each logits processor once per engine (``LLM(logits_processors=[cls])``) and
tells it how the persistent batch changes (``update_state``) before every step; ``apply``
then sees the whole batch's logits, one row per batch index. :class:`EvalrunWatermarkLogitsProcessor`
keeps, per batch index, the evalrun processor of a watermarked request (built from
``SamplingParams.extra_args["evalrun_watermark"]``, see :func:`watermark_extra_args`) with the
request's prompt ids and a live reference to its output ids, and in ``apply`` overwrites that
row with what the evalrun processor returns for the context ``prompt + output`` -- exactly the
context the ``hf`` provider passes.

The math: vLLM (0.32 V1 ``Sampler``) runs processors that are not argmax-invariant on the raw
float32 logits *before* penalties, the greedy argmax and the temperature division; evalrun
processors return final scores meant to be sampled at temperature 1 (argmax at temperature 0)
and apply the real temperature themselves. So a watermarked request goes to vLLM with
``temperature=1.0`` (``0.0`` when its own temperature is 0), neutral top-p/top-k/min-p and no
penalties (:func:`vllm_temperature`; ``validate_params`` refuses anything else), and the
real temperature travels in ``extra_args``.

The secret key travels in memory only, in ``extra_args`` (a plain ``str``: vLLM's msgpack
transport refuses ``str`` subclasses, so it cannot be wrapped to hide it from ``repr``; the
provider never logs the sampling parameters). Once a request's processor is built the key is
removed from the engine-side ``extra_args`` and the processor is kept there instead, so a
request re-added after preemption gets its processor back (with its generation state).

This module imports without vllm, or with a vllm that does not import (the base class falls
back to ``object``; the provider reports the broken import), so that its bookkeeping can be
tested anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalrun.watermark import parse_watermark

try:  # vllm is optional: without it the class still imports (for tests of the bookkeeping)
    from vllm.v1.sample.logits_processor import LogitsProcessor as _Base
except Exception:  # pragma: no cover - not installed, or broken (checked by the provider)
    # the ignore is used only where vllm is installed (without it mypy sees _Base as Any)
    _Base = object  # type: ignore[assignment,misc,unused-ignore]

EXTRA_ARGS_KEY = "evalrun_watermark"
_PROCESSOR = "_processor"
_EPS = 1e-5


def vllm_temperature(temperature: float) -> float:
    """The temperature to give vLLM for a watermarked request: the evalrun processor applies
    the real one, vLLM samples its scores at 1 (or takes the argmax)."""
    return 0.0 if float(temperature) == 0 else 1.0


def watermark_extra_args(spec: str, key: str, temperature: float, seed: int) -> dict[str, Any]:
    """``SamplingParams.extra_args`` for a request watermarked with ``spec`` under ``key``."""
    if not key:
        raise ValueError(f"--watermark {spec}: no watermark key given")
    return {EXTRA_ARGS_KEY: {"spec": str(spec), "key": str(key),
                             "temperature": float(temperature), "seed": int(seed)}}


def _watermark_args(params: Any) -> dict[str, Any] | None:
    extra = getattr(params, "extra_args", None) or {}
    wm = extra.get(EXTRA_ARGS_KEY)
    return wm if isinstance(wm, dict) else None


@dataclass
class _Row:
    processor: Any
    prompt: list[int]
    output: list[int]  # vLLM's live list of the request's generated ids

    def context(self) -> list[int]:
        return self.prompt + list(self.output)


class EvalrunWatermarkLogitsProcessor(_Base):
    """vLLM V1 logits processor that applies evalrun watermark processors per request."""

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        model_config = getattr(vllm_config, "model_config", None)
        self.vocab_size = int(model_config.get_vocab_size()) if model_config is not None else None
        self.device = device
        self.rows: dict[int, _Row] = {}
        self._schemes: dict[str, Any] = {}

    # ------------------------------------------------------------------ vLLM interface
    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Refuse, before the request reaches the engine, watermark arguments that are
        malformed or sampling settings that would change the math (vLLM must sample the
        processor's scores as they are)."""
        wm = _watermark_args(sampling_params)
        if wm is None:
            return
        for field, kind in (("spec", str), ("key", str), ("temperature", (int, float)),
                            ("seed", int)):
            if not isinstance(wm.get(field), kind):
                raise ValueError(f"extra_args[{EXTRA_ARGS_KEY!r}] needs {field!r}")
        temperature = float(wm["temperature"])
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        want = vllm_temperature(temperature)
        p = sampling_params
        off = abs(float(p.temperature) - want) > _EPS if want else float(p.temperature) >= _EPS
        if off:
            raise ValueError(f"a watermarked request must be sent with temperature={want} "
                             "(its own temperature goes in extra_args)")
        neutral = (float(getattr(p, "top_p", 1.0)) == 1.0 and int(getattr(p, "top_k", 0) or 0) <= 0
                   and float(getattr(p, "min_p", 0.0)) == 0.0
                   and float(getattr(p, "presence_penalty", 0.0)) == 0.0
                   and float(getattr(p, "frequency_penalty", 0.0)) == 0.0
                   and float(getattr(p, "repetition_penalty", 1.0)) == 1.0
                   and not getattr(p, "logit_bias", None))
        if not neutral:
            raise ValueError("a watermarked request cannot use top_p/top_k/min_p, penalties "
                             "or logit_bias: they would change the watermark's distribution")

        try:
            parse_watermark(wm["spec"])
        except Exception as exc:  # SpecError: report as the ValueError vLLM expects
            raise ValueError(str(exc)) from None

    def is_argmax_invariant(self) -> bool:
        # watermarks change the argmax (kgw bias, sampling schemes' chosen token): run before
        # vLLM's greedy pick and temperature division
        return False

    def update_state(self, batch_update: Any) -> None:
        """Apply a batch change: removed, then added, then moved (vLLM's documented order)."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, prompt_ids, output_ids in batch_update.added:
            row = self._new_row(params, prompt_ids, output_ids)
            if row is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            row_a = self.rows.pop(a, None)
            row_b = self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if row_b is not None and getattr(direction, "name", direction) == "SWAP":
                self.rows[a] = row_b

    def apply(self, logits: Any) -> Any:
        """Overwrite each watermarked row with its evalrun processor's scores."""
        if not self.rows:
            return logits
        import torch

        for index, row in self.rows.items():
            if index >= logits.shape[0]:
                continue
            context = torch.tensor([row.context()], dtype=torch.long, device=logits.device)
            out = row.processor(context, logits[index:index + 1])
            logits[index] = out[0].to(device=logits.device, dtype=logits.dtype)
        return logits

    # ------------------------------------------------------------------ helpers
    def _new_row(self, params: Any, prompt_ids: Any, output_ids: list[int]) -> _Row | None:
        wm = _watermark_args(params)
        if wm is None:
            return None
        if prompt_ids is None:
            raise ValueError("evalrun watermarks need the prompt's token ids (not embeddings)")
        processor = wm.get(_PROCESSOR)
        if processor is None:
            # first time in the batch: build it, then keep it in place of the key so that a
            # preempted request resumes with the same processor and the key is not kept around
            scheme = self._schemes.get(wm["spec"])
            if scheme is None:

                scheme = self._schemes[wm["spec"]] = parse_watermark(wm["spec"])
            # only watermarked requests carry extra_args (vllm.py sends none for "none")
            assert scheme is not None
            processor = scheme.logits_processor(str(wm["key"]), self._vocab(),
                                                temperature=float(wm["temperature"]),
                                                seed=int(wm["seed"]))
            wm[_PROCESSOR] = processor
            wm.pop("key", None)
        return _Row(processor, list(prompt_ids), output_ids)

    def _vocab(self) -> int:
        if self.vocab_size is None:
            raise ValueError("the model's vocab_size is unknown")
        return self.vocab_size
